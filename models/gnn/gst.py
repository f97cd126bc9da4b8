"""Graph Segment Training (GST) on the factorized trunk: whole-graph context for the config head
at the memory of one segment (docs/gnn.md, "Graph Segment Training"). A :class:`TrunkTable`
holds per graph and segment the trunk outputs the head reads (the segment's **read rows**: its
configurable nodes and links' inner nodes) and its pooling statistics (:meth:`Pool.partial`).
Inference is exact (:func:`segmented_graph_state`).
"""

from __future__ import annotations

import zlib
from collections import OrderedDict
from dataclasses import dataclass, replace

import numpy as np
import torch

from features.processed import ProcessedGraph
from features.segments import cached_segmentation, graph_fingerprint
from models.gnn.config import GnnConfig
from models.gnn.data import GraphTensors, config_rows
from models.gnn.model import ConfigLinks, GraphState, RankerGNN

SEGMENTS_PER_STEP = 1  # segments trained (forward + backward) per graph and step


@dataclass
class SegmentTensors:
    """One segment as a graph of its own (the edges inside it)."""

    node_feat: torch.Tensor
    node_opcode: torch.Tensor
    edge_index: torch.Tensor  # local ids
    configurable: int  # configurable nodes in the segment
    node_ids: np.ndarray  # graph positions of the segment's nodes (local order)


@dataclass
class GraphSegments:
    """A graph's segments, and where their read rows go in the graph's read-row array."""

    key: str  # graph fingerprint (table key)
    parts: list[SegmentTensors]
    reads: list[torch.Tensor]  # per segment: local positions of the nodes the head reads
    gather: torch.Tensor  # read rows concatenated segment by segment -> graph read-row order
    config_slot: torch.Tensor  # (nc,) read row of each configurable node
    links: ConfigLinks  # the graph's links, inner nodes as read rows (-1: none)

    @property
    def num_segments(self) -> int:
        return len(self.parts)


def build_segments(g: ProcessedGraph, tensors: GraphTensors, size: int,
                   features_dir: str | None = None) -> GraphSegments:
    """Cut layout graph ``g`` (already on a device as ``tensors``) into segments of about ``size``
    nodes, with the read rows of each: the configurable nodes and the links' inner nodes, each
    read from the segment that holds it."""
    if tensors.config_node_pos is None or tensors.links is None:
        raise ValueError("GST on the factorized trunk needs a layout graph with its links")
    seg = cached_segmentation(g, size, features_dir)
    n = g.num_nodes
    src, dst = tensors.edge_index.cpu().numpy()
    pos = tensors.config_node_pos.cpu().numpy()
    inner = tensors.links.inner.cpu().numpy()
    read = np.unique(np.concatenate([pos, inner[inner >= 0]]))
    slot = np.full(n, -1, dtype=np.int64)
    slot[read] = np.arange(len(read))
    device = tensors.node_feat.device
    parts, reads, order = [], [], []
    local = np.full(n, -1, dtype=np.int64)
    for s in range(seg.num_segments):
        nodes = seg.segment(s)
        local[nodes] = np.arange(len(nodes))
        keep = (local[src] >= 0) & (local[dst] >= 0)
        sub_edges = torch.as_tensor(np.stack([local[src[keep]], local[dst[keep]]]), device=device)
        node_idx = torch.as_tensor(nodes, device=device)
        parts.append(SegmentTensors(tensors.node_feat[node_idx], tensors.node_opcode[node_idx],
                                    sub_edges, int((local[pos] >= 0).sum()), nodes))
        here = np.flatnonzero(slot[nodes] >= 0)
        reads.append(torch.as_tensor(here, device=device))
        order.append(slot[nodes[here]])
        local[nodes] = -1
    gather = np.argsort(np.concatenate(order), kind="stable")
    inner_slot = np.where(inner >= 0, slot[np.maximum(inner, 0)], -1)
    links = replace(tensors.links, inner=torch.as_tensor(inner_slot, device=device))
    return GraphSegments(f"{g.collection}/{g.split}/{graph_fingerprint(g)}", parts, reads,
                         torch.as_tensor(gather, device=device),
                         torch.as_tensor(slot[pos], device=device), links)


def graph_segments(g: ProcessedGraph, tensors: GraphTensors, size: int,
                   features_dir: str | None = None) -> GraphSegments:
    """:func:`build_segments`, once per size for the graph's ``tensors`` (kept on them)."""
    if size not in tensors.segments:
        tensors.segments[size] = build_segments(g, tensors, size, features_dir)
    return tensors.segments[size]


@dataclass
class _TrunkEntry:
    rows: torch.Tensor  # (k, d) read rows of one segment
    pooled: torch.Tensor  # (S,) Pool.partial of its nodes
    step: int  # the training step that wrote it

    @property
    def nbytes(self) -> int:
        return int(self.rows.numel() * self.rows.element_size()
                   + self.pooled.numel() * self.pooled.element_size())


class TrunkTable:
    """Stored trunk outputs per (graph, segment), detached, at most ``max_bytes`` in all: the
    oldest written slots are evicted first (an entry alone over the limit empties the table)."""

    def __init__(self, max_bytes: int):
        if max_bytes <= 0:
            raise ValueError(f"history_max_bytes must be positive, got {max_bytes}")
        self.max_bytes = int(max_bytes)
        self.nbytes = 0
        self._rows: OrderedDict[tuple[str, int], _TrunkEntry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, graph: str, segment: int) -> _TrunkEntry | None:
        return self._rows.get((graph, int(segment)))

    def store(self, graph: str, segment: int, rows: torch.Tensor, pooled: torch.Tensor,
              step: int) -> None:
        slot = (graph, int(segment))
        old = self._rows.pop(slot, None)
        if old is not None:
            self.nbytes -= old.nbytes
        entry = self._rows[slot] = _TrunkEntry(rows.detach(), pooled.detach(), int(step))
        self.nbytes += entry.nbytes
        while self.nbytes > self.max_bytes and self._rows:
            _, old = self._rows.popitem(last=False)
            self.nbytes -= old.nbytes


def uses_gst(model: RankerGNN, segment_size: int) -> bool:
    """Whether ``model`` trains and predicts segment-wise: a layout model with ``segment_size`` >
    0, which must then be factorized (tile models always run whole graphs)."""
    if segment_size <= 0 or model.args.kind == "tile":
        return False
    if not model.factorized:
        raise ValueError("Graph Segment Training (--segment-size) needs a factorized layout model "
                         "(--arch factorized); the copy arch trains on whole graphs")
    return True


def draw_trained(rng: np.random.Generator, segs: GraphSegments, count: int) -> np.ndarray:
    """Segments trained this step (sorted), drawn in proportion to their configurable nodes
    (uniformly where no segment has one)."""
    weights = np.array([p.configurable for p in segs.parts], dtype=np.float64)
    if weights.sum() <= 0:
        weights = np.ones(segs.num_segments)
    count = min(max(1, count), int((weights > 0).sum()))
    return np.sort(rng.choice(segs.num_segments, size=count, replace=False,
                              p=weights / weights.sum()))


def segment_trunk(model: RankerGNN, part: SegmentTensors,
                  reads: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One segment through the trunk: its read rows (k, d) and its pooling statistics."""
    h = model.trunk(part.node_feat, part.node_opcode, part.edge_index)
    return h[reads], model.pool.partial(h)


def assemble_state(model: RankerGNN, tensors: GraphTensors, segs: GraphSegments,
                   rows: list[torch.Tensor], pooled: list[torch.Tensor]) -> GraphState:
    """The graph's :class:`GraphState` from every segment's read rows and pooling statistics."""
    head = model.config_head
    h = torch.cat(rows)[segs.gather]
    return GraphState(tensors.node_feat, tensors.node_opcode, tensors.edge_index,
                      tensors.config_node_pos, summary=model.pool.combine(torch.stack(pooled)),
                      node_in=head.node_inputs(h[segs.config_slot], model.config_encoder),
                      links=segs.links, link_feat=head.link_features(h, segs.links))


def segmented_graph_state(model: RankerGNN, segs: GraphSegments,
                          tensors: GraphTensors) -> GraphState:
    """Inference: every segment's trunk fresh, assembled into the graph's state."""
    outs = [segment_trunk(model, part, segs.reads[s]) for s, part in enumerate(segs.parts)]
    return assemble_state(model, tensors, segs, [o[0] for o in outs], [o[1] for o in outs])


def gst_costs(model: RankerGNN, g: ProcessedGraph, tensors: GraphTensors, idx: np.ndarray,
              device: torch.device, cfg: GnnConfig, step: int, table: TrunkTable) -> torch.Tensor:
    """Costs of a training step's configs ``idx``: the trunk with gradient over the drawn
    segments, the oldest stored segment refreshed without, the rest from the table; the head
    fresh over the whole graph's configurable nodes."""
    segs = graph_segments(g, tensors, cfg.segment_size, str(cfg.features_dir()))
    rng = np.random.default_rng([int(cfg.seed), int(step), zlib.crc32(segs.key.encode())])
    trained = set(int(s) for s in draw_trained(rng, segs, SEGMENTS_PER_STEP))
    entries = {s: table.get(segs.key, s) for s in range(segs.num_segments)}
    stored = [s for s in entries if s not in trained and entries[s] is not None]
    refresh = {s for s in entries if s not in trained and entries[s] is None}
    if stored and not refresh:
        refresh.add(min(stored, key=lambda s: entries[s].step))
    rows, pooled = [], []
    for s, part in enumerate(segs.parts):
        if s in trained or s in refresh:
            with torch.set_grad_enabled(s in trained and torch.is_grad_enabled()):
                r, p = segment_trunk(model, part, segs.reads[s])
            table.store(segs.key, s, r, p, step)
        else:
            r, p = entries[s].rows, entries[s].pooled
        rows.append(r)
        pooled.append(p)
    graph = assemble_state(model, tensors, segs, rows, pooled)
    feats = config_rows(g, idx, device)
    z = model.config_vectors(model.embed_configs(graph, feats), feats)
    return model.score(z)
