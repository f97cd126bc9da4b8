"""Graph Segment Training on the factorized trunk: whole-graph context for the config head at
the memory of one segment (docs/gnn.md, "Graph Segment Training").

The head reads only a few of the trunk's outputs: the embeddings of the configurable nodes and of
the configurable-node links' inner nodes, and the graph's pooled summary. So, unlike the copy
model's per-config history (:mod:`models.gnn.gst`), a :class:`TrunkTable` holds per graph and
segment the trunk's outputs the head reads from that segment (its **read rows**) and its pooling
statistics (:meth:`Pool.partial`). A step trains one segment's trunk, refreshes the oldest stored
segment without gradient, and runs the head fresh over every configurable node for every config.
Inference is exact (:func:`segmented_graph_state`).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import torch

from features.processed import ProcessedGraph
from models.gnn import gst
from models.gnn.config import GnnConfig
from models.gnn.data import GraphTensors, config_rows, tabular_rows
from models.gnn.gst import GraphSegments, SegmentCache, SegmentLru, SegmentTensors, draw_trained
from models.gnn.model import ConfigLinks, GraphState, RankerGNN


@dataclass
class TrunkSegments:
    """Where a graph's segments' read rows go in the graph's read-row array."""

    reads: list[torch.Tensor]  # per segment: local positions of the nodes the head reads
    gather: torch.Tensor  # read rows concatenated segment by segment -> graph read-row order
    config_slot: torch.Tensor  # (nc,) read row of each configurable node
    links: ConfigLinks  # the graph's links, inner nodes as read rows (-1: none)


def trunk_segments(segs: GraphSegments, tensors: GraphTensors) -> TrunkSegments:
    """The read rows of ``segs`` (a layout graph's segments): configurable nodes and the links'
    inner nodes, each read from the segment that holds it (built once, kept on ``segs``)."""
    if segs.trunk is not None:
        return segs.trunk
    if tensors.config_node_pos is None or tensors.links is None:
        raise ValueError("GST on the factorized trunk needs a layout graph with its links")
    pos = tensors.config_node_pos.cpu().numpy()
    inner = tensors.links.inner.cpu().numpy()
    num_nodes = int(tensors.node_feat.shape[0])
    read = np.unique(np.concatenate([pos, inner[inner >= 0]]))
    slot = np.full(num_nodes, -1, dtype=np.int64)
    slot[read] = np.arange(len(read))
    device = tensors.node_feat.device
    reads, order = [], []
    for part in segs.parts:
        here = np.flatnonzero(slot[part.node_ids] >= 0)
        reads.append(torch.as_tensor(here, device=device))
        order.append(slot[part.node_ids[here]])
    gather = np.argsort(np.concatenate(order), kind="stable")
    inner_slot = np.where(inner >= 0, slot[np.maximum(inner, 0)], -1)
    links = ConfigLinks(tensors.links.edge_index, tensors.links.hops,
                        torch.as_tensor(inner_slot, device=device), tensors.links.kind)
    segs.trunk = TrunkSegments(reads, torch.as_tensor(gather, device=device),
                               torch.as_tensor(slot[pos], device=device), links)
    return segs.trunk


@dataclass
class _TrunkEntry:
    rows: torch.Tensor  # (k, d) read rows of one segment
    pooled: torch.Tensor  # (S,) Pool.partial of its nodes
    step: int  # the training step that wrote it

    @property
    def nbytes(self) -> int:
        return int(self.rows.numel() * self.rows.element_size()
                   + self.pooled.numel() * self.pooled.element_size())


class TrunkTable(SegmentLru):
    """Stored trunk outputs per (graph, segment), detached, at most ``max_bytes`` (the oldest
    written graph-segments evicted first)."""

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, graph: str, segment: int) -> _TrunkEntry | None:
        return self._rows.get((graph, int(segment)))

    def store(self, graph: str, segment: int, rows: torch.Tensor, pooled: torch.Tensor,
              step: int) -> None:
        slot = (graph, int(segment))
        self._take(slot)
        self._put(slot, _TrunkEntry(rows.detach(), pooled.detach(), int(step)))


class TrunkGstState:
    """What GST on the factorized trunk keeps between the steps of one run."""

    def __init__(self, history_max_bytes: int):
        self.segments = SegmentCache()
        self.table = TrunkTable(history_max_bytes)


def segment_trunk(model: RankerGNN, part: SegmentTensors,
                  reads: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One segment through the trunk: its read rows (k, d) and its pooling statistics."""
    h = model.trunk(part.node_feat, part.node_opcode, part.edge_index)
    return h[reads], model.pool.partial(h)


def assemble_state(model: RankerGNN, tensors: GraphTensors, ts: TrunkSegments,
                   rows: list[torch.Tensor], pooled: list[torch.Tensor]) -> GraphState:
    """The graph's :class:`GraphState` from every segment's read rows and pooling statistics."""
    head = model.config_head
    h = torch.cat(rows)[ts.gather]
    state = GraphState(tensors.node_feat, tensors.node_opcode, tensors.edge_index,
                       tensors.config_node_pos)
    state.summary = model.pool.combine(torch.stack(pooled))
    state.node_in = head.node_inputs(h[ts.config_slot], model.config_encoder)
    state.links = ts.links
    state.link_feat = head.link_features(h, ts.links)
    return state


def segmented_graph_state(model: RankerGNN, segs: GraphSegments,
                          tensors: GraphTensors) -> GraphState:
    """Inference: every segment's trunk fresh, assembled into the graph's state."""
    ts = trunk_segments(segs, tensors)
    outs = [segment_trunk(model, part, ts.reads[s]) for s, part in enumerate(segs.parts)]
    return assemble_state(model, tensors, ts, [o[0] for o in outs], [o[1] for o in outs])


def trunk_gst_costs(model: RankerGNN, g: ProcessedGraph, tensors: GraphTensors, idx: np.ndarray,
                    device: torch.device, cfg: GnnConfig, step: int,
                    state: TrunkGstState) -> torch.Tensor:
    """Costs of a training step's configs ``idx``: the trunk with gradient over the drawn
    segments, the oldest stored segment refreshed without, the rest from the table; the head
    fresh over the whole graph's configurable nodes."""
    if not model.factorized:
        raise ValueError("GST on the factorized trunk needs a factorized layout model "
                         "(--arch factorized); a copy model trains the published recipe")
    segs = state.segments.get(g, tensors, cfg.segment_size, str(cfg.features_dir()))
    ts = trunk_segments(segs, tensors)
    rng = np.random.default_rng([int(cfg.seed), int(step), zlib.crc32(segs.key.encode())])
    trained = set(int(s) for s in draw_trained(rng, segs, gst.SEGMENTS_PER_STEP))
    entries = {s: state.table.get(segs.key, s) for s in range(segs.num_segments)}
    stored = [s for s in entries if s not in trained and entries[s] is not None]
    refresh = {s for s in entries if s not in trained and entries[s] is None}
    if stored and not refresh:
        refresh.add(min(stored, key=lambda s: entries[s].step))
    rows, pooled = [], []
    for s, part in enumerate(segs.parts):
        if s in trained or s in refresh:
            with torch.set_grad_enabled(s in trained and torch.is_grad_enabled()):
                r, p = segment_trunk(model, part, ts.reads[s])
            state.table.store(segs.key, s, r, p, step)
        else:
            r, p = entries[s].rows, entries[s].pooled
        rows.append(r)
        pooled.append(p)
    graph = assemble_state(model, tensors, ts, rows, pooled)
    feats = config_rows(g, idx, device)
    z = model.config_vectors(model.embed_configs(graph, feats), feats,
                             tabular_rows(model, g, tensors, feats))
    return model.score(z)
