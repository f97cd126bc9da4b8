"""The configurable-node graph (features.configgraph): path links exactly where a
non-configurable path within the hop limit joins two configurable nodes, meet links exactly where
their outputs meet at a non-configurable node within the limit."""

from __future__ import annotations

import networkx as nx
import numpy as np
from hypothesis import given, settings, strategies as st

from features.configgraph import MEET, PATH, config_graph, config_graph_of_npz, to_positions


@st.composite
def dags(draw):
    """A random DAG in topological order (edges producer < consumer) and its configurable nodes."""
    n = draw(st.integers(2, 24))
    pairs = [(p, c) for c in range(1, n) for p in range(c)]
    edges = draw(st.lists(st.sampled_from(pairs), max_size=3 * n)) if pairs else []
    cfg = sorted(draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=n)))
    hops = draw(st.integers(1, 6))
    return n, edges, cfg, hops


def non_configurable_distances(n: int, edges, cfg: list[int], source: int) -> dict[int, int]:
    """Distances from ``source`` to the non-configurable nodes it reaches through
    non-configurable nodes only."""
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    inner = g.subgraph([w for w in range(n) if w not in set(cfg)] + [source])
    return {w: d for w, d in nx.single_source_shortest_path_length(inner, source).items()
            if w != source}


def brute_force_meets(n: int, edges, cfg: list[int], hops: int) -> dict[tuple[int, int], int]:
    """(smaller ordinal, larger ordinal) -> smallest d_a + d_b over meeting nodes."""
    dist = [non_configurable_distances(n, edges, cfg, u) for u in cfg]
    meets = {}
    for a in range(len(cfg)):
        for b in range(a + 1, len(cfg)):
            common = set(dist[a]) & set(dist[b])
            best = min((dist[a][w] + dist[b][w] for w in common), default=hops + 1)
            if best <= hops:
                meets[(a, b)] = best
    return meets


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
    paths, meets = links[links[:, 5] == PATH], links[links[:, 5] == MEET]
    got = {(int(s), int(d)): int(h) for s, d, h, *_ in paths}
    assert got == brute_force(n, edges, cfg, hops)
    assert len(got) == len(paths)  # one row per linked pair
    assert {(int(a), int(b)): int(h) for a, b, h, *_ in meets} == brute_force_meets(n, edges, cfg, hops)
    assert len(meets) == len({(a, b) for a, b, *_ in meets.tolist()})
    g = nx.DiGraph(list(edges))
    configurable = set(cfg)
    for a, b, h, w, w2, _ in meets.tolist():  # the meeting node is reached by both at that sum
        da = non_configurable_distances(n, edges, cfg, cfg[a])
        db = non_configurable_distances(n, edges, cfg, cfg[b])
        assert w == w2 and a < b and da[w] + db[w] == h
    for s, d, h, first, last, _ in paths.tolist():
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
    assert links.tolist() == [[0, 1, 3, 1, 2, PATH]]
    assert config_graph_of_npz(4, edge_index, np.array([0, 3]), max_hops=2).shape == (0, 6)
    # node 1 pruned: its inner slot becomes -1, node 2 moves to position 1
    assert to_positions(links, np.array([0, 2, 3])).tolist() == [[0, 1, 3, -1, 1, PATH]]


def test_outputs_meeting_at_an_op_are_linked():
    # 0 -> 2 <- 1 (an add of two configurable outputs), 2 -> 3 (configurable)
    links = config_graph(4, np.array([0, 1, 2]), np.array([2, 2, 3]), np.array([0, 1, 3]), 4)
    assert links.tolist() == [[0, 2, 2, 2, 2, PATH], [1, 2, 2, 2, 2, PATH], [0, 1, 2, 2, 2, MEET]]


def test_max_links_keeps_the_nearest():
    # 0 feeds 1 directly and 2, 3 through a non-configurable node 4
    producer = np.array([0, 0, 4, 4])
    consumer = np.array([1, 4, 2, 3])
    links = config_graph(5, producer, consumer, np.array([0, 1, 2, 3]), max_hops=4, max_links=1)
    assert links[links[:, 5] == PATH][:, :3].tolist() == [[0, 1, 1]]


def test_no_configurable_node_or_no_hops():
    assert config_graph(3, np.array([0]), np.array([1]), np.array([], np.int64), 4).shape == (0, 6)
    assert config_graph(3, np.array([0]), np.array([1]), np.array([0, 1]), 0).shape == (0, 6)
