"""A wall-clock training budget (``--time-budget SECONDS``) shared across collections and folds.

Sharing: when a collection starts it gets ``remaining × (floor / n_left + (1 - floor) × w / Σw)``
of the time still left, where ``w`` is its training-row count (capped by the per-graph
subsample, :func:`training_weight`) and the sums run over the collections not trained yet; so a
collection that finishes early leaves its time to the later ones, and the smallest still gets
at least ``floor / n_left`` of what is left. Inside a collection the time is split evenly over
the remaining fits (folds × candidate modes); a fraction :data:`FIT_FRACTION` of each slice is
for boosting, the rest for reading rows and scoring.

Enforcement: :class:`DeadlineCallback` stops LightGBM when the fit's deadline passes and keeps
the best iteration seen so far (by the first validation metric; the last one without validation).
At least one boosting round always runs. Loading rows is not interruptible: the budget covers
it only by leaving less time for boosting.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import lightgbm as lgb
import polars as pl

FLOOR = 0.5
FIT_FRACTION = 0.75


def training_weight(path, max_per_graph: int) -> float:
    """Rows that training will read from ``path``: per graph min(rows, max_per_graph)."""
    try:
        sizes = pl.scan_parquet(path).group_by("graph").len().collect()["len"].to_numpy()
    except (FileNotFoundError, OSError):
        return 0.0
    if max_per_graph > 0:
        sizes = sizes.clip(max=max_per_graph)
    return float(sizes.sum())


@dataclass
class TimeBudget:
    """``total`` seconds (0 = unlimited) for the collections named in ``weights``."""

    total: float
    weights: dict[str, float]
    floor: float = FLOOR
    start: float = field(default_factory=time.monotonic)
    pending: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.pending = set(self.weights)

    @property
    def unlimited(self) -> bool:
        return self.total <= 0

    def remaining(self) -> float:
        return float("inf") if self.unlimited else self.total - (time.monotonic() - self.start)

    def claim(self, name: str) -> float:
        """Seconds for collection ``name`` (inf when unlimited); marks it as no longer pending."""
        if self.unlimited:
            self.pending.discard(name)
            return float("inf")
        left = sorted(self.pending | {name})
        total_w = sum(self.weights.get(n, 0.0) for n in left)
        frac = self.floor / len(left) + (1 - self.floor) * (
            self.weights.get(name, 0.0) / total_w if total_w > 0 else 1 / len(left))
        self.pending.discard(name)
        return max(0.0, self.remaining()) * frac

    def skip(self, name: str) -> None:
        """``name`` needs no time (already trained)."""
        self.pending.discard(name)


@dataclass
class Slicer:
    """Splits a collection's ``seconds`` evenly over ``fits`` consecutive fits."""

    seconds: float
    fits: int
    start: float = field(default_factory=time.monotonic)
    done: int = 0

    def deadline(self) -> float:
        """Monotonic deadline of the next fit's boosting (inf when unlimited)."""
        if self.seconds == float("inf"):
            return float("inf")
        now = time.monotonic()
        left = max(0.0, self.start + self.seconds - now)
        slice_s = left / max(1, self.fits - self.done)
        self.done += 1
        return now + FIT_FRACTION * slice_s


class DeadlineCallback:
    """Stop boosting at ``deadline`` (``time.monotonic()``), keeping the best iteration so far."""

    def __init__(self, deadline: float) -> None:
        # an instance attribute: lightgbm.train gives callbacks without one in their __dict__ a
        # negative order; 40 = after lightgbm.early_stopping (30), which may already have stopped
        self.order = 40
        self.deadline = deadline
        self.best_value: float | None = None
        self.best_iter = 0
        self.best_list: list = []
        self.stopped_at: int | None = None

    def __call__(self, env: lgb.callback.CallbackEnv) -> None:
        results = env.evaluation_result_list or []
        if results:
            _, _, value, higher = results[0][:4]
            better = self.best_value is None or (value > self.best_value if higher
                                                 else value < self.best_value)
            if better:
                self.best_value, self.best_iter, self.best_list = value, env.iteration, list(results)
        else:
            self.best_iter = env.iteration
        if time.monotonic() >= self.deadline:
            self.stopped_at = env.iteration + 1
            raise lgb.callback.EarlyStopException(self.best_iter, self.best_list)
