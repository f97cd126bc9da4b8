"""Graph Segment Training (GST, docs/competition.md §7): constant training memory whatever the graph size.

Each graph is cut into segments of about ``segment_size`` nodes (:mod:`features.segments`, cached
with the features). A training step runs forward + backward through ``segments_per_step``
random segments of the step's configs; every other segment's pooled embedding comes from a
**historical embedding table** keyed by (graph, config, segment) (:class:`HistoryTable`,
bounded in bytes, oldest rows evicted), or, for a config not in the table, is computed without
gradient (and stored; with ``history_fill=false`` such entries are left out of the step instead,
which bounds step time too). The trained segments' fresh embeddings refresh the table. **Stale
embedding dropout** leaves each historical embedding out with probability ``stale_dropout``;
the combination (:meth:`models.gnn.model.Pool.combine`) is normalised over the segments kept,
so the trained segments' weight is scaled up by exactly the weight that was dropped. The combined
vector then goes through the model's scoring part (cross-config attention, head).

Inference is exact: :func:`segmented_embed` embeds every segment fresh, no history. With
``segment_combine=pool``, a ``meanmax`` model with ``norm`` ``layer``/``none`` and segments that
cut no edge (or a halo of at least ``layers`` hops), it equals whole-graph embedding.

Edges that cross segments are dropped (``segment_halo=0``) or kept as boundary inputs: a halo of
``segment_halo`` hops of neighbours joins the segment's message passing but not its pooling.
"""

from __future__ import annotations

import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from features.processed import ProcessedGraph
from features.segments import cached_segmentation, graph_fingerprint
from models.gnn.data import GraphTensors, config_rows, tabular_rows
from models.gnn.model import RankerGNN


@dataclass(frozen=True)
class SegmentSpec:
    """How graphs are cut (part of a run's config; inference must use the training one)."""

    size: int
    method: str = "contiguous"
    halo: int = 0
    combine: str = "pool"

    @classmethod
    def from_config(cls, cfg: Any) -> "SegmentSpec | None":
        size = int(getattr(cfg, "segment_size", 0) or 0)
        if size <= 0:
            return None
        return cls(size=size, method=getattr(cfg, "segment_method", "contiguous"),
                   halo=int(getattr(cfg, "segment_halo", 0)),
                   combine=getattr(cfg, "segment_combine", "pool"))


@dataclass
class SegmentTensors:
    """One segment as a graph of its own: its ``core`` nodes first, then its halo."""

    node_feat: torch.Tensor
    node_opcode: torch.Tensor
    edge_index: torch.Tensor  # local ids
    core: int  # number of the segment's own nodes (pooled)
    config_node_pos: torch.Tensor | None  # layout: local positions of the configurable nodes here
    config_cols: torch.Tensor | None  # layout: their columns in the graph's config_feat


@dataclass
class GraphSegments:
    key: str  # graph fingerprint (history key)
    parts: list[SegmentTensors]
    sizes: torch.Tensor  # (K,) float core node counts

    @property
    def num_segments(self) -> int:
        return len(self.parts)


def _halo_mask(adj: sp.csr_matrix | None, core: np.ndarray, n: int, hops: int) -> np.ndarray:
    mask = np.zeros(n, dtype=bool)
    mask[core] = True
    for _ in range(hops if adj is not None else 0):
        grown = mask | (adj @ mask.astype(np.float32) > 0)
        if grown.sum() == mask.sum():
            break
        mask = grown
    return mask


def build_segments(g: ProcessedGraph, tensors: GraphTensors, spec: SegmentSpec,
                   features_dir: str | None = None) -> GraphSegments:
    """Cut ``g`` (already on a device as ``tensors``) into :class:`SegmentTensors`."""
    seg = cached_segmentation(g, spec.size, spec.method, features_dir)
    n = g.num_nodes
    edges = tensors.edge_index.cpu().numpy()
    src, dst = edges
    adj = None
    if spec.halo > 0 and edges.size:
        ones = np.ones(len(src), dtype=np.float32)
        adj = sp.csr_matrix((np.concatenate([ones, ones]), (np.concatenate([src, dst]),
                                                           np.concatenate([dst, src]))), shape=(n, n))
    pos = None if tensors.config_node_pos is None else tensors.config_node_pos.cpu().numpy()
    device = tensors.node_feat.device
    parts = []
    local = np.full(n, -1, dtype=np.int64)
    for s in range(seg.num_segments):
        core = seg.segment(s)
        mask = _halo_mask(adj, core, n, spec.halo)
        mask[core] = False
        nodes = np.concatenate([core, np.flatnonzero(mask)])
        local[nodes] = np.arange(len(nodes))
        keep = (local[src] >= 0) & (local[dst] >= 0)
        sub_edges = torch.as_tensor(np.stack([local[src[keep]], local[dst[keep]]]), device=device)
        node_idx = torch.as_tensor(nodes, device=device)
        cols = lpos = None
        if pos is not None:
            inside = np.flatnonzero(local[pos] >= 0)
            cols = torch.as_tensor(inside, device=device)
            lpos = torch.as_tensor(local[pos[inside]], device=device)
        parts.append(SegmentTensors(tensors.node_feat[node_idx], tensors.node_opcode[node_idx],
                                    sub_edges, len(core), lpos, cols))
        local[nodes] = -1
    sizes = torch.as_tensor(np.diff(seg.starts).astype(np.float32), device=device)
    return GraphSegments(key=f"{g.collection}/{g.split}/{graph_fingerprint(g)}", parts=parts,
                         sizes=sizes)


class SegmentCache:
    """Segments of each graph built once per (graph object, spec); bounded LRU."""

    def __init__(self, max_graphs: int = 512):
        self.max_graphs = max_graphs
        self._cache: OrderedDict[tuple, tuple[ProcessedGraph, GraphSegments]] = OrderedDict()

    def get(self, g: ProcessedGraph, tensors: GraphTensors, spec: SegmentSpec,
            features_dir: str | None = None) -> GraphSegments:
        key = (id(g), spec, str(tensors.node_feat.device))
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key][1]
        segs = build_segments(g, tensors, spec, features_dir)
        self._cache[key] = (g, segs)  # holding g keeps id(g) from being reused
        while len(self._cache) > self.max_graphs:
            self._cache.popitem(last=False)
        return segs


class HistoryTable:
    """Historical segment embeddings keyed by (graph, config, segment), at most ``max_bytes``.

    Stored as one (K, P) row per (graph, config) plus a filled mask; writing a row makes it the
    newest, and the oldest rows are evicted when the table is over its byte limit.
    """

    def __init__(self, max_bytes: int):
        if max_bytes <= 0:
            raise ValueError(f"history_max_bytes must be positive, got {max_bytes}")
        self.max_bytes = int(max_bytes)
        self.nbytes = 0
        self._rows: OrderedDict[tuple[str, int], tuple[torch.Tensor, torch.Tensor]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._rows)

    @staticmethod
    def _row_bytes(values: torch.Tensor, filled: torch.Tensor) -> int:
        return values.numel() * values.element_size() + filled.numel() * filled.element_size()

    def lookup(self, graph: str, configs: np.ndarray, segments: np.ndarray, dim: int,
               device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """Values (B, S, dim) and a (B, S) mask of the entries present."""
        values = torch.zeros(len(configs), len(segments), dim, device=device)
        have = torch.zeros(len(configs), len(segments), dtype=torch.bool, device=device)
        seg_idx = torch.as_tensor(np.asarray(segments, dtype=np.int64), device=device)
        for b, c in enumerate(np.asarray(configs).tolist()):
            row = self._rows.get((graph, int(c)))
            if row is not None:
                values[b] = row[0][seg_idx].to(device)
                have[b] = row[1][seg_idx].to(device)
        return values, have

    def store(self, graph: str, configs: np.ndarray, segments: np.ndarray, num_segments: int,
              values: torch.Tensor) -> None:
        """Write ``values`` (B, S, P) for ``configs`` x ``segments`` (detached, float32)."""
        values = values.detach().float()
        seg_idx = torch.as_tensor(np.asarray(segments, dtype=np.int64), device=values.device)
        for b, c in enumerate(np.asarray(configs).tolist()):
            key = (graph, int(c))
            row = self._rows.pop(key, None)
            if row is None:
                row = (torch.zeros(num_segments, values.shape[-1], device=values.device),
                       torch.zeros(num_segments, dtype=torch.bool, device=values.device))
                self.nbytes += self._row_bytes(*row)
            row[0][seg_idx] = values[b]
            row[1][seg_idx] = True
            self._rows[key] = row  # newest last
        while self.nbytes > self.max_bytes and self._rows:
            _, old = self._rows.popitem(last=False)
            self.nbytes -= self._row_bytes(*old)


class GstState:
    """Everything GST keeps between steps of one training run (segments, history)."""

    def __init__(self, history_max_bytes: int):
        self.segments = SegmentCache()
        self.history = HistoryTable(history_max_bytes)


def _segment_feats(model: RankerGNN, seg: SegmentTensors, feats: torch.Tensor) -> tuple:
    if model.args.kind == "layout":
        return feats[:, seg.config_cols], seg.config_node_pos
    return feats, None


def embed_segment(model: RankerGNN, seg: SegmentTensors, feats: torch.Tensor) -> torch.Tensor:
    """Pooled embedding (B, P) of one segment for configs ``feats`` ((1, P) for late tile)."""
    f, pos = _segment_feats(model, seg, feats)
    return model.embed(seg.node_feat, seg.node_opcode, seg.edge_index, f, pos, pool_nodes=seg.core)


def config_keys(model: RankerGNN, idx: np.ndarray) -> np.ndarray:
    """History keys of configs ``idx``: the config index, or one key for a late-join tile model
    (its segment embeddings do not depend on the config)."""
    return np.array([-1]) if model.late_join else np.asarray(idx, dtype=np.int64)


def segmented_embed(model: RankerGNN, segs: GraphSegments, feats: torch.Tensor,
                    combine: str) -> torch.Tensor:
    """Exact (inference) embedding: every segment fresh, combined like training without dropout."""
    parts = torch.stack([embed_segment(model, s, feats) for s in segs.parts], dim=1)
    return model.pool.combine(parts, segs.sizes.expand(parts.shape[0], -1), combine)


def gst_costs(model: RankerGNN, g: ProcessedGraph, tensors: GraphTensors, idx: np.ndarray,
              device: torch.device, cfg: Any, step: int, state: GstState) -> torch.Tensor:
    """Costs of a training step's configs ``idx`` with gradient through ``segments_per_step``
    random segments, history (or a no-grad pass) for the others, stale embedding dropout."""
    spec = SegmentSpec.from_config(cfg)
    assert spec is not None
    features_dir = str(cfg.features_dir()) if hasattr(cfg, "features_dir") else None
    segs = state.segments.get(g, tensors, spec, features_dir)
    k = segs.num_segments
    rng = np.random.default_rng([int(cfg.seed), int(step), zlib.crc32(segs.key.encode())])
    trained = np.sort(rng.choice(k, size=min(max(1, int(cfg.segments_per_step)), k), replace=False))
    stale = np.setdiff1d(np.arange(k), trained)
    feats = config_rows(g, idx, device)
    keys = config_keys(model, idx)
    dim = model.pool.out_dim
    fresh = torch.stack([embed_segment(model, segs.parts[s], feats) for s in trained], dim=1)
    parts = [None] * k
    for j, s in enumerate(trained):
        parts[s] = fresh[:, j]
    weights = segs.sizes.expand(len(keys), -1).clone()
    fill = bool(getattr(cfg, "history_fill", True))
    if len(stale):
        old, have = state.history.lookup(segs.key, keys, stale, dim, device)
        with torch.no_grad():
            for j, s in enumerate(stale):
                missing = torch.nonzero(~have[:, j]).flatten()
                if not fill:
                    weights[:, s] *= have[:, j].to(weights.dtype)
                elif len(missing):
                    sub = feats if model.late_join else feats[missing]
                    old[missing, j] = embed_segment(model, segs.parts[s], sub).float()
                    state.history.store(segs.key, keys[missing.cpu().numpy()], [s], k,
                                        old[missing, j][:, None])
                parts[s] = old[:, j].to(fresh.dtype)
        p = float(cfg.stale_dropout)
        if model.training and p > 0:
            gen = torch.Generator().manual_seed(int(rng.integers(2**31)))
            # only embeddings read from the table are stale; a no-grad fill is current
            drop = (torch.rand(len(keys), len(stale), generator=gen) < p) & have.cpu()
            weights[:, torch.as_tensor(stale, device=device)] *= (~drop).to(device, weights.dtype)
    pooled = model.pool.combine(torch.stack(parts, dim=1), weights, spec.combine)
    state.history.store(segs.key, keys, trained, k, fresh)
    return model.score(model.config_vectors(pooled, feats, tabular_rows(model, g, tensors, feats)))
