"""Blend model predictions per graph and write the submission.

Per collection:

1. each model's costs are normalised per graph (``--norm rank|minmax|zscore``); the seed runs of
   a model (``gnn@seed0``, ``gnn@seed1``, ...) are averaged first (:mod:`models.predictions`);
2. blend weights are fitted on the *valid* split to maximise the official metric, the mean
   per-graph score (tile top-5 score / Kendall τ);
3. the test costs are the weighted sums; the submission holds every test graph of the data root.

Guarding against overfitting a handful of valid graphs (4-20 per layout collection): weights are
searched on a coarse simplex grid (step ``--grid-step``, 0.1 by default) and then shrunk toward
equal weights, ``w = (1 - a) * w_best + a * equal``. The shrinkage ``a`` is picked from
``--alphas`` by leave-one-graph-out: for each valid graph, the grid optimum of the *other*
graphs is shrunk and scored on the held-out graph; the ``a`` with the best held-out mean wins
(within ``HELD_OUT_TOLERANCE`` = 0.001 of the best, the most shrinkage wins). ``a = 1``
(equal weights) wins whenever fitting does not help on held-out graphs, which is what a noisy
fit on 7 graphs usually deserves; with fewer than ``MIN_GRAPHS_TO_FIT`` valid graphs the
weights are simply equal. ``summary.json`` records the
in-sample and held-out score of every ``a`` so the effect of the choice is visible.

Test runtimes are never read here.
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from tpurank.atomic import write_json
from tpurank.collections import Collection, parse_collections
from tpurank.config import StageConfig, parse_config, run_metadata
from features.io import discover
from models.metrics import final_score, graph_score
from models.predictions import (NORMALISATIONS, model_runs, predictions_path,
                                read_model_predictions, write_predictions)

from ensemble.submission import check_file, submission_rows, write_submission
from ensemble.truth import config_count, split_truth

BLEND_MODEL = "blend"
MIN_GRAPHS_TO_FIT = 3
#: held-out differences below this are noise: among near-ties the most shrinkage wins
HELD_OUT_TOLERANCE = 1e-3


@dataclass
class BlendConfig(StageConfig):
    """Blend model predictions and write the submission (python -m ensemble blend)."""

    models: str = "gnn,lgbm"
    submission: str = "submissions/submission.csv"
    norm: str = "minmax"  # chosen on sample-small valid (3 seeds): rank loses on tile, see README
    grid_step: float = 0.1
    alphas: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)
    max_fit_configs: int = 20_000

    PRESETS = {"quick": {}, "full": {}}

    @property
    def model_list(self) -> list[str]:
        return [m.strip() for m in self.models.split(",") if m.strip()]

    @property
    def preds_dir(self) -> Path:
        return Path(self.work) / "preds"

    @property
    def blend_dir(self) -> Path:
        return Path(self.work) / "blend"


@dataclass
class FitResult:
    """Fitted weights of one collection and the evidence behind them."""

    weights: list[float]
    alpha: float
    best_grid_weights: list[float]
    n_graphs: int
    in_sample: dict[str, float] = field(default_factory=dict)  # alpha -> mean valid score
    held_out: dict[str, float] = field(default_factory=dict)  # alpha -> leave-one-graph-out score
    method: str = "loo-shrinkage"


def simplex_grid(n_models: int, step: float) -> np.ndarray:
    """All weight vectors with entries in multiples of ``step`` summing to 1, shape (p, n_models)."""
    parts = int(round(1.0 / step))
    if parts < 1 or abs(parts * step - 1.0) > 1e-9:
        raise ValueError(f"grid step {step} must divide 1 (e.g. 0.1, 0.25)")
    points = [c for c in itertools.product(range(parts + 1), repeat=n_models) if sum(c) == parts]
    return np.array(points, dtype=np.float64) / parts


def blend_costs(normed: Sequence[Mapping[str, np.ndarray]], weights: Sequence[float],
                stems: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """Weighted sum of per-graph normalised costs (one mapping per model).

    Rounded to float32, the precision of the prediction files, so that what is scored here, what
    is saved and what is submitted rank ties identically (float64 sums of equal ranks can differ
    in the last bit).
    """
    stems = list(stems if stems is not None else normed[0])
    return {s: sum(w * np.asarray(m[s], dtype=np.float64) for w, m in zip(weights, normed))
            .astype(np.float32).astype(np.float64) for s in stems}


def _score(coll: Collection, normed, weights, stem: str, truth: Mapping[str, np.ndarray]) -> float:
    return graph_score(coll, blend_costs(normed, weights, [stem])[stem], truth[stem])


def _best_index(mean_scores: np.ndarray, grid: np.ndarray) -> int:
    """Grid optimum; among (numerically) tied points the one closest to equal weights."""
    top = np.flatnonzero(mean_scores >= mean_scores.max() - 1e-12)
    equal = np.full(grid.shape[1], 1.0 / grid.shape[1])
    return int(top[np.argmin(np.abs(grid[top] - equal).sum(axis=1))])


def fit_weights(coll: Collection, normed: Sequence[Mapping[str, np.ndarray]],
                truth: Mapping[str, np.ndarray], grid_step: float = 0.1,
                alphas: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0),
                max_configs: int = 20_000) -> FitResult:
    """Weights maximising the mean valid score, shrunk toward equal by leave-one-graph-out.

    For layout graphs with more than ``max_configs`` configs, τ is computed on a fixed random
    subset of that many configs (an unbiased estimate with a standard error of about
    ``1/sqrt(max_configs)``), which keeps fitting on 100k-config graphs fast.
    """
    k = len(normed)
    equal = np.full(k, 1.0 / k)
    stems = sorted(truth)
    if k == 1 or len(stems) < MIN_GRAPHS_TO_FIT:
        reason = "single model" if k == 1 else f"fewer than {MIN_GRAPHS_TO_FIT} valid graphs"
        return FitResult(equal.tolist(), 1.0, equal.tolist(), len(stems), method=f"equal ({reason})")
    if not coll.is_tile:  # τ on a fixed random subset of configs: same estimate, bounded cost
        normed, truth = _subsample(normed, truth, max_configs)
    grid = simplex_grid(k, grid_step)
    scores = np.array([[_score(coll, normed, w, s, truth) for s in stems] for w in grid])  # (p, g)
    best_all = grid[_best_index(scores.mean(axis=1), grid)]
    result = FitResult([], 0.0, best_all.tolist(), len(stems))
    totals = scores.sum(axis=1)
    for alpha in alphas:
        held = []
        for g, stem in enumerate(stems):
            best_rest = grid[_best_index((totals - scores[:, g]) / (len(stems) - 1), grid)]
            held.append(_score(coll, normed, (1 - alpha) * best_rest + alpha * equal, stem, truth))
        w_alpha = (1 - alpha) * best_all + alpha * equal
        result.in_sample[f"{alpha:g}"] = float(np.mean(
            [_score(coll, normed, w_alpha, s, truth) for s in stems]))
        result.held_out[f"{alpha:g}"] = float(np.mean(held))
    top = max(result.held_out.values())
    result.alpha = max(float(a) for a, v in result.held_out.items() if v >= top - HELD_OUT_TOLERANCE)
    result.weights = ((1 - result.alpha) * best_all + result.alpha * equal).tolist()
    return result


def _subsample(normed: Sequence[Mapping[str, np.ndarray]], truth: Mapping[str, np.ndarray],
               max_configs: int) -> tuple[list[dict[str, np.ndarray]], dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    keep = {s: (np.sort(rng.choice(len(t), max_configs, replace=False)) if len(t) > max_configs
                else slice(None)) for s, t in sorted(truth.items())}
    return ([{s: np.asarray(m[s])[keep[s]] for s in keep} for m in normed],
            {s: np.asarray(truth[s])[keep[s]] for s in keep})


def _mean_score(coll: Collection, costs: Mapping[str, np.ndarray],
                truth: Mapping[str, np.ndarray]) -> float:
    return float(np.mean([graph_score(coll, costs[s], truth[s]) for s in truth])) if truth else float("nan")


def _load_normed(cfg: BlendConfig, coll: Collection, split: str) -> list[dict[str, np.ndarray]]:
    normed = [read_model_predictions(cfg.preds_dir, m, coll, split, cfg.norm) for m in cfg.model_list]
    for model, preds in zip(cfg.model_list[1:], normed[1:]):
        if set(preds) != set(normed[0]):
            diff = sorted(set(preds) ^ set(normed[0]))
            raise ValueError(f"{coll.name}/{split}: models {cfg.model_list[0]!r} and {model!r} predict "
                             f"different graphs (e.g. {diff[:3]})")
    return normed


def _require(preds: Mapping[str, np.ndarray], sizes: Mapping[str, int], what: str) -> None:
    """Every graph predicted, with one cost per config (stale predictions fail here, by name)."""
    missing = sorted(set(sizes) - set(preds))
    if missing:
        raise ValueError(f"{what}: no prediction for {len(missing)} graph(s), e.g. {missing[:3]}")
    wrong = sorted(s for s, n in sizes.items() if len(preds[s]) != n)
    if wrong:
        s = wrong[0]
        raise ValueError(f"{what}: graph {s!r} has {len(preds[s])} predicted costs but {sizes[s]} "
                         f"configs ({len(wrong)} such graph(s); stale predictions? re-run predict)")


def blend_collection(cfg: BlendConfig, coll: Collection) -> tuple[dict, dict[str, np.ndarray]]:
    """Fit weights on valid, blend valid and test; returns (summary, test costs)."""
    truth = split_truth(cfg.data, coll, "valid")
    valid_normed = _load_normed(cfg, coll, "valid") if truth else []
    for model, preds in zip(cfg.model_list, valid_normed):
        _require(preds, {s: len(t) for s, t in truth.items()}, f"{coll.name}/valid, model {model}")
    fit = (fit_weights(coll, valid_normed, truth, cfg.grid_step, cfg.alphas, cfg.max_fit_configs)
           if truth else FitResult([1.0 / len(cfg.model_list)] * len(cfg.model_list), 1.0, [], 0,
                     method="equal (no valid graphs)"))
    test_sizes = {gf.stem: config_count(gf.path) for gf in discover(cfg.data, [coll], ["test"])}
    test_normed = _load_normed(cfg, coll, "test") if test_sizes else []
    for model, preds in zip(cfg.model_list, test_normed):
        _require(preds, test_sizes, f"{coll.name}/test, model {model}")
    test_costs = blend_costs(test_normed, fit.weights, sorted(test_sizes)) if test_sizes else {}
    summary = {"weights": dict(zip(cfg.model_list, fit.weights)), "fit": dataclasses.asdict(fit),
               "valid_score": {}, "n_valid": len(truth), "n_test": len(test_sizes)}
    if truth:
        valid_costs = blend_costs(valid_normed, fit.weights, sorted(truth))
        write_predictions(predictions_path(cfg.preds_dir, BLEND_MODEL, coll, "valid"), valid_costs)
        for model, preds in zip(cfg.model_list, valid_normed):
            summary["valid_score"][model] = _mean_score(coll, preds, truth)
        summary["valid_score"][BLEND_MODEL] = _mean_score(coll, valid_costs, truth)
    if test_sizes:
        write_predictions(predictions_path(cfg.preds_dir, BLEND_MODEL, coll, "test"), test_costs)
    return summary, test_costs


def run_id(cfg: BlendConfig) -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{Path(cfg.data).name}-{cfg.preset}-seed{cfg.seed}"


def run_blend(cfg: BlendConfig) -> dict:
    """Blend every collection, write the submission (+ a copy in ``submissions/<run>/``), check it."""
    if cfg.norm not in NORMALISATIONS:
        raise ValueError(f"--norm must be one of {NORMALISATIONS}, got {cfg.norm!r}")
    if not cfg.model_list:
        raise ValueError("--models is empty")
    rid = run_id(cfg)
    summary = {"run_id": rid, "models": cfg.model_list, "norm": cfg.norm,
               "runs": {m: model_runs(cfg.preds_dir, m) for m in cfg.model_list},
               "collections": {}, "metadata": run_metadata(cfg)}
    rows: dict[str, list[int]] = {}
    colls = [c for c in parse_collections(cfg.collections) if discover(cfg.data, [c], ["valid", "test"])]
    if not colls:
        raise FileNotFoundError(f"{cfg.data}: no valid/test graphs of collections {cfg.collections!r}")
    for coll in colls:
        coll_summary, test_costs = blend_collection(cfg, coll)
        summary["collections"][coll.name] = coll_summary
        rows.update(submission_rows(coll, test_costs))
        _print_collection(coll, coll_summary)
    valid_final = {m: final_score({c: s["valid_score"][m] for c, s in summary["collections"].items()
                                   if m in s["valid_score"]})
                   for m in cfg.model_list + [BLEND_MODEL]
                   if any(m in s["valid_score"] for s in summary["collections"].values())}
    summary["valid_final"] = valid_final
    submission = write_submission(cfg.submission, rows)
    run_dir = submission.parent / rid
    write_submission(run_dir / "submission.csv", rows)
    problems = check_file(submission, cfg.data)
    summary["check"] = problems or "ok"
    summary["submission"] = str(submission)
    summary["run_dir"] = str(run_dir)
    write_json(run_dir / "blend.json", summary)
    write_json(cfg.blend_dir / "summary.json", summary)
    if problems:
        raise ValueError(f"{submission} failed the checker: " + "; ".join(problems[:5]))
    return summary


def _print_collection(coll: Collection, s: dict) -> None:
    weights = ", ".join(f"{m}={w:.2f}" for m, w in s["weights"].items())
    scores = ", ".join(f"{m}={v:.4f}" for m, v in s["valid_score"].items())
    print(f"{coll.name:22s} valid graphs={s['n_valid']:4d} test graphs={s['n_test']:4d} "
          f"weights: {weights} ({s['fit']['method']}, shrink={s['fit']['alpha']:g})"
          + (f" | valid: {scores}" if scores else ""), flush=True)


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(BlendConfig, argv, prog="python -m ensemble blend")
    summary = run_blend(cfg)
    finals = ", ".join(f"{m}={v:.4f}" for m, v in summary["valid_final"].items())
    print(f"valid final (mean of collections): {finals}")
    print(f"wrote {summary['submission']} (checked OK) and {summary['run_dir']}/ [run {summary['run_id']}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
