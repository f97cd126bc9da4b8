"""Blend weights: the blend stage's config, weight search on a simplex grid with shrinkage toward
equal weights chosen by leave-one-graph-out (see :mod:`ensemble.blend` for the protocol), and the
weighted per-graph costs. Shared by the valid-split blend (:mod:`ensemble.blend`), the out-of-fold
blend (:mod:`ensemble.oof`) and the seeds table (:mod:`ensemble.seeds`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from tpurank.collections import Collection
from tpurank.config import StageConfig
from models.metrics import graph_score
from models.predictions import read_model_predictions



BLEND_MODEL = "blend"
MIN_GRAPHS_TO_FIT = 3
#: leave-one-graph-out differences below this are noise: among near-ties the most shrinkage wins
LOO_TOLERANCE = 1e-3


@dataclass
class BlendConfig(StageConfig):
    """Blend model predictions and write the submission (python -m ensemble blend)."""

    models: str = "gnn,lgbm"  # comma list of the models whose predictions are blended (WORK/preds/<model>)
    submission: str = "submissions/submission.csv"  # submission CSV written (and checked)
    norm: str = "minmax"  # chosen on sample-small valid (3 seeds): rank loses on tile, see README
    grid_step: float = 0.1  # step of the simplex grid the blend weights are searched on
    alphas: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)  # shrinkages toward equal weights, picked by leave-one-graph-out
    max_fit_configs: int = 20_000  # graphs with more configs are scored on a fixed random subset of this many
    protocol: str = "auto"  # auto = oof: fit on the models' out-of-fold predictions (stops naming a model without them) | valid: fit on the valid split (in-sample)
    folds: int = 0  # K of the models' fold plan; 0 = count their test-fold<k> files
    tile_hedge: int = 0  # tile: at most this many of the submitted top 5 from one predicted tile-count group (ensemble.hedge); 0 = plain top 5

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
    in_sample: dict[str, float] = field(default_factory=dict)  # alpha -> mean score, fitted graphs
    loo: dict[str, float] = field(default_factory=dict)  # alpha -> leave-one-graph-out score
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


class GraphScorer:
    """Per-graph scores of weighted blends, memoised by (weights, graph).

    Nested fits (leave-one-fold-out, leave-one-graph-out) score the same grid points on the same
    graphs over and over; with the cache each (weights, graph) pair is scored once. For layout
    graphs with more than ``max_configs`` configs, τ is computed on a fixed random subset of that
    many configs (an unbiased estimate with a standard error of about ``1/sqrt(max_configs)``).
    """

    def __init__(self, coll: Collection, normed: Sequence[Mapping[str, np.ndarray]],
                 truth: Mapping[str, np.ndarray], max_configs: int = 20_000) -> None:
        if not coll.is_tile:
            normed, truth = _subsample(normed, truth, max_configs)
        self.coll, self.normed, self.truth = coll, list(normed), dict(truth)
        self._cache: dict[tuple[tuple[float, ...], str], float] = {}

    def score(self, weights: Sequence[float], stem: str) -> float:
        key = (tuple(np.round(np.asarray(weights, dtype=np.float64), 9).tolist()), stem)
        if key not in self._cache:
            cost = blend_costs(self.normed, weights, [stem])[stem]
            self._cache[key] = graph_score(self.coll, cost, self.truth[stem])
        return self._cache[key]

    def matrix(self, grid: np.ndarray, stems: Sequence[str]) -> np.ndarray:
        """Scores of every grid point on every graph, shape (points, graphs)."""
        return np.array([[self.score(w, s) for s in stems] for w in grid])


def _best_index(mean_scores: np.ndarray, grid: np.ndarray) -> int:
    """Grid optimum; among (numerically) tied points the one closest to equal weights."""
    top = np.flatnonzero(mean_scores >= mean_scores.max() - 1e-12)
    equal = np.full(grid.shape[1], 1.0 / grid.shape[1])
    return int(top[np.argmin(np.abs(grid[top] - equal).sum(axis=1))])


def fit_weights(coll: Collection, normed: Sequence[Mapping[str, np.ndarray]],
                truth: Mapping[str, np.ndarray], grid_step: float = 0.1,
                alphas: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0),
                max_configs: int = 20_000, stems: Sequence[str] | None = None,
                scorer: GraphScorer | None = None) -> FitResult:
    """Weights maximising the mean score over ``stems`` (default: every graph of ``truth``),
    shrunk toward equal by leave-one-graph-out; only those graphs are looked at.

    ``scorer`` shares scores between fits on overlapping graph sets (nested schemes).
    """
    k = len(normed)
    equal = np.full(k, 1.0 / k)
    stems = sorted(truth if stems is None else stems)
    if k == 1 or len(stems) < MIN_GRAPHS_TO_FIT:
        reason = "single model" if k == 1 else f"fewer than {MIN_GRAPHS_TO_FIT} graphs to fit on"
        return FitResult(equal.tolist(), 1.0, equal.tolist(), len(stems), method=f"equal ({reason})")
    scorer = scorer or GraphScorer(coll, normed, truth, max_configs)
    grid = simplex_grid(k, grid_step)
    scores = scorer.matrix(grid, stems)  # (p, g)
    best_all = grid[_best_index(scores.mean(axis=1), grid)]
    result = FitResult([], 0.0, best_all.tolist(), len(stems))
    totals = scores.sum(axis=1)
    for alpha in alphas:
        loo = []
        for g, stem in enumerate(stems):
            best_rest = grid[_best_index((totals - scores[:, g]) / (len(stems) - 1), grid)]
            loo.append(scorer.score((1 - alpha) * best_rest + alpha * equal, stem))
        w_alpha = (1 - alpha) * best_all + alpha * equal
        result.in_sample[f"{alpha:g}"] = float(np.mean([scorer.score(w_alpha, s) for s in stems]))
        result.loo[f"{alpha:g}"] = float(np.mean(loo))
    top = max(result.loo.values())
    result.alpha = max(float(a) for a, v in result.loo.items() if v >= top - LOO_TOLERANCE)
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
