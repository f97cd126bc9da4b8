"""Fitting one LightGBM model: LambdaRank on graded query groups, or the explicit pairwise
classifier (:mod:`models.lgbm.pairwise`).

Ranking modes early-stop on the *official* metric (tile top-5 score / layout Kendall τ, mean
over the early-stopping graphs); the pairwise mode on the binary log-loss of sampled pairs of
those graphs (:class:`BoostControl`: also the time budget and resumable checkpoints).
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Callable

import lightgbm as lgb
import numpy as np
from tqdm.auto import tqdm

from tpurank.atomic import write_json
from tpurank.collections import Collection
from models.lgbm.config import LgbmConfig
from models.lgbm.data import Rows, chunk_groups, graph_runs
from models.lgbm.model import ModelInfo, RankerModel
from models.lgbm.pairwise import PairSequence, pair_feature_names, sample_pairs
from models.metrics import graph_score

# Fixed settings (no option: nobody measured another value)
N_GRADES = 30  # relevance grades 0..29 (<= 31 with LightGBM's default label gain)
# a graph's train rows are split into query groups of at most this many rows (LightGBM allows
# 10,000; lambdarank costs O(group size x truncation level) per row); layout's truncation level
MAX_GROUP_SIZE = 256
TREES = {"min_data_in_leaf": 50, "feature_fraction": 0.8, "bagging_fraction": 0.8,
         "bagging_freq": 1, "lambda_l2": 1.0, "max_bin": 255}
MAX_PAIRS_TOTAL = 2_000_000  # pairwise memory cap: pairs_per_graph shrinks to fit (2 x F float32 each)
# pair rows LightGBM samples to place its bin boundaries (the only pair rows held at once besides
# one batch: 2F float64 each)
PAIR_BIN_SAMPLE = 20000


def safe_names(names: list[str]) -> list[str]:
    """Feature names LightGBM accepts (no JSON special characters); originals stay in ModelInfo."""
    return [re.sub(r"[^0-9A-Za-z_.\-]", "_", n) for n in names]


def booster_params(cfg: LgbmConfig) -> dict:
    """LightGBM parameters shared by every mode (deterministic for a given seed)."""
    return {"learning_rate": cfg.learning_rate, "num_leaves": cfg.num_leaves, **TREES,
            "seed": cfg.seed, "deterministic": True, "force_col_wise": True,
            "num_threads": cfg.threads if cfg.threads > 0 else (os.cpu_count() or 1),
            "verbosity": -1, "metric": "None"}


def ranking_params(collection: Collection) -> dict:
    """LambdaRank settings: label gain and truncation follow what the metric rewards.

    Tile is scored on the top 5 only: exponential gain (LightGBM's default 2^g - 1) and a short
    truncation focus the model on the fastest configs. Layout is scored by Kendall τ over all
    configs: linear gain and no truncation weigh every pair of a group alike.
    """
    if collection.is_tile:
        gain, truncation = [float(2 ** g - 1) for g in range(N_GRADES)], 20
    else:
        gain, truncation = [float(g) for g in range(N_GRADES)], MAX_GROUP_SIZE
    return {"objective": "lambdarank", "label_gain": gain, "lambdarank_truncation_level": truncation}


def _warmup_value(calls: int, higher_is_better: bool) -> float:
    """A placeholder metric that improves every round: early stopping cannot pick (or stop at)
    an iteration before ``min_rounds`` (small validation sets are noisy, and the first rounds
    of a ranking model can score well by luck)."""
    return -1e9 + calls if higher_is_better else 1e9 - calls


def official_feval(collection: Collection, valid: Rows, every: int = 1, warmup: int = 0,
                   start: int = 0) -> Callable:
    """A LightGBM ``feval``: mean official score over the validation graphs (higher = better).

    Computed every ``every`` iterations; in between the last value is repeated, which early
    stopping never counts as an improvement, so the best iteration is always a scored one.
    """
    runs = [r for r in graph_runs(valid.graph_code) if len(r) > 1]
    target = valid.target
    name = "top5" if collection.is_tile else "tau"
    state = {"calls": start, "last": -np.inf}  # start: rounds done before a resume

    def feval(preds: np.ndarray, _data: lgb.Dataset) -> tuple[str, float, bool]:
        state["calls"] += 1
        calls = state["calls"]
        if calls < warmup:
            return name, _warmup_value(calls, True), True
        if calls == warmup or (calls - warmup) % max(1, every) == 0:
            scores = [graph_score(collection, -preds[r], target[r]) for r in runs]
            state["last"] = float(np.mean(scores)) if scores else 0.0
        return name, state["last"], True

    return feval


def logloss_feval(warmup: int = 0, start: int = 0) -> Callable:
    """Binary log-loss of the validation pairs (lower = better), with the same warm-up."""
    state = {"calls": start}

    def feval(preds: np.ndarray, data: lgb.Dataset) -> tuple[str, float, bool]:
        state["calls"] += 1
        if state["calls"] < warmup:
            return "pair_logloss", _warmup_value(state["calls"], False), False
        p = np.clip(preds, 1e-7, 1 - 1e-7)
        y = data.get_label()
        return "pair_logloss", float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p))), False

    return feval


def progress_callback(bar: tqdm, every: int = 10) -> Callable:
    """A LightGBM callback advancing ``bar`` and showing the latest validation metric."""

    def callback(env: lgb.callback.CallbackEnv) -> None:
        bar.update(1)
        if env.evaluation_result_list and env.iteration % every == 0:
            _, metric, value, *_ = env.evaluation_result_list[0]
            shown = "warm-up" if abs(value) >= 1e8 else f"{value:.4f}"  # see _warmup_value
            bar.set_postfix({metric: shown}, refresh=False)

    return callback


class BoostControl:
    """One LightGBM callback for early stopping (as ``lightgbm.early_stopping(first_metric_only=
    True)``), the deadline (``time.monotonic()``), both stopping at the best iteration so far, and
    resumable checkpoints: every ``checkpoint_every`` seconds the booster text and early-stopping
    state go to ``checkpoint`` in one atomic write, tagged with ``key``; a new control for the
    same path and key resumes from it. A resumed fit is only equivalent to an uninterrupted one,
    not bit-identical (bagging draws restart).
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


def _pair_dataset(rows: Rows, pairs_per_graph: int, max_total: int, rng: np.random.Generator,
                  reference: lgb.Dataset | None = None) -> lgb.Dataset:
    """Pairs of ``rows`` as a LightGBM Dataset fed by a :class:`PairSequence` (bounded memory)."""
    per_graph = max(1, min(pairs_per_graph, max_total // max(1, len(rows.graphs))))
    a, b, label = sample_pairs(rows.graph_code, rows.target, per_graph, rng)
    return lgb.Dataset(PairSequence(rows.X, a, b), label=label, reference=reference,
                       feature_name=safe_names(pair_feature_names(rows.feature_names)),
                       free_raw_data=True)


def fit_model(mode: str, train: Rows, valid: Rows | None, cfg: LgbmConfig,
              collection: Collection, deadline: float = float("inf"),
              checkpoint: Path | None = None, key: str = "") -> RankerModel:
    """Fit one ``mode`` model; boosting stops at ``deadline`` (``time.monotonic()``) if earlier.

    ``lambdarank``: one query group per graph chunk (see ``chunk_groups``); ``pairwise``: a binary
    classifier ``a faster than b`` on sampled same-graph pairs (see ``pairwise``). With
    ``checkpoint``, the booster is saved there every ``cfg.checkpoint_every`` seconds and a
    checkpoint left by a killed fit with the same ``key`` is resumed (then removed).
    """
    stop = BoostControl(deadline, patience=cfg.early_stopping_rounds,
                        checkpoint=checkpoint if cfg.checkpoint_every > 0 else None,
                        checkpoint_every=cfg.checkpoint_every, key=f"{key}:{mode}")
    resumed = stop.start_iteration
    rng = np.random.default_rng(cfg.seed)
    has_valid = valid is not None and len(valid) > 0
    if mode == "pairwise":
        train_set = _pair_dataset(train, cfg.pairs_per_graph, MAX_PAIRS_TOTAL, rng)
        valid_set = _pair_dataset(valid, cfg.valid_pairs_per_graph, MAX_PAIRS_TOTAL // 4, rng,
                                  reference=train_set) if has_valid else None
        params = {"objective": "binary", "bin_construct_sample_cnt": PAIR_BIN_SAMPLE}
        feval = logloss_feval(cfg.min_rounds, resumed)
    else:
        grades = train.grades(N_GRADES)
        order, sizes = chunk_groups(train.graph_code, MAX_GROUP_SIZE, rng)
        train_set = lgb.Dataset(train.X[order], label=grades[order], group=sizes,
                                feature_name=safe_names(train.feature_names), free_raw_data=True)
        valid_set = lgb.Dataset(valid.X, label=valid.grades(N_GRADES),
                                reference=train_set) if has_valid else None
        params = ranking_params(collection)
        feval = official_feval(collection, valid, cfg.eval_every, cfg.min_rounds,
                               resumed) if has_valid else None
    valid_sets = [valid_set] if valid_set is not None else []
    rounds = max(1, cfg.num_boost_round - resumed)
    with tqdm(total=rounds, desc=f"{collection.name} {mode}", unit="it", leave=False,
              mininterval=1.0) as bar:
        booster = lgb.train(booster_params(cfg) | params, train_set,
                            num_boost_round=rounds, init_model=stop.init_model,
                            valid_sets=valid_sets, valid_names=["valid"] * len(valid_sets),
                            feval=feval if valid_sets else None,
                            callbacks=[progress_callback(bar), stop])
    info = ModelInfo(mode=mode, feature_names=list(train.feature_names), collection=collection.name,
                     seed=cfg.seed, pair_refs=cfg.pair_refs,
                     best_iteration=int(booster.best_iteration or booster.current_iteration()))
    if stop.stopped_at is not None:
        info.extra["stopped_by_time_budget_at"] = stop.stopped_at
    if resumed:
        info.extra["resumed_from_iteration"] = resumed
    stop.clear()
    return RankerModel(booster=booster, info=info)
