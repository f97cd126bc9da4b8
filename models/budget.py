"""The time budget of a training invocation (``--time-budget SECONDS``), shared by the runs it
makes (collections, folds): time a run leaves unused carries over to the next ones. Standard
library only (the LightGBM stage imports no torch). :meth:`TimeBudget.share` (GNN) splits the
remaining time in proportion to weight; :meth:`TimeBudget.claim` (LightGBM) gives each named run
``remaining × (floor / n_left + (1 - floor) × w / Σw)`` over the runs not claimed yet, so the
smallest still gets at least ``floor / n_left`` of what is left.
"""

from __future__ import annotations

import math
import time


class TimeBudget:
    """``seconds`` of ``clock`` for a whole invocation; ``seconds <= 0``: no limit (every share
    is infinite)."""

    def __init__(self, seconds: float, clock=time.monotonic, weights: dict[str, float] | None = None,
                 floor: float = 0.5) -> None:
        self.seconds = float(seconds)
        self.clock = clock
        self.start = clock()
        self.weights = dict(weights or {})
        self.floor = floor
        self.pending = set(self.weights)

    @property
    def limited(self) -> bool:
        return self.seconds > 0

    def remaining(self) -> float:
        if not self.limited:
            return math.inf
        return max(0.0, self.seconds - (self.clock() - self.start))

    def share(self, runs_left: float, weight: float = 1.0) -> float:
        """Seconds for the next run of ``weight`` when runs of total weight ``runs_left`` (this one
        included) remain: the remaining time split in proportion to weight."""
        return self.remaining() * weight / max(weight, runs_left, 1e-9)

    def claim(self, name: str) -> float:
        """Seconds for the run ``name`` of ``weights`` (inf when unlimited); marks it as claimed."""
        if not self.limited:
            self.pending.discard(name)
            return math.inf
        left = sorted(self.pending | {name})
        total_w = sum(self.weights.get(n, 0.0) for n in left)
        frac = self.floor / len(left) + (1 - self.floor) * (
            self.weights.get(name, 0.0) / total_w if total_w > 0 else 1 / len(left))
        self.pending.discard(name)
        return self.remaining() * frac
