"""``python -m features build``: prune, featurize and cache every graph; write tabular parquet.

Pipeline per collection (files in parallel over a process pool, tqdm progress):

1. **norm pass** — train graphs only: node features (and tile config features) are computed
   unnormalised and their per-column sums are cached per graph; ``norm.npz`` = mean/std fitted
   on train only.
2. **graph pass** — every graph: :func:`process_graph` (prune + rewire, -1 re-padding,
   engineered + dot-general features, normalisation, config dedup, int8 layout configs), saved
   with :func:`features.processed.save_processed`; its tabular rows go to a per-graph parquet part.
3. **tabular** — parts concatenated into ``tabular/<split>.parquet``.

Caching: each graph's outputs are keyed by the input identity (path, size, mtime), the transform
parameters, the package version and the norm stats; a ``done/<split>/<stem>.json`` marker
holding the key is written *last*, so a killed run leaves no entry that looks complete and a
rerun only redoes what is missing or stale.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
from tqdm import tqdm

from tpurank import __version__
from tpurank.atomic import save_npz, write_json
from tpurank.collections import Collection, get_collection, parse_collections, pb_dir, npz_dir
from tpurank.config import StageConfig, parse_config, save_run_config
from features.dotdims import DotDims
from features.configcodes import CodedConfigs, encode_array, load_coded
from features.io import Graph, GraphFile, discover
from features.processed import (ProcessedGraph, graph_dir, norm_path, save_processed,
                                tabular_path)
from features import tabular as tab
from features import transforms as tf

NORM_EPS = 1e-6


@dataclass
class BuildConfig(StageConfig):
    """Feature build: pruning, -1 padding, engineered and dot-general features, tabular rows."""

    splits: str = "train,valid,test"  # comma list of the splits to build
    out: str = ""  # features directory; default WORK/features
    jobs: int = 0  # worker processes; 0 = all cores
    prune_hops: int = 1  # k of the k-hop neighbourhood kept around configurable nodes; -1 = no pruning
    rewire: bool = True  # keep an edge between kept nodes joined only through removed nodes
    rewire_max_sources: int = 8  # rewired producers per removed path, nearest first; 0 = unlimited
    pad_minus_one: bool = True  # -1 beyond the rank in per-dimension blocks (node and tile config)
    engineered: bool = True  # log transforms, lane (% 128) features, degree and depth
    dot_features: bool = True  # dot-general dims and dot/conv operand shapes
    exact_dot: bool = True  # use ROOT/pb/<rel>.pb exact dot dims when present
    dedup: bool = True  # average the runtimes of identical train configs
    max_train_configs: int = 0  # random subset of (deduplicated) train configs per graph; 0 = all
    tabular: bool = True  # also write the LightGBM parquet
    tabular_max_train_rows: int = 2000  # LightGBM train rows per graph (random subset); 0 = all. Valid/test: all
    heuristic: bool = True  # tabular f_heur_cost / f_heur_rank (features.heuristic padding cost)
    config_chunk: int = 2048  # configs processed at a time (memory bound)
    use_cache: bool = False  # read npz through WORK/cache (a second, int8 copy: off by default)
    skip_bad_report: str = ""  # validate report: skip the files it lists as bad
    progress: bool = True  # progress bars on stderr

    PRESETS = {"quick": {"max_train_configs": 4000, "tabular_max_train_rows": 2000},
               "full": {"max_train_configs": 0, "tabular_max_train_rows": 8000}}

    def transform_params(self) -> dict[str, Any]:
        """What changes the outputs (part of every cache key)."""
        keys = ("prune_hops", "rewire", "rewire_max_sources", "pad_minus_one", "engineered",
                "dot_features", "exact_dot", "dedup", "max_train_configs", "tabular", "heuristic",
                "tabular_max_train_rows")
        params = {k: getattr(self, k) for k in keys}
        if self.max_train_configs or self.tabular_max_train_rows:
            params["seed"] = self.seed
        return params


# ---------------------------------------------------------------------------------------------
# norm stats
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


# ---------------------------------------------------------------------------------------------
# node stage
@dataclass
class NodeStage:
    """Pruned graph with unnormalised node features."""

    node_feat: np.ndarray
    names: list[str]
    node_opcode: np.ndarray
    edge_index: np.ndarray  # (2, m) PyG
    orig_node_ids: np.ndarray
    config_node_pos: np.ndarray | None
    stats: dict[str, Any] = field(default_factory=dict)


def node_feature_names(cfg: BuildConfig) -> list[str]:
    """Column names of ``ProcessedGraph.node_feat`` for these transform parameters."""
    names = [f"raw_{i}" for i in range(140)]
    if cfg.engineered:
        names += list(tf.LANE_NAMES)
    if cfg.dot_features:
        names += list(tf.DOT_CONV_NAMES)
    if cfg.engineered:
        names += list(tf.STRUCTURE_NAMES)
    return names + ["is_configurable"]


def node_stage(graph: Graph, cfg: BuildConfig, exact_dot: dict[int, DotDims] | None = None) -> NodeStage:
    """Transforms on the nodes: features on the full graph, then pruning (layout only)."""
    nf = np.asarray(graph.node_feat, np.float32)
    op = np.asarray(graph.node_opcode, np.int64)
    n = graph.num_nodes
    base = tf.repad_node_feat(nf, op, graph.edge_index) if cfg.pad_minus_one else nf.copy()
    blocks = [tf.log_transform_columns(base) if cfg.engineered else base]
    if cfg.engineered:
        blocks.append(tf.lane_features(tf.repad_node_feat(nf, op, graph.edge_index)
                                       if not cfg.pad_minus_one else base))
    if cfg.dot_features:
        blocks.append(tf.dot_conv_features(nf, op, graph.edge_index, exact_dot))
    if cfg.engineered:
        blocks.append(tf.structure_features(n, graph.edge_index))
    is_cfg = np.zeros((n, 1), np.float32)
    cfg_ids = graph.node_config_ids
    if cfg_ids is not None:
        is_cfg[np.asarray(cfg_ids), 0] = 1.0
    blocks.append(is_cfg)
    feat = np.concatenate(blocks, axis=1)
    if graph.is_tile or cfg_ids is None:
        ei = np.asarray(graph.edge_index, np.int64).reshape(-1, 2)[:, ::-1].T.copy()
        return NodeStage(feat, node_feature_names(cfg), op, ei, np.arange(n, dtype=np.int64), None,
                         {"nodes": n, "edges": int(ei.shape[1]), "kept_nodes": n,
                          "kept_edges": int(ei.shape[1]), "rewired": 0})
    pr = tf.prune_graph(n, graph.edge_index, np.asarray(cfg_ids), cfg.prune_hops, cfg.rewire,
                        cfg.rewire_max_sources)
    stats = {"nodes": n, "edges": pr.num_orig_edges, "kept_nodes": int(len(pr.kept)),
             "kept_edges": int(pr.edge_index_pyg.shape[1]), "rewired": pr.num_rewired}
    return NodeStage(feat[pr.kept], node_feature_names(cfg), op[pr.kept], pr.edge_index_pyg,
                     pr.kept.astype(np.int64), pr.positions(np.asarray(cfg_ids)), stats)


# ---------------------------------------------------------------------------------------------
# config stage
@dataclass
class ConfigSelection:
    """Which source configs are kept (sorted ``index``) and their (averaged) targets."""

    index: np.ndarray
    target: np.ndarray | None
    num_source: int
    num_duplicates: int = 0


def _config_chunks(graph: Graph, rows: np.ndarray, chunk: int) -> Iterable[tuple[np.ndarray, np.ndarray]]:
    """``(rows_chunk, configs)`` for layout graphs, int8, ``chunk`` configs at a time."""
    src = graph.node_config_feat
    for start in range(0, len(rows), chunk):
        idx = rows[start:start + chunk]
        block = src[idx[0]:idx[-1] + 1] if len(idx) and idx[-1] - idx[0] + 1 == len(idx) else src[idx]
        yield idx, np.asarray(block).astype(np.int8, copy=False)


def select_configs(graph: Graph, split: str, cfg: BuildConfig, seed_key: str = "") -> ConfigSelection:
    """Train: deduplicate identical configs (averaging runtimes) and optionally subsample.
    Valid/test: every config, in the source order."""
    c = graph.num_configs
    all_rows = np.arange(c, dtype=np.int64)
    target = None if split == "test" else graph.target()
    if split != "train":
        return ConfigSelection(all_rows, target, c)
    index, dups = all_rows, 0
    if cfg.dedup and c > 1:
        if graph.is_tile:
            hashes = tf.config_row_hashes(np.asarray(graph.config_feat, np.float32))
        else:
            hashes = np.concatenate([tf.config_row_hashes(block)
                                     for _, block in _config_chunks(graph, all_rows, cfg.config_chunk)])
        index, inverse = tf.dedup_groups(hashes)
        target = tf.group_mean(target, inverse, len(index))
        dups = c - len(index)
    else:
        target = np.asarray(target, np.float64)
    if cfg.max_train_configs and len(index) > cfg.max_train_configs:
        seed = int.from_bytes(hashlib.sha256(f"{cfg.seed}:{seed_key}".encode()).digest()[:8], "little")
        keep = np.sort(np.random.default_rng(seed).choice(len(index), cfg.max_train_configs, replace=False))
        index, target = index[keep], target[keep]
    return ConfigSelection(index, target, c, dups)


def tile_config_feat(graph: Graph, rows: np.ndarray, cfg: BuildConfig) -> np.ndarray:
    """Tile config features for the GNN: signed-log of :func:`tab.tile_config_features`."""
    feats = tab.tile_config_features(np.asarray(graph.config_feat)[rows], tab.kernel_output_shape(graph),
                                     cfg.pad_minus_one)
    return tf.signed_log1p(feats) if cfg.engineered else feats


TILE_CONFIG_NAMES = tuple(tab.tile_feature_names()[len(tab.GRAPH_FEATURES):])


# ---------------------------------------------------------------------------------------------
# single graph
def process_graph(graph: Graph, collection: Collection | str, split: str, stem: str,
                  norm: NormStats | None, cfg: BuildConfig, exact_dot: dict[int, DotDims] | None = None,
                  *, config_out: Path | None = None,
                  tabular_sink: Callable[[np.ndarray, np.ndarray], None] | None = None,
                  stage: NodeStage | None = None) -> ProcessedGraph:
    """Featurize one graph (e.g. a brand-new program for ``models.gnn rank --hlo``).

    ``norm`` = :func:`load_norm` of the training build (None: unnormalised). ``config_out``: write
    layout configs chunk by chunk into this ``.npy`` (memory-mapped result) instead of RAM.
    ``tabular_sink(config_index_chunk, feature_chunk)`` receives tabular rows chunk by chunk.
    """
    coll = get_collection(collection) if isinstance(collection, str) else collection
    ns = stage if stage is not None else node_stage(graph, cfg, exact_dot if cfg.dot_features else None)
    node_feat = _apply(ns.node_feat, *(norm.node_mean, norm.node_std) if norm else (None, None))
    sel = select_configs(graph, split, cfg, seed_key=f"{coll.slug}/{stem}")
    meta: dict[str, Any] = {"node_feature_names": ns.names, "prune": ns.stats,
                            "transform_params": cfg.transform_params(), "version": __version__,
                            "num_source_configs": sel.num_source, "num_duplicates": sel.num_duplicates}
    if tabular_sink is not None:
        meta["tabular_feature_names"] = tab.tabular_feature_names(graph.is_tile, cfg.heuristic)
        if cfg.heuristic:
            tabular_sink = _with_heuristic(tabular_sink, tab.heuristic_table(graph, cfg.config_chunk))
    if graph.is_tile:
        config_feat = tile_config_feat(graph, sel.index, cfg)
        if norm is not None and norm.config_mean is not None:
            config_feat = _apply(config_feat, norm.config_mean, norm.config_std)
        meta["config_feature_names"] = list(TILE_CONFIG_NAMES)
        if tabular_sink is not None:
            tabular_sink(sel.index, tab.tile_tabular_features(graph, sel.index, cfg.pad_minus_one))
    else:
        config_feat = _layout_configs(graph, sel.index, cfg, config_out, tabular_sink, exact_dot)
        meta["config_feature_names"] = ["out_layout_0..5", "in_layout_0..5", "kernel_layout_0..5"]
    return ProcessedGraph(collection=coll.name, split=split, stem=stem, node_feat=node_feat,
                          node_opcode=ns.node_opcode, edge_index=ns.edge_index,
                          orig_node_ids=ns.orig_node_ids, config_feat=config_feat,
                          config_index=sel.index, config_node_pos=ns.config_node_pos,
                          target=sel.target, meta=meta)


def _with_heuristic(sink: Callable[[np.ndarray, np.ndarray], None],
                    table: np.ndarray) -> Callable[[np.ndarray, np.ndarray], None]:
    """``sink`` with the heuristic columns of each chunk's source configs appended."""
    def append(idx: np.ndarray, feats: np.ndarray) -> None:
        sink(idx, np.concatenate([feats, table[idx]], axis=1))
    return append


def _layout_configs(graph: Graph, rows: np.ndarray, cfg: BuildConfig, config_out: Path | None,
                    tabular_sink: Callable[[np.ndarray, np.ndarray], None] | None,
                    exact_dot: dict[int, DotDims] | None = None) -> CodedConfigs:
    """Layout configs of ``rows`` as codes (:mod:`features.configcodes`), chunk by chunk,
    feeding the tabular rows of each chunk to ``tabular_sink``. ``config_out`` is accepted for
    compatibility and ignored: the codes are small enough for RAM (c x nc x 1-2 bytes)."""
    del config_out
    ctx = None
    if tabular_sink is not None:
        dots = tf.dot_dims_for_graph(np.asarray(graph.node_feat), graph.node_opcode, graph.edge_index,
                                     exact_dot) if cfg.dot_features else None
        ctx = tab.layout_context(graph, dots, cfg.rewire_max_sources)
    src = graph.node_config_feat
    if isinstance(src, CodedConfigs):  # streamed from the npz: keep the table, slice the codes
        coded = CodedConfigs(np.asarray(src.codes)[rows], src.table)
    else:
        coded = encode_array(_RowsView(graph, rows, cfg.config_chunk), cfg.config_chunk)
    if ctx is not None:
        for idx, block in _config_chunks(graph, rows, cfg.config_chunk):
            tabular_sink(idx, tab.layout_chunk_features(ctx, block))
    return coded


class _RowsView:
    """Rows ``rows`` of a graph's layout configs as an int8 array-like (for :func:`encode_array`)."""

    def __init__(self, graph: Graph, rows: np.ndarray, chunk: int) -> None:
        self.graph, self.rows, self.chunk = graph, rows, chunk
        self.shape = (len(rows),) + tuple(graph.node_config_feat.shape[1:])

    def __getitem__(self, sl: slice) -> np.ndarray:
        idx = self.rows[sl]
        return next(iter(_config_chunks(self.graph, idx, max(1, len(idx)))))[1] if len(idx) else \
            np.zeros((0,) + self.shape[1:], np.int8)


# ---------------------------------------------------------------------------------------------
# build: tasks, cache keys, workers
def _identity(path: Path) -> dict[str, Any]:
    st = path.stat()
    return {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


def _pb_path(data: str, gf: GraphFile) -> Path:
    rel = gf.path.relative_to(npz_dir(data))
    return pb_dir(data) / rel.with_suffix(".pb")


def _exact_dims(cfg: BuildConfig, gf: GraphFile) -> tuple[dict[int, DotDims] | None, dict[str, Any] | None]:
    """Exact dot dims from the raw proto when present (and the HLO reader is available)."""
    if not (cfg.exact_dot and cfg.dot_features) or gf.collection.is_tile:
        return None, None
    pb = _pb_path(cfg.data, gf)
    if not pb.is_file():
        return None, None
    try:
        from features.hlo import exact_dot_dims
    except ImportError:
        return None, None
    return exact_dot_dims(pb), _identity(pb)


def _load(cfg: BuildConfig, path: Path, configs: bool = True) -> Graph:
    """The graph, layout configs streamed out of the npz into codes (or, with ``use_cache``,
    memory-mapped from the int8 ``WORK/cache`` copy, made on first use). ``configs=False``:
    nodes only (the norm pass), the big member is not even decompressed."""
    try:
        if cfg.use_cache:
            from features.cache import load_cached

            return load_cached(path, Path(cfg.work) / "cache")
        return load_coded(path, cfg.config_chunk, configs=configs)
    except Exception as exc:  # the message must name the file
        if str(path) in str(exc):
            raise
        raise ValueError(f"{path}: cannot load graph: {type(exc).__name__}: {exc}") from exc


@dataclass(frozen=True)
class Task:
    cfg: BuildConfig
    features_dir: str
    collection: str
    split: str
    stem: str
    path: str
    norm_key: str = ""


def _marker(features_dir: str, coll: Collection, split: str, stem: str, kind: str) -> Path:
    return Path(features_dir) / coll.slug / kind / split / f"{stem}.json"


def _read_marker(path: Path, key: str) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if data.get("key") == key else None


def _norm_key(task: Task) -> tuple[str, Path, Path]:
    cfg, coll = task.cfg, get_collection(task.collection)
    path = Path(task.path)
    pb = _pb_path(cfg.data, GraphFile(coll, task.split, task.stem, path))
    key = _key("norm", _identity(path), _identity(pb) if pb.is_file() and cfg.exact_dot else None,
               cfg.transform_params(), __version__)
    marker = _marker(task.features_dir, coll, task.split, task.stem, "norm_parts")
    return key, marker, marker.with_suffix(".npz")


def _norm_cached(task: Task) -> dict[str, Any] | None:
    key, marker, npz = _norm_key(task)
    if _read_marker(marker, key) and npz.is_file():
        return {"stem": task.stem, "collection": task.collection, "cached": True, "npz": str(npz)}
    return None


def _norm_task(task: Task) -> dict[str, Any]:
    """Train graph -> moments of its (unnormalised) node / tile config features, cached."""
    cached = _norm_cached(task)
    if cached is not None:
        return cached
    cfg, coll = task.cfg, get_collection(task.collection)
    path = Path(task.path)
    gf = GraphFile(coll, task.split, task.stem, path)
    key, marker, npz = _norm_key(task)
    graph = _load(cfg, path, configs=False)
    exact, _ = _exact_dims(cfg, gf)
    ns = node_stage(graph, cfg, exact)
    arrays = {"node": _moments(ns.node_feat)}
    if graph.is_tile:
        arrays["config"] = _moments(tile_config_feat(graph, np.arange(graph.num_configs), cfg))
    _save_stage(task, key, ns)  # the graph pass reuses it: the node stage runs once per graph
    save_npz(npz, **arrays)
    write_json(marker, {"key": key})
    return {"stem": task.stem, "collection": coll.name, "cached": False, "npz": str(npz)}


def _stage_path(task: Task) -> Path:
    coll = get_collection(task.collection)
    return _marker(task.features_dir, coll, task.split, task.stem, "norm_parts").with_suffix(".stage.npz")


def _save_stage(task: Task, key: str, ns: NodeStage) -> None:
    arrays = {"node_feat": ns.node_feat, "node_opcode": ns.node_opcode, "edge_index": ns.edge_index,
              "orig_node_ids": ns.orig_node_ids, "key": np.array(key),
              "stats": np.array(json.dumps(ns.stats))}
    if ns.config_node_pos is not None:
        arrays["config_node_pos"] = ns.config_node_pos
    save_npz(_stage_path(task), **arrays)


def _load_stage(task: Task) -> NodeStage | None:
    """The node stage the norm pass computed for this train graph (None when absent or stale)."""
    path = _stage_path(task)
    if not path.is_file():
        return None
    key = _norm_key(task)[0]
    try:
        with np.load(path, allow_pickle=False) as d:
            if str(d["key"]) != key:
                return None
            return NodeStage(d["node_feat"], node_feature_names(task.cfg), d["node_opcode"],
                             d["edge_index"], d["orig_node_ids"],
                             d["config_node_pos"] if "config_node_pos" in d.files else None,
                             json.loads(str(d["stats"])))
    except (OSError, ValueError, KeyError):
        return None


def _graph_key(task: Task) -> tuple[str, Path, Path, Path]:
    cfg, coll = task.cfg, get_collection(task.collection)
    path = Path(task.path)
    pb = _pb_path(cfg.data, GraphFile(coll, task.split, task.stem, path))
    key = _key("graph", _identity(path), _identity(pb) if pb.is_file() and cfg.exact_dot else None,
               cfg.transform_params(), __version__, task.norm_key)
    return (key, _marker(task.features_dir, coll, task.split, task.stem, "done"),
            graph_dir(task.features_dir, coll, task.split, task.stem),
            part_path(task.features_dir, coll, task.split, task.stem))


def _graph_cached(task: Task) -> dict[str, Any] | None:
    """The summary of an up-to-date graph entry, or None when it must be (re)built."""
    key, marker, out_dir, part = _graph_key(task)
    done = _read_marker(marker, key)
    if done and (out_dir / "meta.json").is_file() and (part.is_file() or not task.cfg.tabular):
        return dict(done["summary"], cached=True)
    return None


def _graph_task(task: Task) -> dict[str, Any]:
    """One graph: processed arrays + tabular part + done marker (written last)."""
    cached = _graph_cached(task)
    if cached is not None:
        return cached
    cfg, coll = task.cfg, get_collection(task.collection)
    path = Path(task.path)
    gf = GraphFile(coll, task.split, task.stem, path)
    key, marker, out_dir, part = _graph_key(task)
    start = time.perf_counter()
    graph = _load(cfg, path)
    exact, _ = _exact_dims(cfg, gf)
    norm = load_norm(task.features_dir, coll) if task.norm_key else None
    frames: list[Any] = []
    names = tab.tabular_feature_names(graph.is_tile, cfg.heuristic)

    def sink(idx: np.ndarray, feats: np.ndarray) -> None:
        frames.append((idx, feats))

    stage = _load_stage(task) if task.split == "train" else None
    pg = process_graph(graph, coll, task.split, task.stem, norm, cfg, exact,
                       tabular_sink=sink if cfg.tabular else None, stage=stage)
    pg.meta["source"] = _identity(path)
    pg.meta["exact_dot"] = exact is not None
    pg.meta["node_stage_reused"] = stage is not None
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    save_processed(pg, out_dir)
    if cfg.tabular:
        idx_all = np.concatenate([f[0] for f in frames]) if frames else np.zeros(0, np.int64)
        feats = np.concatenate([f[1] for f in frames]) if frames else np.zeros((0, len(names)), np.float32)
        target = None if task.split == "test" else pg.target
        if task.split == "train" and cfg.tabular_max_train_rows and len(idx_all) > cfg.tabular_max_train_rows:
            keep = _subsample(len(idx_all), cfg.tabular_max_train_rows, cfg.seed, f"tab/{coll.slug}/{task.stem}")
            idx_all, feats, target = idx_all[keep], feats[keep], target[keep]
        tab.write_parquet(tab.make_frame(task.stem, idx_all, target, feats, names), part)
    summary = dict(pg.meta["prune"], configs=int(len(pg.config_index)),
                   source_configs=int(pg.meta["num_source_configs"]),
                   duplicates=int(pg.meta["num_duplicates"]), stem=task.stem, split=task.split,
                   collection=coll.name, seconds=round(time.perf_counter() - start, 3))
    write_json(marker, {"key": key, "summary": summary})
    _stage_path(task).unlink(missing_ok=True)  # used once: the graph is done
    return dict(summary, cached=False)


def _subsample(n: int, k: int, seed: int, key: str) -> np.ndarray:
    """Sorted ``k`` of ``n`` positions, deterministic per (seed, key)."""
    s = int.from_bytes(hashlib.sha256(f"{seed}:{key}".encode()).digest()[:8], "little")
    return np.sort(np.random.default_rng(s).choice(n, k, replace=False))


def part_path(features_dir: str | os.PathLike, coll: Collection, split: str, stem: str) -> Path:
    return Path(features_dir) / coll.slug / "tabular" / "parts" / split / f"{stem}.parquet"


def _run(fn: Callable[[Task], dict[str, Any]], tasks: list[Task], jobs: int, desc: str,
         progress: bool, probe: Callable[[Task], dict[str, Any] | None] | None = None
         ) -> list[dict[str, Any]]:
    """Run tasks (largest input first) on a process pool with a progress bar; errors name the file."""
    tasks = sorted(tasks, key=lambda t: -Path(t.path).stat().st_size)
    results: list[dict[str, Any]] = []
    if probe is not None:  # cache hits are answered here, without starting workers
        hits = [(t, probe(t)) for t in tasks]
        results = [r for _, r in hits if r is not None]
        tasks = [t for t, r in hits if r is None]
    bar = tqdm(total=len(tasks), desc=desc, unit="graph", disable=not progress or not tasks,
               file=sys.stderr)
    if jobs <= 1 or len(tasks) <= 1:
        for t in tasks:
            results.append(_named(fn, t))
            bar.update()
    else:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
            futures = [pool.submit(_named, fn, t) for t in tasks]
            try:
                for fut in as_completed(futures):
                    results.append(fut.result())
                    bar.update()
            except BaseException:
                for fut in futures:  # fail fast: finished graphs stay cached for the rerun
                    fut.cancel()
                raise
    bar.close()
    return results


def _named(fn: Callable[[Task], dict[str, Any]], task: Task) -> dict[str, Any]:
    """Run ``fn``; any error becomes a picklable ``GraphBuildError`` whose message names the file
    (worker exceptions cross the process boundary; some, like BadGraphError, do not pickle)."""
    try:
        return fn(task)
    except Exception as exc:
        msg = str(exc) if task.path in str(exc) else f"{task.path}: {type(exc).__name__}: {exc}"
        raise GraphBuildError(f"feature build failed: {msg}\n{traceback.format_exc()}") from None


class GraphBuildError(RuntimeError):
    """A graph could not be featurized; the message names the file and the problem."""


def _files(cfg: BuildConfig, colls: list[Collection], splits: list[str]) -> list[GraphFile]:
    files = discover(cfg.data, colls, splits)
    if cfg.skip_bad_report:
        from features.validate_report import load_bad_files

        bad = load_bad_files(cfg.skip_bad_report)
        skipped = [f for f in files if str(f.path.resolve()) in bad]
        for f in skipped:
            print(f"skipping bad file {f.path} (listed in {cfg.skip_bad_report})", file=sys.stderr)
        files = [f for f in files if str(f.path.resolve()) not in bad]
    return files


def _fit_norm(features_dir: Path, coll: Collection, results: list[dict[str, Any]]) -> NormStats | None:
    if not results:
        try:
            return load_norm(features_dir, coll)
        except FileNotFoundError:
            return None
    node, config = [], []
    for r in sorted(results, key=lambda r: r["stem"]):
        with np.load(r["npz"], allow_pickle=False) as d:
            node.append(d["node"])
            if "config" in d.files:
                config.append(d["config"])
    mean, std = _fit(node)
    cm, cs = _fit(config) if config else (None, None)
    return NormStats(mean, std, [], cm, cs)


def build_features(cfg: BuildConfig) -> Path:
    """Build features for the configured collections/splits; returns the features directory."""
    features_dir = Path(cfg.out) if cfg.out else Path(cfg.work) / "features"
    colls = parse_collections(cfg.collections)
    splits = [s.strip() for s in cfg.splits.split(",") if s.strip()]
    jobs = cfg.jobs or os.cpu_count() or 1
    files = _files(cfg, colls, splits)
    if not files:
        raise FileNotFoundError(f"no npz files under {npz_dir(cfg.data)} for "
                                f"{cfg.collections} / {cfg.splits}")
    fd = str(features_dir)
    train = [Task(cfg, fd, f.collection.name, f.split, f.stem, str(f.path))
             for f in files if f.split == "train"]
    norm_results = _run(_norm_task, train, jobs, "norm stats", cfg.progress, _norm_cached)
    norm_keys: dict[str, str] = {}
    for coll in colls:
        stats = _fit_norm(features_dir, coll, [r for r in norm_results if r["collection"] == coll.name])
        if stats is None:
            if any(f.collection == coll for f in files):
                raise FileNotFoundError(f"{coll.name}: no train graphs and no saved {norm_path(fd, coll)}; "
                                        "build with the train split first")
            continue
        stats.node_names = node_feature_names(cfg)
        if len(stats.node_names) != len(stats.node_mean):
            raise ValueError(f"{norm_path(fd, coll)}: built with other transform parameters; "
                             "rebuild with --splits including train")
        stats.save(norm_path(fd, coll))
        norm_keys[coll.name] = stats.key()
    tasks = [Task(cfg, fd, f.collection.name, f.split, f.stem, str(f.path),
                  norm_keys.get(f.collection.name, ""))
             for f in files]
    start = time.perf_counter()
    results = _run(_graph_task, tasks, jobs, "features", cfg.progress, _graph_cached)
    elapsed = time.perf_counter() - start
    for coll in colls:
        mine = [r for r in results if r["collection"] == coll.name]
        if not mine:
            continue
        slug_dir = features_dir / coll.slug
        if cfg.tabular:
            for split in splits:
                stems = sorted(r["stem"] for r in mine if r["split"] == split)
                if stems:
                    _merge_tabular(fd, coll, split, stems)
                else:  # no graphs left in this split: no stale rows either
                    tabular_path(fd, coll, split).unlink(missing_ok=True)
                    tabular_path(fd, coll, split).with_suffix(".json").unlink(missing_ok=True)
        report = reduction_report(mine)
        write_json(slug_dir / "prune_report.json", report)
        save_run_config(cfg, slug_dir, name="build.json")
        print(f"{coll.name}: {report['graphs']} graphs, nodes {report['nodes']} -> {report['kept_nodes']} "
              f"({report['node_reduction']:.1%} removed), edges {report['edges']} -> {report['kept_edges']} "
              f"({report['edge_reduction']:.1%} removed, {report['rewired']} rewired), "
              f"configs {report['source_configs']} -> {report['configs']}")
    _remove_stale(features_dir, colls, splits, {(f.collection.name, f.split, f.stem) for f in files})
    fresh = [r for r in results if not r.get("cached")]
    print(f"features: {len(results)} graphs ({len(fresh)} built, {len(results) - len(fresh)} cached) "
          f"in {elapsed:.1f} s -> {features_dir}")
    return features_dir


def _remove_stale(features_dir: Path, colls: list[Collection], splits: list[str],
                  current: set[tuple[str, str, str]]) -> None:
    """Drop outputs of graphs no longer in the data (or now listed as bad) for the built splits."""
    for coll in colls:
        for split in splits:
            base = features_dir / coll.slug / "graphs" / split
            if not base.is_dir():
                continue
            for d in base.iterdir():
                if d.is_dir() and not d.name.startswith(".") and (coll.name, split, d.name) not in current:
                    shutil.rmtree(d)
                    for extra in (_marker(str(features_dir), coll, split, d.name, "done"),
                                  part_path(features_dir, coll, split, d.name)):
                        extra.unlink(missing_ok=True)


def load_build_config(features_dir: str | os.PathLike, collection: Collection | str) -> BuildConfig:
    """The :class:`BuildConfig` a feature directory was built with (to featurize new graphs the
    same way, e.g. ``process_graph(graph, coll, "test", stem, load_norm(...), cfg)``)."""
    from tpurank.config import load_run_config

    coll = get_collection(collection) if isinstance(collection, str) else collection
    return load_run_config(BuildConfig, Path(features_dir) / coll.slug / "build.json")


def _merge_tabular(fd: str, coll: Collection, split: str, stems: list[str]) -> None:
    """Concatenate the per-graph parts; skipped when the parts are unchanged since the last merge."""
    parts = [part_path(fd, coll, split, s) for s in stems]
    out = tabular_path(fd, coll, split)
    stamp = out.with_suffix(".json")
    key = _key([(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in parts])
    if out.is_file() and _read_marker(stamp, key):
        return
    rows = tab.concat_parquet(parts, out)
    write_json(stamp, {"key": key, "rows": rows, "graphs": len(parts)})


def reduction_report(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Node/edge reduction by pruning and config dedup, summed over graphs."""
    keys = ("nodes", "edges", "kept_nodes", "kept_edges", "rewired", "configs", "source_configs",
            "duplicates")
    tot = {k: int(sum(r.get(k, 0) for r in results)) for k in keys}
    tot["graphs"] = len(results)
    tot["node_reduction"] = 1 - tot["kept_nodes"] / max(tot["nodes"], 1)
    tot["edge_reduction"] = 1 - tot["kept_edges"] / max(tot["edges"], 1)
    return tot


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(BuildConfig, argv, prog="python -m features build")
    build_features(cfg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
