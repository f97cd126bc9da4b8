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

from features.atomic import write_json
from features.collections import Collection
from features.config import load_run_config, save_run_config
from features.processed import ProcessedGraph
from models import metrics
from models.gnn.config import GnnConfig
from models.gnn.data import (GraphTensors, config_rows, graph_tensors, joint_collections,
                             load_graphs, sample_configs, trainable)
from models.gnn.model import ModelArgs, RankerGNN
from models.losses import get_loss
from models.training import (EarlyStopping, autocast, choose_device, eval_mode, load_checkpoint,
                             make_grad_scaler, make_optimizer, make_scheduler, save_checkpoint,
                             seed_everything, set_cpu_threads, step_rng)

MODEL_NAME = "gnn"


def model_args_for(cfg: GnnConfig, g: ProcessedGraph) -> ModelArgs:
    """Model shape from the config and the data's feature widths."""
    config_dim = 18 if not g.is_tile else int(g.config_feat.shape[1])
    return ModelArgs(kind="tile" if g.is_tile else "layout", node_dim=int(g.node_feat.shape[1]),
                     config_dim=config_dim, hidden=cfg.hidden, layers=cfg.layers, conv=cfg.conv,
                     heads=cfg.heads, opcode_dim=cfg.opcode_dim,
                     layout_value_dim=cfg.layout_value_dim, norm=cfg.norm, pool=cfg.pool,
                     dropout=cfg.dropout, cross_attn=cfg.cross_attn, cross_heads=cfg.cross_heads,
                     tile_join=cfg.tile_join)


class TensorCache:
    """Config-independent tensors of each graph, built once per graph and kept."""

    def __init__(self, device: torch.device):
        self.device = device
        self._cache: dict[int, GraphTensors] = {}

    def get(self, g: ProcessedGraph) -> GraphTensors:
        key = id(g)
        if key not in self._cache:
            self._cache[key] = graph_tensors(g, self.device)
        return self._cache[key]


def forward_configs(model: RankerGNN, g: ProcessedGraph, tensors: GraphTensors, idx: np.ndarray,
                    device: torch.device) -> torch.Tensor:
    """Costs of configs ``idx`` of graph ``g`` (one batch)."""
    feats = config_rows(g, idx, device)
    return model(tensors.node_feat, tensors.node_opcode, tensors.edge_index, feats,
                 tensors.config_node_pos)


def predict_costs(model: RankerGNN, g: ProcessedGraph, batch_size: int = 64,
                  idx: np.ndarray | None = None, cache: TensorCache | None = None) -> np.ndarray:
    """Predicted cost (lower = faster) of every config of ``g`` (or of ``idx``), in that order.

    Configs are split into near-equal consecutive chunks of at most ``batch_size``, so that
    cross-configuration attention always sees a full-size context.
    """
    device = next(model.parameters()).device
    tensors = (cache or TensorCache(device)).get(g)
    idx = np.arange(g.num_configs) if idx is None else np.asarray(idx)
    if len(idx) == 0:
        return np.zeros(0, dtype=np.float64)
    chunks = np.array_split(idx, math.ceil(len(idx) / max(1, batch_size)))
    out = []
    with eval_mode(model):
        for chunk in chunks:
            out.append(forward_configs(model, g, tensors, chunk, device).float().cpu().numpy())
    return np.concatenate(out).astype(np.float64)


def validation_subset(g: ProcessedGraph, max_configs: int, seed: int) -> np.ndarray:
    """A fixed subset of a valid graph's configs used for early stopping (all when small)."""
    if max_configs <= 0 or g.num_configs <= max_configs:
        return np.arange(g.num_configs)
    rng = np.random.default_rng([seed, 7919, g.num_configs])
    return np.sort(rng.choice(g.num_configs, size=max_configs, replace=False))


def evaluate(model: RankerGNN, collection: Collection, graphs: list[ProcessedGraph], cfg: GnnConfig,
             cache: TensorCache | None = None, max_configs: int = 0) -> dict[str, Any]:
    """Official per-graph scores (τ or tile top-5 score) on valid graphs with targets."""
    preds, truth = {}, {}
    for g in graphs:
        if g.target is None or g.num_configs < 2:
            continue
        idx = validation_subset(g, max_configs, cfg.seed)
        preds[g.stem] = predict_costs(model, g, cfg.predict_batch, idx, cache)
        truth[g.stem] = np.asarray(g.target, dtype=np.float64)[idx]
    if not truth:
        return {"collection": collection.name, "score": float("nan"), "n_graphs": 0, "per_graph": {}}
    return metrics.score_collection(collection, preds, truth)


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
            cost = forward_configs(model, g, cache.get(g), idx, device)
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


def load_trained_dir(model_dir: str | Path, device: torch.device | str = "cpu"
                     ) -> tuple[RankerGNN, GnnConfig]:
    """Model (best weights, eval mode) and config saved in ``model_dir``."""
    model_dir = Path(model_dir)
    state = load_checkpoint(model_dir / "best.pt", device)
    model = RankerGNN(ModelArgs(**state["model_args"])).to(device)
    model.load_state_dict(state["model"])
    model.eval()
    cfg_path = model_dir / "config.json"
    cfg = load_run_config(GnnConfig, cfg_path) if cfg_path.is_file() else GnnConfig()
    return model, cfg


def load_trained(work: str | Path, collection: Collection | str, seed: int | None = None,
                 tag: str = "", device: str = "auto") -> tuple[RankerGNN, GnnConfig]:
    """Public API: the trained model of ``collection`` under ``WORK/models/gnn/`` and its config.

    ``seed=None`` takes the lowest trained seed.
    """
    from features.collections import get_collection

    coll = get_collection(collection) if isinstance(collection, str) else collection
    base = dataclasses.replace(GnnConfig(), work=str(work), tag=tag).collection_dir(coll)
    if seed is None:
        seeds = sorted(int(p.name[4:]) for p in base.glob("seed*")
                       if p.name[4:].isdigit() and (p / "best.pt").is_file())
        if not seeds:
            raise FileNotFoundError(f"{base}: no trained GNN (seed*/best.pt); run "
                                    f"`python -m models.gnn train --work {work} --collection {coll.name}`")
        seed = seeds[0]
    return load_trained_dir(base / f"seed{seed}", choose_device(device))


def predict_collection(cfg: GnnConfig, collection: Collection, splits=("valid", "test")
                       ) -> dict[str, Path]:
    """Write ``WORK/preds/gnn/<slug>/<split>.npz`` for every graph and config of each split."""
    from models.predictions import predictions_path, run_name, write_predictions

    set_cpu_threads(cfg.threads)
    device = choose_device(cfg.device)
    model, saved = load_trained_dir(cfg.model_dir(collection), device)
    written = {}
    for split in splits:
        graphs = load_graphs(cfg.features_dir(), collection, split)
        costs = {g.stem: source_order(g, predict_costs(model, g, saved.predict_batch or cfg.predict_batch))
                 for g in tqdm(graphs, desc=f"predict {collection.name}/{split}", leave=False)}
        model_name = MODEL_NAME + (f"-{cfg.tag}" if cfg.tag else "")  # tagged runs stay apart
        path = predictions_path(cfg.preds_dir(), run_name(model_name, cfg.seed), collection, split)
        write_predictions(path, costs)
        written[split] = path
    return written


def source_order(g: ProcessedGraph, cost: np.ndarray) -> np.ndarray:
    """Costs in the source file's config order (``config_index``); valid/test graphs must keep
    every config exactly once."""
    index = np.asarray(g.config_index, dtype=np.int64)
    if np.array_equal(index, np.arange(len(index))):
        return cost
    if not np.array_equal(np.sort(index), np.arange(len(index))):
        raise ValueError(f"{g.collection}/{g.split}/{g.stem}: config_index is not a permutation of "
                         f"all configs (deduplicated?); predictions need one cost per source config")
    out = np.empty_like(cost)
    out[index] = cost
    return out


def summary_line(report: dict[str, Any]) -> str:
    return (f"{report['collection']}: valid {report['score']:.4f} over {report['n_graphs']} graphs "
            f"(best step {report['best_step']}, {report['train_seconds']:.0f} s, "
            f"{report['train_configs_per_s']:.0f} configs/s)")


def dump_summary(path: Path, reports: list[dict[str, Any]]) -> None:
    slim = [{k: r[k] for k in ("collection", "score", "n_graphs", "seed", "best_step",
                               "train_seconds", "cross_attn", "joint_search")} for r in reports]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, slim)
