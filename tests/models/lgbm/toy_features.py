"""Synthetic tabular files in the feature pipeline's format, with a learnable ranking.

Used by the tests and the benchmark (``tests/bench/bench_lgbm.py``); never by training on data.
Runtime of a config = graph scale x exp(w . x) x log-normal noise, with fixed weights ``w``
(``f_0`` weight +1 down to ``f_{F-2}`` weight -1; the middle feature has weight 0) and a
graph-level feature ``f_{F-1}`` = log(scale), constant within a graph.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from tpurank.collections import COLLECTIONS, Collection
from features.processed import tabular_path


def toy_frame(n_graphs: int, n_configs: int, n_features: int, seed: int, with_target: bool = True,
              prefix: str = "g") -> pl.DataFrame:
    """Rows of ``n_graphs`` graphs of ``n_configs`` configs each."""
    rng = np.random.default_rng(seed)
    w = np.linspace(1.0, -1.0, n_features - 1)
    frames = []
    for g in range(n_graphs):
        X = rng.normal(size=(n_configs, n_features)).astype(np.float32)
        scale = rng.uniform(1, 100)
        X[:, -1] = np.float32(np.log(scale))
        runtime = scale * np.exp(X[:, :-1] @ w + 0.3 * rng.normal(size=n_configs))
        cols = {"graph": [f"{prefix}{g:03d}"] * n_configs,
                "config": np.arange(n_configs, dtype=np.int64),
                "target": runtime if with_target else np.full(n_configs, None)}
        cols.update({f"f_{k}": X[:, k] for k in range(n_features)})
        frames.append(pl.DataFrame(cols, schema_overrides={"target": pl.Float64}))
    return pl.concat(frames)


def write_toy_features(features_dir: str | Path, collections: tuple[Collection, ...] = COLLECTIONS,
                       n_graphs: tuple[int, int, int] = (12, 4, 3), n_configs: int = 60,
                       n_features: int = 6, seed: int = 0) -> Path:
    """Write ``features_dir/<slug>/tabular/{train,valid,test}.parquet`` for ``collections``."""
    features_dir = Path(features_dir)
    for k, collection in enumerate(collections):
        for s, (split, n) in enumerate(zip(("train", "valid", "test"), n_graphs)):
            df = toy_frame(n, n_configs, n_features, seed=seed * 100 + k * 10 + s,
                           with_target=split != "test", prefix=f"{split}_")
            path = tabular_path(features_dir, collection, split)
            path.parent.mkdir(parents=True, exist_ok=True)
            df.write_parquet(path)
    return features_dir
