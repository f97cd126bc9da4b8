"""Grouped K-fold cross-validation of the GNN ranker (``--folds K``, K >= 2; docs/gnn.md,
"Cross-validation"): fold ``k`` of :func:`models.cv.fold_plan` trains on ``plan.training(k)``,
watched on ``plan.inner_valid(k)``, and predicts ``plan.held_out(k)`` and the test split. Models in
``M/fold<k>/``, with ``M/folds.json``: the graphs each fold model saw (checked).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from tpurank.atomic import save_npz
from tpurank.collections import Collection
from features.processed import ProcessedGraph
from models import metrics
from models.budget import TimeBudget
from models.gnn.config import GnnConfig
from models.gnn.data import load_graphs, trainable
from models.training import DistContext, barrier, broadcast_object

Key = tuple[str, str]  # (split, stem)
LABELLED = ("train", "valid")


def fold_dir(cfg: GnnConfig, collection: Collection, k: int) -> Path:
    return cfg.model_dir(collection) / f"fold{k}"


def get_plan(cfg: GnnConfig, collection: Collection, ctx: DistContext | None = None):
    """The shared fold plan (created by rank 0 under torchrun, then loaded by the others)."""
    from models.cv import fold_plan

    ctx = ctx or DistContext()
    make = lambda: fold_plan(cfg.work, cfg.features_dir(), collection,  # noqa: E731
                             folds=cfg.folds, seed=cfg.seed)
    plan = make() if ctx.is_main else None
    barrier(ctx)
    return plan if plan is not None else make()


def usable_folds(cfg: GnnConfig, collection: Collection) -> int:
    """``cfg.folds`` when the collection's labelled graphs support K-fold OOF predictions (OOF files
    are keyed by stem, so no stem may be in both train and valid; K folds need K stems), else 0
    (the train/valid protocol, with a note on stderr). ``train`` and ``predict`` both decide so."""
    if cfg.folds < 2:
        return 0
    if not _labelled_built(cfg, collection):  # inference only: the trained fold models decide
        manifest = cfg.model_dir(collection) / "folds.json"
        return int(json.loads(manifest.read_text())["folds"]) if manifest.is_file() else 0
    stems = {split: {g.stem for g in load_graphs(cfg.features_dir(), collection, split)}
             for split in LABELLED}
    both = sorted(stems["train"] & stems["valid"])
    distinct = len(stems["train"] | stems["valid"])
    why = (f"stem(s) {both[:3]} are in both train and valid" if both else
           f"only {distinct} labelled graph(s) for {cfg.folds} folds" if distinct < cfg.folds else "")
    if why:
        print(f"{collection.name}: --folds {cfg.folds} not usable ({why}); training on train, "
              f"early stopping on valid instead", file=sys.stderr)
        return 0
    return cfg.folds


def _labelled_built(cfg: GnnConfig, collection: Collection) -> bool:
    """Whether features of both labelled splits exist (not so in an inference-only WORK)."""
    base = cfg.features_dir() / collection.slug / "graphs"
    return all((base / split).is_dir() for split in LABELLED)


def labelled_graphs(cfg: GnnConfig, collection: Collection) -> dict[Key, ProcessedGraph]:
    return {(split, g.stem): g for split in LABELLED
            for g in load_graphs(cfg.features_dir(), collection, split)}


def watches_held_out(cfg: GnnConfig, collection: Collection) -> bool:
    """Whether fold models train on their inner slice and watch held-out graphs instead
    (``--inner-valid false``, layout only: BENCHMARKS.md, "How the GNN's fold models train")."""
    return not cfg.inner_valid and not collection.is_tile


def fold_training(cfg: GnnConfig, collection: Collection, plan, k: int,
                  graphs: dict[Key, ProcessedGraph]) -> tuple[list[ProcessedGraph], list[ProcessedGraph]]:
    """(train graphs, inner-valid graphs) of fold ``k``."""
    from models.gnn.train import limit_graphs

    train = [graphs[key] for key in plan.training(k) if key in graphs and trainable(graphs[key])]
    valid = [graphs[key] for key in plan.inner_valid(k) if key in graphs]
    if watches_held_out(cfg, collection):  # the inner set trains too
        if cfg.keep != "last" or cfg.patience != 0:
            raise ValueError("--inner-valid false needs --keep last --patience 0: the fold's "
                             "held-out graphs may draw its learning curve, never choose weights")
        train += [g for g in valid if trainable(g)]
        held = [graphs[key] for key in plan.held_out(k) if key in graphs and trainable(graphs[key])]
        pick = np.random.default_rng([cfg.seed, k]).permutation(len(held))[:max(1, len(valid))]
        valid = [held[i] for i in sorted(pick)]
    if not train:
        raise RuntimeError(f"{collection.name}: fold {k} has no usable training graphs under "
                           f"{cfg.features_dir()} (plan {plan.path})")
    return limit_graphs(cfg, train), valid


def train_folds(cfg: GnnConfig, collection: Collection, budget: TimeBudget, units_left: float,
                ctx: DistContext, device: torch.device) -> dict[str, Any]:
    """Train the K fold models of one collection (each resumable) and write ``folds.json``;
    ``units_left`` is the time-share weight of this collection's folds and of those of the
    collections still to come (:meth:`GnnConfig.budget_weight`)."""
    from models.cv import write_fold_manifest
    from models.gnn.train import fit

    plan = get_plan(cfg, collection, ctx)
    graphs = labelled_graphs(cfg, collection)
    reports, seen = [], {}
    weight = cfg.budget_weight(collection)
    for k in range(plan.folds):
        train, valid = fold_training(cfg, collection, plan, k, graphs)
        inner = [] if watches_held_out(cfg, collection) else valid
        seen[k] = sorted({(g.split, g.stem) for g in train + inner})
        reports.append(fit(cfg, collection, train, valid, fold_dir(cfg, collection, k),
                           budget.share(units_left - k * weight, weight), ctx, device,
                           extra_config={"fold": k, "folds": plan.folds, "fold_plan": str(plan.path)},
                           monitor_only=watches_held_out(cfg, collection)))
    if ctx.is_main:
        write_fold_manifest(cfg.model_dir(collection) / "folds.json", plan, seen)
    return broadcast_object(fold_summary(collection, cfg, reports), ctx)


def fold_summary(collection: Collection, cfg: GnnConfig, reports: list[dict]) -> dict[str, Any]:
    """The fold models' reports in one: inner-valid score mean, total time and configs/s."""
    scores = [r["score"] for r in reports if np.isfinite(r["score"])]
    seconds = sum(r["train_seconds"] for r in reports)
    configs = sum(r["train_configs_per_s"] * r["train_seconds"] for r in reports
                  if np.isfinite(r["train_configs_per_s"]))
    return {"collection": collection.name, "score": float(np.mean(scores)) if scores else math.nan,
            "n_graphs": sum(r["n_graphs"] for r in reports), "seed": cfg.seed,
            "best_step": [r["best_step"] for r in reports], "train_seconds": seconds,
            "train_configs_per_s": configs / seconds if seconds > 0 else math.nan,
            "stopped_by": ",".join(sorted({r["stopped_by"] for r in reports})),
            "world_size": reports[0]["world_size"] if reports else 1, "folds": len(reports),
            "score_kind": ("held-out monitor" if watches_held_out(cfg, collection)
                           else "inner-valid") + " mean over folds", "cross_attn": cfg.cross_attn}


def _by_config_index(g: ProcessedGraph, cost: np.ndarray, rows: np.ndarray | None = None
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(source config indices ascending, costs, targets) of a labelled graph's processed rows
    (``rows``: the positions ``cost`` belongs to; all rows when None)."""
    rows = np.arange(g.num_configs) if rows is None else np.asarray(rows, dtype=np.int64)
    index = np.asarray(g.config_index, dtype=np.int64)[rows]
    target = np.asarray(g.target, dtype=np.float64)[rows]
    order = np.argsort(index, kind="stable")
    return index[order], np.asarray(cost)[order], target[order]


def oof_rows(cfg: GnnConfig, collection: Collection, g: ProcessedGraph, split: str) -> np.ndarray | None:
    """Which configs of a held-out graph get an OOF prediction: every config of a valid graph
    (None); of a train graph the rows of its LightGBM tabular file (at most ``--oof-max-configs``),
    so OOF cost is bounded; the blend scores each graph on the configs every model predicted."""
    if split != "train":
        return None
    from features.build import load_build_config
    from features.tasks import subsample, tabular_train_positions

    rows = np.arange(g.num_configs)  # features written by other means than `features build`
    if (cfg.features_dir() / collection.slug / "build.json").is_file():
        build = load_build_config(cfg.features_dir(), collection)
        rows = tabular_train_positions(g.num_configs, build, collection.slug, g.stem)
    cap = cfg.oof_max_configs
    if cap > 0 and len(rows) > cap:
        rows = rows[subsample(len(rows), cap, cfg.seed, f"oof/{g.stem}")]
    return rows


def predict_folds(cfg: GnnConfig, collection: Collection) -> dict[str, Any]:
    """Write the OOF, valid, test-fold<k> and test predictions of one collection's fold models;
    returns the OOF and official-valid scores. In a WORK without train features (e.g. the Kaggle
    inference notebook) there are no OOF predictions, and each valid graph (when built) is
    predicted by the first fold model whose manifest shows it never saw the graph."""
    from models.cv import check_manifest
    from models.gnn.infer import load_trained_dir, predict_costs, source_order
    from models.predictions import (OOF_CONFIG_SPLIT, OOF_SPLIT, fold_split, predictions_path,
                                    write_fold_average, write_predictions)
    from models.training import choose_device, set_cpu_threads

    set_cpu_threads(cfg.predict_threads)
    device = choose_device(cfg.device)
    manifest = cfg.model_dir(collection) / "folds.json"
    labelled = _labelled_built(cfg, collection)
    if labelled:
        plan = get_plan(cfg, collection)
        check_manifest(manifest, plan)
        graphs = labelled_graphs(cfg, collection)
        folds = plan.folds
    else:
        manifest = json.loads(manifest.read_text())
        folds = int(manifest["folds"])
        built = (cfg.features_dir() / collection.slug / "graphs" / "valid").is_dir()
        valid = load_graphs(cfg.features_dir(), collection, "valid") if built else []
    test = load_graphs(cfg.features_dir(), collection, "test")
    preds, run = cfg.preds_dir(), cfg.run_name()
    oof: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    valid_costs: dict[str, np.ndarray] = {}
    for k in range(folds):
        model, saved = load_trained_dir(fold_dir(cfg, collection, k), device, cfg.predict_context)
        batch = saved.predict_batch or cfg.predict_batch
        if not labelled:
            seen = set(manifest["seen"][str(k)])
            for g in valid:
                if g.stem not in valid_costs and f"valid/{g.stem}" not in seen:
                    valid_costs[g.stem] = source_order(g, predict_costs(model, g, batch))
        for key in tqdm(plan.held_out(k) if labelled else [], desc=f"oof {collection.name} fold {k}",
                        leave=False):
            g = graphs.get(key)
            if g is None or g.target is None:
                continue
            if g.stem in oof:
                raise ValueError(f"{collection.name}: graph {g.stem!r} is held out twice (train and "
                                 f"valid share a stem); OOF predictions are keyed by stem")
            rows = oof_rows(cfg, collection, g, key[0])
            cost = predict_costs(model, g, batch, idx=rows)
            oof[g.stem] = _by_config_index(g, cost, rows)
            if key[0] == "valid":
                valid_costs[g.stem] = source_order(g, cost)
        write_predictions(predictions_path(preds, run, collection, fold_split(k)),
                          {g.stem: source_order(g, predict_costs(model, g, batch)) for g in
                           tqdm(test, desc=f"test {collection.name} fold {k}", leave=False)})
    if labelled:
        write_predictions(predictions_path(preds, run, collection, OOF_SPLIT),
                          {s: v[1] for s, v in oof.items()})
        save_npz(predictions_path(preds, run, collection, OOF_CONFIG_SPLIT),
                 **{s: v[0] for s, v in oof.items()})
        save_npz(predictions_path(preds, run, collection, "oof-target"),
                 **{s: v[2] for s, v in oof.items()})
    if valid_costs:
        write_predictions(predictions_path(preds, run, collection, "valid"), valid_costs)
    write_fold_average(preds, run, collection, folds=folds)
    if not labelled:
        return {"collection": collection.name, "folds": folds, "oof_score": math.nan,
                "oof_graphs": 0, "valid_score": math.nan, "valid_graphs": len(valid_costs),
                "inference_only": True}
    return oof_report(collection, oof, valid_costs, graphs, folds)


def oof_report(collection: Collection, oof: dict, valid_costs: dict[str, np.ndarray],
               graphs: dict[Key, ProcessedGraph], folds: int) -> dict[str, Any]:
    scored = {s: v for s, v in oof.items() if np.ptp(v[2]) > 0 and len(v[2]) >= 2}
    report = metrics.score_collection(collection, {s: v[1] for s, v in scored.items()},
                                      {s: v[2] for s, v in scored.items()})
    truth = {s: np.asarray(graphs[("valid", s)].target, dtype=np.float64)[
        np.argsort(np.asarray(graphs[("valid", s)].config_index), kind="stable")] for s in valid_costs}
    official = metrics.score_collection(collection, valid_costs, truth) if truth else {}
    return {"collection": collection.name, "folds": folds, "oof_score": report["score"],
            "oof_graphs": report["n_graphs"], "oof_per_graph": report["per_graph"],
            "valid_score": official.get("score", math.nan), "valid_graphs": official.get("n_graphs", 0)}
