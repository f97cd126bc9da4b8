"""The configurable-node graph: which configurable nodes act on each other through the program
(the factorized GNN's head graph; the two link kinds are defined in docs/features.md, "Transforms").

A *path* link (kind 0) joins ``u -> ... -> v`` through non-configurable nodes only; a *meet* link
(kind 1) joins ``a < b`` whose outputs meet at a non-configurable node: two layouts meeting at one
op (say the operands of an add) decide whether it needs a copy, a cost no directed path shows.

Computed by ``features build`` on the source graph (before pruning), stored as ``config_graph.npy``;
:func:`config_graph` on the pruned graph is the fallback for graphs written without it.

Array: ``(E, 6)`` int64 rows ``[src, dst, hops, first_inner, last_inner, kind]``; ``src``/``dst``
are ordinals of configurable nodes (positions in ``node_config_ids`` / ``config_node_pos``,
producer first for a path link, the smaller first for a meet link), ``hops`` in
``1..max_hops``, the inner nodes are node ids of the graph the function was given (-1 when the
path has no inner node); rows sorted by ``(kind, src, dst)``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

COLUMNS = ("src", "dst", "hops", "first_inner", "last_inner", "kind")
NO_NODE = -1
PATH, MEET = 0, 1


def empty_config_graph() -> np.ndarray:
    return np.zeros((0, len(COLUMNS)), np.int64)


def config_graph(num_nodes: int, producer: np.ndarray, consumer: np.ndarray,
                 config_nodes: np.ndarray, max_hops: int,
                 max_links: int = 0) -> np.ndarray:
    """Links between configurable nodes (module docstring) of a graph given as directed edges
    ``producer[i] -> consumer[i]``; ``config_nodes`` are the configurable node ids in ordinal
    order. ``max_links > 0`` keeps at most that many links per source, the nearest first (a
    bound for programs where one op fans out to thousands of configurable consumers)."""
    config_nodes = np.asarray(config_nodes, np.int64)
    if max_hops < 1 or len(config_nodes) == 0:
        return empty_config_graph()
    producer, consumer = np.asarray(producer, np.int64), np.asarray(consumer, np.int64)
    # row p lists the consumers of node p (duplicate edges merged)
    adj = sp.csr_matrix((np.ones(len(producer), np.int8), (producer, consumer)), shape=(num_nodes,) * 2)
    adj.sum_duplicates()
    ordinal = np.full(num_nodes, -1, np.int64)
    ordinal[config_nodes] = np.arange(len(config_nodes))
    stamp = np.full(num_nodes, -1, np.int64)  # last source that visited a node
    paths, reached = [], []
    for src, u in enumerate(config_nodes.tolist()):
        links, reach = _links_from(adj, ordinal, stamp, src, int(u), max_hops, max_links)
        paths.append(links)
        reached.append(reach)
    out = np.concatenate(paths + [meet_links(np.concatenate(reached), max_hops, max_links)])
    return out[np.lexsort((out[:, 1], out[:, 0], out[:, 5]))] if len(out) else out


def meet_links(reach: np.ndarray, max_hops: int, max_links: int = 0) -> np.ndarray:
    """Meet links from ``reach`` rows ``[src, node, hops]`` (every non-configurable node each
    configurable node reaches through non-configurable nodes, at its distance): the pairs of
    sources that reach one node within ``max_hops`` edges in all, each pair once at its nearest
    meeting node; at most ``max_links`` per configurable node, the nearest first."""
    if len(reach) == 0:
        return empty_config_graph()
    reach = reach[np.lexsort((reach[:, 2], reach[:, 1]))]  # by node, nearest source first
    starts = np.flatnonzero(np.r_[True, reach[1:, 1] != reach[:-1, 1]])
    counts = np.diff(np.r_[starts, len(reach)])
    pairs = []
    for start, count in zip(starts[counts > 1].tolist(), counts[counts > 1].tolist()):
        group = reach[start:start + count]
        if max_links:
            group = group[:max_links]
        a, b = np.triu_indices(len(group), k=1)
        hops = group[a, 2] + group[b, 2]
        ok = hops <= max_hops
        if ok.any():
            lo = np.minimum(group[a, 0], group[b, 0])[ok]
            hi = np.maximum(group[a, 0], group[b, 0])[ok]
            node = np.full(ok.sum(), group[0, 1])
            pairs.append(np.stack([lo, hi, hops[ok], node, node, np.full(ok.sum(), MEET)], axis=1))
    if not pairs:
        return empty_config_graph()
    links = np.concatenate(pairs)
    links = links[np.lexsort((links[:, 2], links[:, 1], links[:, 0]))]  # per pair, nearest first
    first = np.r_[True, np.any(links[1:, :2] != links[:-1, :2], axis=1)]
    links = links[first]
    if max_links:  # nearest links of each source (sources are the smaller ordinal)
        links = links[np.lexsort((links[:, 2], links[:, 0]))]
        rank = np.arange(len(links)) - np.searchsorted(links[:, 0], links[:, 0])
        links = links[rank < max_links]
    return links


def _links_from(adj: sp.csr_matrix, ordinal: np.ndarray, stamp: np.ndarray, src: int, u: int,
                max_hops: int, max_links: int) -> tuple[np.ndarray, np.ndarray]:
    """Breadth-first search from configurable node ``u`` over consumers, through non-configurable
    nodes only: one path link per configurable node reached (its shortest path), and the
    ``[src, node, hops]`` rows of the non-configurable nodes reached."""
    stamp[u] = src
    frontier = np.array([u], np.int64)
    first = np.array([NO_NODE], np.int64)  # first inner node of the path to each frontier node
    found: list[np.ndarray] = []
    reached: list[np.ndarray] = []
    for hops in range(1, max_hops + 1):
        starts, ends = adj.indptr[frontier], adj.indptr[frontier + 1]
        counts = ends - starts
        if counts.sum() == 0:
            break
        nxt = adj.indices[_ranges(starts, counts)]
        parent = np.repeat(frontier, counts)
        via = np.repeat(first, counts)
        new = stamp[nxt] != src
        nxt, parent, via = nxt[new], parent[new], via[new]
        nxt, keep = np.unique(nxt, return_index=True)  # shortest path: first parent wins
        parent, via = parent[keep], via[keep]
        stamp[nxt] = src
        is_cfg = ordinal[nxt] >= 0
        if is_cfg.any():
            inner = hops > 1
            last = np.where(inner, parent[is_cfg], NO_NODE)
            first_inner = np.where(inner, via[is_cfg], NO_NODE)
            found.append(np.stack([np.full(is_cfg.sum(), src), ordinal[nxt[is_cfg]],
                                   np.full(is_cfg.sum(), hops), first_inner, last,
                                   np.full(is_cfg.sum(), PATH)], axis=1))
        # non-configurable nodes carry the search on; a path's first inner node is itself
        frontier = nxt[~is_cfg]
        first = np.where(via[~is_cfg] == NO_NODE, frontier, via[~is_cfg])
        reached.append(np.stack([np.full(len(frontier), src), frontier,
                                 np.full(len(frontier), hops)], axis=1))
        if max_links and sum(len(f) for f in found) >= max_links or frontier.size == 0:
            break
    links = np.concatenate(found).astype(np.int64) if found else empty_config_graph()
    reach = np.concatenate(reached).astype(np.int64) if reached else np.zeros((0, 3), np.int64)
    return (links[:max_links] if max_links else links), reach


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(start, start + count)`` for each pair, without a Python loop."""
    total = int(counts.sum())
    shift = np.repeat(starts - np.cumsum(counts) + counts, counts)
    return shift + np.arange(total)


def config_graph_of_npz(num_nodes: int, edge_index: np.ndarray, config_ids: np.ndarray,
                        max_hops: int, max_links: int = 0) -> np.ndarray:
    """:func:`config_graph` of a source graph in the npz convention (``edge_index`` rows
    ``[consumer, producer]``)."""
    e = np.asarray(edge_index, np.int64).reshape(-1, 2)
    return config_graph(num_nodes, e[:, 1], e[:, 0], config_ids, max_hops, max_links)


def to_positions(links: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """``links`` of a source graph with inner node ids mapped to positions among the ``kept``
    (sorted) node ids of a pruned graph; inner nodes that were pruned become -1."""
    out = np.array(links, np.int64, copy=True)
    for col in (3, 4):
        ids = out[:, col]
        out[:, col] = np.where((ids >= 0) & np.isin(ids, kept), np.searchsorted(kept, ids), NO_NODE)
    return out
