"""The configurable-node graph (features.configgraph): links exactly where a non-configurable
path within the hop limit joins two configurable nodes."""

from __future__ import annotations

import networkx as nx
import numpy as np
from hypothesis import given, settings, strategies as st

from features.configgraph import config_graph, config_graph_of_npz, to_positions


@st.composite
def dags(draw):
    """A random DAG in topological order (edges producer < consumer) and its configurable nodes."""
    n = draw(st.integers(2, 24))
    pairs = [(p, c) for c in range(1, n) for p in range(c)]
    edges = draw(st.lists(st.sampled_from(pairs), max_size=3 * n)) if pairs else []
    cfg = sorted(draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=n)))
    hops = draw(st.integers(1, 6))
    return n, edges, cfg, hops


def brute_force(n: int, edges, cfg: list[int], hops: int) -> dict[tuple[int, int], int]:
    """(src ordinal, dst ordinal) -> shortest path length, by networkx on the graph where only
    the two endpoints may be configurable."""
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    configurable = set(cfg)
    links = {}
    for i, u in enumerate(cfg):
        for j, v in enumerate(cfg):
            if u == v:
                continue
            allowed = [w for w in range(n) if w not in configurable] + [u, v]
            sub = g.subgraph(allowed)
            # paths must not pass *through* v or start elsewhere than u: remove v's out-edges and
            # u's in-edges, which no simple u -> v path uses anyway
            try:
                length = nx.shortest_path_length(sub, u, v)
            except nx.NetworkXNoPath:
                continue
            if length <= hops:
                links[(i, j)] = length
    return links


@settings(max_examples=150, deadline=None)
@given(dags())
def test_linked_exactly_when_a_non_configurable_path_within_the_limit_joins_them(case):
    n, edges, cfg, hops = case
    producer = np.array([p for p, _ in edges], np.int64)
    consumer = np.array([c for _, c in edges], np.int64)
    links = config_graph(n, producer, consumer, np.array(cfg), hops)
    got = {(int(s), int(d)): int(h) for s, d, h, _, _ in links}
    assert got == brute_force(n, edges, cfg, hops)
    assert len(got) == len(links)  # one row per linked pair
    g = nx.DiGraph(list(edges))
    configurable = set(cfg)
    for s, d, h, first, last in links.tolist():
        u, v = cfg[s], cfg[d]
        if h == 1:
            assert first == last == -1
            continue
        # the inner nodes lie on one shortest path: u -> first ... last -> v, all non-configurable
        assert first not in configurable and last not in configurable
        assert g.has_edge(u, first) and g.has_edge(last, v)
        inner = g.subgraph([w for w in range(n) if w not in configurable])
        assert nx.shortest_path_length(inner, first, last) == h - 2


def test_npz_convention_and_positions_after_pruning():
    # chain 0 -> 1 -> 2 -> 3 (npz rows are [consumer, producer]); 0 and 3 configurable
    edge_index = np.array([[1, 0], [2, 1], [3, 2]])
    links = config_graph_of_npz(4, edge_index, np.array([0, 3]), max_hops=3)
    assert links.tolist() == [[0, 1, 3, 1, 2]]
    assert config_graph_of_npz(4, edge_index, np.array([0, 3]), max_hops=2).shape == (0, 5)
    # node 1 pruned: its inner slot becomes -1, node 2 moves to position 1
    assert to_positions(links, np.array([0, 2, 3])).tolist() == [[0, 1, 3, -1, 1]]


def test_max_links_keeps_the_nearest():
    # 0 feeds 1 directly and 2, 3 through a non-configurable node 4
    producer = np.array([0, 0, 4, 4])
    consumer = np.array([1, 4, 2, 3])
    links = config_graph(5, producer, consumer, np.array([0, 1, 2, 3]), max_hops=4, max_links=1)
    assert links[:, :3].tolist() == [[0, 1, 1]]


def test_no_configurable_node_or_no_hops():
    assert config_graph(3, np.array([0]), np.array([1]), np.array([], np.int64), 4).shape == (0, 5)
    assert config_graph(3, np.array([0]), np.array([1]), np.array([0, 1]), 0).shape == (0, 5)
