"""The companion's pieces, in process: the no-op path, the hash, the heartbeat layout, checkpoint items."""
import multiprocessing
import os
import random
import struct
import time

import pytest

torch = pytest.importorskip("torch", reason="torch is not importable")

import ddp_profile  # noqa: E402
from ddp_profile import checkpoint_items, hashing, heartbeat  # noqa: E402

M = (1 << 64) - 1
P = 1099511628211
C_OFFSET = 1469598103934665603  # the C++ runtime's constant as written (not FNV's standard 14695981039346656037)


def test_noop_without_run(monkeypatch):
    monkeypatch.delenv("DDP_PROFILE_RUN", raising=False)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(4, 3)), batch_size=2)
    dp = ddp_profile.attach(model, opt, loss_fn=lambda m, b: m(b[0]).sum(), sampler=None)
    assert not dp.enabled
    assert dp.loader(loader) is loader
    assert dp.save is torch.save and dp.load is torch.load
    assert not model._forward_pre_hooks and not model._forward_hooks
    # torch < 2.0 has no optimizer step hooks at all.
    assert not getattr(opt, "_optimizer_step_pre_hooks", {}) and not getattr(opt, "_optimizer_step_post_hooks", {})


def test_bytes_hash_known_values():
    assert hashing.bytes_hash(b"") == "%016x" % C_OFFSET == "14650fb0739d0383"
    # Tail bytes only (under 8 bytes): byte-wise FNV-1a from the C++ offset. Values from an independent numpy
    # uint64 implementation.
    assert hashing.bytes_hash(b"a") == "44bd8ad473cd9906"
    assert hashing.bytes_hash(b"foobar") == "88fad7c0a8ff07f2"


@pytest.mark.parametrize("one_pass", [("cpu",), ()], ids=["matrix-vector", "two-reductions"])
def test_replica_digest_matches_the_cpp_values(one_pass, monkeypatch):
    # The same values tests/runtime/test_replica_digest.cpp pins for runtime/common/replica_digest.cpp, by either way
    # of reading the blocks (one int64 matrix-vector product on the CPU, two reductions where torch has none).
    monkeypatch.setattr(hashing, "ONE_PASS_DEVICES", one_pass)
    assert hashing.tensors_hash([torch.tensor([1, 2, 3])]) == "b009e8c7bbc3068b"
    assert hashing.tensors_hash([torch.arange(5, dtype=torch.float32)]) == "9df07692ce89948d"
    assert hashing.tensors_hash([torch.arange(10000, dtype=torch.int32)]) == "4f3c493149020022"  # 1 block + a part
    # Exact values on every torch version (linspace's rounding changed between 1.13 and 2.x).
    assert hashing.tensors_hash([torch.arange(-500, 501, dtype=torch.float64) / 500]) == "913238bfa983490d"
    assert hashing.tensors_hash([torch.tensor([1, 2, 3]), torch.arange(5, dtype=torch.float32)]) == "8cb5d5cadd385bf2"
    assert hashing.tensors_hash([torch.empty(0)]) == "01d391924635a6d1"
    assert hashing.tensors_hash([torch.arange(100000, dtype=torch.float64) / 7]) == "368421314001bcae"  # 24 blocks + a part
    # Non-contiguous tensors hash as their contiguous copy; a view at an odd byte offset as its bytes.
    assert hashing.tensors_hash([torch.arange(6.0).reshape(2, 3).t()]) == hashing.tensors_hash(
        [torch.arange(6.0).reshape(2, 3).t().contiguous()])
    big = torch.arange(40000, dtype=torch.uint8)
    assert hashing.tensors_hash([big[3:]]) == hashing.tensors_hash([big[3:].clone()])


def test_replica_digest_sees_any_changed_word_and_a_moved_one():
    v = torch.randn(9000, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    base = hashing.tensors_hash([v])
    for i in (0, 17, 4095, 4096, 8999):
        w = v.clone()
        w.view(torch.int64)[i] ^= 1
        assert hashing.tensors_hash([w]) != base, i
    s = v.clone()
    s[3], s[19] = v[19], v[3]  # the same lane, the next row
    assert hashing.tensors_hash([s]) != base
    n = torch.tensor([float("nan"), 1.0])
    assert hashing.tensors_hash([n]) == hashing.tensors_hash([n.clone()]) and hashing.same_bits(n, n.clone())


def test_fnv_word_loop_matches_struct_reference():
    data = bytes(random.Random(1).randrange(256) for _ in range(8 * 37 + 5))
    h = C_OFFSET
    for (w,) in struct.iter_unpack("<Q", data[: 8 * 37]):
        h = ((h ^ w) * P) & M
    for b in data[8 * 37:]:
        h = ((h ^ b) * P) & M
    assert hashing.bytes_hash(data) == "%016x" % h


def test_heartbeat_layout(tmp_path):
    hb = heartbeat.Heartbeat(str(tmp_path), 3)
    hb.set_state(heartbeat.RUNNING)
    hb.step(7, 2)
    hb.stage(heartbeat.OPTIMIZER)
    hb.step_time(10)
    hb.step_time(30)
    hb.reason("injected hang at step 7")
    path = os.path.join(str(tmp_path), "progress", "rank3.bin")
    assert os.path.getsize(path) == 520
    r = heartbeat.read(path)
    assert r["magic"] == 0x50524F47 and r["rank"] == 3 and r["pid"] == os.getpid()
    assert (r["state"], r["step"], r["epoch"], r["stage"], r["bucket"]) == (1, 7, 2, 9, -1)
    assert r["median_step_ns"] == 20 and r["reason"] == "injected hang at step 7"
    assert r["last_ns"] > 0 and r["format_version"] == 2


def test_a_ddp_profile_of_another_heartbeat_format_is_refused_naming_both(monkeypatch):
    from ddp_profile import env

    monkeypatch.setenv("DDP_PROFILE_FORMAT", "1")
    with pytest.raises(env.FormatMismatch, match="writes heartbeat format 2.*reads format 1"):
        env.check_format()
    monkeypatch.delenv("DDP_PROFILE_FORMAT")
    with pytest.raises(env.FormatMismatch, match="unknown"):
        env.check_format()
    monkeypatch.setenv("DDP_PROFILE_FORMAT", "2")
    env.check_format()


def _beat_forever(run: str, seconds: float) -> None:
    hb = heartbeat.Heartbeat(run, 0)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        hb.stage(heartbeat.FORWARD)
        hb.step(1, 0)


def test_heartbeat_time_is_never_read_half_written(tmp_path):
    # The supervisor polls the mapped record while the rank writes it: a time read as 0 (struct.pack_into zeroes a
    # field before it writes its bytes: 12 % of such reads here) made it call a running rank hung.
    start = time.monotonic_ns()
    writer = multiprocessing.get_context("fork").Process(target=_beat_forever, args=(str(tmp_path), 1.5))
    writer.start()
    path = os.path.join(str(tmp_path), "progress", "rank0.bin")
    reads = bad = 0
    try:
        while writer.is_alive() and reads < 2_000_000:
            if not os.path.exists(path) or os.path.getsize(path) < 40:
                continue
            with open(path, "rb") as f:
                fd = f.fileno()
                for _ in range(20000):
                    b = os.pread(fd, 40, 0)
                    if struct.unpack_from("<I", b, 0)[0] != heartbeat.MAGIC:
                        continue  # not yet written whole: the supervisor skips such a record too
                    reads += 1
                    bad += struct.unpack_from("<q", b, 32)[0] < start
    finally:
        writer.join()
    assert reads > 1000
    assert bad == 0, "%d of %d reads saw a time half-written" % (bad, reads)


def test_checkpoint_items():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(8, 4)).sum().backward()
    opt.step()
    sched = torch.optim.lr_scheduler.StepLR(opt, 10)
    items = checkpoint_items.Items(model, opt, sched, None, has_sampler=True)
    full = {"model": {"module." + k: v for k, v in model.state_dict().items()}, "optimizer": opt.state_dict(),
            "scheduler": sched.state_dict(), "epoch": 1, "global_step": 5, "sampler_epoch": 1,
            "rng": {"torch": torch.get_rng_state(), "py": random.getstate()}}
    exp = items.expected()
    assert "buffer:1.running_mean" in exp and "optimizer.state:0.weight" in exp and "scheduler" in exp
    assert set(items.found(full)) >= set(exp)
    only = set(items.found(model.state_dict()))
    assert "param:0.weight" in only and "buffer:1.num_batches_tracked" in only
    assert not only & {"optimizer.param_groups", "epoch", "step", "sampler.position", "rng.torch", "scheduler"}


def test_tied_weights_are_one_parameter_stored_under_any_of_their_names():
    """A head tied to its embedding (one Parameter under two names) is expected once and found under either name, as
    save_pretrained's safetensors keeps it; weights made one through .data (two Parameters, one storage) are one
    tensor too. Untied weights of equal values stay two."""
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class Lm(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.mid, self.other = nn.Embedding(16, 4), nn.Linear(4, 4), nn.Linear(4, 4)
            self.head = nn.Linear(4, 16, bias=False)
            self.head.weight = self.wte.weight  # tied, as tie_word_embeddings does
            self.other.weight.data = self.mid.weight.data  # one storage, two Parameters
            self.twin = nn.Linear(4, 4)
            with torch.no_grad():
                self.twin.weight.copy_(self.mid.weight)  # equal values, its own storage: not tied

    m = Lm()
    items = checkpoint_items.Items(m, torch.optim.SGD(m.parameters(), 0.1), None, None, has_sampler=False)
    params = [x for x in items.expected() if x.startswith("param:")]
    assert "param:wte.weight" in params and "param:head.weight" not in params
    assert "param:mid.weight" in params and "param:other.weight" not in params
    assert "param:twin.weight" in params
    stored_once = {k: v for k, v in m.state_dict().items() if k not in ("wte.weight", "mid.weight")}
    found = items.found(stored_once)
    assert "param:wte.weight" in found and "param:mid.weight" in found
    assert not set(params) - set(found)


def test_a_checkpoint_directory_still_being_written_is_copied_once_settled(tmp_path):
    """accelerate's save_state returns on every rank while the main process still writes its files (each through a
    .tmp* renamed into place): the copy waits for the directory to settle instead of losing or half-copying them."""
    import threading

    from ddp_profile import files

    src = tmp_path / "ckpt"
    src.mkdir()

    def writer():
        for k in range(30):
            tmp = src / (".tmp%d" % k)
            tmp.write_bytes(os.urandom(100_000))
            os.replace(tmp, src / ("part%d.bin" % k))
            time.sleep(0.01)

    t = threading.Thread(target=writer)
    t.start()
    time.sleep(0.02)
    files.copy_tree(str(src), str(tmp_path / "copy"), quiet_s=0.15)
    t.join()
    assert sorted(os.listdir(tmp_path / "copy")) == sorted("part%d.bin" % k for k in range(30))


def test_every_record_is_checked_against_layout_before_it_is_written(tmp_path):
    """A writer that renames, drops or mistypes a field fails at the write (layout.RECORDS, records.def's mirror),
    never leaving a line the C++ judges would misread."""
    from ddp_profile import files, layout

    log = files.Jsonl(str(tmp_path / "rank0.samples.jsonl"), layout.VERIFY_RECORDS[layout.SAMPLES])
    log.write({"epoch": 0, "step": 0, "micro": 0, "batch": 0, "indices": [1, 2], "sampler_epoch": None})
    for bad, why in [({"epoch": 0, "step": 0, "micro": 0, "batch": 0, "index": [1]}, "unknown field 'index'"),
                     ({"epoch": 0, "step": 0, "micro": 0, "batch": 0}, "field 'indices': missing"),
                     ({"epoch": 0, "step": "0", "micro": 0, "batch": 0, "indices": []}, "field 'step': not Int"),
                     ({"epoch": 0, "step": 0, "micro": 0, "batch": 0, "indices": [True]}, "field 'indices': not IntList")]:
        with pytest.raises(layout.ContractError, match=why):
            log.write(bad)
    log.close()
    assert (tmp_path / "rank0.samples.jsonl").read_text().count("\n") == 1
    with pytest.raises(layout.ContractError, match="first_nonfinite_layer.layer"):
        layout.check_record("training", {"step": 0, "rss": 1, "first_nonfinite_layer": {"layer": 3}})
    with pytest.raises(layout.ContractError, match="no record 'sample'"):
        files.Jsonl(str(tmp_path / "x.jsonl"), "sample")


def test_a_census_counts_live_tensors_and_graphs_and_names_what_grows():
    """The census counts the live tensors (each storage's bytes once), the autograd nodes they reach, and names a
    container once it grows; the companion's own tensors (ground.own) are never counted."""
    torch = pytest.importorskip("torch")
    from ddp_profile import ground, tensor_census

    c = tensor_census.Census(0, lambda: 0)
    base = c.take(0)
    mine = ground.own([torch.zeros(1000) for _ in range(5)])
    assert c.take(1)["tensors"] == base["tensors"]
    global kept_for_census
    kept_for_census = [torch.zeros(10), torch.zeros(10)]
    w = torch.ones(3, requires_grad=True)
    total = w.sum()
    for _ in range(3):
        total = total + (w * 2).sum()
    after = c.take(2)
    assert after["tensors"] >= base["tensors"] + 2 + 2  # the list's two, w and total
    assert after["graph_nodes"] >= 7
    kept_for_census.append(torch.zeros(10))
    grown = c.take(3)
    lists = [h for h in grown["holders"] if h["kind"] == "list" and h["count"] == 3]
    assert lists and lists[0]["name"] == "global `kept_for_census` of test_unit"
    del mine


def test_the_census_comes_often_early_then_at_doubling_gaps():
    """A short check run still gets censuses enough after its verified steps; a long one is covered to its end."""
    pytest.importorskip("torch")
    from ddp_profile import tensor_census

    c = tensor_census.Census(4, lambda: 0)
    c.spent = 1e9  # no time left in the budget: the schedule alone
    taken = []
    for step in range(0, 300):
        if c.due(step):
            c.take(step)
            c.spent = 1e9
            taken.append(step)
    assert taken[:4] == [4, 6, 8, 10]
    gaps = [b - a for a, b in zip(taken[4:], taken[5:])]
    assert gaps == sorted(gaps) and taken[-1] >= 150 and len(taken) <= 12
