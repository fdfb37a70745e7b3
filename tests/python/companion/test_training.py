"""The companion's per-step records of whether the job learns, and its dataset probe, in process (no torchrun): what
they record for a planted error, and that recording changes nothing the training draws."""
import json
import random

import pytest

torch = pytest.importorskip("torch", reason="torch is not importable")

from ddp_profile import dataset_probe, files, training  # noqa: E402


def _lines(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _training(tmp_path, model, optimizer, scheduler=None):
    return training.Training(model, optimizer, scheduler, files.Jsonl(str(tmp_path / "t.jsonl"), "training"))


def test_a_step_records_zero_nonfinite_and_absent_gradients(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    t = _training(tmp_path, model, opt)
    t.forward_pre()
    out = model(torch.ones(2, 3))
    t.forward_post((torch.ones(2, 3),), {}, out)
    out.sum().backward()
    model[0].weight.grad.zero_()
    model[1].bias.grad[0] = float("nan")
    model[1].weight.grad = None
    t.before_step()
    t.after_step(0, None)
    line = _lines(tmp_path / "t.jsonl")[0]
    assert line["grad_zero"] == ["0.weight"]
    assert line["grad_nonfinite"] == ["1.bias"]
    assert line["grad_none"] == ["1.weight"]
    assert line["output_finite"] and not line["model_in_eval"] and line["params"] == 4 and line["rss"] > 0


def test_a_float16_gradient_with_a_huge_norm_is_not_called_non_finite(tmp_path):
    p = torch.nn.Parameter(torch.zeros(100, dtype=torch.float16))
    opt = torch.optim.SGD([p], lr=0.1)
    model = torch.nn.Module()
    model.p = p
    t = _training(tmp_path, model, opt)
    p.grad = torch.full((100,), 60000.0, dtype=torch.float16)  # each finite; the norm overflows float16
    t.before_step()
    t.after_step(0, None)
    assert _lines(tmp_path / "t.jsonl")[0]["grad_nonfinite"] == []


def test_the_first_non_finite_layer_is_found_without_disturbing_the_rng(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Dropout(0.5), torch.nn.Linear(3, 1))
    with torch.no_grad():
        model[2].weight.fill_(float("inf"))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    t = _training(tmp_path, model, opt)
    x = torch.ones(4, 3)
    t.forward_pre()
    out = model(x)
    state = torch.get_rng_state()
    t.forward_post((x,), {}, out)
    assert torch.equal(torch.get_rng_state(), state)  # the forward run again drew from a forked RNG
    t.after_step(0, None)
    line = _lines(tmp_path / "t.jsonl")[0]
    assert not line["output_finite"] and line["first_nonfinite_layer"]["layer"] == "2 (Linear)"


def test_eval_mode_and_the_scheduler_count_are_recorded(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Dropout(0.1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1)  # found by the search: not given
    t = _training(tmp_path, model, opt)
    model.eval()
    t.forward_pre()
    with torch.no_grad():  # a validation forward: not training, not recorded
        t2 = training.Training(model, opt, None, files.Jsonl(str(tmp_path / "u.jsonl"), "training"))
        t2.forward_pre()
        assert t2.training_forwards == 0
    sched.step()
    sched.step()
    t.after_step(0, None)
    line = _lines(tmp_path / "t.jsonl")[0]
    assert line["model_in_eval"] and line["eval_modules"] == ["1 (Dropout)"]
    assert line["scheduler_steps"] == 2


class _Noisy(torch.utils.data.Dataset):
    def __len__(self):
        return 50

    def __getitem__(self, i):
        return torch.rand(3) + i, random.random()  # "augmentation" from both RNGs


def test_the_dataset_probe_compares_seeded_reads_and_restores_every_rng():
    plain = torch.utils.data.TensorDataset(torch.arange(40.0).reshape(20, 2), torch.arange(20))
    a, b = dataset_probe.probe(plain), dataset_probe.probe(torch.utils.data.TensorDataset(
        torch.arange(40.0).reshape(20, 2), torch.arange(20)))
    assert a == b and len(a["items"]) == dataset_probe.PROBES and a["random_items"] == []
    other = dataset_probe.probe(torch.utils.data.TensorDataset(torch.arange(40.0).reshape(20, 2) + 1, torch.arange(20)))
    assert other["items"] != a["items"]
    torch_state, py_state = torch.get_rng_state(), random.getstate()
    noisy = dataset_probe.probe(_Noisy())  # random per read, yet the same under one seed: compared
    assert torch.equal(torch.get_rng_state(), torch_state) and random.getstate() == py_state
    assert len(noisy["items"]) == dataset_probe.PROBES
    assert dataset_probe.probe(iter([1, 2]))["not_probed"]


def test_a_parameter_stepped_by_another_optimizer_is_not_outside():
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 1))
    main = torch.optim.SGD(model[0].parameters(), lr=0.1)
    head = torch.optim.Adam(model[1].parameters(), lr=0.1)  # noqa: F841  (alive: the search finds it)
    assert training.outside_optimizer(model, main) == []
    del head
    import gc

    gc.collect()
    assert training.outside_optimizer(model, main) == ["1.weight", "1.bias"]


def _iterate(t, model, opt, zero_grad=True, steps=2, step_first=False):
    """`steps` iterations of a plain loop through Training's hooks, as the companion calls them."""
    for _ in range(steps):
        if zero_grad:
            opt.zero_grad()
        t.forward_pre()
        loss = model(torch.ones(2, 3)).square().sum()
        if step_first:  # the hooks only: a real update here trips autograd's in-place check on some versions
            t.before_step()
            t.after_step(0, None)
        loss.backward()
        if not step_first:
            t.before_step()
            opt.step()
            t.after_step(0, None)


def test_each_step_counts_its_backwards_and_sees_gradients_left_from_the_last(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    t = _training(tmp_path, model, opt)
    _iterate(t, model, opt)
    _iterate(t, model, opt, zero_grad=False)
    _iterate(t, model, opt, step_first=True, steps=1)
    lines = _lines(tmp_path / "t.jsonl")
    assert [(x["forwards"], x["backwards"], x["stale_grads"]) for x in lines[:4]] == \
        [(1, 1, False), (1, 1, False), (1, 1, True), (1, 1, True)]
    assert not any(x["step_before_backward"] for x in lines[:4])
    assert lines[4]["step_before_backward"] and lines[4]["backwards"] == 0


def test_replicated_state_is_equal_on_copies_and_names_a_drifting_buffer():
    from ddp_profile import replicated

    torch.manual_seed(0)
    a = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    b = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    b.load_state_dict(a.state_dict())
    assert replicated.buffers(a) == replicated.buffers(b)
    b(torch.randn(8, 3))  # a training forward on b's own batch updates its running statistics
    got = dict(replicated.buffers(b))
    differ = [k for k, v in replicated.buffers(a) if got[k] != v]
    assert differ == ["buffers", "buffer/1.running_mean", "buffer/1.running_var", "buffer/1.num_batches_tracked"]
    oa, ob = torch.optim.AdamW(a.parameters(), lr=1e-3), torch.optim.AdamW(b.parameters(), lr=2e-3)
    assert replicated.optimizer(oa)[0] == ("optimizer/param_groups[0].lr", "0.001")
    assert [k for (k, v), (_, w) in zip(replicated.optimizer(oa), replicated.optimizer(ob)) if v != w] == \
        ["optimizer/param_groups[0].lr"]
    s = torch.utils.data.DistributedSampler(list(range(10)), num_replicas=2, rank=1, seed=4)
    assert dict(replicated.sampler(s)) == {"sampler/seed": "4", "sampler/num_replicas": "2", "sampler/shuffle": "True",
                                           "sampler/drop_last": "False", "sampler/epoch": "0"}


def test_gradients_a_later_zero_grad_clears_before_the_step_are_not_stale(tmp_path):
    """A GAN's discriminator: after its step the generator's backward runs through it (its gradients are not
    zeroed yet), then its own zero_grad comes before its next forward: nothing piles up into its next step."""
    from ddp_profile import iteration

    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    t = _training(tmp_path, model, opt)
    iteration.watch_zero_grad(opt, t.iteration.zero_grad_called)
    for _ in range(3):
        model(torch.ones(2, 3)).sum().backward()  # the generator's backward through it, after its step
        opt.zero_grad()
        t.forward_pre()
        model(torch.ones(2, 3)).square().sum().backward()
        t.before_step()
        opt.step()
        t.after_step(0, None)
    lines = _lines(tmp_path / "t.jsonl")
    assert [x["stale_grads"] for x in lines] == [False, False, False]
    assert [x["backwards"] for x in lines] == [2, 2, 2]
