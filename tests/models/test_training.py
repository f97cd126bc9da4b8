"""Shared training utilities: schedule, early stopping, seeding, safe checkpoints."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.training import (EarlyStopping, StepHorizon, choose_device, load_checkpoint,
                             make_horizon_scheduler, make_optimizer, save_checkpoint,
                             seed_everything, step_rng, warmup_cosine)


def test_warmup_then_cosine():
    values = [warmup_cosine(s, total_steps=100, warmup_steps=10) for s in range(100)]
    assert values[0] == pytest.approx(0.1)
    assert values[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(values[10:], values[11:]))
    assert values[-1] == pytest.approx(0.05, abs=0.01)


def test_scheduler_and_optimizer_groups():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))
    opt = make_optimizer(model, lr=0.1, weight_decay=0.01)
    assert [g["weight_decay"] for g in opt.param_groups] == [0.01, 0.0]
    sched = make_horizon_scheduler(opt, StepHorizon(10), warmup_steps=2)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.05)
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1)


def test_early_stopping_counts_patience_and_roundtrips():
    stop = EarlyStopping(patience=2)
    assert stop.update(0.5, 1)
    assert not stop.update(0.4, 2)
    assert not stop.should_stop
    assert not stop.update(0.5, 3)
    assert stop.should_stop and stop.best_step == 1
    clone = EarlyStopping(patience=2)
    clone.load_state_dict(stop.state_dict())
    assert clone.state_dict() == stop.state_dict()
    assert not EarlyStopping(patience=0, bad_evals=100).should_stop


def test_seeding_and_step_rng_are_deterministic():
    seed_everything(3)
    a = torch.rand(3)
    seed_everything(3)
    assert torch.equal(a, torch.rand(3))
    assert np.array_equal(step_rng(1, 5).random(4), step_rng(1, 5).random(4))
    assert not np.array_equal(step_rng(1, 5).random(4), step_rng(1, 6).random(4))


def test_choose_device():
    assert choose_device("cpu").type == "cpu"
    assert choose_device("auto").type in ("cpu", "cuda")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA"):
            choose_device("cuda")


class _Evil:
    def __reduce__(self):
        return (print, ("pickled code ran",))


def test_checkpoint_roundtrip_and_safe_loading(tmp_path):
    model = torch.nn.Linear(2, 2)
    path = save_checkpoint(tmp_path / "c.pt", {"model": model.state_dict(), "step": 3,
                                               "history": [{"a": 1.0}]})
    state = load_checkpoint(path)
    assert state["step"] == 3 and torch.equal(state["model"]["weight"], model.weight)
    torch.save({"x": _Evil()}, tmp_path / "evil.pt")
    with pytest.raises(RuntimeError, match="evil.pt"):
        load_checkpoint(tmp_path / "evil.pt")
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "missing.pt")


def test_step_horizon_follows_measured_speed():
    from models.training import StepHorizon

    horizon = StepHorizon(1000)
    assert horizon.update(10, 0.5, float("inf")) == 1000
    assert horizon.update(10, 0.5, 20.0) == 50
    assert horizon.update(10, 0.001, 20.0) == 1000  # never past --steps


def test_checkpointed_layers_give_the_same_gradients():
    from models.training import checkpoint_module_lists

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))

        def forward(self, x):
            for layer in self.layers:
                x = torch.nn.functional.gelu(layer(x))
            return x.sum()

    torch.manual_seed(0)
    a = Net()
    b = Net()
    b.load_state_dict(a.state_dict())
    assert checkpoint_module_lists(b) == 3
    x = torch.randn(5, 4)
    a(x).backward()
    b(x).backward()
    for pa, pb in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(pa.grad, pb.grad)
    assert list(a.state_dict()) == list(b.state_dict())
    with pytest.raises(ValueError, match="ModuleList"):
        checkpoint_module_lists(torch.nn.Linear(2, 2))


def test_reuse_freed_memory_sets_glibc_thresholds_or_says_it_did_not():
    """On glibc the thresholds are set (a second call too); elsewhere a plain False, no error."""
    import platform

    from models.training import reuse_freed_memory

    result = reuse_freed_memory()
    assert isinstance(result, bool)
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert result and reuse_freed_memory(256 << 20) and reuse_freed_memory()
