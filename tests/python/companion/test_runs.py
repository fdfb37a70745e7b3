"""Real 2-rank runs of examples/seed_job.py under torchrun with the companion on: check, record, an injected kill,
and a single-process (no DDP) check run. Skipped when torchrun is not found next to the python running pytest
(or at /root/.cache/ddp_profile/torchvenv/bin/torchrun)."""
import json
import os
import struct
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is not importable")
if int(torch.__version__.split(".")[0]) < 2:
    # The companion records with torch >= 2.0 only (optimizer step hooks); Debian's torch 1.13 also has no working
    # torchrun under Python 3.11. There it must import and do nothing: test_unit.py checks that.
    pytest.skip("torch %s: the companion records with torch >= 2.0 (and needs its torchrun)" % torch.__version__,
                allow_module_level=True)

from conftest import PYDIR, ROOT  # noqa: E402


def load_dump(path):
    """A companion tensor file: the safetensors layout (an 8-byte header length, a JSON header, the bytes), read here
    with torch alone (safetensors.torch.load_file reads it too)."""
    data = open(str(path), "rb").read()
    (n,) = struct.unpack_from("<Q", data)
    header = json.loads(data[8:8 + n])
    dtypes = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
              "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
              "BOOL": torch.bool}
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, z = e["data_offsets"]
        raw = bytearray(data[8 + n + b:8 + n + z])
        out[name] = torch.frombuffer(raw, dtype=dtypes[e["dtype"]]).reshape(e["shape"]) if raw else \
            torch.zeros(e["shape"], dtype=dtypes[e["dtype"]])
    return out


from ddp_profile import heartbeat, layout  # noqa: E402

# What the outer ddp_profile sets: the heartbeat format it reads (the companion refuses another).
FORMAT = {layout.ENV_FORMAT: str(layout.HEARTBEAT_FORMAT_VERSION)}

SEED = os.path.join(ROOT, "examples", "seed_job.py")


def _torchrun():
    for p in (os.path.join(os.path.dirname(sys.executable), "torchrun"),
              "/root/.cache/ddp_profile/torchvenv/bin/torchrun"):
        if os.path.exists(p):
            return p
    pytest.skip("torchrun not found (next to %s or in /root/.cache/ddp_profile/torchvenv/bin)" % sys.executable)


def run(tmp, *args, timeout=240, **env):
    e = dict(os.environ, PYTHONPATH=PYDIR, DDP_PROFILE_RUN=str(tmp), OMP_NUM_THREADS="1", **FORMAT, **env)
    cmd = [_torchrun(), "--standalone", "--nproc-per-node", "2", SEED] + list(args)
    return subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout)


def lines(path):
    with open(path) as f:
        return [json.loads(x) for x in f if x.strip()]


@pytest.fixture(scope="module")
def check_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("check")
    p = run(tmp, "--epochs", "1", "--ckpt", str(tmp / "user_ckpt.pt"), DDP_PROFILE_MODE="check")
    assert p.returncode == 0, p.stderr[-3000:]
    return tmp


def test_check_files(check_run):
    v = check_run / "verify"
    for r in (0, 1):
        meta = json.loads((v / ("rank%d.meta.json" % r)).read_text())
        assert meta["rank"] == r and meta["world_size"] == 2 and meta["exit"] == "ok"
        assert meta["launch"]["method"] == "torchrun" and meta["backend"] == "gloo"
        assert meta["batch"]["x"] == {"shape": [64, 128], "dtype": "float32"}
        assert meta["sampler"]["is_distributed"] and meta["sampler"]["dataset_size"] == 10000
        assert meta["optimizer"] == "AdamW" and meta["optimizer_steps"] == 79 and meta["epochs"] == 1
        for s in range(3):
            assert (v / ("rank%d_step%d.safetensors" % (r, s))).exists()
        assert len(lines(v / ("rank%d.final.jsonl" % r))) >= 4 + 1
        hb = heartbeat.read(str(check_run / "progress" / ("rank%d.bin" % r)))
        assert hb["state"] == heartbeat.DONE and hb["step"] == 79
    ref = load_dump(v / "reference_step0.safetensors")  # flat {"grads/<param>": t, "acts/<micro>/<layer>": t}
    mine = load_dump(v / "rank0_step0.safetensors")
    assert json.loads((v / "reference_step0.json").read_text())["batch_sizes"] == [[64, 64]]
    grads = [k for k in ref if k.startswith("grads/")]
    assert grads and any(k.startswith("acts/0/") for k in ref)
    for k in grads:
        assert torch.allclose(ref[k], mine[k], atol=1e-6), k


def test_samples_disjoint_and_complete(check_run):
    v = check_run / "verify"
    seen = []
    for r in (0, 1):
        s = lines(v / ("rank%d.samples.jsonl" % r))
        assert len(s) == 79 and s[0]["step"] == 0 and s[0]["micro"] == 0 and s[0]["sampler_epoch"] == 0
        seen.append({i for x in s for i in x["indices"]})
    assert not seen[0] & seen[1]
    assert len(seen[0] | seen[1]) == 10000


def test_replicas_equal(check_run):
    v = check_run / "verify"
    a, b = lines(v / "rank0.replicas.jsonl"), lines(v / "rank1.replicas.jsonl")
    assert a[0]["step"] == -1 and len(a) == 80 and a == b
    assert len(a[0]["param_hash"]) == 16


def test_collectives_and_checkpoints(check_run):
    v = check_run / "verify"
    c = lines(v / "rank0.collectives.jsonl")
    assert len(c) == 79 and all(x["collectives"] == 1 and x["bytes"] > 0 for x in c)
    ck = lines(v / "rank0.checkpoints.jsonl")
    assert len(ck) == 1 and ck[0]["index"] == 1 and ck[0]["copy"] == "checkpoints/save1/rank0/user_ckpt.pt"
    assert set(ck[0]["found"]) >= set(ck[0]["expected"])
    assert (check_run / "checkpoints" / "save1" / "rank0" / "user_ckpt.pt").exists()  # under the script's own name
    assert (v / "rank1.checkpoints.jsonl").read_text() == ""  # only rank 0 saves in seed_job


def test_record_mode(tmp_path):
    p = run(tmp_path, "--epochs", "1", DDP_PROFILE_MODE="record", DDP_PROFILE_SCHEDULE="1,1,3")
    assert p.returncode == 0, p.stderr[-3000:]
    for r in (0, 1):
        t = json.loads((tmp_path / ("rank%d.pt.trace.json" % r)).read_text())
        assert t["distributedInfo"]["rank"] == r and t["distributedInfo"]["world_size"] == 2
        assert (tmp_path / "verify" / ("rank%d.meta.json" % r)).exists()
        assert not (tmp_path / "verify" / ("rank%d.samples.jsonl" % r)).exists()


def test_injected_kill(tmp_path):
    p = run(tmp_path, "--epochs", "1", DDP_PROFILE_MODE="check", DDP_PROFILE_FAULT="kill,1,3", timeout=180)
    assert p.returncode != 0
    assert "SIGKILL" in p.stderr or "-9" in p.stderr
    hb = heartbeat.read(str(tmp_path / "progress" / "rank1.bin"))
    assert hb["reason"] == "injected kill at step 3" and hb["step"] == 3 and hb["stage"] == heartbeat.OPTIMIZER


def test_single_process_no_ddp(tmp_path):
    code = """
import torch, ddp_profile
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 2))
opt = torch.optim.SGD(m.parameters(), lr=0.1)
ds = torch.utils.data.TensorDataset(torch.randn(40, 4), torch.randint(0, 2, (40,)))
loader = torch.utils.data.DataLoader(ds, batch_size=8, shuffle=True)
crit = torch.nn.CrossEntropyLoss()
dp = ddp_profile.attach(m, opt, loss_fn=lambda mod, b: crit(mod(b[0]), b[1]))
for x, y in dp.loader(loader):
    crit(m(x), y).backward(); opt.step(); opt.zero_grad()
"""
    e = dict(os.environ, PYTHONPATH=PYDIR, DDP_PROFILE_RUN=str(tmp_path), DDP_PROFILE_MODE="check", **FORMAT)
    for k in ("RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID"):
        e.pop(k, None)
    p = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    v = tmp_path / "verify"
    meta = json.loads((v / "rank0.meta.json").read_text())
    assert meta["world_size"] == 1 and meta["launch"]["method"] == "python" and meta["dropout_off_modules"] == 1
    assert meta["sampler"]["class"] == "RandomSampler" and not meta["forward_random_beyond_dropout"]
    s = lines(v / "rank0.samples.jsonl")
    assert sorted(i for x in s for i in x["indices"]) == list(range(40))
    assert lines(v / "rank0.collectives.jsonl")[0]["collectives"] is None
    ref, mine = load_dump(v / "reference_step0.safetensors"), load_dump(v / "rank0_step0.safetensors")
    grads = [k for k in ref if k.startswith("grads/")]
    assert grads
    for k in grads:  # dropout is off in verified steps, so the reference matches exactly
        assert torch.allclose(ref[k], mine[k], atol=1e-7), k


def test_hold_after_save(tmp_path):
    import signal
    import time

    e = dict(os.environ, PYTHONPATH=PYDIR, DDP_PROFILE_RUN=str(tmp_path), DDP_PROFILE_MODE="check",
             DDP_PROFILE_VERIFY_STEPS="0", DDP_PROFILE_HOLD_AFTER_SAVE="1", OMP_NUM_THREADS="1", **FORMAT)
    cmd = [_torchrun(), "--standalone", "--nproc-per-node", "2", SEED, "--epochs", "2", "--ckpt",
           str(tmp_path / "ck.pt")]
    p = subprocess.Popen(cmd, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        ck = tmp_path / "verify" / "rank0.checkpoints.jsonl"
        deadline = time.time() + 120
        while time.time() < deadline and not (ck.exists() and ck.read_text().strip()):
            time.sleep(0.2)
        time.sleep(2)
        assert p.poll() is None, "the job should hold after its first save"
        assert len(lines(ck)) == 1 and (tmp_path / "checkpoints" / "save1" / "rank0" / "ck.pt").exists()
        assert (tmp_path / "ck.pt").exists()
        assert heartbeat.read(str(tmp_path / "progress" / "rank0.bin"))["stage"] == heartbeat.CHECKPOINT
    finally:  # torchrun starts its workers in sessions of their own: end them by the pids in their heartbeats
        for r in (0, 1):
            try:
                os.kill(heartbeat.read(str(tmp_path / "progress" / ("rank%d.bin" % r)))["pid"], signal.SIGKILL)
            except (OSError, ValueError, struct.error):
                pass
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
