"""One graph's transforms: node stage (features, pruning), config selection (dedup, subsample),
config encoding and tabular rows — :func:`process_graph`.

The node features are blocks of columns, one :data:`NODE_BLOCKS` row each (the ``BuildConfig``
flag that turns it on, the function computing it, its column names): the node stage, the column
names and, through the flags, the cache key all follow that table.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Iterable

import numpy as np

from tpurank.collections import Collection, get_collection
from features.buildconfig import BuildConfig, code_digest
from features.columns import signed_log1p
from features.configcodes import CodedConfigs, encode_blocks
from features.configgraph import config_graph_of_npz, to_positions
from features.dot_features import DOT_CONV_NAMES, DotDims, dot_conv_features, dot_dims_for_graph
from features.io import NODE_FEAT_DIM, Graph
from features.processed import NormStats, ProcessedGraph, _apply
from features.pruning import STRUCTURE_NAMES, prune_graph, structure_features
from features import tabular as tab
from features import transforms as tf


# ---- node stage ---------------------------------------------------------------------------------
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
    config_graph: np.ndarray | None = None  # layout: features.configgraph rows, inner nodes as positions


@dataclass
class NodeInputs:
    """What the node blocks are computed from: one graph, the build settings, exact dot dims."""

    graph: Graph
    cfg: BuildConfig
    exact_dot: dict[int, DotDims] | None = None

    @cached_property
    def node_feat(self) -> np.ndarray:
        return np.asarray(self.graph.node_feat, np.float32)

    @cached_property
    def node_opcode(self) -> np.ndarray:
        return np.asarray(self.graph.node_opcode, np.int64)

    @cached_property
    def repadded(self) -> np.ndarray:
        """The 140 raw columns with -1 beyond each tensor's rank (computed once)."""
        return tf.repad_node_feat(self.node_feat, self.node_opcode, self.graph.edge_index)


def _raw(x: NodeInputs) -> np.ndarray:
    base = x.repadded if x.cfg.pad_minus_one else x.node_feat.copy()
    return tf.log_transform_columns(base) if x.cfg.engineered else base


def _is_configurable(x: NodeInputs) -> np.ndarray:
    out = np.zeros((x.graph.num_nodes, 1), np.float32)
    if x.graph.node_config_ids is not None:
        out[np.asarray(x.graph.node_config_ids), 0] = 1.0
    return out


@dataclass(frozen=True)
class NodeBlock:
    """Columns of ``ProcessedGraph.node_feat``: present when ``flag`` (a ``BuildConfig`` field) is
    on, or always (``flag`` None); ``compute`` returns them as an (n, len(columns)) array."""

    flag: str | None
    compute: Callable[[NodeInputs], np.ndarray]
    columns: tuple[str, ...]


#: the node feature blocks, in column order (docs/features.md, "What the models get")
NODE_BLOCKS: tuple[NodeBlock, ...] = (
    # docs/competition.md §4 after -1 re-padding (pad_minus_one) and log transforms (engineered)
    NodeBlock(None, _raw, tuple(f"raw_{i}" for i in range(NODE_FEAT_DIM))),
    NodeBlock("engineered", lambda x: tf.lane_features(x.repadded), tuple(tf.LANE_NAMES)),
    NodeBlock("dot_features", lambda x: dot_conv_features(x.node_feat, x.node_opcode, x.graph.edge_index,
                                                          x.exact_dot), tuple(DOT_CONV_NAMES)),
    NodeBlock("engineered", lambda x: structure_features(x.graph.num_nodes, x.graph.edge_index),
              tuple(STRUCTURE_NAMES)),
    NodeBlock(None, _is_configurable, ("is_configurable",)),
)


def node_blocks(cfg: BuildConfig) -> list[NodeBlock]:
    """The blocks these settings turn on, in column order."""
    return [b for b in NODE_BLOCKS if b.flag is None or getattr(cfg, b.flag)]


def node_feature_names(cfg: BuildConfig) -> list[str]:
    """Column names of ``ProcessedGraph.node_feat`` for these transform parameters."""
    return [name for block in node_blocks(cfg) for name in block.columns]


def node_features(inputs: NodeInputs) -> np.ndarray:
    """The unnormalised node features of the full graph: the active blocks side by side."""
    parts = []
    for block in node_blocks(inputs.cfg):
        part = np.asarray(block.compute(inputs), np.float32)
        if part.shape != (inputs.graph.num_nodes, len(block.columns)):
            raise ValueError(f"node block {block.columns[0]}..: shape {part.shape}, expected "
                             f"({inputs.graph.num_nodes}, {len(block.columns)})")
        parts.append(part)
    return np.concatenate(parts, axis=1)


def node_stage(graph: Graph, cfg: BuildConfig, exact_dot: dict[int, DotDims] | None = None) -> NodeStage:
    """Transforms on the nodes: features on the full graph, then pruning (layout only)."""
    op = np.asarray(graph.node_opcode, np.int64)
    n = graph.num_nodes
    feat = node_features(NodeInputs(graph, cfg, exact_dot))
    cfg_ids = graph.node_config_ids
    if graph.is_tile or cfg_ids is None:
        ei = np.asarray(graph.edge_index, np.int64).reshape(-1, 2)[:, ::-1].T.copy()
        return NodeStage(feat, node_feature_names(cfg), op, ei, np.arange(n, dtype=np.int64), None,
                         {"nodes": n, "edges": int(ei.shape[1]), "kept_nodes": n,
                          "kept_edges": int(ei.shape[1]), "rewired": 0})
    pr = prune_graph(n, graph.edge_index, np.asarray(cfg_ids), cfg.prune_hops, cfg.rewire,
                        cfg.rewire_max_sources)
    links = config_graph_of_npz(n, graph.edge_index, np.asarray(cfg_ids), cfg.config_graph_hops,
                                cfg.config_graph_max_links)
    stats = {"nodes": n, "edges": pr.num_orig_edges, "kept_nodes": int(len(pr.kept)),
             "kept_edges": int(pr.edge_index_pyg.shape[1]), "rewired": pr.num_rewired,
             "config_links": int(len(links))}
    return NodeStage(feat[pr.kept], node_feature_names(cfg), op[pr.kept], pr.edge_index_pyg,
                     pr.kept.astype(np.int64), pr.positions(np.asarray(cfg_ids)), stats,
                     to_positions(links, pr.kept))


# ---- config stage -------------------------------------------------------------------------------
def _config_chunks(graph: Graph, rows: np.ndarray, chunk: int) -> Iterable[tuple[np.ndarray, np.ndarray]]:
    """``(rows_chunk, configs)`` for layout graphs, int8, ``chunk`` configs at a time."""
    src = graph.node_config_feat
    for start in range(0, len(rows), chunk):
        idx = rows[start:start + chunk]
        block = src[idx[0]:idx[-1] + 1] if len(idx) and idx[-1] - idx[0] + 1 == len(idx) else src[idx]
        yield idx, np.asarray(block).astype(np.int8, copy=False)


def select_configs(graph: Graph, split: str, cfg: BuildConfig,
                   seed_key: str = "") -> tuple[np.ndarray, np.ndarray | None, int]:
    """``(index, target, duplicates)``: the kept source configs (sorted), their (averaged)
    targets and the number of duplicates merged. Train: deduplicate identical configs
    (averaging runtimes) and optionally subsample. Valid/test: every config, in the source order."""
    c = graph.num_configs
    all_rows = np.arange(c, dtype=np.int64)
    target = None if split == "test" else graph.target()
    if split != "train":
        return all_rows, target, 0
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
        keep = subsample(len(index), cfg.max_train_configs, cfg.seed, seed_key)
        index, target = index[keep], target[keep]
    return index, target, dups


def subsample(n: int, k: int, seed: int, key: str) -> np.ndarray:
    """Sorted ``k`` of ``n`` positions, deterministic per (seed, key)."""
    s = int.from_bytes(hashlib.sha256(f"{seed}:{key}".encode()).digest()[:8], "little")
    return np.sort(np.random.default_rng(s).choice(n, k, replace=False))


def tile_config_feat(graph: Graph, rows: np.ndarray, cfg: BuildConfig) -> np.ndarray:
    """Tile config features for the GNN: signed-log of :func:`tab.tile_config_features`."""
    feats = tab.tile_config_features(np.asarray(graph.config_feat)[rows], tab.kernel_output_shape(graph),
                                     cfg.pad_minus_one)
    return signed_log1p(feats) if cfg.engineered else feats


# ---- single graph -------------------------------------------------------------------------------
def process_graph(graph: Graph, collection: Collection | str, split: str, stem: str,
                  norm: NormStats | None, cfg: BuildConfig, exact_dot: dict[int, DotDims] | None = None,
                  *, tabular_sink: Callable[[np.ndarray, np.ndarray], None] | None = None,
                  stage: NodeStage | None = None) -> ProcessedGraph:
    """Featurize one graph (e.g. a brand-new program for ``models.gnn rank --hlo``).

    ``norm`` = :func:`load_norm` of the training build (None: unnormalised).
    ``tabular_sink(config_index_chunk, feature_chunk)`` receives tabular rows chunk by chunk.
    """
    coll = get_collection(collection) if isinstance(collection, str) else collection
    ns = stage if stage is not None else node_stage(graph, cfg, exact_dot if cfg.dot_features else None)
    node_feat = _apply(ns.node_feat, *(norm.node_mean, norm.node_std) if norm else (None, None))
    index, target, dups = select_configs(graph, split, cfg, seed_key=f"{coll.slug}/{stem}")
    meta: dict[str, Any] = {"node_feature_names": ns.names, "prune": ns.stats,
                            "transform_params": cfg.transform_params(), "code": code_digest(),
                            "num_source_configs": graph.num_configs, "num_duplicates": dups}
    if tabular_sink is not None:
        meta["tabular_feature_names"] = tab.tabular_feature_names(graph.is_tile, cfg.heuristic)
        if cfg.heuristic:
            tabular_sink = _with_heuristic(tabular_sink, tab.heuristic_table(graph, cfg.config_chunk))
    layout_arrays = None
    if graph.is_tile:
        config_feat = tile_config_feat(graph, index, cfg)
        if norm is not None and norm.config_mean is not None:
            config_feat = _apply(config_feat, norm.config_mean, norm.config_std)
        meta["config_feature_names"] = tab.tile_feature_names()[len(tab.GRAPH_FEATURES):]
        if tabular_sink is not None:
            tabular_sink(index, tab.tile_tabular_features(graph, index, cfg.pad_minus_one))
    else:
        config_feat, layout_ctx = _layout_configs(graph, index, cfg, tabular_sink, exact_dot)
        layout_arrays = layout_ctx.arrays()
        meta["config_feature_names"] = ["out_layout_0..5", "in_layout_0..5", "kernel_layout_0..5"]
    return ProcessedGraph(collection=coll.name, split=split, stem=stem, node_feat=node_feat,
                          node_opcode=ns.node_opcode, edge_index=ns.edge_index,
                          orig_node_ids=ns.orig_node_ids, config_feat=config_feat,
                          config_index=index, config_node_pos=ns.config_node_pos,
                          target=target, meta=meta, layout_context=layout_arrays,
                          config_graph=ns.config_graph)


def _with_heuristic(sink: Callable[[np.ndarray, np.ndarray], None],
                    table: np.ndarray) -> Callable[[np.ndarray, np.ndarray], None]:
    """``sink`` with the heuristic columns of each chunk's source configs appended."""
    def append(idx: np.ndarray, feats: np.ndarray) -> None:
        sink(idx, np.concatenate([feats, table[idx]], axis=1))
    return append


def _layout_configs(graph: Graph, rows: np.ndarray, cfg: BuildConfig,
                    tabular_sink: Callable[[np.ndarray, np.ndarray], None] | None,
                    exact_dot: dict[int, DotDims] | None = None
                    ) -> tuple[CodedConfigs, tab.LayoutContext]:
    """Layout configs of ``rows`` as codes (:mod:`features.configcodes`), chunk by chunk,
    feeding the tabular rows of each chunk to ``tabular_sink``; and the graph's layout context
    (kept with the processed graph whether or not tabular rows are written; LightGBM's layout rows
    and the GNN's head both read it), dot contracting dims included when
    ``cfg.dot_features``."""
    dots = dot_dims_for_graph(np.asarray(graph.node_feat), graph.node_opcode, graph.edge_index,
                              exact_dot) if cfg.dot_features else None
    ctx = tab.layout_context(graph, dots, cfg.rewire_max_sources)
    src = graph.node_config_feat
    if isinstance(src, CodedConfigs):  # streamed from the npz: keep the table, slice the codes
        coded = CodedConfigs(np.asarray(src.codes)[rows], src.table)
    else:
        coded = encode_blocks((block for _, block in _config_chunks(graph, rows, cfg.config_chunk)),
                              len(rows), src.shape[1], graph.path or "<array>")
    if tabular_sink is not None:
        for idx, block in _config_chunks(graph, rows, cfg.config_chunk):
            tabular_sink(idx, tab.layout_chunk_features(ctx, block))
    return coded, ctx
