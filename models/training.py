"""Shared training utilities: seeding, device choice, LR schedule, early stopping, checkpoints.

Used by the GNN (``models.gnn``) and reusable by any other torch or non-torch model
(:func:`seed_everything` also seeds ``random`` and NumPy).

Checkpoints hold only tensors and plain Python values so that they load with
``torch.load(..., weights_only=True)`` (no pickled code is ever executed on load).
"""

from __future__ import annotations

import contextlib
import math
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch

from tpurank.atomic import atomic_path


def seed_everything(seed: int, deterministic: bool = False) -> None:
    """Seed ``random``, NumPy and torch (CPU and CUDA). ``deterministic`` also asks cuDNN for
    deterministic kernels (slower; CPU runs are deterministic anyway)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    if deterministic:
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False


def step_rng(seed: int, step: int, stream: int = 0) -> np.random.Generator:
    """A NumPy generator that depends only on ``(seed, step, stream)``.

    Drawing each step's samples from its own generator makes a resumed run draw exactly what an
    uninterrupted run would have drawn, without saving any RNG state.
    """
    return np.random.default_rng([seed, step, stream])


def choose_device(preference: str = "auto") -> torch.device:
    """``auto`` -> CUDA when available, else CPU; otherwise the named device (``cpu``, ``cuda:1``)."""
    if preference == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(preference)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device {preference!r} requested but CUDA is not available")
    return device


def set_cpu_threads(threads: int) -> None:
    """Limit torch's CPU threads (0 = leave torch's default)."""
    if threads > 0:
        torch.set_num_threads(threads)


def autocast(device: torch.device, enabled: bool) -> contextlib.AbstractContextManager:
    """Mixed precision on CUDA (bf16 when supported, else fp16); a no-op on CPU or when disabled."""
    if not enabled or device.type != "cuda":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.autocast(device_type="cuda", dtype=dtype)


def make_grad_scaler(device: torch.device, enabled: bool) -> torch.amp.GradScaler:
    """A gradient scaler, active only for fp16 autocast on CUDA (bf16 needs none)."""
    active = enabled and device.type == "cuda" and not torch.cuda.is_bf16_supported()
    return torch.amp.GradScaler("cuda" if device.type == "cuda" else "cpu", enabled=active)


def warmup_cosine(step: int, total_steps: int, warmup_steps: int, min_factor: float = 0.05) -> float:
    """LR multiplier: linear warmup from ~0 to 1, then cosine decay to ``min_factor``."""
    if warmup_steps > 0 and step < warmup_steps:
        return (step + 1) / warmup_steps
    span = max(1, total_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / span)
    return min_factor + (1.0 - min_factor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW without weight decay on biases, norms and embeddings' 1-D parameters."""
    decay, no_decay = [], []
    for _, param in model.named_parameters():
        if not param.requires_grad:
            continue
        (decay if param.ndim >= 2 else no_decay).append(param)
    groups = [{"params": decay, "weight_decay": weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr)


def make_scheduler(optimizer: torch.optim.Optimizer, total_steps: int,
                   warmup_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: warmup_cosine(s, total_steps, warmup_steps))


@dataclass
class EarlyStopping:
    """Tracks the best validation value (higher is better) and says when to stop.

    ``patience`` counts evaluations without an improvement larger than ``min_delta``;
    ``patience <= 0`` never stops early.
    """

    patience: int
    min_delta: float = 0.0
    best: float = -math.inf
    best_step: int = -1
    bad_evals: int = 0
    history: list[dict[str, float]] = field(default_factory=list)

    def update(self, value: float, step: int) -> bool:
        """Record ``value`` at ``step``; True when it is a new best."""
        self.history.append({"step": float(step), "value": float(value)})
        if value > self.best + self.min_delta:
            self.best, self.best_step, self.bad_evals = float(value), int(step), 0
            return True
        self.bad_evals += 1
        return False

    @property
    def should_stop(self) -> bool:
        return self.patience > 0 and self.bad_evals >= self.patience

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "best_step": self.best_step, "bad_evals": self.bad_evals,
                "history": list(self.history)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best = float(state["best"])
        self.best_step = int(state["best_step"])
        self.bad_evals = int(state["bad_evals"])
        self.history = [dict(h) for h in state.get("history", [])]


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> Path:
    """Atomically ``torch.save`` a dict of tensors / state dicts / plain values."""
    path = Path(path)
    with atomic_path(path, suffix=".pt") as tmp:
        torch.save(state, tmp)
    return path


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint safely (``weights_only=True``: tensors and plain containers only)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: checkpoint not found (train the model first)")
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # unpickling errors have many types; name the file
        raise RuntimeError(f"{path}: cannot load checkpoint safely: {exc}") from exc


@contextlib.contextmanager
def eval_mode(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """Temporarily switch ``model`` to eval mode and disable autograd."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield model
    finally:
        model.train(was_training)


def peak_memory_mb(device: torch.device) -> float:
    """Peak memory of this process: CUDA allocator peak on GPU, max RSS on CPU (MiB)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    except (ImportError, OSError):
        return float("nan")
