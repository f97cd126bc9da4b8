"""Training and validation of one collection's model, in one process or under ``torchrun``
(nanoGPT style: single-process and DDP in the same loop). Files, time budget, presets: docs/gnn.md.

Under ``torchrun --nproc_per_node N -m models.gnn train ...`` the train graphs are sharded across
ranks (rank ``r`` keeps graphs ``r, r+N, ...``), each rank samples its graphs and configs per step
from ``step_rng(seed, step, rank)``, DDP averages the gradients, and rank 0 alone evaluates,
writes checkpoints (the single-process format) and broadcasts the early-stopping and time-budget
decisions, so every rank stops at the same step.

**Memory model** (per step, CPU float32, ``benchmarks/gnn_memory.json``): a copy step keeps
``A ~= (alpha0 + alpha1 * L) * n * B * d`` bytes for ``B`` copies of ``n`` kept nodes, ``L`` layers
at width ``d``; a factorized step ``A ~= (trunk * n + (head * nc + link * E) * B) * d`` for ``nc``
configurable nodes and ``E`` links; ``--node-budget`` caps the rows
(:meth:`GnnConfig.configs_per_step_for`).
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from tpurank.atomic import atomic_path, write_json
from tpurank.collections import Collection
from tpurank.config import run_metadata
from features.processed import ProcessedGraph
from models.gnn.config import GnnConfig
from models.gnn.data import load_graphs, sample_configs, trainable
from models.gnn.infer import TensorCache, evaluate, load_trained_dir, train_costs
from models.gnn.model import ModelArgs, RankerGNN
from models.losses import pairwise_logistic
from models.training import (DistContext, EarlyStopping, StepHorizon, all_reduce, autocast,
                             barrier, broadcast_object, budget_clock, checkpoint_module_lists,
                             choose_device, load_checkpoint, make_grad_scaler,
                             make_horizon_scheduler, make_optimizer, save_checkpoint,
                             seed_everything, set_cpu_threads, step_rng)

WEIGHT_DECAY = 1e-4  # AdamW weight decay
GRAD_CLIP = 1.0  # gradient norm clipped to this value
TILE_GRAPHS_PER_STEP = 4  # graphs per optimiser step (losses averaged) of a tile model; layout: 1
REGIME_STEPS = 4  # steps --regime times per collection
REGIME_PASSES = 30  # --regime: between the passes timed at the real shape (2-18) and on the samples (48-76)


def model_args_for(cfg: GnnConfig, g: ProcessedGraph) -> ModelArgs:
    """Model shape from the config and the data's feature widths; tile models have one
    architecture (recorded as ``copy``)."""
    return ModelArgs(kind="tile" if g.is_tile else "layout", node_dim=int(g.node_feat.shape[1]),
                     config_dim=int(g.config_feat.shape[1]) if g.is_tile else 18,
                     hidden=cfg.hidden, layers=cfg.layers, dropout=cfg.dropout,
                     cross_attn=cfg.cross_attn, arch="copy" if g.is_tile else cfg.arch,
                     head_product=cfg.head_product, head_patterns=cfg.head_patterns,
                     head_pool=cfg.head_pool, head_heuristic=cfg.head_heuristic,
                     head_sizes=cfg.head_sizes, head_shares=cfg.head_shares)


class StepModule(nn.Module):
    """What DDP wraps: one call = the costs of a step's configs (:func:`infer.train_costs`), so
    DDP's gradient hooks stay correct whatever that does inside (whole graph, GST)."""

    def __init__(self, model: RankerGNN):
        super().__init__()
        self.model = model

    def forward(self, g, tensors, idx, device, cfg, step):  # noqa: D102 (see class)
        return train_costs(self.model, g, tensors, idx, device, cfg, step)


@dataclass
class Trainer:
    """The moving parts of one training run."""

    cfg: GnnConfig
    ctx: DistContext
    device: torch.device
    model: RankerGNN
    step_model: nn.Module  # StepModule, DDP-wrapped under torchrun
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    scaler: torch.amp.GradScaler
    stopper: EarlyStopping
    horizon: StepHorizon
    history: list[dict[str, float]] = field(default_factory=list)
    stopped_by: str = ""  # set when a run ended for good (a resumed run then trains no more)

    def state(self, step: int) -> dict:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(), "scaler": self.scaler.state_dict(),
                "early_stopping": self.stopper.state_dict(), "step": step,
                "model_args": asdict(self.model.args), "history": self.history,
                "stopped_by": self.stopped_by}

    def restore(self, path: Path) -> int:
        """Load everything saved in ``last.pt``; returns the next step."""
        state = load_checkpoint(path, self.device)
        if state["model_args"] != asdict(self.model.args):
            raise RuntimeError(f"{path}: saved model shape differs from this config; "
                               f"use --resume false or another --tag")
        for name in ("model", "optimizer", "scheduler", "scaler"):
            getattr(self, name).load_state_dict(state[name])
        self.stopper.load_state_dict(state["early_stopping"])
        self.history = list(state["history"])
        self.stopped_by = str(state.get("stopped_by", ""))
        return int(state["step"])

    def save_best(self, out: Path, step: int) -> None:
        save_checkpoint(out / "best.pt", {"model": self.model.state_dict(),
                                          "model_args": asdict(self.model.args), "step": step})


def make_trainer(cfg: GnnConfig, ctx: DistContext, device: torch.device,
                 example: ProcessedGraph) -> Trainer:
    model = RankerGNN(model_args_for(cfg, example)).to(device)
    if cfg.activation_checkpointing:
        checkpoint_module_lists(model, "layers")
    step_model: nn.Module = StepModule(model)
    if ctx.active:
        # device_ids=None: the module sits on this rank's one device already, and DDP then passes
        # the step's arguments (a ProcessedGraph, numpy indices) through untouched
        # find_unused_parameters: a step may leave parameters unused (e.g. tile vs layout paths)
        step_model = nn.parallel.DistributedDataParallel(
            step_model, device_ids=None, find_unused_parameters=True)
    optimizer = make_optimizer(model, cfg.lr, WEIGHT_DECAY)
    horizon = StepHorizon(cfg.steps)
    return Trainer(cfg=cfg, ctx=ctx, device=device, model=model, step_model=step_model,
                   optimizer=optimizer,
                   scheduler=make_horizon_scheduler(optimizer, horizon, cfg.warmup_steps),
                   scaler=make_grad_scaler(device, cfg.amp), stopper=EarlyStopping(cfg.patience),
                   horizon=horizon)


def train_step(tr: Trainer, graphs: list[ProcessedGraph], cache: TensorCache, step: int,
               graphs_per_step: int) -> tuple[float, int]:
    """One optimiser step on this rank's graphs; returns (loss, configs used)."""
    cfg, rank = tr.cfg, tr.ctx.rank
    rng = step_rng(cfg.seed, step, rank)
    torch.manual_seed(cfg.seed * 1_000_003 + step + rank * 1_000_000_007)  # dropout: (seed, step, rank)
    tr.optimizer.zero_grad(set_to_none=True)
    total, configs = 0.0, 0
    chosen = rng.choice(len(graphs), size=min(graphs_per_step, len(graphs)), replace=False)
    for k, gi in enumerate(chosen):
        g = graphs[int(gi)]
        target = np.asarray(g.target, dtype=np.float64)
        tensors = cache.get(g)
        links = tensors.links
        size = cfg.configs_per_step_for(g.num_nodes, g.is_tile,
                                        0 if g.is_tile else len(g.config_node_pos),
                                        0 if links is None else int(links.hops.numel()))
        idx = sample_configs(rng, target, size, cfg.close_bias)
        # DDP all-reduces the gradients on the step's last backward only
        skip_sync = tr.ctx.active and k < len(chosen) - 1
        with tr.step_model.no_sync() if skip_sync else contextlib.nullcontext():
            with autocast(tr.device, cfg.amp):
                cost = tr.step_model(g, tensors, idx, tr.device, cfg, step)
            y = torch.as_tensor(target[idx], device=tr.device)
            loss = pairwise_logistic(cost.float(), y) / len(chosen)
            tr.scaler.scale(loss).backward()
        total += float(loss.detach())
        configs += len(idx)
    tr.scaler.unscale_(tr.optimizer)
    torch.nn.utils.clip_grad_norm_(tr.model.parameters(), GRAD_CLIP)
    tr.scaler.step(tr.optimizer)
    tr.scaler.update()
    tr.scheduler.step()
    return total, configs


def train_graphs(cfg: GnnConfig, collection: Collection) -> list[ProcessedGraph]:
    """The usable train graphs of ``collection``."""
    graphs = [g for g in load_graphs(cfg.features_dir(), collection, "train") if trainable(g)]
    if not graphs:
        raise RuntimeError(f"{collection.name}: no usable train graphs under {cfg.features_dir()}")
    return limit_graphs(cfg, graphs)


def limit_graphs(cfg: GnnConfig, graphs: list[ProcessedGraph]) -> list[ProcessedGraph]:
    if cfg.max_train_graphs > 0 and len(graphs) > cfg.max_train_graphs:
        keep = np.random.default_rng(cfg.seed).choice(len(graphs), cfg.max_train_graphs, replace=False)
        graphs = [graphs[i] for i in sorted(keep)]
    return graphs


def eval_configs(graphs: list[ProcessedGraph], max_configs: int = 0) -> int:
    """Configs scored by an evaluation on ``graphs`` (``max_configs`` per graph; 0 = all)."""
    return sum(min(g.num_configs, max_configs) if max_configs > 0 else g.num_configs
               for g in graphs if g.target is not None)


class EvalReserve:
    """Seconds to keep for the evaluations still due when the time runs out (the periodic one and
    the final report): measured from the last periodic evaluation; before the first, estimated from
    the training speed (a forward pass costs about half a training step per config)."""

    def __init__(self, valid: list[ProcessedGraph], max_configs: int, final_max_configs: int = 0,
                 final_eval: bool = True):
        self.periodic = eval_configs(valid, max_configs)
        final = eval_configs(valid, final_max_configs) if final_eval else 0
        self.final_ratio = final / self.periodic if self.periodic else 1.0
        self.seconds_per_eval: float | None = None
        self._warmup: tuple[float, int] | None = None  # (seconds, configs) after the first step

    def seconds_per_config(self, spent: float, configs: int) -> float:
        """Training seconds per config so far (0 = no estimate yet), without this invocation's
        first step: a warm-up that can take several steps' time (docs/gnn.md, "Time and threads")."""
        if self._warmup is None:
            if configs > 0:
                self._warmup = (spent, configs)
            return 0.0
        more = configs - self._warmup[1]
        return (spent - self._warmup[0]) / more if more > 0 else 0.0

    def seconds(self, seconds_per_config: float, pending_eval: bool) -> float:
        per_eval = self.seconds_per_eval
        if per_eval is None:
            per_eval = 0.5 * seconds_per_config * self.periodic
        return per_eval * (self.final_ratio + (1.0 if pending_eval else 0.0))


def train_collection(cfg: GnnConfig, collection: Collection, seconds: float = math.inf,
                     ctx: DistContext | None = None, device: torch.device | None = None
                     ) -> dict[str, Any]:
    """Train (or resume) one collection's model on its train split, early-stopped on valid;
    returns the final validation report. ``seconds`` is this run's share of the time budget
    (default: ``cfg.time_budget`` when set, else no limit)."""
    if math.isinf(seconds) and cfg.time_budget > 0:
        seconds = cfg.time_budget
    train = train_graphs(cfg, collection)
    valid = load_graphs(cfg.features_dir(), collection, "valid")
    return fit(cfg, collection, train, valid, cfg.model_dir(collection), seconds,
               ctx or DistContext(), device or choose_device(cfg.device))


def fit(cfg: GnnConfig, collection: Collection, train: list[ProcessedGraph],
        valid: list[ProcessedGraph], out: Path, seconds: float, ctx: DistContext,
        device: torch.device, extra_config: dict | None = None, monitor_only: bool = False
        ) -> dict[str, Any]:
    """Train on ``train``, early-stop on ``valid``, write ``out/`` and return the report.
    ``monitor_only``: ``valid`` only draws the learning curve (nothing is chosen by it), so no
    evaluation after training takes time from the share: the last periodic score is the report's."""
    clock = budget_clock(cfg.budget_clock)
    t_start = clock()
    seed_everything(cfg.seed)
    set_cpu_threads(cfg.threads)
    out.mkdir(parents=True, exist_ok=True)
    # this rank's train graphs: every world_size-th, from rank (all when too few)
    mine = train[ctx.rank::ctx.world_size] if len(train) >= ctx.world_size else train
    tr = make_trainer(cfg, ctx, device, train[0])
    start = 0
    saved = json.loads((out / "config.json").read_text()) if (out / "config.json").is_file() else {}
    plans = [Path(c.get("fold_plan") or "").name for c in (saved, extra_config or {})]
    other_plan = plans[0] != plans[1]  # a fold model of another plan (e.g. a new --regime): start afresh
    if cfg.resume and (out / "last.pt").is_file() and not other_plan:
        start = tr.restore(out / "last.pt")
    elif ctx.is_main:  # a fresh run must never report an older run's best weights
        (out / "best.pt").unlink(missing_ok=True)
    if ctx.is_main:  # with the device it trained on, and whether mixed precision ran (CUDA only)
        write_json(out / "config.json", {**run_metadata(cfg), "world_size": ctx.world_size,
                                         "device": str(device),
                                         "amp": cfg.amp and device.type == "cuda",
                                         **(extra_config or {})})
    barrier(ctx)
    loop = _loop(tr, collection, mine, valid, out, start, seconds - (clock() - t_start),
                 monitor_only)
    report = None
    if ctx.is_main:
        report = _final_report(tr, collection, valid, out, loop, len(train), monitor_only)
    return broadcast_object(report, ctx)


def _loop(tr: Trainer, collection: Collection, graphs: list[ProcessedGraph],
          valid: list[ProcessedGraph], out: Path, start: int, seconds: float,
          monitor_only: bool = False) -> dict[str, Any]:
    """Steps until ``cfg.steps``, early stopping, ``step_budget`` or the time share is spent;
    returns the report's entries on the run."""
    cfg, ctx = tr.cfg, tr.ctx
    # every rank must run the same number of forward/backward passes per step (DDP collectives)
    per_step_graphs = int(all_reduce(min(TILE_GRAPHS_PER_STEP if collection.is_tile else 1,
                                         len(graphs)), ctx, tr.device, op="MIN"))
    cache, valid_cache = TensorCache(tr.device), TensorCache(tr.device)
    reserve = EvalReserve(valid, cfg.val_max_configs, cfg.final_val_max_configs,
                          final_eval=not monitor_only)
    clock = budget_clock(cfg.budget_clock)
    t0, configs, running = clock(), 0, []
    label = f"gnn {collection.name}" + (f" {out.name}" if out.name.startswith("fold") else "")
    bar = tqdm(total=cfg.steps, initial=start, desc=label, mininterval=5.0, leave=False,
               disable=not ctx.is_main)  # total follows the time budget's projected steps: ETA
    step, evaluated, stopped_by = start, start, tr.stopped_by or "steps"
    while step < cfg.steps and not tr.stopped_by:
        spent = clock() - t0
        per_step = spent / (step - start) if step > start else 0.0
        left = seconds - spent - reserve.seconds(reserve.seconds_per_config(spent, configs),
                                                 pending_eval=step > evaluated)
        stop = {"early_stopping": tr.stopper.should_stop,
                "step_budget": cfg.step_budget > 0 and step - start >= cfg.step_budget,
                "time_budget": left <= per_step * 0.5}
        reason = next((r for r, s in stop.items() if s), "")
        # rank 0 decides, so that every rank stops at the same step
        reason, tr.horizon.total = broadcast_object((reason, tr.horizon.update(step, per_step, left)),
                                                    ctx)
        if reason:
            stopped_by = reason
            break
        tr.step_model.train()
        loss, used = train_step(tr, graphs, cache, step, per_step_graphs)
        running.append(all_reduce(loss, ctx, tr.device) / ctx.world_size)
        configs += used
        step += 1
        bar.total = tr.horizon.total
        bar.update(1)
        if step % cfg.eval_every == 0 or step == cfg.steps:
            t_eval = clock()
            _evaluate_and_save(tr, collection, valid, valid_cache, out, step, running,
                               clock() - t0, bar)
            reserve.seconds_per_eval = clock() - t_eval
            running, evaluated = [], step
    if stopped_by == "time_budget" and not tr.stopped_by:
        tr.stopped_by = stopped_by  # final: a rerun resumes into the report, not more training
        if step > evaluated and running:  # keep what was trained since the last evaluation
            _evaluate_and_save(tr, collection, valid, valid_cache, out, step, running,
                               clock() - t0, bar)
        elif ctx.is_main:
            save_checkpoint(out / "last.pt", tr.state(step))
    bar.close()
    elapsed, configs = clock() - t0, all_reduce(configs, ctx, tr.device)
    return {"train_seconds": elapsed, "last_step": step, "stopped_by": stopped_by,
            "train_configs_per_s": configs / elapsed if elapsed > 0 else float("nan")}


def _evaluate_and_save(tr: Trainer, collection: Collection, valid: list[ProcessedGraph],
                       cache: TensorCache, out: Path, step: int, running: list[float],
                       elapsed: float, bar) -> None:
    """Rank 0 scores ``valid``; every rank records the broadcast score (same early stopping)."""
    cfg = tr.cfg
    score = math.nan
    if tr.ctx.is_main:
        score = evaluate(tr.model, collection, valid, cfg, cache, cfg.val_max_configs)["score"]
    score = broadcast_object(score, tr.ctx)
    score = -math.inf if not np.isfinite(score) else score
    improved = tr.stopper.update(score, step)
    tr.history.append({"step": step, "loss": float(np.mean(running)), "valid": float(score),
                       "seconds": elapsed})
    bar.set_postfix(loss=f"{tr.history[-1]['loss']:.4f}", valid=f"{score:.4f}")
    if tr.ctx.is_main:
        if improved or cfg.keep == "last":
            tr.save_best(out, step)
        save_checkpoint(out / "last.pt", tr.state(step))


def _final_report(tr: Trainer, collection: Collection, valid: list[ProcessedGraph], out: Path,
                  loop: dict[str, Any], n_train: int, monitor_only: bool = False) -> dict[str, Any]:
    cfg = tr.cfg
    if not (out / "best.pt").is_file():  # no evaluation ran (e.g. steps == 0): keep current weights
        tr.save_best(out, loop["last_step"])
    t_eval = time.monotonic()
    if monitor_only:
        last = tr.history[-1]["valid"] if tr.history else math.nan
        report = {"collection": collection.name, "score": last, "n_graphs": len(valid)}
    else:
        model, _ = load_trained_dir(out, tr.device)
        report = evaluate(model, collection, valid, cfg, TensorCache(tr.device),
                          max_configs=cfg.final_val_max_configs)
    report.update({**loop, "seed": cfg.seed, "best_step": tr.stopper.best_step, "keep": cfg.keep,
                   "final_eval_seconds": time.monotonic() - t_eval, "world_size": tr.ctx.world_size,
                   "n_train_graphs": n_train, "history": tr.history,
                   "final_val_max_configs": cfg.final_val_max_configs,
                   "cross_attn": cfg.cross_attn})
    write_json(out / "report.json", report)
    plot_report(report, out)
    return report


def plot_report(report: dict[str, Any], out: Path) -> None:
    """Write ``valid_scores.png`` (per-graph score) and ``curves.png`` (loss / valid vs step)."""
    from matplotlib.figure import Figure  # no pyplot: no global state, no backend to choose

    figures, coll = {}, report["collection"]
    if per_graph := report.get("per_graph", {}):
        stems = list(per_graph)
        fig = figures["valid_scores.png"] = Figure(figsize=(max(4.0, 0.35 * len(stems) + 2), 3.5))
        ax = fig.subplots()
        ax.bar(range(len(stems)), [per_graph[s] for s in stems], color="tab:blue")
        ax.axhline(report["score"], color="tab:red", lw=1, label=f"mean {report['score']:.3f}")
        ax.set_xticks(range(len(stems)), stems, rotation=90, fontsize=7)
        metric = "top-5 score" if coll.startswith("tile") else "Kendall τ"
        ax.set_ylabel(metric)
        ax.set_title(f"GNN validation {metric} per graph — {coll}")
        ax.legend(loc="lower right")
    if history := report.get("history", []):
        steps = [h["step"] for h in history]
        fig = figures["curves.png"] = Figure(figsize=(6, 3.5))
        ax1 = fig.subplots()
        ax1.plot(steps, [h["loss"] for h in history], color="tab:orange", label="train loss")
        ax1.set_xlabel("step")
        ax1.set_ylabel("train loss", color="tab:orange")
        ax2 = ax1.twinx()
        ax2.plot(steps, [h["valid"] for h in history], color="tab:blue", marker="o", label="valid")
        ax2.set_ylabel("validation score", color="tab:blue")
        ax1.set_title(f"GNN training — {coll}")
    for name, fig in figures.items():
        with atomic_path(out / name, suffix=".png") as tmp:
            fig.savefig(tmp, format="png", dpi=100, bbox_inches="tight")


def summary_line(report: dict[str, Any]) -> str:
    return (f"{report['collection']}: {report.get('score_kind', 'valid')} {report['score']:.4f} "
            f"over {report['n_graphs']} graphs (best step {report['best_step']}, "
            f"{report['train_seconds']:.0f} s, "
            f"{report['train_configs_per_s']:.0f} configs/s, stopped by {report['stopped_by']})")


def choose_regime(cfg: GnnConfig, collections: list[Collection], device: torch.device) -> None:
    """``--regime``: per collection, time a few steps and write ``regime.json`` (once per WORK and
    model, so every seed and the predict stage follow it): the options its fold models train with.
    Fold models that pass over their train graphs fewer than :data:`REGIME_PASSES` times in their
    share are step-limited: 2 folds (longer shares) and no dropout win there; with more passes
    they overfit: ``--folds`` and dropout 0.1 win (BENCHMARKS.md, "How the GNN's fold models train")."""
    units = sum(cfg.folds * cfg.budget_weight(c) for c in collections)
    for coll in collections:
        path = cfg.collection_dir(coll) / "regime.json"
        if path.is_file() or cfg.time_budget <= 0 or cfg.folds < 2:
            continue
        graphs = train_graphs(cfg, coll)
        per_step = min(TILE_GRAPHS_PER_STEP if coll.is_tile else 1, len(graphs))
        tr, cache, clock = make_trainer(cfg, DistContext(), device, graphs[0]), TensorCache(device), \
            budget_clock(cfg.budget_clock)
        seconds = []
        for step in [*range(REGIME_STEPS)] * 2:  # timed the second time: tensors cached, as in training
            start = clock()
            train_step(tr, graphs, cache, step, per_step)
            seconds.append(clock() - start)
        step_seconds = float(np.mean(seconds[REGIME_STEPS:]))
        share = cfg.time_budget * cfg.budget_weight(coll) / units
        passes = share / step_seconds * per_step / (len(graphs) * (cfg.folds - 1) / cfg.folds)
        few = passes < REGIME_PASSES
        write_json(path, {"passes": passes, "step_seconds": step_seconds, "share_seconds": share,
                          "options": {"folds": 2 if few else cfg.folds, "dropout": 0.0 if few else 0.1}})
        print(f"{coll.name}: about {passes:,.0f} passes over its train graphs a fold model: "
              f"{'2 folds, no dropout' if few else f'{cfg.folds} folds, dropout 0.1'}", flush=True)
