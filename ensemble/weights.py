"""Blend weights: the blend stage's config, the selection criterion (:class:`Criterion`) and
:func:`fit_weights`, a simplex grid search shrunk toward the tail anchor (docs/ensemble.md, "Blend")."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Mapping, Sequence

import numpy as np

from tpurank.collections import Collection
from tpurank.config import StageConfig
from tpurank.registry import default_models
from models.metrics import graph_score

BLEND_MODEL = "blend"
MIN_GRAPHS_TO_FIT = 3
#: held-out criterion differences below this are noise: among near-ties the most shrinkage wins
LOO_TOLERANCE = 1e-3
#: a model whose mean over the worst graphs is this much below the best model's is "worse on the
#: tail": the shrinkage anchor leaves it out (smaller differences are ties)
TAIL_TOLERANCE = 1e-2
#: the share of graphs the reports call "the worst 5 %"
WORST_FRACTION = 0.05


def tail_count(n_graphs: int, fraction: float) -> int:
    """How many graphs "the worst ``fraction``" of ``n_graphs`` is (at least one)."""
    return max(1, math.ceil(fraction * n_graphs - 1e-9))


def tail_mean(scores, fraction: float = WORST_FRACTION) -> float:
    """Mean of the worst ``fraction`` of per-graph scores (at least one graph)."""
    values = np.sort(np.asarray(list(scores.values()) if isinstance(scores, Mapping) else scores,
                                dtype=np.float64))
    return float(values[:tail_count(len(values), fraction)].mean()) if values.size else float("nan")


@dataclass(frozen=True)
class Criterion:
    """What the weight search and the shrinkage choice maximise over per-graph scores:
    ``(1 - tail_weight) * mean + tail_weight * (mean of the worst tail_fraction of graphs)``
    (0: the plain mean, the official metric). The tile score is unbounded below, so a choice made
    on the mean alone can trade a few ruined kernels for thousandths elsewhere."""

    tail_weight: float = 0.0
    tail_fraction: float = 0.1

    def __post_init__(self) -> None:
        if not 0.0 <= self.tail_weight <= 1.0:
            raise ValueError(f"tail weight must be in [0, 1], got {self.tail_weight}")
        if not 0.0 < self.tail_fraction <= 1.0:
            raise ValueError(f"tail fraction must be in (0, 1], got {self.tail_fraction}")

    def describe(self) -> str:
        if self.tail_weight == 0:
            return "mean"
        return (f"{1 - self.tail_weight:g} x mean + {self.tail_weight:g} x mean of the worst "
                f"{self.tail_fraction:.0%}")

    def value(self, scores: np.ndarray) -> np.ndarray:
        """The criterion over the last axis (graphs) of ``scores``."""
        scores = np.asarray(scores, dtype=np.float64)
        mean = scores.mean(axis=-1)
        if self.tail_weight == 0:
            return mean
        k = tail_count(scores.shape[-1], self.tail_fraction)
        tail = np.sort(scores, axis=-1)[..., :k].mean(axis=-1)
        return (1 - self.tail_weight) * mean + self.tail_weight * tail


@dataclass
class BlendConfig(StageConfig):
    """Blend model predictions and write the submission (python -m ensemble blend)."""

    models: str = field(default_factory=default_models)  # comma list of the models whose predictions are blended (WORK/preds/<model>)
    submission: str = "submissions/submission.csv"  # submission CSV written (and checked)
    norm: str = "minmax"  # chosen on sample-small valid (3 seeds): rank loses on tile, see README
    grid_step: float = 0.1  # step of the simplex grid the blend weights are searched on
    alphas: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)  # shrinkages toward the anchor weights (equal over the models not worse on the tail), picked on held-out folds (OOF) or graphs (valid)
    max_fit_configs: int = 20_000  # graphs with more configs are scored on a fixed random subset of this many
    protocol: Literal["auto", "oof", "valid"] = "auto"  # auto = oof: fit on the models' out-of-fold predictions (stops naming a model without them) | valid: fit on the valid split (in-sample)
    tail_weight: float = 0.0  # layout: the selection criterion of weights and shrinkage is (1 - w) x mean + w x mean of the worst --tail-fraction of graphs (0 = the mean; chosen out of fold, BENCHMARKS.md)
    tile_tail_weight: float = 0.5  # the same w for tile, whose score is unbounded below (chosen out of fold, BENCHMARKS.md)
    tail_fraction: float = 0.1  # share of a collection's graphs that the criterion's tail term (and the shrinkage anchor) averages, at least one
    tile_top5: Literal["blend", "portfolio"] = "portfolio"  # tile top 5: portfolio (one of the five slots for each model, the rest to the better out of fold: 4 + 1 for two; ensemble.hedge, chosen out of fold, BENCHMARKS.md) | blend (the weighted average's)

    PRESETS = {"quick": {}, "full": {}}

    @property
    def model_list(self) -> list[str]:
        return [m.strip() for m in self.models.split(",") if m.strip()]

    def criterion(self, coll: Collection) -> Criterion:
        """The selection criterion of ``coll`` (tile and layout have their own tail weight)."""
        return Criterion(self.tile_tail_weight if coll.is_tile else self.tail_weight, self.tail_fraction)

    @property
    def preds_dir(self) -> Path:
        return Path(self.work) / "preds"


@dataclass
class FitResult:
    """Fitted weights of one collection and the evidence behind them."""

    weights: list[float]
    alpha: float
    n_graphs: int
    in_sample: dict[str, float] = field(default_factory=dict)  # alpha -> criterion, fitted graphs
    loo: dict[str, float] = field(default_factory=dict)  # alpha -> criterion of the held-out scores (method: leave-one-fold-out or -graph-out)
    method: str = "loo-shrinkage"  # lofo-shrinkage: held out by fold; loo-shrinkage: by graph
    criterion: str = "mean"
    anchor: list[float] = field(default_factory=list)  # what the weights are shrunk toward
    loo_mean: dict[str, float] = field(default_factory=dict)  # alpha -> mean held-out score
    loo_worst: dict[str, float] = field(default_factory=dict)  # alpha -> mean of the worst 5 % of them


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
    """Per-graph scores of weighted blends, memoised by (weights, graph): nested fits score the
    same grid points on the same graphs over and over. Layout graphs with more than
    ``max_configs`` configs are scored on a fixed random subset of that many."""

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


def _best_index(values: np.ndarray, grid: np.ndarray, anchor: np.ndarray) -> int:
    """Grid optimum; among (numerically) tied points the one closest to ``anchor``."""
    top = np.flatnonzero(values >= values.max() - 1e-12)
    return int(top[np.argmin(np.abs(grid[top] - anchor).sum(axis=1))])


def tail_anchor(tails: np.ndarray) -> np.ndarray:
    """Equal weights over the models whose mean over their worst graphs (``tails``) is within
    :data:`TAIL_TOLERANCE` of the best model's, zero for the others: shrinking toward it never
    moves weight to a model that is worse on the collection's tail."""
    keep = tails >= tails.max() - TAIL_TOLERANCE
    return keep / keep.sum()


def fit_weights(coll: Collection, normed: Sequence[Mapping[str, np.ndarray]],
                truth: Mapping[str, np.ndarray], grid_step: float = 0.1,
                alphas: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0),
                max_configs: int = 20_000, stems: Sequence[str] | None = None,
                scorer: GraphScorer | None = None, criterion: Criterion | None = None,
                groups: Mapping[str, int] | None = None) -> FitResult:
    """Weights maximising ``criterion`` (default: the mean score) over ``stems`` (default: every
    graph of ``truth``; only those are looked at), shrunk toward the :func:`tail_anchor` by the
    shrinkage that scores best held out: with ``groups`` (stem -> fold, at least two folds)
    leave-one-fold-out, else leave-one-graph-out. By fold because a fold's OOF predictions come
    from one fold model, weak on all its graphs at once (issue 22). ``scorer`` shares scores
    between fits on overlapping graph sets (nested fits)."""
    criterion = criterion or Criterion()
    k = len(normed)
    equal = np.full(k, 1.0 / k)
    stems = sorted(truth if stems is None else stems)
    if k == 1 or len(stems) < MIN_GRAPHS_TO_FIT:
        reason = "single model" if k == 1 else f"fewer than {MIN_GRAPHS_TO_FIT} graphs to fit on"
        return FitResult(equal.tolist(), 1.0, len(stems), method=f"equal ({reason})",
                         criterion=criterion.describe(), anchor=equal.tolist())
    scorer = scorer or GraphScorer(coll, normed, truth, max_configs)
    grid = simplex_grid(k, grid_step)
    scores = scorer.matrix(grid, stems)  # (p, g)
    singles = scores[[int(np.flatnonzero(np.isclose(grid[:, m], 1.0))[0]) for m in range(k)]]
    worst = Criterion(1.0, criterion.tail_fraction)  # each model's mean over its worst graphs
    target = tail_anchor(worst.value(singles))
    best_all = grid[_best_index(criterion.value(scores), grid, target)]
    folds = _fold_index(stems, groups)
    result = FitResult([], 0.0, len(stems), criterion=criterion.describe(), anchor=target.tolist(),
                       method="loo-shrinkage" if folds is None else "lofo-shrinkage")
    if folds is None:  # leave-one-graph-out: every graph its own fold
        folds = np.arange(len(stems))
    best_rest: list[np.ndarray] = [np.empty(0)] * len(stems)
    targets: list[np.ndarray] = [np.empty(0)] * len(stems)
    for f in np.unique(folds):  # per graph, the grid optimum and the anchor of the other folds
        rest = folds != f
        t = tail_anchor(worst.value(singles[:, rest]))
        w = grid[_best_index(criterion.value(scores[:, rest]), grid, t)]
        for g in np.flatnonzero(~rest):
            best_rest[g], targets[g] = w, t
    for alpha in alphas:
        loo = np.array([scorer.score((1 - alpha) * w + alpha * t, stem)
                        for w, t, stem in zip(best_rest, targets, stems)])
        w_alpha = (1 - alpha) * best_all + alpha * target
        key = f"{alpha:g}"
        result.in_sample[key] = float(criterion.value(np.array([scorer.score(w_alpha, s) for s in stems])))
        result.loo[key] = float(criterion.value(loo))
        result.loo_mean[key] = float(loo.mean())
        result.loo_worst[key] = tail_mean(loo)
    top = max(result.loo.values())
    result.alpha = max(float(a) for a, v in result.loo.items() if v >= top - LOO_TOLERANCE)
    result.weights = ((1 - result.alpha) * best_all + result.alpha * target).tolist()
    return result


def _fold_index(stems: Sequence[str], groups: Mapping[str, int] | None) -> np.ndarray | None:
    """Each stem's fold (``groups``) when there are at least two folds and every fold's
    complement has enough graphs to fit on; else None (leave-one-graph-out)."""
    if groups is None:
        return None
    folds = np.array([groups[s] for s in stems])
    labels = np.unique(folds)
    if len(labels) < 2 or any((folds != f).sum() < MIN_GRAPHS_TO_FIT for f in labels):
        return None
    return folds


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
