"""Hand-made tabular parquet files in the feature pipeline's format (learnable toy rankings)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from features.collections import COLLECTIONS, Collection
from features.processed import tabular_path


def toy_frame(n_graphs: int, n_configs: int, n_features: int, seed: int, with_target: bool = True,
              prefix: str = "g") -> pl.DataFrame:
    """Rows of ``n_graphs`` graphs; runtime = graph scale * exp(w . x) * noise (learnable)."""
    rng = np.random.default_rng(seed)
    w = np.linspace(1.0, -1.0, n_features)  # fixed across seeds: the same task everywhere
    frames = []
    for g in range(n_graphs):
        n = int(n_configs if np.isscalar(n_configs) else n_configs[g])
        X = rng.normal(size=(n, n_features)).astype(np.float32)
        scale = rng.uniform(1, 100)
        X[:, -1] = np.float32(np.log(scale))  # a graph-level feature, constant within the graph
        runtime = scale * np.exp(X[:, :-1] @ w[:-1] + 0.3 * rng.normal(size=n))
        cols = {"graph": [f"{prefix}{g:03d}"] * n, "config": np.arange(n, dtype=np.int64),
                "target": runtime if with_target else np.full(n, None)}
        cols.update({f"f_{k}": X[:, k] for k in range(n_features)})
        frames.append(pl.DataFrame(cols, schema_overrides={"target": pl.Float64}))
    return pl.concat(frames)


def write_toy_features(features_dir: Path, collections: tuple[Collection, ...] = COLLECTIONS,
                       n_graphs: tuple[int, int, int] = (12, 4, 3), n_configs: int = 60,
                       n_features: int = 6, seed: int = 0) -> Path:
    for k, collection in enumerate(collections):
        for s, (split, n) in enumerate(zip(("train", "valid", "test"), n_graphs)):
            df = toy_frame(n, n_configs, n_features, seed=seed * 100 + k * 10 + s,
                           with_target=split != "test", prefix=f"{split}_")
            path = tabular_path(features_dir, collection, split)
            path.parent.mkdir(parents=True, exist_ok=True)
            df.write_parquet(path)
    return features_dir


@pytest.fixture()
def toy_work(tmp_path: Path) -> Path:
    """A work dir whose ``features/`` holds toy tabular files for tile:xla and layout:xla:random."""
    work = tmp_path / "work"
    collections = tuple(c for c in COLLECTIONS if c.name in ("tile:xla", "layout:xla:random"))
    write_toy_features(work / "features", collections)
    return work
