"""ddp_profile.auto, the companion with no line in the script: its way in (site_entry.py as a sitecustomize) stays off
unless ddp_profile runs the job and keeps the environment's own sitecustomize; with it on, a batch is the step's when
a training forward takes it, also when the loader is read a batch ahead (Lightning, accelerate)."""
import os
import shutil
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is not importable")

import ddp_profile  # noqa: E402
from ddp_profile import auto, env, sampling  # noqa: E402

from ddp_profile import companion  # noqa: E402  (the module that owns the process's companion)

PACKAGE = os.path.dirname(ddp_profile.__file__)
PROBE = ("import sys, torch; print('auto' if 'ddp_profile.auto' in sys.modules else 'off', "
         "getattr(torch.save, '__qualname__', '?'))")


def _companion_dir(tmp_path):
    """What ddp_profile writes into a run folder: the package and its site_entry.py as sitecustomize.py."""
    d = tmp_path / "companion"
    shutil.copytree(PACKAGE, d / "ddp_profile", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copyfile(os.path.join(PACKAGE, "site_entry.py"), d / "sitecustomize.py")
    return d


def _run(pythonpath, extra_env):
    e = {k: v for k, v in os.environ.items() if not k.startswith("DDP_PROFILE_")}
    e["PYTHONPATH"] = os.pathsep.join(str(p) for p in pythonpath)
    e.update(extra_env)
    return subprocess.run([sys.executable, "-c", PROBE], env=e, capture_output=True, text=True, timeout=300)


def test_the_way_in_does_nothing_unless_ddp_profile_runs_the_job(tmp_path):
    out = _run([_companion_dir(tmp_path)], {})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["off", "save"], out.stdout + out.stderr


@pytest.mark.skipif(not hasattr(torch.optim.Optimizer, "register_step_pre_hook"), reason="needs torch >= 2.0")
def test_under_ddp_profile_it_installs_after_torch_and_keeps_the_environments_sitecustomize(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import sys\nsys.stderr.write('their sitecustomize ran\\n')\n")
    run = tmp_path / "run"
    out = _run([_companion_dir(tmp_path), theirs],
               {"DDP_PROFILE_RUN": str(run), "DDP_PROFILE_FORMAT": str(ddp_profile.layout.HEARTBEAT_FORMAT_VERSION)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["auto", "Auto.save"], out.stdout + out.stderr
    assert "their sitecustomize ran" in out.stderr


class _Recorded:
    """The companion's side of a consumed batch, as Companion records it."""

    def __init__(self):
        self.batches, self.epochs, self.found_by, self.own_loaders = [], 0, "auto", set()
        self.dropped, self.passes = [], []
        self.in_epoch, self.batch_in_epoch = False, 0
        self.hb = self.recorder = self  # the heartbeat's stage() and the recorder's drop_batch(), unused here

    def drop_batch(self, batch, draw_pass=None):
        self.dropped.append((int(batch[0][0]), draw_pass))

    def stage(self, s):
        pass

    def adopt_loader(self, loader):
        self.loader = loader

    def begin_epoch(self, loader):
        self.epochs += 1
        return self.epochs - 1

    def on_batch(self, batch, epoch, b, draw_pass=None):
        self.batches.append((epoch, b, int(batch[0][0])))
        self.passes.append(draw_pass)


def _auto_with(rec, mode, monkeypatch, tmp_path):
    """An Auto of `mode` whose companion is `rec`, both the process's own for the test."""
    monkeypatch.setattr(companion, "_current", rec)
    a = auto.Auto(env.Config(run=str(tmp_path), mode=mode, verify_steps=0, fault=None, hold_after_save=0,
                             schedule=(1, 1, 1)))
    monkeypatch.setattr(auto, "_auto", a)
    return a


def test_a_batch_read_ahead_is_the_steps_whose_forward_takes_it(monkeypatch, tmp_path):
    rec = _Recorded()
    a = _auto_with(rec, "record", monkeypatch, tmp_path)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.arange(6.0)), batch_size=2)
    val = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.arange(100.0, 104.0)), batch_size=2)
    v = a.iterate(val, lambda: iter(val))
    next(v)  # a validation batch before training: not the training's
    it = a.iterate(loader, lambda: iter(loader))
    first, ahead = next(it), next(it)  # a framework's look-ahead: batch 1 fetched before batch 0 is trained on
    a._consume((first[0],), {})
    a._consume((ahead[0],), {})
    third = next(it)
    a._consume((third[0] * 2,), {})  # the forward transformed its input: the oldest fetched batch is taken
    assert rec.batches == [(0, 0, 0), (0, 1, 2), (0, 2, 4)]
    assert a.train_loader is loader and rec.loader is loader


def test_a_peek_at_the_first_batch_is_no_pass_of_training(monkeypatch, tmp_path):
    """PyTorch's DDP tutorial reads `next(iter(loader))` before each epoch's pass: that batch, equal to the pass's
    first, is dropped as never trained on, against the sampler pass it came from, and the pass that trains is whole
    and keeps its own indices (it was one batch off when a drop took from the latest pass)."""
    rec = _Recorded()
    a = _auto_with(rec, "check", monkeypatch, tmp_path)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.arange(6.0)), batch_size=2)
    next(a.iterate(loader, lambda: iter(loader)))  # b_sz = len(next(iter(self.train_data))[0])
    for (x,) in a.iterate(loader, lambda: iter(loader)):
        a._consume((x,), {})
    assert rec.batches == [(0, 0, 0), (0, 1, 2), (0, 2, 4)]
    assert rec.passes == [2, 2, 2] and rec.dropped == [(0, 1)]
    draws = sampling.record_loader(loader)
    assert [p.number for p in draws.passes] == [1, 2]
    assert sampling.take(draws, 2, 2) == [0, 1] and sampling.take(draws, 2, 1) == [0, 1]


def test_a_pass_keeps_the_samplers_epoch_at_its_start():
    data = torch.utils.data.TensorDataset(torch.arange(8.0))
    s = torch.utils.data.DistributedSampler(data, num_replicas=2, rank=0, seed=3)
    draws = sampling.record(s)
    s.set_epoch(5)
    it = iter(s)
    first = next(it)
    s.set_epoch(6)  # too late for this pass: its permutation is drawn
    rest = list(it)
    assert sampling.pass_epoch(draws) == 5
    at_5 = torch.utils.data.DistributedSampler(data, num_replicas=2, rank=0, seed=3)
    at_5.set_epoch(5)
    assert sampling.take(draws, 4) == [first] + rest == list(at_5)


def test_once_the_script_uses_dp_loader_no_other_loaders_batch_is_taken_as_training(monkeypatch, tmp_path):
    """A loader iterated beside dp.loader (a validation pass before training) is not the training's: its batches are
    neither queued nor recorded at a training forward, which dp.loader's own batches already are."""
    rec = _Recorded()
    train = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.arange(4.0)), batch_size=2)
    rec.own_loaders = {train}
    a = _auto_with(rec, "record", monkeypatch, tmp_path)
    val = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.arange(100.0, 104.0)), batch_size=2)
    v = a.iterate(val, lambda: iter(val))
    batch = next(v)
    a._consume((batch[0],), {})
    assert not a.queue and rec.batches == [] and a.train_loader is None
    # dp.loader's: its batches are dp.loader's to record (record mode still times the pass's data path)
    own = a.iterate(train, lambda: iter(train))
    next(own)
    assert not a.queue and rec.batches == []
