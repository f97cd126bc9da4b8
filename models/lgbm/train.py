"""Training and prediction of every selected collection, resumable, within a time budget
(docs/lgbm.md, "Training" and "Outputs"; ``--folds K >= 2``: :mod:`models.lgbm.folds`). Costs are
the negated ranking scores (LightGBM's are higher = faster), one per config of every valid and
test graph (checked in :func:`models.lgbm.data.assemble_costs`).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import polars as pl

from tpurank.atomic import remove_dead_temporaries, write_json
from tpurank.collections import Collection
from features.io import discover
from features.processed import tabular_path
from models.budget import TimeBudget
from models.lgbm.config import LgbmConfig
from models.lgbm.data import load_rows, truth_by_graph
from models.lgbm.model import RankerModel
from models.lgbm.runstate import (DONE_FILE, Slicer, candidates, fit_candidates, is_current, read_done,
                                  record, summarise, write_done)
from models.metrics import score_collection
from models.predictions import predictions_path, read_predictions


def evaluate_model(model: RankerModel, cfg: LgbmConfig,
                   collection: Collection) -> tuple[dict | None, dict[str, np.ndarray] | None]:
    """``(score, costs)`` of ``model`` on every valid config (Nones without graded rows)."""
    path = tabular_path(cfg.features_dir(), collection, "valid")
    truth = truth_by_graph(path)
    if not truth:
        return None, None
    costs = model.predict_file(path, cfg.predict_batch_rows)
    return score_collection(collection, costs, truth), costs


def train_collection(cfg: LgbmConfig, collection: Collection,
                     seconds: float = float("inf")) -> dict:
    """Train, evaluate and save the model(s) of one collection within ``seconds``; its metrics."""
    if cfg.folds >= 2:
        from models.lgbm.folds import train_folds
        return train_folds(cfg, collection, seconds)
    if cfg.folds == 1 or cfg.folds < 0:
        raise ValueError(f"--folds {cfg.folds}: use 0 (train/valid split) or K >= 2")
    out_dir = cfg.model_dir(collection)
    out_dir.mkdir(parents=True, exist_ok=True)
    remove_dead_temporaries(out_dir)  # what a killed run's atomic writes left
    train_path = tabular_path(cfg.features_dir(), collection, "train")
    start = time.perf_counter()
    train = load_rows(train_path, cfg.max_train_configs_per_graph, cfg.seed)
    if not len(train):
        raise ValueError(f"{train_path}: no train rows with a target")
    valid_path = tabular_path(cfg.features_dir(), collection, "valid")
    valid = (load_rows(valid_path, cfg.max_valid_configs_per_graph, cfg.seed + 1, train.feature_names)
             if valid_path.is_file() else None)
    if valid is not None and (not len(valid) or valid.target is None):
        valid = None
    load_s = time.perf_counter() - start
    valid_costs: dict[str, dict[str, np.ndarray] | None] = {}

    def evaluate(mode: str, model: RankerModel) -> dict:
        scored, valid_costs[mode] = evaluate_model(model, cfg, collection)
        return {"valid_score": None if scored is None else scored["score"],
                "valid_per_graph": None if scored is None else scored["per_graph"]}

    modes = candidates(cfg, collection)
    chosen, _, results, importance = fit_candidates(
        cfg, collection, train, valid, out_dir, Slicer(max(0.0, seconds - load_s), len(modes)),
        evaluate, "valid_score", collection.name)
    costs = valid_costs[chosen]
    if costs is not None:  # predicted once here; `predict` reuses it
        record(out_dir, predictions_path(cfg.preds_dir(), cfg.run_name(), collection, "valid"),
               costs, [valid_path])
    metrics = {"collection": collection.name, "mode": chosen, "seed": cfg.seed, "folds": 0,
               "train_rows": len(train), "train_graphs": len(train.graphs),
               "valid_rows_early_stopping": 0 if valid is None else len(valid),
               "load_s": round(load_s, 2), "total_s": round(time.perf_counter() - start, 2),
               "budget_s": None if seconds == float("inf") else round(seconds, 2),
               "valid_score": results[chosen]["valid_score"], "results": results,
               # --mode auto without folds picks the mode on the valid graphs it then reports:
               # that valid score is in-sample (use --folds K for an honest choice)
               "mode_chosen_on": "valid (in-sample)" if len(modes) > 1 else None,
               "best_iteration": results[chosen]["best_iteration"],
               "top_features": importance[:10]}
    write_json(out_dir / "metrics.json", metrics)
    write_done(out_dir, cfg, metrics)
    return metrics


def collection_weight(cfg: LgbmConfig, collection: Collection) -> float:
    """Rows that training will read of ``collection`` (per graph at most
    ``max_train_configs_per_graph``), for sharing the time budget."""
    total = 0.0
    for split in ("train", "valid") if cfg.folds >= 2 else ("train",):
        path = tabular_path(cfg.features_dir(), collection, split)
        if path.is_file():
            sizes = pl.scan_parquet(path).group_by("graph").len().collect()["len"].to_numpy()
            if cfg.max_train_configs_per_graph > 0:
                sizes = sizes.clip(max=cfg.max_train_configs_per_graph)
            total += float(sizes.sum())
    return total


def train_all(cfg: LgbmConfig) -> dict[str, dict]:
    """Train every selected collection not already done; prints one line per collection."""
    collections = cfg.selected_collections()
    done = {c.name: read_done(cfg.model_dir(c), cfg) for c in collections}
    todo = [c for c in collections if done[c.name] is None]
    budget = TimeBudget(cfg.time_budget, weights={c.name: collection_weight(cfg, c) for c in todo}
                        if cfg.time_budget > 0 else None)
    out = {}
    for collection in collections:
        metrics = done[collection.name]
        resumed = metrics is not None
        if not resumed:
            metrics = train_collection(cfg, collection, budget.claim(collection.name))
        score = metrics["valid_score"]
        print(f"[lgbm] {collection.name:20s} mode={metrics['mode']:11s} "
              f"valid={'n/a' if score is None else f'{score:.4f}'} "
              f"iters={metrics.get('best_iteration')} time={metrics['total_s']:.1f}s"
              + (f" (done before: {cfg.model_dir(collection) / DONE_FILE})" if resumed else ""),
              flush=True)
        out[collection.name] = metrics
    return out


def predict_collection(cfg: LgbmConfig, collection: Collection) -> dict[str, dict]:
    """Write ``WORK/preds/lgbm[-tag]@seed<k>/<slug>/{valid,test}.npz`` (reusing a file the ledger
    says the same model wrote from the same input); returns a summary per split."""
    if cfg.folds >= 2:
        from models.lgbm.folds import predict_folds
        return predict_folds(cfg, collection)
    model_dir = cfg.model_dir(collection)
    model: RankerModel | None = None
    summary: dict[str, dict] = {}
    for split in ("valid", "test"):
        path = tabular_path(cfg.features_dir(), collection, split)
        if not path.is_file():
            print(f"[lgbm] {collection.name} {split}: no tabular file at {path}; skipped", flush=True)
            continue
        out = predictions_path(cfg.preds_dir(), cfg.run_name(), collection, split)
        reused = is_current(model_dir, out, [path])
        if reused:
            costs = read_predictions(out)
        else:
            model = model or RankerModel.load(model_dir)
            costs = model.predict_file(path, cfg.predict_batch_rows)
            record(model_dir, out, costs, [path])
        missing = missing_graphs(cfg, collection, split, costs)
        if missing:
            print(f"[lgbm] WARNING {collection.name} {split}: {len(missing)} source graph(s) of "
                  f"{cfg.data} have no tabular rows (skipped as bad by the feature build?), e.g. "
                  f"{missing[:3]}", flush=True)
        truth = truth_by_graph(path) if split == "valid" else {}
        summary[split] = summarise(collection, out, costs, truth, reused)
    return summary


def missing_graphs(cfg: LgbmConfig, collection: Collection, split: str,
                   costs: dict[str, np.ndarray]) -> list[str]:
    """Source graphs under ``cfg.data`` without a prediction (empty when the data root is absent)."""
    if not Path(cfg.data).is_dir():
        return []
    stems = [f.stem for f in discover(cfg.data, [collection], [split])]
    return sorted(set(stems) - set(costs))


def predict_all(cfg: LgbmConfig) -> dict[str, dict]:
    out = {}
    for collection in cfg.selected_collections():
        summary = predict_collection(cfg, collection)
        for split, info in summary.items():
            extra = f" score {info['score']:.4f}" if "score" in info else ""
            extra += " (reused, not predicted again)" if info.get("reused") else ""
            print(f"[lgbm] {collection.name:20s} {split:5s}: {info['graphs']} graphs, "
                  f"{info['configs']} configs -> {info['path']}{extra}", flush=True)
        out[collection.name] = summary
    return out
