"""Graph structure (producers, topological order, depth, degree features) and k-hop pruning with rewiring.

Conventions as in :mod:`features.transforms`: ``edge_index`` arguments are ``(m, 2)`` rows
``[consumer, producer]`` unless the name says ``pyg``.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

# ---- structure ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Csr:
    """Producers (operands) of every node, in the edge order of the file."""

    indptr: np.ndarray
    indices: np.ndarray

    def of(self, node: int) -> np.ndarray:
        return self.indices[self.indptr[node]:self.indptr[node + 1]]

    def first_two(self, nodes: np.ndarray) -> np.ndarray:
        """(len(nodes), 2): the first two operands of each node, -1 where it has fewer."""
        out = np.full((len(nodes), 2), -1, np.int64)
        for k, node in enumerate(nodes.tolist()):
            ops = self.of(node)[:2]
            out[k, :len(ops)] = ops
        return out


def producers_csr(num_nodes: int, edge_index: np.ndarray) -> Csr:
    """Operands of each node (``edge_index`` rows are ``[consumer, producer]``), file order kept."""
    e = np.asarray(edge_index, dtype=np.int64).reshape(-1, 2)
    order = np.argsort(e[:, 0], kind="stable")
    counts = np.bincount(e[:, 0], minlength=num_nodes)
    indptr = np.zeros(num_nodes + 1, np.int64)
    np.cumsum(counts, out=indptr[1:])
    return Csr(indptr, e[order, 1])


def topo_order(num_nodes: int, edge_index: np.ndarray) -> np.ndarray:
    """A topological order (producers first). Identity when the file is already ordered (docs/competition.md §3)."""
    e = np.asarray(edge_index, dtype=np.int64).reshape(-1, 2)
    if e.size == 0 or bool(np.all(e[:, 0] > e[:, 1])):
        return np.arange(num_nodes, dtype=np.int64)
    consumers = sp.csr_matrix((np.ones(len(e), np.int8), (e[:, 1], e[:, 0])), shape=(num_nodes,) * 2)
    indeg = np.bincount(e[:, 0], minlength=num_nodes)
    frontier = np.flatnonzero(indeg == 0)
    order: list[np.ndarray] = []
    while frontier.size:
        order.append(frontier)
        nxt = consumers[frontier].indices
        np.subtract.at(indeg, nxt, 1)
        frontier = np.unique(nxt[indeg[nxt] == 0])
    out = np.concatenate(order) if order else np.zeros(0, np.int64)
    if out.size != num_nodes:
        raise ValueError("edge_index has a cycle: not a dataflow graph")
    return out


def node_depths(num_nodes: int, edge_index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Longest-path depth from the sources and to the sinks (both 0 at the ends)."""
    csr = producers_csr(num_nodes, edge_index)
    order = topo_order(num_nodes, edge_index)
    depth = np.zeros(num_nodes, np.int64)
    rdepth = np.zeros(num_nodes, np.int64)
    indptr, ind = csr.indptr, csr.indices
    for u in order:
        a, b = indptr[u], indptr[u + 1]
        if b > a:
            depth[u] = depth[ind[a:b]].max() + 1
    for u in order[::-1]:
        a, b = indptr[u], indptr[u + 1]
        if b > a:
            ops = ind[a:b]
            rdepth[ops] = np.maximum(rdepth[ops], rdepth[u] + 1)
    return depth, rdepth


def structure_features(num_nodes: int, edge_index: np.ndarray) -> np.ndarray:
    """(n, 5): log1p in-degree (operands), log1p out-degree (users), depth / max, reverse depth /
    max, log1p depth — computed on the *original* graph, before pruning."""
    e = np.asarray(edge_index, dtype=np.int64).reshape(-1, 2)
    indeg = np.bincount(e[:, 0], minlength=num_nodes)
    outdeg = np.bincount(e[:, 1], minlength=num_nodes)
    depth, rdepth = node_depths(num_nodes, e)
    longest = max(1, int(depth.max(initial=0)))
    return np.stack([np.log1p(indeg), np.log1p(outdeg), depth / longest, rdepth / longest,
                     np.log1p(depth)], axis=1).astype(np.float32)


STRUCTURE_NAMES = ("log_in_degree", "log_out_degree", "depth_frac", "rdepth_frac", "log_depth")


# ---- pruning -----------------------------------------------------------------------------------
@dataclass
class PruneResult:
    """A pruned graph: ``kept`` original ids (sorted), ``edge_index_pyg`` (2, m) in new positions,
    source = producer, target = consumer; ``num_rewired`` edges added by rewiring."""

    kept: np.ndarray
    edge_index_pyg: np.ndarray
    num_rewired: int
    num_orig_edges: int

    def positions(self, orig_ids: np.ndarray) -> np.ndarray:
        """Positions in the pruned graph of original node ids (which must be kept)."""
        if not np.isin(orig_ids, self.kept).all():
            raise ValueError("node not kept by pruning")
        return np.searchsorted(self.kept, orig_ids)


def k_hop_nodes(num_nodes: int, edge_index: np.ndarray, seeds: np.ndarray, hops: int) -> np.ndarray:
    """Boolean mask of nodes within ``hops`` undirected hops of ``seeds`` (hops < 0: all nodes)."""
    if hops < 0:
        return np.ones(num_nodes, bool)
    e = np.asarray(edge_index, dtype=np.int64).reshape(-1, 2)
    keep = np.zeros(num_nodes, bool)
    keep[np.asarray(seeds, np.int64)] = True
    if hops == 0 or e.size == 0:
        return keep
    adj = sp.csr_matrix((np.ones(2 * len(e), np.int8),
                         (np.r_[e[:, 0], e[:, 1]], np.r_[e[:, 1], e[:, 0]])), shape=(num_nodes,) * 2)
    frontier = np.flatnonzero(keep)
    for _ in range(hops):
        nbrs = np.unique(adj[frontier].indices)
        frontier = nbrs[~keep[nbrs]]
        if frontier.size == 0:
            break
        keep[frontier] = True
    return keep


def rewire_edges(num_nodes: int, edge_index: np.ndarray, keep: np.ndarray,
                 max_sources: int = 0) -> set[tuple[int, int]]:
    """Pairs ``(producer, consumer)`` of kept nodes joined by a path whose inner nodes are all removed.

    One pass in topological order: ``sources[r]`` is the set of kept nodes reaching removed node ``r``
    through removed nodes only; a kept consumer of ``r`` inherits an edge from each of them.
    Sets are shared, not copied, along chains of single-operand removed nodes.

    ``max_sources > 0`` caps each set to the sources latest in topological order (the nearest
    ones): densely cross-linked removed regions would otherwise add O(kept^2) edges. With the
    cap, reachability between kept nodes is usually, but no longer provably, preserved.
    """
    csr = producers_csr(num_nodes, edge_index)
    sources: dict[int, frozenset[int]] = {}
    pairs: set[tuple[int, int]] = set()
    empty: frozenset[int] = frozenset()
    for u in topo_order(num_nodes, edge_index).tolist():
        ops = csr.of(u).tolist()
        removed_ops = [p for p in ops if not keep[p]]
        if keep[u]:
            for p in removed_ops:
                pairs.update((s, u) for s in sources.get(p, empty))
            continue
        inherited = [sources[p] for p in removed_ops if sources.get(p)]
        kept_ops = frozenset(p for p in ops if keep[p])
        if not kept_ops and len(inherited) == 1:
            sources[u] = inherited[0]
        elif kept_ops or inherited:
            merged = kept_ops.union(*inherited)
            if max_sources and len(merged) > max_sources:
                merged = frozenset(heapq.nlargest(max_sources, merged))
            sources[u] = merged
    return pairs


def prune_graph(num_nodes: int, edge_index: np.ndarray, seeds: np.ndarray, hops: int,
                rewire: bool = True, max_sources: int = 0) -> PruneResult:
    """Keep ``seeds`` (configurable nodes) and their ``hops``-hop neighbourhood; optionally rewire.

    ``hops < 0`` keeps the whole graph, and so does an empty ``seeds`` (a graph without
    configurable nodes would otherwise vanish). Every seed is always kept, and with ``rewire`` (and
    no ``max_sources`` cap, see :func:`rewire_edges`) the reachability between kept nodes equals
    that of the original graph.
    """
    e = np.asarray(edge_index, dtype=np.int64).reshape(-1, 2)
    keep = k_hop_nodes(num_nodes, e, seeds, hops if len(seeds) else -1)
    kept = np.flatnonzero(keep)
    new_pos = np.full(num_nodes, -1, np.int64)
    new_pos[kept] = np.arange(len(kept))
    both = keep[e[:, 0]] & keep[e[:, 1]] if e.size else np.zeros(0, bool)
    src = new_pos[e[both, 1]]
    dst = new_pos[e[both, 0]]
    n_rewired = 0
    if rewire and not keep.all():
        pairs = rewire_edges(num_nodes, e, keep, max_sources)
        if pairs:
            rp = np.array(sorted(pairs), dtype=np.int64)
            existing = set(zip(src.tolist(), dst.tolist()))
            new = [(a, b) for a, b in zip(new_pos[rp[:, 0]].tolist(), new_pos[rp[:, 1]].tolist())
                   if (a, b) not in existing]
            if new:
                arr = np.array(new, dtype=np.int64)
                src, dst = np.r_[src, arr[:, 0]], np.r_[dst, arr[:, 1]]
                n_rewired = len(new)
    ei = np.stack([src, dst]).astype(np.int64) if len(src) else np.zeros((2, 0), np.int64)
    return PruneResult(kept=kept, edge_index_pyg=ei, num_rewired=n_rewired, num_orig_edges=int(len(e)))
