"""Out-of-fold (OOF) blending and its honest score.

Models trained with ``--folds K`` write ``oof`` predictions: every labelled graph (train + valid)
predicted by the fold model that did not see it (:mod:`models.predictions`, :mod:`models.cv`).
The blend is fitted on those, and its quality is measured by a *nested* scheme so that no
reported number uses weights fitted on the graph it scores:

* **leave-one-fold-out**: for every fold ``k`` of the fold plan, the whole blend fit (grid
  optimum + shrinkage chosen on the remaining folds held out in turn) is redone on the other
  folds' graphs and scored on fold ``k``'s graphs. The per-fold scores give the mean ± sd over
  folds;
* the official ``valid`` graphs are scored with the weights of the fold that held them out (the
  ``valid`` table of the report is therefore nested too);
* single models need no nesting: their OOF predictions are already out of sample.

The weights used for the test submission are fitted once on all OOF graphs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from tpurank.collections import Collection
from models.cv import FoldPlan, fold_plan, load_plan, plan_path
from models.metrics import graph_score
from models.predictions import SEED_SEPARATOR

from ensemble.hedge import (NestedPortfolio, PortfolioFit, blend_members, blend_or_portfolio,
                            hedge_portfolio, nested_portfolio, portfolio_summary)
from ensemble.truth import split_truth
from ensemble.weights import Criterion, FitResult, GraphScorer, blend_costs, fit_weights

LABELLED_SPLITS = ("train", "valid")


def labelled_truth(data: str | Path, coll: Collection) -> dict[str, np.ndarray]:
    """``{stem: target}`` of every labelled graph (train + valid) of a collection."""
    out: dict[str, np.ndarray] = {}
    for split in LABELLED_SPLITS:
        for stem, target in split_truth(data, coll, split).items():
            if stem in out:
                raise ValueError(f"{coll.name}: graph {stem!r} is in both train and valid under "
                                 f"{data}; OOF predictions are keyed by stem and cannot tell them apart")
            out[stem] = target
    return out


def stem_folds(plan: FoldPlan) -> dict[str, int]:
    """Stem -> fold of a plan (a stem's train and valid entries share a fold by construction)."""
    return {stem: plan.fold_of(split, stem) for split, stem in plan.graphs()}


def plan_for(work: str | Path, data: str | Path, coll: Collection, folds: int, seed: int) -> FoldPlan:
    """The saved plan the models used (``WORK/folds/...``), else the one they would create."""
    path = plan_path(work, coll, folds, seed)
    if path.is_file():
        return load_plan(path)
    try:
        return fold_plan(work, Path(work) / "features", coll, folds=folds, seed=seed)
    except FileNotFoundError:
        return fold_plan(work, Path(work) / "features", coll, folds=folds, seed=seed, data=data)


def run_seed(run: str) -> int | None:
    """``gnn@seed3`` -> 3; a seed-free run -> None."""
    m = re.search(re.escape(SEED_SEPARATOR) + r"(\d+)$", run)
    return int(m.group(1)) if m else None


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


@dataclass
class NestedBlend:
    """Leave-one-fold-out blend: per fold the weights fitted without it and its score."""

    scores: dict  # fold_scores() of the nested costs
    weights: dict[str, list[float]] = field(default_factory=dict)  # fold -> weights
    alpha: dict[str, float] = field(default_factory=dict)
    method: dict[str, str] = field(default_factory=dict)
    costs: dict[str, np.ndarray] = field(default_factory=dict)  # stem -> cost, its fold's weights

    def to_json(self) -> dict:
        return {"scores": self.scores, "weights": self.weights, "alpha": self.alpha,
                "method": self.method}


def nested_blend(coll: Collection, normed: Sequence[Mapping[str, np.ndarray]],
                 truth: Mapping[str, np.ndarray], fold_of: Mapping[str, int], grid_step: float,
                 alphas: Sequence[float], scorer: GraphScorer, criterion: Criterion | None = None,
                 anchor: str = "tail", by_fold: bool = True) -> NestedBlend:
    """Fit the blend on all folds but ``k`` and blend fold ``k`` with those weights, for every k.
    ``by_fold``: the shrinkage inside each fit is chosen leave-one-fold-out over its folds, else
    leave-one-graph-out (:func:`ensemble.weights.fit_weights`)."""
    stems = sorted(truth)
    out = NestedBlend(scores={})
    for k in sorted(set(fold_of[s] for s in stems)):
        fit_on = [s for s in stems if fold_of[s] != k]
        scored = [s for s in stems if fold_of[s] == k]
        fit: FitResult = fit_weights(coll, normed, truth, grid_step, alphas, stems=fit_on,
                                     scorer=scorer, criterion=criterion, anchor=anchor,
                                     groups=fold_of if by_fold else None)
        out.weights[str(k)], out.alpha[str(k)], out.method[str(k)] = fit.weights, fit.alpha, fit.method
        out.costs.update(blend_costs(normed, fit.weights, scored))
    out.scores = fold_scores(coll, out.costs, truth, fold_of)
    return out


def seed_spread(per_run: Mapping[str, dict]) -> dict:
    """Mean ± sd over every (seed run, fold) cell of one model's runs."""
    cells = [v for r in per_run.values() for v in r["per_fold"].values()]
    return {"mean": float(np.mean(cells)), "sd": float(np.std(cells)), "cells": len(cells),
            "runs": len(per_run)}


def has_oof(preds_dir: str | Path, models: Sequence[str], coll: Collection) -> list[str]:
    """The models (of ``models``) that have no OOF predictions for ``coll``."""
    from models.predictions import OOF_SPLIT, model_runs, predictions_path

    return [m for m in models
            if not any(predictions_path(preds_dir, r, coll, OOF_SPLIT).is_file()
                       for r in model_runs(preds_dir, m))]


def detect_folds(preds_dir: str | Path, models: Sequence[str], coll: Collection) -> int:
    """K from the ``test-fold<k>`` files of the models' runs (they must agree)."""
    from models.predictions import OOF_SPLIT, fold_splits, model_runs, predictions_path

    found = {}
    for m in models:
        for r in model_runs(preds_dir, m):
            if predictions_path(preds_dir, r, coll, OOF_SPLIT).is_file():
                found[r] = len(fold_splits(preds_dir, r, coll))
    ks = sorted(set(found.values()))
    if len(ks) != 1 or ks[0] < 2:
        raise ValueError(f"{coll.name}: cannot tell the fold count from the test-fold<k> files "
                         f"under {preds_dir} ({found}); pass --folds K")
    return ks[0]


def run_fold_scores(cfg, coll: Collection, model: str, labelled: Mapping[str, np.ndarray],
                    folds: int, default_fold_of: Mapping[str, int]) -> dict[str, dict]:
    """OOF scores of each seed run of ``model`` alone (on the configs it predicted), over the
    folds of that run's own plan."""
    from models.predictions import OOF_SPLIT, model_runs, predictions_path, read_oof

    out = {}
    for run in model_runs(cfg.preds_dir, model):
        if not predictions_path(cfg.preds_dir, run, coll, OOF_SPLIT).is_file():
            continue
        seed = run_seed(run)
        own = plan_path(cfg.work, coll, folds, seed) if seed is not None else None
        fold_of = stem_folds(load_plan(own)) if own is not None and own.is_file() else default_fold_of
        oof = read_oof(cfg.preds_dir, run, coll)
        stems = [s for s in oof if s in labelled and s in fold_of]
        costs = {s: oof[s][1] for s in stems}
        truth = {s: _at(labelled[s], oof[s][0], f"{run}/{coll.slug}/oof") for s in stems}
        out[run] = {k: v for k, v in fold_scores(coll, costs, truth, fold_of).items()
                    if k != "per_graph"}
    return out


def _at(target: np.ndarray, idx: np.ndarray, what: str) -> np.ndarray:
    if idx.size and (idx.min() < 0 or idx.max() >= target.size):
        raise ValueError(f"{what}: config index {int(idx.max())} out of range for a graph with "
                         f"{target.size} configs")
    return np.asarray(target)[idx]


def _positions(idx: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    order = np.argsort(idx, kind="stable")
    return order[np.searchsorted(idx[order], wanted)]


def load_aligned_oof(cfg, coll: Collection, labelled: Mapping[str, np.ndarray]
                     ) -> tuple[list[dict[str, np.ndarray]], dict[str, np.ndarray], dict]:
    """Per model, its seed runs' OOF costs normalised (``cfg.norm``) and averaged, on the
    configs that *every* run of every model predicted (train graphs' OOF may cover a
    deduplicated / subsampled set of configs, ``oof-config.npz``); the truth on those configs;
    and what was dropped (graphs not predicted by all runs, or with < 2 common configs)."""
    from models.predictions import OOF_SPLIT, model_runs, normalise_costs, predictions_path, read_oof

    runs = {m: [r for r in model_runs(cfg.preds_dir, m)
                if predictions_path(cfg.preds_dir, r, coll, OOF_SPLIT).is_file()]
            for m in cfg.model_list}
    data = {m: [read_oof(cfg.preds_dir, r, coll) for r in rs] for m, rs in runs.items()}
    every = [d for ds in data.values() for d in ds]
    stems = sorted(set.intersection(*[set(d) for d in every]))
    unknown = [s for s in stems if s not in labelled]
    if unknown:
        raise ValueError(f"{coll.name}/oof: predictions for {len(unknown)} graph(s) that are not "
                         f"labelled graphs under {cfg.data}, e.g. {unknown[:3]}")
    partial = sorted(set.union(*[set(d) for d in every]) - set(stems))
    normed: list[dict[str, np.ndarray]] = [{} for _ in cfg.model_list]
    truth: dict[str, np.ndarray] = {}
    index: dict[str, np.ndarray] = {}
    few: list[str] = []
    for stem in stems:
        common = every[0][stem][0]
        for d in every[1:]:
            common = np.intersect1d(common, d[stem][0])
        common = np.unique(common)
        if common.size < 2:
            few.append(stem)
            continue
        truth[stem] = _at(labelled[stem], common, f"{coll.name}/oof graph {stem}")
        index[stem] = common
        for i, m in enumerate(cfg.model_list):
            parts = [normalise_costs(d[stem][1][_positions(d[stem][0], common)], cfg.norm)
                     for d in data[m]]
            normed[i][stem] = np.mean(parts, axis=0).astype(np.float32).astype(np.float64)
    info = {"runs": runs, "not_in_every_run": partial, "under_2_common_configs": few,
            "configs": int(sum(t.size for t in truth.values())), "index": index}
    return normed, truth, info


def check_manifests(work: str | Path, coll: Collection) -> list[str]:
    """Check every ``folds.json`` under ``WORK/models`` for ``coll`` against the fold plan it
    names (:func:`models.cv.check_manifest`: no fold model saw a graph of its held-out fold);
    returns the manifests checked. A manifest whose plan file is gone is an error too."""
    import json

    from models.cv import check_manifest

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


def load_collection_oof(cfg, coll: Collection) -> tuple[int, FoldPlan, dict[str, int], dict, tuple]:
    """The OOF inputs of one collection's blend: K, the fold plan, stem -> fold, the labelled
    truth and :func:`load_aligned_oof`'s (normed, truth, info)."""
    folds = cfg.folds or detect_folds(cfg.preds_dir, cfg.model_list, coll)
    plan = plan_for(cfg.work, cfg.data, coll, folds, cfg.seed)
    fold_of = stem_folds(plan)
    labelled = labelled_truth(cfg.data, coll)
    normed, truth, aligned = load_aligned_oof(cfg, coll, labelled)
    unplanned = sorted(set(truth) - set(fold_of))
    if unplanned:
        raise ValueError(f"{coll.name}/oof: {len(unplanned)} predicted graph(s) not in the fold "
                         f"plan {plan.path}, e.g. {unplanned[:3]}")
    if len(truth) < 2:
        raise ValueError(f"{coll.name}/oof: {len(truth)} graph(s) predicted by every model run; "
                         "nothing to fit a blend on")
    return folds, plan, fold_of, labelled, (normed, truth, aligned)


def blend_collection_oof(cfg, coll: Collection) -> tuple[dict, dict[str, np.ndarray]]:
    """Fit on OOF, report nested; blend valid (nested weights) and test (all-OOF weights)."""
    from models.predictions import OOF_CONFIG_SPLIT, OOF_SPLIT, predictions_path, write_predictions
    from tpurank.atomic import save_npz

    from ensemble.weights import BLEND_MODEL, _load_normed, _mean_score, _require
    from ensemble.truth import test_sizes as ranked_and_tied

    folds, plan, fold_of, labelled, (normed, truth, aligned) = load_collection_oof(cfg, coll)
    manifests = check_manifests(cfg.work, coll)  # before any fitting: a leak fails fast
    scorer = GraphScorer(coll, normed, truth, cfg.max_fit_configs)
    fit = fit_weights(coll, normed, truth, cfg.grid_step, cfg.alphas, scorer=scorer,
                      criterion=cfg.criterion(coll), groups=fold_of)
    nested = nested_blend(coll, normed, truth, fold_of, cfg.grid_step, cfg.alphas, scorer,
                          cfg.criterion(coll))
    portfolio = _tile_portfolio(cfg, coll, normed, truth, fold_of, nested, fit.weights)
    oof = {"folds": folds, "plan": str(plan.path), "n_graphs": len(truth), "manifests": manifests,
           "n_labelled": len(labelled), "n_configs": aligned["configs"],
           "not_in_every_run": aligned["not_in_every_run"],
           "under_2_common_configs": aligned["under_2_common_configs"], "blend": nested.to_json(), "models": {}, "runs": {}}
    if portfolio is not None:
        oof["average"] = portfolio[2]  # the weighted average's nested scores, for comparison
    for model, preds in zip(cfg.model_list, normed):
        oof["models"][model] = fold_scores(coll, preds, truth, fold_of)
        runs = run_fold_scores(cfg, coll, model, labelled, folds, fold_of)
        oof["runs"][model] = {"per_run": runs, "spread": seed_spread(runs)} if runs else {}
    write_predictions(predictions_path(cfg.preds_dir, BLEND_MODEL, coll, OOF_SPLIT), nested.costs)
    save_npz(predictions_path(cfg.preds_dir, BLEND_MODEL, coll, OOF_CONFIG_SPLIT),
             **{s: aligned["index"][s] for s in nested.costs})

    valid_truth = {s: t for s, t in split_truth(cfg.data, coll, "valid").items() if s in truth}
    summary = {"protocol": "oof", "weights": dict(zip(cfg.model_list, fit.weights)),
               "fit": _fit_json(fit), "oof": oof, "valid_score": {}, "n_valid": len(valid_truth)}
    if portfolio is not None:
        summary["portfolio"] = portfolio_summary(portfolio[0], portfolio[1])
    if valid_truth:
        valid_normed = _load_normed(cfg, coll, "valid")
        for model, preds in zip(cfg.model_list, valid_normed):
            _require(preds, {s: len(t) for s, t in valid_truth.items()}, f"{coll.name}/valid, model {model}")
            summary["valid_score"][model] = _mean_score(coll, preds, valid_truth)
        # each official valid graph blended with the weights (and slots) fitted without its fold
        valid_costs = {s: blend_or_portfolio(valid_normed, nested.weights[str(fold_of[s])], [s],
                                             portfolio[1].counts[str(fold_of[s])] if portfolio else None)[s]
                       for s in sorted(valid_truth)}
        write_predictions(predictions_path(cfg.preds_dir, BLEND_MODEL, coll, "valid"), valid_costs)
        summary["valid_score"][BLEND_MODEL] = _mean_score(coll, valid_costs, valid_truth)
    test_sizes = ranked_and_tied(cfg.data, coll)[0]  # graphs without configurable nodes: run_blend
    test_costs: dict[str, np.ndarray] = {}
    if test_sizes:
        test_normed = _load_normed(cfg, coll, "test")
        for model, preds in zip(cfg.model_list, test_normed):
            _require(preds, test_sizes, f"{coll.name}/test, model {model}")
        test_costs = blend_or_portfolio(test_normed, fit.weights, sorted(test_sizes),
                                        portfolio[0].counts if portfolio else None)
        write_predictions(predictions_path(cfg.preds_dir, BLEND_MODEL, coll, "test"), test_costs)
    summary["n_test"] = len(test_sizes)
    return summary, test_costs


def _tile_portfolio(cfg, coll: Collection, normed: Sequence[Mapping[str, np.ndarray]],
                    truth: Mapping[str, np.ndarray], fold_of: Mapping[str, int], nested: NestedBlend,
                    weights: Sequence[float]) -> tuple[PortfolioFit, NestedPortfolio, dict] | None:
    """``--tile-top5 portfolio`` on a tile collection: the slots fitted on every OOF graph (for
    the test) and nested (per fold). The nested portfolio's costs and scores replace the
    average's in ``nested`` (they are what the blend submits); returns (fit, nested fit, the
    average's nested scores). None otherwise."""
    if not (coll.is_tile and cfg.tile_top5 == "portfolio"):
        return None
    from ensemble.weights import BLEND_MODEL

    members = blend_members(normed, weights, sorted(truth))
    fit = hedge_portfolio(members, [*cfg.model_list, BLEND_MODEL], truth, cfg.criterion(coll),
                          len(cfg.model_list))
    inner = nested_portfolio(normed, cfg.model_list, truth, fold_of, nested.weights, cfg.criterion(coll))
    average = nested.scores
    nested.costs = inner.costs
    nested.scores = fold_scores(coll, nested.costs, truth, fold_of)
    return fit, inner, average


def _fit_json(fit: FitResult) -> dict:
    import dataclasses

    return dataclasses.asdict(fit)
