"""The ``--time-budget`` of the LightGBM ranker inside a collection, and its enforcement.

A collection claims its share of the time left (:class:`models.budget.TimeBudget`, weighted by
:func:`training_weight`); :class:`Slicer` splits it evenly over the remaining fits (folds ×
candidate modes), :data:`FIT_FRACTION` of each slice for boosting, the rest for reading rows and
scoring. :class:`BoostControl` stops boosting at the deadline (at least one round runs; loading
rows is not interruptible) and also does early stopping and the resumable checkpoints.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import lightgbm as lgb
import polars as pl

from tpurank.atomic import write_json

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


class BoostControl:
    """One LightGBM callback for early stopping, the deadline and resumable checkpoints.

    - Early stopping (``patience`` rounds without improvement of the first validation metric,
      as ``lightgbm.early_stopping(first_metric_only=True)``) and the deadline
      (``time.monotonic()``) both stop at the best iteration so far.
    - With ``checkpoint`` (a JSON path), the booster text and the early-stopping state are
      saved there in one atomic write every ``checkpoint_every`` seconds (tagged with ``key``,
      e.g. the settings fingerprint). A new control for the same path and
      key resumes from it: :attr:`init_model` and :attr:`start_iteration` are set, and the best
      iteration seen before the kill is kept as the one to beat. A resumed fit is not
      bit-identical to an uninterrupted one (bagging draws restart), only equivalent.
    """

    def __init__(self, deadline: float = float("inf"), patience: int = 0,
                 checkpoint: Path | None = None, checkpoint_every: float = 60.0,
                 key: str = "") -> None:
        # an instance attribute: lightgbm.train gives callbacks without one in their __dict__ a
        # negative order; 40 = after the other callbacks
        self.order = 40
        self.deadline, self.patience = deadline, patience
        self.checkpoint, self.every, self.key = checkpoint, checkpoint_every, key
        self.best_value: float | None = None
        self.best_iter = -1
        self.best_list: list = []
        self.stopped_at: int | None = None
        self.start_iteration = 0
        self.init_model: lgb.Booster | None = None
        self._saved_at = time.monotonic()
        self._resume()

    def _resume(self) -> None:
        if self.checkpoint is None or not self.checkpoint.is_file():
            return
        try:
            saved = json.loads(self.checkpoint.read_text())
        except json.JSONDecodeError:
            return
        if saved.get("key") != self.key:
            return
        self.start_iteration = int(saved["iteration"])
        self.best_iter, self.best_value = int(saved["best_iter"]), saved["best_value"]
        self.best_list = [tuple(r) for r in saved["best_list"]]
        self.init_model = lgb.Booster(model_str=saved["model"])

    def _save(self, env: lgb.callback.CallbackEnv) -> None:
        # one atomic file (model text + early-stopping state): a kill never leaves them apart
        write_json(self.checkpoint, {"key": self.key, "iteration": env.iteration + 1,
                                     "best_iter": self.best_iter, "best_value": self.best_value,
                                     "best_list": [list(r) for r in self.best_list],
                                     "model": env.model.model_to_string()})
        self._saved_at = time.monotonic()

    def clear(self) -> None:
        """Remove the checkpoint (the fit's result is saved elsewhere)."""
        if self.checkpoint is not None:
            self.checkpoint.unlink(missing_ok=True)

    def _stop(self) -> None:
        raise lgb.callback.EarlyStopException(self.best_iter, self.best_list)

    def __call__(self, env: lgb.callback.CallbackEnv) -> None:
        results = env.evaluation_result_list or []
        if results:
            _, _, value, higher = results[0][:4]
            better = self.best_value is None or (value > self.best_value if higher
                                                 else value < self.best_value)
            if better:
                self.best_value, self.best_iter, self.best_list = value, env.iteration, list(results)
            if self.patience > 0 and env.iteration - self.best_iter >= self.patience:
                self._stop()
        else:
            self.best_iter = env.iteration
        if time.monotonic() >= self.deadline:
            self.stopped_at = env.iteration + 1
            self._stop()
        if env.iteration == env.end_iteration - 1:
            self._stop()
        if self.checkpoint is not None and time.monotonic() - self._saved_at >= self.every:
            self._save(env)
