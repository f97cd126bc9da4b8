"""The models' out-of-fold (OOF) predictions, read for the blend: every labelled graph predicted
by the fold model that did not see it (:mod:`models.cv`). :func:`load_oof` reads and checks one
collection's (fold plan, fold manifests, each model's seed runs normalised and averaged on the
configs every run predicted); :func:`fold_scores` and :func:`run_scores` score them per fold."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from tpurank.collections import Collection
from models.cv import FoldPlan, check_manifest, fold_plan, load_plan, plan_path
from models.metrics import graph_score
from models.predictions import (OOF_SPLIT, SEED_SEPARATOR, fold_splits, model_runs, normalise_costs,
                                predictions_path, read_oof)

from ensemble.truth import split_truth


@dataclass
class OofData:
    """One collection's OOF inputs of the blend."""

    folds: int  # K of the fold plan
    fold_of: dict[str, int]  # stem -> fold
    labelled: dict[str, np.ndarray]  # every labelled graph's truth
    normed: list[dict[str, np.ndarray]]  # per model: its runs' costs normalised and averaged, on...
    truth: dict[str, np.ndarray]  # ... the configs every run of every model predicted
    index: dict[str, np.ndarray]  # stem -> those configs
    runs: dict[str, list[str]]  # model -> its runs with OOF predictions
    manifests: list[str]  # the fold manifests checked


def has_oof(preds_dir: str | Path, models: Sequence[str], coll: Collection) -> list[str]:
    """The models (of ``models``) that have no OOF predictions for ``coll``."""
    return [m for m in models if not _oof_runs(preds_dir, m, coll)]


def _oof_runs(preds_dir: str | Path, model: str, coll: Collection) -> list[str]:
    return [r for r in model_runs(preds_dir, model)
            if predictions_path(preds_dir, r, coll, OOF_SPLIT).is_file()]


def stem_folds(plan: FoldPlan) -> dict[str, int]:
    """Stem -> fold of a plan (a stem's train and valid entries share a fold by construction)."""
    return {stem: plan.fold_of(split, stem) for split, stem in plan.graphs()}


def load_oof(cfg, coll: Collection) -> OofData:
    """Read and check one collection's OOF inputs (``cfg``: a :class:`ensemble.weights.BlendConfig`)."""
    runs = {m: _oof_runs(cfg.preds_dir, m, coll) for m in cfg.model_list}
    folds = _detect_folds(cfg.preds_dir, runs, coll)
    path = plan_path(cfg.work, coll, folds, cfg.seed)  # the plan the models used, else theirs to be
    plan = load_plan(path) if path.is_file() else _new_plan(cfg, coll, folds)
    fold_of = stem_folds(plan)
    labelled: dict[str, np.ndarray] = {}
    for split in ("train", "valid"):
        for stem, target in split_truth(cfg.data, coll, split).items():
            if stem in labelled:
                raise ValueError(f"{coll.name}: graph {stem!r} is in both train and valid under "
                                 f"{cfg.data}; OOF predictions are keyed by stem and cannot tell them apart")
            labelled[stem] = target
    data = {m: [read_oof(cfg.preds_dir, r, coll) for r in rs] for m, rs in runs.items()}
    every = [d for ds in data.values() for d in ds]
    stems = sorted(set.intersection(*[set(d) for d in every]))
    unknown = [s for s in stems if s not in labelled]
    if unknown:
        raise ValueError(f"{coll.name}/oof: predictions for {len(unknown)} graph(s) that are not "
                         f"labelled graphs under {cfg.data}, e.g. {unknown[:3]}")
    out = OofData(folds, fold_of, labelled, [{} for _ in cfg.model_list], {}, {}, runs, [])
    for stem in stems:  # on the configs every run predicted (train OOF may cover a subset)
        common = every[0][stem][0]
        for d in every[1:]:
            common = np.intersect1d(common, d[stem][0])
        common = np.unique(common)
        if common.size < 2:  # nothing to rank
            continue
        out.truth[stem] = _at(labelled[stem], common, f"{coll.name}/oof graph {stem}")
        out.index[stem] = common
        for i, m in enumerate(cfg.model_list):
            parts = [normalise_costs(d[stem][1][_positions(d[stem][0], common)], cfg.norm)
                     for d in data[m]]
            out.normed[i][stem] = np.mean(parts, axis=0).astype(np.float32).astype(np.float64)
    unplanned = sorted(set(out.truth) - set(fold_of))
    if unplanned:
        raise ValueError(f"{coll.name}/oof: {len(unplanned)} predicted graph(s) not in the fold "
                         f"plan {plan.path}, e.g. {unplanned[:3]}")
    if len(out.truth) < 2:
        raise ValueError(f"{coll.name}/oof: {len(out.truth)} graph(s) predicted by every model run; "
                         "nothing to fit a blend on")
    out.manifests = check_manifests(cfg.work, coll)  # before any fitting: a leak fails fast
    return out


def _new_plan(cfg, coll: Collection, folds: int) -> FoldPlan:
    try:
        return fold_plan(cfg.work, Path(cfg.work) / "features", coll, folds=folds, seed=cfg.seed)
    except FileNotFoundError:
        return fold_plan(cfg.work, Path(cfg.work) / "features", coll, folds=folds, seed=cfg.seed,
                         data=cfg.data)


def _detect_folds(preds_dir: str | Path, runs: Mapping[str, list[str]], coll: Collection) -> int:
    """The largest K of the ``test-fold<k>`` files of the models' runs: the blend's own folds
    (models may differ, e.g. the GNN's ``--regime``: each run's OOF predictions are its own)."""
    found = {r: len(fold_splits(preds_dir, r, coll)) for rs in runs.values() for r in rs}
    if not found or min(found.values()) < 2:
        raise ValueError(f"{coll.name}: cannot tell the fold count from the test-fold<k> files "
                         f"under {preds_dir} ({found}); predict every model again")
    return max(found.values())


def _at(target: np.ndarray, idx: np.ndarray, what: str) -> np.ndarray:
    if idx.size and (idx.min() < 0 or idx.max() >= target.size):
        raise ValueError(f"{what}: config index {int(idx.max())} out of range for a graph with "
                         f"{target.size} configs")
    return np.asarray(target)[idx]


def _positions(idx: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    order = np.argsort(idx, kind="stable")
    return order[np.searchsorted(idx[order], wanted)]


def check_manifests(work: str | Path, coll: Collection) -> list[str]:
    """Check every ``folds.json`` under ``WORK/models`` for ``coll`` against the fold plan it
    names (:func:`models.cv.check_manifest`: no fold model saw a graph of its held-out fold);
    returns the manifests checked. A manifest whose plan file is gone is an error too."""
    checked = []
    for path in sorted((Path(work) / "models").rglob("folds.json")):
        try:
            manifest = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: unreadable fold manifest ({e})") from None
        if manifest.get("collection") != coll.name:
            continue
        plan_file = Path(manifest.get("plan") or plan_path(work, coll, int(manifest["folds"]),
                                                           int(manifest["seed"])))
        if not plan_file.is_file():
            raise FileNotFoundError(f"{path}: its fold plan {plan_file} does not exist")
        try:
            check_manifest(manifest, load_plan(plan_file))
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
        checked.append(str(path))
    return checked


def fold_scores(coll: Collection, costs: Mapping[str, np.ndarray], truth: Mapping[str, np.ndarray],
                fold_of: Mapping[str, int]) -> dict:
    """Mean score per fold, mean ± sd over folds, and the pooled mean over graphs."""
    per_graph = {s: graph_score(coll, costs[s], truth[s]) for s in sorted(truth)}
    per_fold: dict[str, float] = {}
    n_per_fold: dict[str, int] = {}
    for k in sorted(set(fold_of[s] for s in truth)):
        vals = [v for s, v in per_graph.items() if fold_of[s] == k]
        per_fold[str(k)], n_per_fold[str(k)] = float(np.mean(vals)), len(vals)
    means = list(per_fold.values())
    return {"mean": float(np.mean(means)), "sd": float(np.std(means)),
            "pooled": float(np.mean(list(per_graph.values()))), "n_graphs": len(per_graph),
            "per_fold": per_fold, "n_per_fold": n_per_fold, "per_graph": per_graph}


def run_scores(cfg, coll: Collection, model: str, oof: OofData) -> dict:
    """The mean ± sd of ``model``'s OOF scores over every (seed run, fold) cell: each seed run
    alone (on the configs it predicted), over the folds of that run's own plan."""
    cells = []
    for run in oof.runs[model]:
        m = re.search(re.escape(SEED_SEPARATOR) + r"(\d+)$", run)
        folds = len(fold_splits(cfg.preds_dir, run, coll))
        own = plan_path(cfg.work, coll, folds, int(m.group(1))) if m else None
        fold_of = stem_folds(load_plan(own)) if own is not None and own.is_file() else oof.fold_of
        preds = read_oof(cfg.preds_dir, run, coll)
        stems = [s for s in preds if s in oof.labelled and s in fold_of]
        costs = {s: preds[s][1] for s in stems}
        truth = {s: _at(oof.labelled[s], preds[s][0], f"{run}/{coll.slug}/oof") for s in stems}
        cells += fold_scores(coll, costs, truth, fold_of)["per_fold"].values()
    if not cells:
        return {}
    return {"spread": {"mean": float(np.mean(cells)), "sd": float(np.std(cells)), "cells": len(cells),
                       "runs": len(oof.runs[model])}}
