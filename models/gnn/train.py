"""Training, validation and prediction for one collection.

Files under ``WORK/models/gnn/<slug>[-tag]/``:
``config.json`` (run config + git SHA), ``last.pt`` (everything to resume), ``best.pt`` (model
weights of the best validation score), ``report.json`` (per-graph validation scores),
``valid_scores.png`` and ``curves.png``.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from tpurank.atomic import write_json
from tpurank.collections import Collection
from tpurank.config import load_run_config, save_run_config
from features.processed import ProcessedGraph
from models import metrics
from models.gnn.config import GnnConfig
from models.gnn.data import (GraphTensors, config_rows, graph_tensors, joint_collections,
                             load_graphs, sample_configs, trainable)
from models.gnn.infer import (MODEL_NAME, TensorCache, evaluate, load_trained, load_trained_dir,
                              predict_collection, predict_costs, source_order, train_costs)
from models.gnn.model import ModelArgs, RankerGNN
from models.losses import get_loss
from models.training import (EarlyStopping, autocast, choose_device, eval_mode, load_checkpoint,
                             make_grad_scaler, make_optimizer, make_scheduler, save_checkpoint,
                             seed_everything, set_cpu_threads, step_rng)

def model_args_for(cfg: GnnConfig, g: ProcessedGraph) -> ModelArgs:
    """Model shape from the config and the data's feature widths."""
    config_dim = 18 if not g.is_tile else int(g.config_feat.shape[1])
    return ModelArgs(kind="tile" if g.is_tile else "layout", node_dim=int(g.node_feat.shape[1]),
                     config_dim=config_dim, hidden=cfg.hidden, layers=cfg.layers, conv=cfg.conv,
                     heads=cfg.heads, opcode_dim=cfg.opcode_dim,
                     layout_value_dim=cfg.layout_value_dim, norm=cfg.norm, pool=cfg.pool,
                     dropout=cfg.dropout, cross_attn=cfg.cross_attn, cross_heads=cfg.cross_heads,
                     tile_join=cfg.tile_join)


def _train_step(model: RankerGNN, graphs: list[ProcessedGraph], cache: TensorCache, cfg: GnnConfig,
                step: int, device: torch.device, loss_fn, optimizer, scheduler, scaler,
                graphs_per_step: int) -> float:
    rng = step_rng(cfg.seed, step)
    torch.manual_seed(cfg.seed * 1_000_003 + step)  # dropout depends only on (seed, step)
    optimizer.zero_grad(set_to_none=True)
    total = 0.0
    chosen = rng.choice(len(graphs), size=min(graphs_per_step, len(graphs)), replace=False)
    for gi in chosen:
        g = graphs[int(gi)]
        target = np.asarray(g.target, dtype=np.float64)
        idx = sample_configs(rng, target, cfg.configs_per_step, cfg.close_bias)
        with autocast(device, cfg.amp):
            cost = train_costs(model, g, cache.get(g), idx, device, cfg, step)
        y = torch.as_tensor(target[idx], device=device)
        kwargs = {"margin": cfg.margin} if cfg.loss == "hinge" else {}
        loss = loss_fn(cost.float(), y, **kwargs) / len(chosen)
        scaler.scale(loss).backward()
        total += float(loss.detach())
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()
    return total


def _train_graphs(cfg: GnnConfig, collection: Collection) -> list[ProcessedGraph]:
    sources = joint_collections(collection) if cfg.joint_search else [collection]
    graphs = [g for c in sources for g in load_graphs(cfg.features_dir(), c, "train") if trainable(g)]
    if not graphs:
        raise RuntimeError(f"{collection.name}: no usable train graphs under {cfg.features_dir()}")
    if cfg.max_train_graphs > 0 and len(graphs) > cfg.max_train_graphs:
        keep = np.random.default_rng(cfg.seed).choice(len(graphs), cfg.max_train_graphs, replace=False)
        graphs = [graphs[i] for i in sorted(keep)]
    return graphs


def _checkpoint_state(model, optimizer, scheduler, scaler, stopper, step, args, history) -> dict:
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(),
            "early_stopping": stopper.state_dict(), "step": step, "model_args": args.to_dict(),
            "history": history}


def _restore(path: Path, args: ModelArgs, device: torch.device, model, optimizer, scheduler,
             scaler, stopper: EarlyStopping) -> tuple[list[dict[str, float]], int]:
    """Load everything saved in ``last.pt``; returns (history, next step)."""
    state = load_checkpoint(path, device)
    if state["model_args"] != args.to_dict():
        raise RuntimeError(f"{path}: saved model shape differs from this config; "
                           f"use --resume false or another --tag")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    scaler.load_state_dict(state["scaler"])
    stopper.load_state_dict(state["early_stopping"])
    return list(state["history"]), int(state["step"])


def train_collection(cfg: GnnConfig, collection: Collection) -> dict[str, Any]:
    """Train (or resume) one collection's model; returns the final validation report."""
    seed_everything(cfg.seed)
    set_cpu_threads(cfg.threads)
    device = choose_device(cfg.device)
    out = cfg.model_dir(collection)
    out.mkdir(parents=True, exist_ok=True)
    train = _train_graphs(cfg, collection)
    valid = load_graphs(cfg.features_dir(), collection, "valid")
    args = model_args_for(cfg, train[0])
    model = RankerGNN(args).to(device)
    optimizer = make_optimizer(model, cfg.lr, cfg.weight_decay)
    scheduler = make_scheduler(optimizer, cfg.steps, cfg.warmup_steps)
    scaler = make_grad_scaler(device, cfg.amp)
    stopper = EarlyStopping(cfg.patience)
    history: list[dict[str, float]] = []
    start = 0
    if cfg.resume and (out / "last.pt").is_file():
        history, start = _restore(out / "last.pt", args, device, model, optimizer, scheduler,
                                  scaler, stopper)
    else:  # a fresh run must never report an older run's best weights
        (out / "best.pt").unlink(missing_ok=True)
    save_run_config(cfg, out)
    loss_fn = get_loss(cfg.loss)
    graphs_per_step = cfg.graphs_per_step_for(collection)
    cache = TensorCache(device)
    t0, configs_seen = time.perf_counter(), 0
    bar = tqdm(range(start, cfg.steps), desc=f"gnn {collection.name}", initial=start,
               total=cfg.steps, mininterval=5.0, leave=False)
    running = []
    for step in bar:
        if stopper.should_stop or (cfg.step_budget > 0 and step - start >= cfg.step_budget):
            break
        model.train()
        running.append(_train_step(model, train, cache, cfg, step, device, loss_fn, optimizer,
                                   scheduler, scaler, graphs_per_step))
        configs_seen += cfg.configs_per_step * graphs_per_step
        done = step + 1
        if done % cfg.eval_every == 0 or done == cfg.steps:
            score = evaluate(model, collection, valid, cfg, cache, cfg.val_max_configs)["score"]
            score = -math.inf if not np.isfinite(score) else score
            improved = stopper.update(score, done)
            history.append({"step": done, "loss": float(np.mean(running)), "valid": float(score),
                            "seconds": time.perf_counter() - t0})
            running = []
            bar.set_postfix(loss=f"{history[-1]['loss']:.4f}", valid=f"{score:.4f}")
            if improved:
                save_checkpoint(out / "best.pt", {"model": model.state_dict(),
                                                  "model_args": args.to_dict(), "step": done})
            save_checkpoint(out / "last.pt", _checkpoint_state(model, optimizer, scheduler, scaler,
                                                               stopper, done, args, history))
    bar.close()
    elapsed = time.perf_counter() - t0
    if not (out / "best.pt").is_file():  # no evaluation ran (e.g. steps == 0): keep current weights
        save_checkpoint(out / "best.pt", {"model": model.state_dict(), "model_args": args.to_dict(),
                                          "step": start})
    model, _ = load_trained_dir(out, device)
    report = evaluate(model, collection, valid, cfg, TensorCache(device), max_configs=0)
    report.update({"seed": cfg.seed, "best_step": stopper.best_step, "train_seconds": elapsed,
                   "train_configs_per_s": configs_seen / elapsed if elapsed > 0 else float("nan"),
                   "n_train_graphs": len(train), "history": history,
                   "cross_attn": cfg.cross_attn, "joint_search": cfg.joint_search})
    write_json(out / "report.json", report)
    from models.gnn.report import plot_report

    plot_report(report, out)
    return report


def summary_line(report: dict[str, Any]) -> str:
    return (f"{report['collection']}: valid {report['score']:.4f} over {report['n_graphs']} graphs "
            f"(best step {report['best_step']}, {report['train_seconds']:.0f} s, "
            f"{report['train_configs_per_s']:.0f} configs/s)")


def dump_summary(path: Path, reports: list[dict[str, Any]]) -> None:
    slim = [{k: r[k] for k in ("collection", "score", "n_graphs", "seed", "best_step",
                               "train_seconds", "cross_attn", "joint_search")} for r in reports]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, slim)
