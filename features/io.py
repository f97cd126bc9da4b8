"""Discover and load TpuGraphs npz files (SPEC §3).

``discover(root)`` lists graph files in the Kaggle layout; ``load_graph(path)`` returns a
:class:`Graph` whose large arrays may be memory-mapped (see :mod:`features.cache`).

Conventions kept from the npz files: ``edge_index`` rows are ``[consumer, producer]``;
``node_splits`` is always returned 1-D; integer arrays are int64.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np

from features.collections import COLLECTIONS, SPLITS, Collection

TILE_KEYS = ("node_feat", "node_opcode", "edge_index", "config_feat", "config_runtime",
             "config_runtime_normalizers")
LAYOUT_KEYS = ("node_feat", "node_opcode", "edge_index", "node_config_ids", "node_config_feat",
               "config_runtime", "node_splits")
NODE_FEAT_DIM = 140
TILE_CONFIG_DIM = 24
LAYOUT_CONFIG_DIM = 18


@dataclass(frozen=True)
class GraphFile:
    """One graph file found under a data root."""

    collection: Collection
    split: str
    stem: str
    path: Path

    @property
    def id(self) -> str:
        """Submission ID, e.g. ``layout:xla:random:unet_3d``."""
        return self.collection.submission_id(self.stem)


@dataclass
class Graph:
    """Arrays of one graph. Large arrays may be ``np.memmap`` (read-only)."""

    node_feat: np.ndarray  # (n, 140) float32
    node_opcode: np.ndarray  # (n,) int64
    edge_index: np.ndarray  # (m, 2) int64, [consumer, producer]
    config_runtime: np.ndarray  # (c,) int64 (zeros in test)
    node_splits: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # (k,)
    config_feat: np.ndarray | None = None  # tile: (c, 24) float32
    config_runtime_normalizers: np.ndarray | None = None  # tile: (c,)
    node_config_ids: np.ndarray | None = None  # layout: (nc,)
    node_config_feat: np.ndarray | None = None  # layout: (c, nc, 18), float32 or int8 (cache)
    path: Path | None = None

    @property
    def is_tile(self) -> bool:
        return self.config_feat is not None

    @property
    def num_nodes(self) -> int:
        return int(self.node_feat.shape[0])

    @property
    def num_configs(self) -> int:
        return int(self.config_runtime.shape[0])

    def target(self) -> np.ndarray:
        """What is ranked (lower is faster): runtime / normalizer for tile, runtime for layout."""
        rt = np.asarray(self.config_runtime, dtype=np.float64)
        if self.config_runtime_normalizers is not None:
            norm = np.asarray(self.config_runtime_normalizers, dtype=np.float64)
            return rt / np.where(norm == 0, 1.0, norm)
        return rt


def discover(root: str | os.PathLike, collections: Iterable[Collection] | None = None,
             splits: Iterable[str] = SPLITS) -> list[GraphFile]:
    """All ``*.npz`` graph files under ``root`` (Kaggle layout), sorted by collection/split/stem."""
    found: list[GraphFile] = []
    for coll in collections or COLLECTIONS:
        for split in splits:
            d = coll.split_dir(root, split)
            if d.is_dir():
                found.extend(GraphFile(coll, split, p.stem, p) for p in sorted(d.glob("*.npz")))
    return found


def _as_1d_int(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).reshape(-1).astype(np.int64, copy=False)


def graph_from_arrays(arrays: dict[str, np.ndarray], path: Path | None = None) -> Graph:
    """Build a :class:`Graph` from a mapping of npz arrays, normalising shapes and int dtypes."""
    is_tile = "config_feat" in arrays
    g = Graph(
        node_feat=arrays["node_feat"],
        node_opcode=_as_1d_int(arrays["node_opcode"]),
        edge_index=np.asarray(arrays["edge_index"]).astype(np.int64, copy=False).reshape(-1, 2),
        config_runtime=_as_1d_int(arrays["config_runtime"]),
        node_splits=_as_1d_int(arrays["node_splits"]) if "node_splits" in arrays
        else np.zeros(0, np.int64),
        path=path,
    )
    if is_tile:
        g.config_feat = arrays["config_feat"]
        g.config_runtime_normalizers = _as_1d_int(arrays["config_runtime_normalizers"])
    else:
        g.node_config_ids = _as_1d_int(arrays["node_config_ids"])
        g.node_config_feat = arrays["node_config_feat"]
    return g


def load_npz(path: str | os.PathLike) -> Graph:
    """Load a graph straight from its npz (everything in RAM). Prefer :func:`load_graph`."""
    path = Path(path)
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    return graph_from_arrays(arrays, path)


def load_graph(path: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> Graph:
    """Load a graph; with ``cache_dir`` the arrays come memory-mapped from the on-disk cache."""
    if cache_dir is None:
        return load_npz(path)
    from features.cache import load_cached

    return load_cached(path, cache_dir)


def read_hidden_runtimes(root: str | os.PathLike) -> dict[str, np.ndarray] | None:
    """True test targets of a generated dataset, by submission ID (None when the root has none).

    Values are what is ranked: runtime/normalizer for tile, runtime for layout (float64).
    Kaggle data never has them; the sample generator writes them apart from the npz files.
    """
    from features.collections import hidden_runtimes_path

    path = hidden_runtimes_path(root)
    if not path.is_file():
        return None
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k].astype(np.float64) for k in data.files}
