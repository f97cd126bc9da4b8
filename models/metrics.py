"""The official score (docs/competition.md §6): tile top-5 score and layout Kendall τ, per graph and per collection.

All functions take *costs* (lower = predicted faster) and true runtimes (lower = faster).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
from scipy.stats import kendalltau

from tpurank.collections import Collection

TILE_TOP_K = 5


def tile_score(pred_cost: np.ndarray, runtime: np.ndarray, k: int = TILE_TOP_K) -> float:
    """``2 - min(rt of the predicted best k) / min(rt of all)``; 1.0 is perfect, higher is better."""
    runtime = np.asarray(runtime, dtype=np.float64)
    if np.shape(pred_cost) != runtime.shape:
        raise ValueError(f"shape mismatch: {np.shape(pred_cost)} predictions vs {runtime.shape} runtimes")
    if runtime.min() <= 0:
        raise ValueError("tile score needs positive runtimes")
    return tile_score_from_ranking(np.argsort(np.asarray(pred_cost), kind="stable"), runtime, k)


def tile_score_from_ranking(top: np.ndarray, runtime: np.ndarray, k: int = TILE_TOP_K) -> float:
    """Tile score of an explicit ranking (indices, fastest first) as in a submission row."""
    runtime = np.asarray(runtime, dtype=np.float64)
    return float(2.0 - runtime[np.asarray(top)[:k]].min() / runtime.min())


def kendall_tau(pred_cost: np.ndarray, runtime: np.ndarray) -> float:
    """Kendall's τ-b between predicted costs and true runtimes (1 = same order). O(n log n)."""
    pred_cost = np.asarray(pred_cost, dtype=np.float64)
    runtime = np.asarray(runtime, dtype=np.float64)
    if pred_cost.shape != runtime.shape:
        raise ValueError(f"shape mismatch: {pred_cost.shape} predictions vs {runtime.shape} runtimes")
    if len(runtime) < 2:
        return 0.0
    tau = kendalltau(pred_cost, runtime).statistic
    return 0.0 if not np.isfinite(tau) else float(tau)


def tau_from_ranking(order: np.ndarray, runtime: np.ndarray) -> float:
    """τ of an explicit permutation (fastest first), as the Kaggle scorer reads a submission row."""
    position = np.empty(len(order), dtype=np.int64)
    position[np.asarray(order)] = np.arange(len(order))
    return kendall_tau(position, runtime)


def graph_score(collection: Collection, pred_cost: np.ndarray, runtime: np.ndarray) -> float:
    """Official per-graph score for the collection's kind."""
    if collection.is_tile:
        return tile_score(pred_cost, runtime)
    return kendall_tau(pred_cost, runtime)


def score_collection(collection: Collection, preds: Mapping[str, np.ndarray],
                     truth: Mapping[str, np.ndarray]) -> dict:
    """Per-graph and mean score over the graphs in ``truth`` (all must be predicted)."""
    missing = sorted(set(truth) - set(preds))
    if missing:
        raise KeyError(f"{collection.name}: no predictions for {len(missing)} graph(s), e.g. {missing[:3]}")
    per_graph = {stem: graph_score(collection, preds[stem], truth[stem]) for stem in sorted(truth)}
    values = list(per_graph.values())
    return {"collection": collection.name, "score": float(np.mean(values)) if values else float("nan"),
            "n_graphs": len(values), "per_graph": per_graph}


def final_score(collection_scores: Mapping[str, float]) -> float:
    """Plain mean of the collection scores (the Kaggle leaderboard number)."""
    return float(np.mean(list(collection_scores.values())))
