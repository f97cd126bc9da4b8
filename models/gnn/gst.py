"""Graph Segment Training (GST, docs/competition.md §7) for the copy arch: the organisers' recipe
(``kaidic/GST``, ``custom_tpu_train.py``), described in docs/gnn.md, "Graph Segment Training".
Also the segments and the bounded tables that GST on the factorized trunk
(:mod:`models.gnn.segment_trunk`) shares.

A step trains one segment, drawn in proportion to the configurable nodes (a segment without one
would give no gradient), its score scaled to the expected number of segments kept; the others'
scores come from a :class:`HistoryTable` keyed by (graph, segment, the config values that segment
sees), a missing entry counting as zero. Stale embedding dropout uses one mask per graph and step,
shared by its configs, so two configs always sum the same segments and their difference is the
model's, not the mask's.
"""

from __future__ import annotations

import hashlib
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from features.processed import ProcessedGraph
from features.segments import cached_segmentation, graph_fingerprint
from models.gnn.config import GnnConfig
from models.gnn.data import GraphTensors, config_rows, tabular_rows
from models.gnn.model import RankerGNN

SEGMENTS_PER_STEP = 1  # segments trained (forward + backward) per graph and step
STALE_DROPOUT = 0.5  # probability of leaving out each stale (historical) segment score in training


@dataclass
class SegmentTensors:
    """One segment as a graph of its own (the edges inside it)."""

    node_feat: torch.Tensor
    node_opcode: torch.Tensor
    edge_index: torch.Tensor  # local ids
    config_node_pos: torch.Tensor | None  # layout: local positions of the configurable nodes here
    config_cols: torch.Tensor | None  # layout: their columns in the graph's config_feat
    configurable: int  # layout: configurable nodes in the segment
    node_ids: np.ndarray  # graph positions of the segment's nodes (local order)

    @property
    def config_free(self) -> bool:
        """True for a layout segment that holds no configurable node: its embedding
        is the same for every config."""
        return self.config_cols is not None and self.config_cols.numel() == 0


@dataclass
class GraphSegments:
    key: str  # graph fingerprint (history key)
    parts: list[SegmentTensors]
    trunk: Any = None  # segment_trunk.TrunkSegments of the graph, built on first use

    @property
    def num_segments(self) -> int:
        return len(self.parts)


def build_segments(g: ProcessedGraph, tensors: GraphTensors, size: int,
                   features_dir: str | None = None) -> GraphSegments:
    """Cut ``g`` (already on a device as ``tensors``) into segments of about ``size`` nodes."""
    seg = cached_segmentation(g, size, features_dir)
    n = g.num_nodes
    src, dst = tensors.edge_index.cpu().numpy()
    pos = None if tensors.config_node_pos is None else tensors.config_node_pos.cpu().numpy()
    device = tensors.node_feat.device
    parts = []
    local = np.full(n, -1, dtype=np.int64)
    for s in range(seg.num_segments):
        nodes = seg.segment(s)
        local[nodes] = np.arange(len(nodes))
        keep = (local[src] >= 0) & (local[dst] >= 0)
        sub_edges = torch.as_tensor(np.stack([local[src[keep]], local[dst[keep]]]), device=device)
        node_idx = torch.as_tensor(nodes, device=device)
        cols = lpos = None
        inside = np.zeros(0, dtype=np.int64)
        if pos is not None:
            inside = np.flatnonzero(local[pos] >= 0)
            cols = torch.as_tensor(inside, device=device)
            lpos = torch.as_tensor(local[pos[inside]], device=device)
        parts.append(SegmentTensors(tensors.node_feat[node_idx], tensors.node_opcode[node_idx],
                                    sub_edges, lpos, cols, len(inside), nodes))
        local[nodes] = -1
    return GraphSegments(key=f"{g.collection}/{g.split}/{graph_fingerprint(g)}", parts=parts)


class SegmentCache:
    """Segments of each graph built once per (graph object, size); bounded LRU."""

    def __init__(self, max_graphs: int = 512):
        self.max_graphs = max_graphs
        self._cache: OrderedDict[tuple, tuple[ProcessedGraph, GraphSegments]] = OrderedDict()

    def get(self, g: ProcessedGraph, tensors: GraphTensors, size: int,
            features_dir: str | None = None) -> GraphSegments:
        key = (id(g), size, str(tensors.node_feat.device))
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key][1]
        segs = build_segments(g, tensors, size, features_dir)
        self._cache[key] = (g, segs)  # holding g keeps id(g) from being reused
        while len(self._cache) > self.max_graphs:
            self._cache.popitem(last=False)
        return segs


@dataclass
class _Entries:
    keys: np.ndarray  # (n,) uint64, sorted
    values: np.ndarray  # (n,) float32

    @property
    def nbytes(self) -> int:
        return int(self.keys.nbytes + self.values.nbytes)


class SegmentLru:
    """Entries (anything with ``nbytes``) per (graph, segment), at most ``max_bytes`` in all:
    writing a slot makes it the newest, and the oldest slots are evicted first."""

    def __init__(self, max_bytes: int):
        if max_bytes <= 0:
            raise ValueError(f"history_max_bytes must be positive, got {max_bytes}")
        self.max_bytes = int(max_bytes)
        self.nbytes = 0
        self._rows: OrderedDict[tuple[str, int], Any] = OrderedDict()

    def _take(self, slot: tuple[str, int]) -> Any:
        """Remove and return the entry of ``slot`` (None when there is none)."""
        old = self._rows.pop(slot, None)
        if old is not None:
            self.nbytes -= old.nbytes
        return old

    def _put(self, slot: tuple[str, int], entry: Any) -> None:
        """Write ``entry`` as the newest, then evict the oldest (an entry alone over the limit
        leaves the table empty)."""
        self._rows[slot] = entry
        self.nbytes += entry.nbytes
        while self.nbytes > self.max_bytes and self._rows:
            _, old = self._rows.popitem(last=False)
            self.nbytes -= old.nbytes


class HistoryTable(SegmentLru):
    """Historical segment scores keyed by (graph, segment, config key), at most ``max_bytes``.

    A config key (:func:`segment_config_key`) identifies the config values a segment sees, so
    configs that agree there share an entry. Each (graph, segment) holds sorted key and score
    arrays (12 bytes an entry); writing to one makes it the newest, and the oldest
    (graph, segment) arrays are evicted when the table is over its byte limit.
    """

    def __len__(self) -> int:
        """Number of entries."""
        return sum(len(e.keys) for e in self._rows.values())

    def lookup(self, graph: str, segment: int, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Scores (B,) of ``keys`` (B,) (0 where missing) and a (B,) mask of those present."""
        keys = np.asarray(keys, dtype=np.uint64)
        values = np.zeros(len(keys), dtype=np.float32)
        entries = self._rows.get((graph, int(segment)))
        if entries is None or not len(entries.keys):
            return values, np.zeros(len(keys), dtype=bool)
        at = np.minimum(np.searchsorted(entries.keys, keys), len(entries.keys) - 1)
        have = entries.keys[at] == keys
        values[have] = entries.values[at[have]]
        return values, have

    def store(self, graph: str, segment: int, keys: np.ndarray, values: np.ndarray) -> None:
        """Write scores ``values`` (B,) under ``keys`` (B,) (a repeated key keeps its first one)."""
        keys, first = np.unique(np.asarray(keys, dtype=np.uint64), return_index=True)
        values = np.asarray(values, dtype=np.float32).reshape(-1)[first]
        slot = (graph, int(segment))
        old = self._take(slot)
        if old is not None:
            kept = ~np.isin(old.keys, keys)
            keys = np.concatenate([old.keys[kept], keys])
            values = np.concatenate([old.values[kept], values])
            order = np.argsort(keys, kind="stable")
            keys, values = keys[order], values[order]
        self._put(slot, _Entries(keys, values))


class GstState:
    """Everything GST keeps between steps of one training run (segments, history)."""

    def __init__(self, history_max_bytes: int):
        self.segments = SegmentCache()
        self.history = HistoryTable(history_max_bytes)


def segment_vectors(model: RankerGNN, seg: SegmentTensors, feats: torch.Tensor,
                    tabular: torch.Tensor | None) -> torch.Tensor:
    """Attention inputs (B, hidden) of one segment for configs ``feats`` (the copy model's
    :meth:`RankerGNN.embed`, which a factorized model refuses)."""
    seen = feats if seg.config_cols is None else feats[:, seg.config_cols]
    pooled = model.embed(seg.node_feat, seg.node_opcode, seg.edge_index, seen,
                         seg.config_node_pos)
    return model.config_vectors(pooled, feats, tabular)


def segment_scores(model: RankerGNN, seg: SegmentTensors, feats: torch.Tensor,
                   tabular: torch.Tensor | None) -> torch.Tensor:
    """Scores (B,) of one segment, the configs ``feats`` attending to each other."""
    return model.score(segment_vectors(model, seg, feats, tabular))


def summed_segment_costs(model: RankerGNN, segs: GraphSegments, g: ProcessedGraph,
                         tensors: GraphTensors, idx: np.ndarray, chunks: list[np.ndarray],
                         context: np.ndarray) -> torch.Tensor:
    """Exact costs (len(idx),) float64 of a segment-trained model: every segment scored fresh,
    the scores summed; in every segment each config attends to the configs at positions
    ``context`` of ``idx``.

    One segment at a time over every chunk of configs, so memory holds one segment's vectors.
    A segment that sees no configurable node gives every config the same vector, so it is
    embedded for one config only.
    """
    device = tensors.node_feat.device
    total = torch.zeros(len(idx), dtype=torch.float64, device=device)
    ctx_pos = torch.as_tensor(context, device=device)
    for seg in segs.parts:
        def vectors(c: np.ndarray, seg: SegmentTensors = seg) -> torch.Tensor:
            feats = config_rows(g, idx[c], device)
            return segment_vectors(model, seg, feats, tabular_rows(model, g, tensors, feats))

        if seg.config_free and not model.uses_tabular:
            z = vectors(chunks[0][:1])
            total += model.score(z).double()
            continue
        z = torch.cat([vectors(c) for c in chunks])
        ctx = z[ctx_pos]
        total += torch.cat([model.score(z[c], ctx).double() for c in chunks])
    return total


def segment_config_key(rows: np.ndarray, seg: SegmentTensors,
                       tabular: np.ndarray | None = None) -> np.ndarray:
    """(B,) uint64 keys of what a segment's output depends on for each config: the layout values
    of the configurable nodes it sees (``rows`` (B, nc, 18)), a tile config's whole row (``rows``
    (B, F)), and with tabular features the config's tabular row. Equal inputs, equal key; a layout
    segment without configurable node has one key for every config."""
    sub = rows if seg.config_cols is None else rows[:, seg.config_cols.cpu().numpy()]
    sub = np.ascontiguousarray(sub).reshape(len(rows), -1)
    digests = []
    for b in range(len(rows)):
        extra = b"" if tabular is None else tabular[b].tobytes()
        digests.append(hashlib.blake2b(sub[b].tobytes() + extra, digest_size=8).digest())
    return np.frombuffer(b"".join(digests), dtype="<u8").astype(np.uint64)


def draw_trained(rng: np.random.Generator, segs: GraphSegments, count: int) -> np.ndarray:
    """Segments trained this step (sorted), drawn in proportion to their configurable nodes
    (uniformly where no segment has one: tile graphs)."""
    weights = np.array([p.configurable for p in segs.parts], dtype=np.float64)
    if weights.sum() <= 0:
        weights = np.ones(segs.num_segments)
    count = min(max(1, count), int((weights > 0).sum()))
    return np.sort(rng.choice(segs.num_segments, size=count, replace=False,
                              p=weights / weights.sum()))


def gst_costs(model: RankerGNN, g: ProcessedGraph, tensors: GraphTensors, idx: np.ndarray,
              device: torch.device, cfg: GnnConfig, step: int, state: GstState) -> torch.Tensor:
    """Costs of a training step's configs ``idx``: gradient through the drawn segment, the
    others' scores from the history table (missing = 0), one stale-dropout mask for the graph."""
    segs = state.segments.get(g, tensors, cfg.segment_size, str(cfg.features_dir()))
    rng = np.random.default_rng([int(cfg.seed), int(step), zlib.crc32(segs.key.encode())])
    trained = draw_trained(rng, segs, SEGMENTS_PER_STEP)
    stale = np.setdiff1d(np.arange(segs.num_segments), trained)
    dropout = STALE_DROPOUT if model.training else 0.0
    kept = stale[rng.random(len(stale)) >= dropout]  # one mask for all configs of the graph
    feats = config_rows(g, idx, device)
    tabular = tabular_rows(model, g, tensors, feats)
    rows = feats.detach().cpu().numpy()
    tab = None if tabular is None else np.ascontiguousarray(tabular.detach().float().cpu().numpy())
    fresh = []
    for s in trained:
        scores = segment_scores(model, segs.parts[s], feats, tabular)
        state.history.store(segs.key, s, segment_config_key(rows, segs.parts[s], tab),
                            scores.detach().float().cpu().numpy())
        fresh.append(scores)
    # the segments whose score can differ between configs: those the rescaled sum stands for
    active = sum(1 for p in segs.parts if model.uses_tabular or not p.config_free)
    expected_kept = len(trained) + (1.0 - dropout) * max(active - len(trained), 0)
    cost = torch.stack(fresh, dim=1).sum(dim=1) * (expected_kept / len(trained))
    for s in kept:
        values, _ = state.history.lookup(segs.key, s, segment_config_key(rows, segs.parts[s], tab))
        cost = cost + torch.as_tensor(values, device=device).to(cost.dtype)
    return cost
