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

from ddp_profile import events, fetch_spans, layout, loader_spans  # noqa: E402

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
    log = events.EventLog(str(tmp_path), 0, "main")
    parts = [("transform", 20, 30), ("transform", 50, 55), ("collate", 60, 90), ("transform", 70, 80)]
    fetch_spans.emit_fetch(log, 0, 10, 100, parts, item=4, epoch=1)
    log.close()
    spans = sorted((STAGE_NAME[e["stage"]], e["t0"], e["t1"])
                   for e in read_events(os.path.join(str(tmp_path), layout.datapath_events_file(0, os.getpid()))))
    assert spans == sorted([("transform", 20, 30), ("transform", 50, 55), ("transform", 70, 80),
                            ("collate", 60, 70), ("collate", 80, 90),
                            ("disk_read", 10, 20), ("disk_read", 30, 50), ("disk_read", 55, 60),
                            ("disk_read", 90, 100)])


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
    workers = {}
    for h in glob.glob(os.path.join(run, layout.DATAPATH_DIR, "*.json")):
        head = json.load(open(h))
        layout.check_record(layout.DATAPATH_RECORD, head)
        if head["role"] == "worker":
            workers[head["pid"]] = head
    assert len(workers) == (2 if persistent else 4)  # non-persistent workers start again each pass
    seen = set()
    for pid, head in workers.items():
        for e in read_events(os.path.join(run, layout.datapath_events_file(0, pid))):
            name = STAGE_NAME[e["stage"]]
            if name == "transform":
                seen.add((e["epoch"], e["item"]))
                assert e["item"] % 2 == head["worker"]  # batch i goes to worker i % 2
    assert seen == {(p, b) for p in (0, 1) for b in range(6)}
    main = read_events(os.path.join(run, layout.datapath_events_file(0, os.getpid())))
    waits = [(e["epoch"], e["item"]) for e in main if STAGE_NAME.get(e["stage"]) == "wait_data"
             and e["kind"] == layout.EVENT_SPAN]
    assert waits == [(p, b) for p in (0, 1) for b in range(6)]
