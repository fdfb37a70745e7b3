"""The data-path recording (events.py, fetch_spans.py, worker_spans.py, loader_spans.py) with a real DataLoader and real worker processes: what each
process writes is the 40-byte Event of the C++ side (layout.EVENT_FORMAT), a batch's fetch is split into transform,
collate and the rest (disk_read) without overlaps, and every batch a worker hands over carries its index and pass."""
import functools
import glob
import json
import os
import struct
import time

import pytest

torch = pytest.importorskip("torch")

from ddp_profile import events, fetch_spans, layout, loader_spans, thread_cpu  # noqa: E402

STAGE_NAME = {v: k for k, v in layout.STAGES.items()}


def read_events(path):
    data = open(path, "rb").read()
    assert len(data) % layout.EVENT_SIZE == 0
    return [dict(zip(layout.EVENT_FIELDS, struct.unpack_from(layout.EVENT_FORMAT, data, i)))
            for i in range(0, len(data), layout.EVENT_SIZE)]


def test_an_event_is_forty_bytes_in_the_declared_order(tmp_path):
    log = events.EventLog(str(tmp_path), 3, "main")
    lane = log.lane("main")
    log.span("transform", lane, 100, 250, step=7, item=9, epoch=2, value=4096, micro=1)
    log.counter("host_rss_bytes", lane, 300, 1 << 30, step=7)
    log.close()
    evs = read_events(os.path.join(str(tmp_path), layout.datapath_events_file(3, os.getpid())))
    assert [STAGE_NAME[e["stage"]] for e in evs if e["kind"] == layout.EVENT_SPAN] == ["transform"]
    s, c = evs
    assert (s["t0"], s["t1"], s["value"], s["step"], s["item"], s["epoch"], s["micro"], s["bucket"]) == \
        (100, 250, 4096, 7, 9, 2, 1, layout.NO_BUCKET)
    assert (c["kind"], c["stage"], c["value"]) == (layout.EVENT_COUNTER, layout.COUNTERS["host_rss_bytes"], 1 << 30)
    header = json.load(open(os.path.join(str(tmp_path), layout.datapath_header_file(3, os.getpid()))))
    layout.check_record(layout.DATAPATH_RECORD, header)
    assert header["lanes"] == ["main"] and header["role"] == "main"


def test_a_fetch_is_split_without_overlap(tmp_path):
    # Moments of one thread (times in us): half of the wall on a CPU, a quarter waiting for a core.
    def at(us):
        return thread_cpu.Moment(us * 1000, us * 500, us * 250, (1, 1))

    log = events.EventLog(str(tmp_path), 0, "main")
    parts = [("transform", at(20), at(30)), ("transform", at(50), at(55)), ("collate", at(60), at(90)),
             ("transform", at(70), at(80))]
    fetch_spans.emit_fetch(log, 0, at(10), at(100), parts, item=4, epoch=1)
    log.close()
    evs = read_events(os.path.join(str(tmp_path), layout.datapath_events_file(0, os.getpid())))
    spans = sorted((STAGE_NAME[e["stage"]], e["t0"] // 1000, e["t1"] // 1000)
                   for e in evs if e["kind"] == layout.EVENT_SPAN)
    assert spans == sorted([("transform", 20, 30), ("transform", 50, 55), ("transform", 70, 80),
                            ("collate", 60, 70), ("collate", 80, 90),
                            ("disk_read", 10, 20), ("disk_read", 30, 50), ("disk_read", 55, 60),
                            ("disk_read", 90, 100)])
    # Each span is followed by its split: CPU ns in value, the wait in us in item, between the moments at its ends.
    for span, split in zip(evs[::2], evs[1::2]):
        assert split["kind"] == layout.EVENT_CPU
        assert (split["t0"], split["t1"], split["stage"]) == (span["t0"], span["t1"], span["stage"])
        wall = span["t1"] - span["t0"]
        assert split["value"] == wall // 2 and split["item"] == (wall // 4 + 500) // 1000


def test_the_timed_calls_share_the_fetchs_wait_by_their_cpu(tmp_path):
    # The fetch's ends read the wait (30 us of it over 90 us); the timed calls' moments do not (wait -1): a transform
    # that ran 8 us of the fetch's 40 us of CPU gets 6 us, a read that slept (no CPU) none.
    cpu = {10: 0, 20: 0, 30: 8, 40: 8, 60: 30, 100: 40}

    def at(us, wait=-1):
        return thread_cpu.Moment(us * 1000, cpu[us] * 1000, wait, (1, 1))

    log = events.EventLog(str(tmp_path), 0, "main")
    parts = [("transform", at(20), at(30)), ("transform", at(40), at(60))]
    fetch_spans.emit_fetch(log, 0, at(10, 0), at(100, 30000), parts, item=0, epoch=0)
    log.close()
    evs = read_events(os.path.join(str(tmp_path), layout.datapath_events_file(0, os.getpid())))
    waits = {(STAGE_NAME[s["stage"]], s["t0"] // 1000): (c["value"] // 1000, c["item"]) for s, c in zip(evs[::2], evs[1::2])}
    assert waits == {("disk_read", 10): (0, 0), ("transform", 20): (8, 6), ("disk_read", 30): (0, 0),
                     ("transform", 40): (22, 17), ("disk_read", 60): (10, 8)}


def test_a_split_across_threads_is_not_known_and_a_wait_may_be_unknown():
    a = thread_cpu.Moment(0, 0, 0, (1, 1))
    assert thread_cpu.split(a, thread_cpu.Moment(10, 5, 2, (1, 2))) is None
    assert thread_cpu.split(a, thread_cpu.Moment(10, 5, -1, (1, 1))) == (5, -1)
    assert events._wait_us(-1) == layout.WAIT_UNKNOWN
    m0 = thread_cpu.moment()
    sum(range(200000))  # on a CPU
    m1 = thread_cpu.moment()
    cpu, wait = thread_cpu.split(m0, m1)
    assert 0 < cpu <= m1.t - m0.t + 1000000  # thread CPU clock granularity
    assert wait == -1 or 0 <= wait <= m1.t - m0.t


class SlowTransformDataset(torch.utils.data.Dataset):
    def __init__(self):
        self.transform = self.slow

    @staticmethod
    def slow(x):
        time.sleep(0.002)
        return x * 2

    def __len__(self):
        return 24

    def __getitem__(self, i):
        time.sleep(0.001)  # the read
        return self.transform(torch.full((4,), float(i)))


@pytest.mark.parametrize("persistent", [False, True])
def test_workers_record_each_batch_with_its_index_and_pass(tmp_path, persistent):
    run = str(tmp_path)
    spans = loader_spans.LoaderSpans(run, 0, lambda: 0)
    ds = SlowTransformDataset()
    dl = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=persistent)
    for _ in range(2):  # two passes
        it, p = spans.start_pass(dl, dl.__iter__)
        got = []
        while True:
            try:
                got.append(spans.next_batch(p, it, functools.partial(next, it)))
            except StopIteration:
                break
        assert len(got) == 6
    spans.training_loader(dl)
    spans.log.flush()
    if persistent:  # the workers flush what they hold as they exit
        dl._iterator._shutdown_workers()
    workers = {}
    for h in glob.glob(os.path.join(run, layout.DATAPATH_DIR, "*.json")):
        head = json.load(open(h))
        layout.check_record(layout.DATAPATH_RECORD, head)
        if head["role"] == "worker":
            workers[head["pid"]] = head
    assert len(workers) == (2 if persistent else 4)  # non-persistent workers start again each pass
    seen = set()
    for pid, head in workers.items():
        evs = read_events(os.path.join(run, layout.datapath_events_file(0, pid)))
        for e, after in zip(evs, evs[1:] + [None]):
            if STAGE_NAME[e["stage"]] == "transform" and e["kind"] == layout.EVENT_SPAN:
                seen.add((e["epoch"], e["item"]))
                assert e["item"] % 2 == head["worker"]  # batch i goes to worker i % 2
                # its split follows it: the worker's thread slept 2 ms in it, far more than it ran
                assert after["kind"] == layout.EVENT_CPU and after["t0"] == e["t0"]
                assert after["value"] < (e["t1"] - e["t0"]) / 2
    assert seen == {(p, b) for p in (0, 1) for b in range(6)}
    main = read_events(os.path.join(run, layout.datapath_events_file(0, os.getpid())))
    waits = [(e["epoch"], e["item"]) for e in main if STAGE_NAME.get(e["stage"]) == "wait_data"
             and e["kind"] == layout.EVENT_SPAN]
    assert waits == [(p, b) for p in (0, 1) for b in range(6)]


def _train_two_ranks(rank, world, init, hooked, run, out):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from ddp_profile.step_spans import StepSpans

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    torch.manual_seed(0)
    # 2.3 MB of gradients in buckets of at most 0.5 MB (DDP's first bucket is at most 1 MB): several buckets a step
    model = DDP(torch.nn.Sequential(torch.nn.Linear(16, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1024),
                                    torch.nn.ReLU(), torch.nn.Linear(1024, 256), torch.nn.ReLU(),
                                    torch.nn.Linear(256, 3)), bucket_cap_mb=0.5)
    spans = StepSpans(events.EventLog(run, rank, "main"), model, False) if hooked else None
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(rank)
    for step in range(4):
        if spans:
            spans.forward_pre(step, 0)
        loss = model(torch.randn(8, 16, generator=g)).square().mean()
        if spans:
            spans.forward_post()
        loss.backward()
        if spans:
            spans.before_update(step)
        opt.step()
        opt.zero_grad()
        if spans:
            spans.after_step(step)
    if rank == 0:
        torch.save([p.detach().clone() for p in model.parameters()], out)
    if spans:
        spans.log.close()
    dist.barrier()
    # Out without torch's teardown: on torch 1.13 the Reducer's destructor joins Gloo's worker thread while holding
    # the GIL, and that thread may still need the GIL to release the Python comm hook's future (a deadlock, about one
    # run in six here; torch 2.11 does not have it). What this test compares is written and flushed by now.
    os._exit(0)


def test_the_bucket_hook_keeps_ddps_numerics_bit_for_bit(tmp_path):
    """The comm hook that times each bucket (step_spans.py) gives the parameters DDP's own reduction gives."""
    import torch.multiprocessing as mp

    params = {}
    for hooked in (False, True):
        out = str(tmp_path / ("params_%d.pt" % hooked))
        init = "file://" + str(tmp_path / ("rendezvous_%d" % hooked))
        mp.spawn(_train_two_ranks, args=(2, init, hooked, str(tmp_path), out), nprocs=2)
        params[hooked] = torch.load(out)
    assert all(torch.equal(a, b) for a, b in zip(params[False], params[True]))
    evs = read_events(os.path.join(str(tmp_path), layout.datapath_events_file(0, _pid_of_rank0(tmp_path))))
    buckets = [e for e in evs if e["kind"] == layout.EVENT_SPAN and STAGE_NAME[e["stage"]] == "allreduce"]
    assert len({e["bucket"] for e in buckets}) > 1, "several buckets a step"
    assert len(buckets) >= 4 and all(e["value"] > 0 and e["bucket"] != layout.NO_BUCKET for e in buckets)


def _pid_of_rank0(tmp_path):
    for h in glob.glob(os.path.join(str(tmp_path), layout.DATAPATH_DIR, "rank0.p*.json")):
        return json.load(open(h))["pid"]
    raise AssertionError("rank 0 wrote no header")


def test_a_composes_steps_are_timed_by_class():
    """A torchvision-style Compose (a `.transforms` list) has each step timed by class while a batch is fetched."""
    class Slow:
        def __call__(self, x):
            time.sleep(0.003)
            return x

    class Fast:
        def __call__(self, x):
            return x + 1

    class Compose:
        def __init__(self, transforms):
            self.transforms = transforms

        def __call__(self, x):
            for t in self.transforms:
                x = t(x)
            return x

    class Data(torch.utils.data.Dataset):
        transform = None

        def __len__(self):
            return 4

        def __getitem__(self, i):
            return self.transform(torch.tensor(float(i)))

    ds = Data()
    ds.transform = Compose([Fast(), Slow()])
    seen = []
    fetch_spans.in_progress.steps.clear()
    fetch_spans.in_progress.sink = lambda t0, t1, parts: seen.append(parts)
    fetch_spans.patch_fetchers()
    fetcher = torch.utils.data._utils.fetch._MapDatasetFetcher(ds, True, torch.utils.data.default_collate, False)
    try:
        out = fetcher.fetch([0, 1, 2, 3])
    finally:
        fetch_spans.in_progress.sink = None
    assert out.tolist() == [1.0, 2.0, 3.0, 4.0]
    steps = fetch_spans.in_progress.steps
    assert set(steps) == {"Fast", "Slow"} and steps["Slow"] > 4 * 2_500_000 > steps["Fast"]
    assert [p[0] for p in seen[0]].count("transform") == 4


_TERMINATED_WORKER = r"""
import os, signal, sys, time
from ddp_profile import events, worker_spans
if sys.argv[2] == "ignored":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
log = events.worker_log(sys.argv[1], 0, 0, 0)
lane = log.lane("loader/0")
worker_spans._flush_when_terminated(log)
log.span("transform", lane, 10, 20, step=3, item=1)  # buffered: a quarter of a second before a timed flush
print("ready", flush=True)
time.sleep(30 if sys.argv[2] == "default" else 1)
print("alive", flush=True)
"""


@pytest.mark.parametrize("disposition", ["default", "ignored"])
def test_a_terminated_worker_writes_what_it_held_and_keeps_the_jobs_disposition(tmp_path, disposition):
    """A DataLoader worker terminated at the job's end (SIGTERM, no finalizer) writes its buffered batches first, then
    dies as SIGTERM would have it; a worker whose job ignores SIGTERM keeps running."""
    import signal
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), "..", "..", "..", "python"))
    p = subprocess.Popen([sys.executable, "-c", _TERMINATED_WORKER, str(tmp_path), disposition],
                         stdout=subprocess.PIPE, text=True, env=env)
    assert p.stdout.readline().strip() == "ready"
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=60)
    if disposition == "default":
        assert p.returncode == -signal.SIGTERM and "alive" not in out
    else:
        assert p.returncode == 0 and "alive" in out
    evs = read_events(glob.glob(os.path.join(str(tmp_path), layout.DATAPATH_DIR, "rank0.p*.events"))[0])
    assert [(STAGE_NAME[e["stage"]], e["step"]) for e in evs if e["kind"] == layout.EVENT_SPAN] == [("transform", 3)]
