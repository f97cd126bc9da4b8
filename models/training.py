"""Torch training utilities of :mod:`models.gnn`: seeding, devices, LR schedule, early stopping,
checkpoints (tensors and plain values only, loaded with ``weights_only=True``: no pickled code
runs), torchrun process groups, the clock of time budgets and activation checkpointing.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch
import torch.distributed as dist

from tpurank.atomic import atomic_path


def seed_everything(seed: int) -> None:
    """Seed ``random``, NumPy and torch (``manual_seed`` seeds every device, CUDA too)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def step_rng(seed: int, step: int, stream: int = 0) -> np.random.Generator:
    """A NumPy generator that depends only on ``(seed, step, stream)``: a resumed run draws exactly
    what an uninterrupted run would have drawn, without saving any RNG state."""
    return np.random.default_rng([seed, step, stream])


def choose_device(preference: str = "auto") -> torch.device:
    """``auto`` -> CUDA when available, else CPU; otherwise the named device (``cpu``, ``cuda:1``)."""
    if preference == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(preference)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device {preference!r} requested but CUDA is not available")
    return device


_DEFAULT_THREADS = torch.get_num_threads()  # torch's own choice at import (all physical cores)


def set_cpu_threads(threads: int) -> None:
    """torch's CPU threads: ``threads``, or torch's default when 0 (also after an earlier call in
    the same process); and :func:`reuse_freed_memory`, which every caller wants too."""
    reuse_freed_memory()
    wanted = threads if threads > 0 else _DEFAULT_THREADS
    if torch.get_num_threads() != wanted:
        torch.set_num_threads(wanted)


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
KEPT_FREE_BYTES = 1 << 30


def reuse_freed_memory(kept_bytes: int = KEPT_FREE_BYTES) -> bool:
    """Let glibc's malloc keep freed blocks of up to ``kept_bytes`` for reuse (True when set; a
    no-op, False, elsewhere). By default glibc unmaps a freed block over 32 MB, so each such CPU
    tensor faults its pages in again: a GNN step spent more time in page faults than in
    arithmetic (``benchmarks/gnn_head_cpu.json``)."""
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt  # musl and others lack it
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, int(kept_bytes)) and mallopt(M_TRIM_THRESHOLD, int(kept_bytes)))


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
    """AdamW without weight decay on 1-D parameters (biases, norms)."""
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW([{"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
                              {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}], lr=lr)


@dataclass
class EarlyStopping:
    """Tracks the best validation value (higher is better); stops after ``patience`` evaluations
    without an improvement (``patience <= 0``: never)."""

    patience: int
    best: float = -math.inf
    best_step: int = -1
    bad_evals: int = 0

    def update(self, value: float, step: int) -> bool:
        """Record ``value`` at ``step``; True when it is a new best."""
        if value > self.best:
            self.best, self.best_step, self.bad_evals = float(value), int(step), 0
            return True
        self.bad_evals += 1
        return False

    @property
    def should_stop(self) -> bool:
        return self.patience > 0 and self.bad_evals >= self.patience

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "best_step": self.best_step, "bad_evals": self.bad_evals}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best, self.best_step, self.bad_evals = (float(state["best"]), int(state["best_step"]),
                                                     int(state["bad_evals"]))


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


# --- multi-process (torchrun) training -------------------------------------------------------


@dataclass
class DistContext:
    """Where this process sits in a ``torchrun`` job (``world_size == 1``: a plain process)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1


def torchrun_env() -> DistContext:
    """The job layout from torchrun's ``RANK`` / ``WORLD_SIZE`` / ``LOCAL_RANK`` (all absent:
    single process)."""
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if world <= 1:
        return DistContext()
    if "RANK" not in os.environ:
        raise RuntimeError("WORLD_SIZE > 1 but RANK is unset; start multi-process training with "
                           "`torchrun --nproc_per_node N -m models.gnn train ...`")
    return DistContext(rank=int(os.environ["RANK"]), world_size=world,
                       local_rank=int(os.environ.get("LOCAL_RANK", os.environ["RANK"])))


def init_distributed(preference: str = "auto") -> tuple[DistContext, torch.device]:
    """Join the torchrun process group (``nccl`` on CUDA, ``gloo`` on CPU) when the torchrun
    environment says so; returns the context and this rank's device (``cuda:LOCAL_RANK``)."""
    ctx = torchrun_env()
    device = choose_device(preference)
    if not ctx.active:
        return ctx, device
    if device.type == "cuda":
        device = torch.device("cuda", ctx.local_rank)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", init_method="env://")
    return ctx, device


def all_reduce(value: float, ctx: DistContext, device: torch.device, op: str = "SUM") -> float:
    """``value`` reduced over all ranks by ``dist.ReduceOp.<op>`` (identity in a single process)."""
    if not ctx.active:
        return float(value)
    tensor = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=getattr(dist.ReduceOp, op))
    return float(tensor.item())


def broadcast_object(obj: Any, ctx: DistContext) -> Any:
    """Rank 0's picklable ``obj`` on every rank (identity in a single process)."""
    if not ctx.active:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier(ctx: DistContext) -> None:
    if ctx.active:
        dist.barrier()


def shutdown_distributed(ctx: DistContext) -> None:
    """Barrier, then leave the process group (so no rank exits while another still writes)."""
    if ctx.active and dist.is_initialized():
        barrier(ctx)
        dist.destroy_process_group()


# --- time budget ------------------------------------------------------------------------------


BUDGET_CLOCKS = {"wall": time.monotonic, "cpu": time.process_time}


def budget_clock(name: str):
    """The clock time budgets are counted in: ``wall`` seconds, or ``cpu`` seconds of this
    process, which a loaded machine does not shrink (equal compute for compared runs)."""
    try:
        return BUDGET_CLOCKS[name]
    except KeyError:
        raise ValueError(f"unknown budget clock {name!r}; expected one of "
                         f"{', '.join(BUDGET_CLOCKS)}") from None


class StepHorizon:
    """The number of steps the LR schedule decays over. Fixed (``steps``) without a time limit;
    under a time limit it is re-estimated from the measured seconds per step, so the cosine
    reaches its floor when the time runs out rather than at a step count never reached."""

    def __init__(self, steps: int):
        self.max_steps = int(steps)
        self.total = int(steps)

    def update(self, done: int, seconds_per_step: float, seconds_left: float) -> int:
        if math.isfinite(seconds_left) and seconds_per_step > 0:
            projected = done + int(seconds_left / seconds_per_step)
            self.total = max(done + 1, min(self.max_steps, projected))
        return self.total


def make_horizon_scheduler(optimizer: torch.optim.Optimizer, horizon: StepHorizon,
                           warmup_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Warmup-cosine LR schedule whose total step count is read from ``horizon`` at every step."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: warmup_cosine(s, horizon.total, warmup_steps))


# --- activation checkpointing -----------------------------------------------------------------


def checkpoint_module_lists(model: torch.nn.Module, name: str = "layers") -> int:
    """Recompute the activations of every module in each ``nn.ModuleList`` called ``name``
    during backward (``torch.utils.checkpoint``) instead of keeping them: L layers hold about one
    layer's activations, at one extra forward. ``forward`` is wrapped on the instance, so
    ``state_dict`` keys and checkpoints are unchanged. Returns the number of wrapped modules."""
    from torch.utils.checkpoint import checkpoint

    wrapped = 0
    for mod_name, module in model.named_modules():
        if not (isinstance(module, torch.nn.ModuleList) and mod_name.split(".")[-1] == name):
            continue
        for layer in module:
            original = layer.forward

            def forward(*args, _original=original, **kwargs):
                if torch.is_grad_enabled():
                    return checkpoint(_original, *args, use_reentrant=False, **kwargs)
                return _original(*args, **kwargs)

            layer.forward = forward
            wrapped += 1
    if not wrapped:
        raise ValueError(f"{type(model).__name__}: no nn.ModuleList named {name!r} to checkpoint; "
                         f"use --activation-checkpointing false")
    return wrapped
