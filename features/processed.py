"""The on-disk format the feature pipeline writes and both rankers read.

Layout of a feature directory (``FEATURES`` = ``<work>/features`` by default)::

    FEATURES/<collection-slug>/
        build.json                       # config + git SHA + versions of the build
        norm.npz                         # node-feature normalisation stats (fitted on train only)
        graphs/<split>/<stem>/           # one ProcessedGraph, one .npy per array
            meta.json
            node_feat.npy  node_opcode.npy  edge_index.npy  orig_node_ids.npy
            [config_node_pos.npy]  [target.npy]  config_index.npy  [config_graph.npy]
            tile:   config_feat.npy                       (c, Ft) float32
            layout: config_codes.npy  config_table.npy   (c, nc) codes into (t, 18) int8 vectors
                    layout_context.npz   (features.tabular.LayoutContext tables)
        tabular/<split>.parquet          # LightGBM rows: graph, config, target, f_* features

Open files stay bounded whatever the number of graphs: :func:`load_processed` reads the small
arrays into RAM and leaves ``config_feat`` lazy, memory-mapped on access through one process-wide
LRU of at most :data:`MAX_OPEN_MAPS` maps (``TPURANK_MAX_OPEN_MAPS``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import numpy as np

from tpurank.atomic import save_npz, temp_sibling, write_json
from tpurank.collections import Collection, get_collection
from features.configcodes import CodedConfigs, encode_array
from features.io import _read_npy_header

# Version of this on-disk format, part of every graph's cache key (features.tasks): 2 added
# layout_context.npz, 3 config_graph.npy, 4 the context's padding tables, so entries written
# before are rebuilt rather than read without them.
FORMAT_VERSION = 4
#: the arrays stored as plain .npy files (config_feat: codes + table, or lazy)
SMALL_ARRAYS = ("node_feat", "node_opcode", "edge_index", "orig_node_ids", "config_node_pos", "target",
                "config_index", "config_graph")
MAX_OPEN_MAPS = int(os.environ.get("TPURANK_MAX_OPEN_MAPS", "32"))
_OPEN_MAPS: "OrderedDict[str, np.ndarray]" = OrderedDict()


def _mapped(path: str) -> np.ndarray:
    """The memory map of ``path`` from the process-wide LRU (opened, and the least recently
    used one closed, as needed)."""
    mm = _OPEN_MAPS.get(path)
    if mm is not None:
        _OPEN_MAPS.move_to_end(path)
        return mm
    mm = np.load(path, mmap_mode="r", allow_pickle=False)
    _OPEN_MAPS[path] = mm
    while len(_OPEN_MAPS) > max(1, MAX_OPEN_MAPS):
        _OPEN_MAPS.popitem(last=False)  # its mmap (and descriptor) closes with the last reference
    return mm


class LazyNpz(Mapping):
    """The arrays of a small ``.npz`` (name -> ndarray), read on first access and then kept; the
    file is closed at once. Graphs whose consumer never asks for them cost no read and no RAM."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = str(path)

    @cached_property
    def _arrays(self) -> dict[str, np.ndarray]:
        with np.load(self.path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}

    def __getitem__(self, key: str) -> np.ndarray:
        return self._arrays[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)

    def __repr__(self) -> str:
        return f"LazyNpz({self.path!r})"


class LazyNpy:
    """A read-only ``.npy`` whose data is memory-mapped only while it is being read.

    ``shape``/``dtype`` come from the header; ``x[idx]`` returns a copy (never a view that would
    keep the map, and its descriptor, alive).
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = str(path)
        with open(self.path, "rb") as fp:
            shape, _, dtype = _read_npy_header(fp)
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, idx: Any) -> np.ndarray:
        return np.array(_mapped(self.path)[idx])

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self[...]
        return out if dtype is None else out.astype(dtype)

    def __repr__(self) -> str:
        return f"LazyNpy({self.path!r}, shape={self.shape}, dtype={self.dtype})"


@dataclass
class ProcessedGraph:
    """One featurized (and, for layout, pruned) graph ready for a model (docs/features.md, "What
    the models get"). A loaded graph's ``config_feat`` is an array-like (``shape``,
    ``config_feat[idx]`` -> ndarray: :class:`LazyNpy` or :class:`~features.configcodes.CodedConfigs`;
    ``np.asarray`` for the whole array), its ``layout_context`` a :class:`LazyNpz` read on first use."""

    collection: str
    split: str
    stem: str
    node_feat: np.ndarray  # (n, F) float32, engineered and normalised
    node_opcode: np.ndarray  # (n,) int64 opcode ids (for embeddings)
    edge_index: np.ndarray  # (2, m) int64, PyG: source = producer (operand), target = consumer
    orig_node_ids: np.ndarray  # (n,) int64 node ids in the source npz
    config_feat: np.ndarray  # tile (c, Ft) float32; layout (c, nc, 18) int8, values -1..5
    config_index: np.ndarray  # (c,) int64 source row of each config (train: the first of duplicates)
    config_node_pos: np.ndarray | None = None  # layout: (nc,) positions of the configurable nodes
    target: np.ndarray | None = None  # (c,) float64 to rank (tile: runtime/normalizer); None for test
    meta: dict[str, Any] = field(default_factory=dict)
    #: layout: the arrays of the graph's features.tabular.LayoutContext (small per-node tables)
    layout_context: Mapping[str, np.ndarray] | None = None
    #: layout: (E, 6) features.configgraph links (ordinals of config_node_pos, inner nodes as positions)
    config_graph: np.ndarray | None = None

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


def save_processed(g: ProcessedGraph, out_dir: str | os.PathLike) -> None:
    """Write ``g`` as a directory of .npy files, atomically (temp dir + rename). Layout configs
    are written as codes + table (an int8 array is encoded first)."""
    out_dir = Path(out_dir)
    tmp = temp_sibling(out_dir)
    shutil.rmtree(tmp, ignore_errors=True)  # a leftover of this process; mkdir fails if it stays
    tmp.mkdir(parents=True)
    for name in SMALL_ARRAYS:
        arr = getattr(g, name)
        if arr is not None:
            np.save(tmp / f"{name}.npy", np.ascontiguousarray(arr), allow_pickle=False)
    cfg = g.config_feat
    if g.is_tile:
        np.save(tmp / "config_feat.npy", np.ascontiguousarray(np.asarray(cfg)), allow_pickle=False)
    else:
        coded = cfg if isinstance(cfg, CodedConfigs) else encode_array(cfg)
        np.save(tmp / "config_codes.npy", np.ascontiguousarray(np.asarray(coded.codes)),
                allow_pickle=False)
        np.save(tmp / "config_table.npy", coded.table, allow_pickle=False)
        if g.layout_context is not None:
            np.savez(tmp / "layout_context.npz", **g.layout_context)
    meta = dict(g.meta, collection=g.collection, split=g.split, stem=g.stem)
    write_json(tmp / "meta.json", meta)
    _OPEN_MAPS.clear()  # no stale map of a replaced entry
    shutil.rmtree(out_dir, ignore_errors=True)  # the replaced entry; os.replace fails if it stays
    os.replace(tmp, out_dir)


def load_processed(in_dir: str | os.PathLike) -> ProcessedGraph:
    """Read a graph written by :func:`save_processed`: small arrays into RAM (files closed),
    ``config_feat`` lazy (memory maps through the bounded LRU, opened on access)."""
    in_dir = Path(in_dir)
    meta_file = in_dir / "meta.json"
    if not meta_file.is_file():
        raise FileNotFoundError(f"{in_dir}: not a processed graph (no meta.json); rebuild features")
    meta = json.loads(meta_file.read_text())
    arrays: dict[str, Any] = {}
    for name in SMALL_ARRAYS:
        p = in_dir / f"{name}.npy"
        arrays[name] = np.load(p, allow_pickle=False) if p.is_file() else None
    codes, feat = in_dir / "config_codes.npy", in_dir / "config_feat.npy"
    if codes.is_file():
        table = np.load(in_dir / "config_table.npy", allow_pickle=False)
        arrays["config_feat"] = CodedConfigs(LazyNpy(codes), table)
    elif feat.is_file():
        arrays["config_feat"] = LazyNpy(feat)
    else:
        raise FileNotFoundError(f"{in_dir}: no config_feat.npy / config_codes.npy; rebuild features")
    ctx_file = in_dir / "layout_context.npz"
    if ctx_file.is_file():  # read only by a consumer that uses it (the GNN's layout head)
        arrays["layout_context"] = LazyNpz(ctx_file)
    return ProcessedGraph(collection=meta["collection"], split=meta["split"], stem=meta["stem"],
                          meta=meta, **arrays)  # type: ignore[arg-type]


def iter_processed(features_dir: str | os.PathLike, collection: Collection, split: str
                   ) -> Iterator[ProcessedGraph]:
    """All processed graphs of one collection/split, sorted by stem (O(1) open files each)."""
    base = Path(features_dir) / collection.slug / "graphs" / split  # no graphs when absent
    for d in sorted(p for p in base.glob("*") if p.is_dir() and not p.name.startswith(".")):
        yield load_processed(d)


# ---- norm.npz: normalisation stats of the node (and tile config) features, fitted on train only ----
NORM_EPS = 1e-6


@dataclass
class NormStats:
    """Per-column mean/std (train only); ``config_*`` only for tile collections."""

    node_mean: np.ndarray
    node_std: np.ndarray
    node_names: list[str]
    config_mean: np.ndarray | None = None
    config_std: np.ndarray | None = None

    def key(self) -> str:
        h = hashlib.sha256()
        for a in (self.node_mean, self.node_std, self.config_mean, self.config_std):
            if a is not None:
                h.update(np.ascontiguousarray(a, np.float64).tobytes())
        h.update("|".join(self.node_names).encode())
        return h.hexdigest()[:16]

    def save(self, path: str | os.PathLike) -> None:
        arrays = {"node_mean": self.node_mean, "node_std": self.node_std,
                  "node_names": np.array(self.node_names)}
        if self.config_mean is not None:
            arrays.update(config_mean=self.config_mean, config_std=self.config_std)
        save_npz(path, **arrays)


def load_norm(features_dir: str | os.PathLike, collection: Collection | str) -> NormStats:
    """The normalisation stats saved by a build (``FEATURES/<slug>/norm.npz``)."""
    coll = get_collection(collection) if isinstance(collection, str) else collection
    path = norm_path(features_dir, coll)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no norm stats; run `python -m features build` with train")
    with np.load(path, allow_pickle=False) as d:
        return NormStats(d["node_mean"], d["node_std"], [str(s) for s in d["node_names"]],
                         d["config_mean"] if "config_mean" in d.files else None,
                         d["config_std"] if "config_std" in d.files else None)


def _moments(x: np.ndarray) -> np.ndarray:
    """(3, F): count, sum, sum of squares (float64)."""
    x = np.asarray(x, np.float64)
    return np.stack([np.full(x.shape[1], x.shape[0], np.float64), x.sum(0), (x * x).sum(0)])


def _fit(moments: Iterable[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    total = sum(moments)
    count = np.maximum(total[0], 1.0)
    mean = total[1] / count
    std = np.sqrt(np.maximum(total[2] / count - mean ** 2, 0.0))
    return mean.astype(np.float32), np.where(std < NORM_EPS, 1.0, std).astype(np.float32)


def _apply(x: np.ndarray, mean: np.ndarray | None, std: np.ndarray | None) -> np.ndarray:
    if mean is None or std is None:
        return x
    if x.shape[1] != len(mean):
        raise ValueError(f"norm stats have {len(mean)} columns, features {x.shape[1]}: "
                         "norm.npz is from a build with other transform parameters; rebuild")
    return ((x - mean) / std).astype(np.float32)
