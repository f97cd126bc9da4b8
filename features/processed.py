"""The on-disk format the feature pipeline writes and both rankers read.

Layout of a feature directory (``FEATURES`` = ``<work>/features`` by default)::

    FEATURES/<collection-slug>/
        build.json                       # config + git SHA + versions of the build
        norm.npz                         # node-feature normalisation stats (fitted on train only)
        graphs/<split>/<stem>/           # one ProcessedGraph, one .npy per array (memory-mappable)
            meta.json
            node_feat.npy  node_opcode.npy  edge_index.npy  orig_node_ids.npy
            config_feat.npy  [config_node_pos.npy]  [target.npy]  config_index.npy
        tabular/<split>.parquet          # LightGBM rows: graph, config, target, f_* features

Array conventions (see :class:`ProcessedGraph`).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from tpurank.atomic import write_json
from tpurank.collections import Collection

ARRAYS = ("node_feat", "node_opcode", "edge_index", "orig_node_ids", "config_feat",
          "config_node_pos", "target", "config_index")


@dataclass
class ProcessedGraph:
    """One featurized (and, for layout, pruned) graph ready for a model.

    - ``node_feat``: (n, F) float32, engineered and normalised node features.
    - ``node_opcode``: (n,) int64 opcode ids (for embeddings).
    - ``edge_index``: (2, m) int64, PyG convention **source = producer (operand), target = consumer**.
    - ``orig_node_ids``: (n,) int64 node ids in the source npz.
    - ``config_feat``: tile (c, Ft) float32; layout (c, nc, 18) int8 (values -1..5), may be a memmap.
    - ``config_node_pos``: layout only, (nc,) int64 positions in this graph of the configurable nodes
      (same order as the last-but-one axis of ``config_feat``).
    - ``target``: (c,) float64 runtime to rank (tile: runtime/normalizer), None for test.
    - ``config_index``: (c,) int64 index of each row in the source file's configs (train rows may
      be deduplicated: the index of the first occurrence).
    """

    collection: str
    split: str
    stem: str
    node_feat: np.ndarray
    node_opcode: np.ndarray
    edge_index: np.ndarray
    orig_node_ids: np.ndarray
    config_feat: np.ndarray
    config_index: np.ndarray
    config_node_pos: np.ndarray | None = None
    target: np.ndarray | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def num_nodes(self) -> int:
        return int(self.node_feat.shape[0])

    @property
    def num_configs(self) -> int:
        return int(self.config_feat.shape[0])

    @property
    def is_tile(self) -> bool:
        return self.config_node_pos is None


def graph_dir(features_dir: str | os.PathLike, collection: Collection, split: str, stem: str) -> Path:
    return Path(features_dir) / collection.slug / "graphs" / split / stem


def tabular_path(features_dir: str | os.PathLike, collection: Collection, split: str) -> Path:
    return Path(features_dir) / collection.slug / "tabular" / f"{split}.parquet"


def norm_path(features_dir: str | os.PathLike, collection: Collection) -> Path:
    return Path(features_dir) / collection.slug / "norm.npz"


def save_processed(g: ProcessedGraph, out_dir: str | os.PathLike,
                   prewritten: dict[str, str | os.PathLike] | None = None) -> None:
    """Write ``g`` as a directory of .npy files, atomically (temp dir + rename).

    ``prewritten`` maps array names to ``.npy`` files already on disk (e.g. a large memmap filled
    chunk by chunk, on the same file system): they are moved in instead of copied.
    """
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(f".{out_dir.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    prewritten = dict(prewritten or {})
    for name in ARRAYS:
        if name in prewritten:
            os.replace(prewritten[name], tmp / f"{name}.npy")
            continue
        arr = getattr(g, name)
        if arr is not None:
            np.save(tmp / f"{name}.npy", np.ascontiguousarray(arr), allow_pickle=False)
    meta = dict(g.meta, collection=g.collection, split=g.split, stem=g.stem)
    write_json(tmp / "meta.json", meta)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    os.replace(tmp, out_dir)


def load_processed(in_dir: str | os.PathLike, mmap: bool = True) -> ProcessedGraph:
    """Read a graph written by :func:`save_processed`; large arrays memory-mapped by default."""
    in_dir = Path(in_dir)
    meta_file = in_dir / "meta.json"
    if not meta_file.is_file():
        raise FileNotFoundError(f"{in_dir}: not a processed graph (no meta.json); rebuild features")
    meta = json.loads(meta_file.read_text())
    arrays: dict[str, np.ndarray | None] = {}
    for name in ARRAYS:
        p = in_dir / f"{name}.npy"
        arrays[name] = np.load(p, mmap_mode="r" if mmap else None) if p.is_file() else None
    return ProcessedGraph(collection=meta["collection"], split=meta["split"], stem=meta["stem"],
                          meta=meta, **arrays)  # type: ignore[arg-type]


def iter_processed(features_dir: str | os.PathLike, collection: Collection, split: str,
                   mmap: bool = True) -> Iterator[ProcessedGraph]:
    """All processed graphs of one collection/split, sorted by stem."""
    base = Path(features_dir) / collection.slug / "graphs" / split
    if not base.is_dir():
        return
    for d in sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")):
        yield load_processed(d, mmap=mmap)
