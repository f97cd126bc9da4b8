"""Explicit pairwise mode: a binary classifier on feature differences of config pairs.

Training pairs: for each graph, ``pairs_per_graph`` pairs ``(a, b)`` of distinct configs drawn
uniformly at random with replacement (a pair may repeat; at most n(n-1)/2 pairs are drawn for
a graph of n configs); pairs with equal runtimes are dropped. The label is 1 when ``a`` is
faster. The orientation of each pair is random, so labels are balanced.

Pair features: ``[x_a - x_b, (x_a + x_b) / 2]``: the difference carries what distinguishes the
two configs, the mean the context (graph-level features are identical within a graph and vanish
from the difference).

Scoring back into a ranking: every config ``i`` is compared with ``R`` reference configs of the
same graph (a seeded uniform sample); its score is the mean over references of the symmetrised
margin ``(m(i, r) - m(r, i)) / 2``, a Borda-style count. Higher score = predicted faster.
"""

from __future__ import annotations

import numpy as np

from models.lgbm.data import graph_runs


def pair_feature_names(names: list[str]) -> list[str]:
    """Names of the pair-matrix columns: ``diff__<name>`` then ``mean__<name>``."""
    return [f"diff__{n}" for n in names] + [f"mean__{n}" for n in names]


def sample_pairs(graph_code: np.ndarray, target: np.ndarray, pairs_per_graph: int,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sample same-graph config pairs; returns row indices ``a``, ``b`` and label ``a faster``."""
    all_a, all_b = [], []
    for rows in graph_runs(np.asarray(graph_code)):
        n = len(rows)
        if n < 2:
            continue
        m = int(min(pairs_per_graph, n * (n - 1) // 2))
        i = rng.integers(0, n, size=m)
        j = rng.integers(0, n - 1, size=m)
        j = j + (j >= i)  # distinct from i, uniform over the others
        all_a.append(rows[i])
        all_b.append(rows[j])
    if not all_a:
        empty = np.zeros(0, np.int64)
        return empty, empty, np.zeros(0, np.float32)
    a, b = np.concatenate(all_a), np.concatenate(all_b)
    ta, tb = target[a], target[b]
    keep = ta != tb
    a, b = a[keep], b[keep]
    return a, b, (target[a] < target[b]).astype(np.float32)


def pair_matrix(X: np.ndarray, a: np.ndarray, b: np.ndarray,
                X_b: np.ndarray | None = None) -> np.ndarray:
    """Pair features ``[x_a - x_b, (x_a + x_b) / 2]`` (``b`` indexes ``X_b`` when given)."""
    xa = X[a]
    xb = (X if X_b is None else X_b)[b]
    return np.concatenate([xa - xb, 0.5 * (xa + xb)], axis=1).astype(np.float32, copy=False)


def choose_refs(n: int, n_refs: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of the reference configs of a graph with ``n`` configs."""
    return np.sort(rng.choice(n, size=min(n, n_refs), replace=False))


def pairwise_scores(predict_margin, X: np.ndarray, X_refs: np.ndarray,
                    batch_pairs: int = 262144) -> np.ndarray:
    """Score each row of ``X`` (one graph) against ``X_refs``; higher = predicted faster.

    ``predict_margin`` maps a pair matrix to raw margins (``booster.predict(..., raw_score=True)``).
    """
    n, r = len(X), len(X_refs)
    if n == 0:
        return np.zeros(0, np.float64)
    if r == 0:
        return np.zeros(n, np.float64)
    scores = np.empty(n, np.float64)
    per_batch = max(1, batch_pairs // r)
    ref_idx = np.arange(r)
    for start in range(0, n, per_batch):
        rows = np.arange(start, min(n, start + per_batch))
        a = np.repeat(rows, r)
        b = np.tile(ref_idx, len(rows))
        forward = predict_margin(pair_matrix(X, a, b, X_refs))
        backward = predict_margin(pair_matrix(X_refs, b, a, X))
        margin = 0.5 * (np.asarray(forward) - np.asarray(backward))
        scores[rows] = margin.reshape(len(rows), r).mean(axis=1)
    return scores
