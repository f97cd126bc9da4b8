"""Graph partitions for Graph Segment Training: coverage, order, on-disk cache."""

from __future__ import annotations

import numpy as np
import pytest

from features.processed import ProcessedGraph
from features.pruning import topo_order
from features.segments import cached_segmentation, num_parts, segment_graph, segments_path


def _dag(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dst = np.repeat(np.arange(1, n), 2)
    src = np.array([rng.integers(0, v) for v in dst], dtype=np.int64)
    perm = rng.permutation(n)  # node ids not in topological order
    return np.unique(np.stack([perm[src], perm[dst]]), axis=1)


def _assignment(seg) -> np.ndarray:
    """(n,) segment id of every node."""
    out = np.empty(len(seg.nodes), dtype=np.int64)
    out[seg.nodes] = np.repeat(np.arange(seg.num_segments), np.diff(seg.starts))
    return out


def _graph(n: int = 50) -> ProcessedGraph:
    return ProcessedGraph(collection="layout:xla:random", split="train", stem="g",
                          node_feat=np.zeros((n, 2), np.float32), node_opcode=np.zeros(n, np.int64),
                          edge_index=_dag(n), orig_node_ids=np.arange(n),
                          config_feat=np.zeros((3, 1, 18), np.int8), config_index=np.arange(3),
                          config_node_pos=np.array([0]))


@pytest.mark.parametrize("n,size", [(1, 4), (7, 3), (100, 10), (257, 1000), (300, 7)])
def test_partition_covers_every_node_once(n, size):
    seg = segment_graph(n, _dag(n, seed=n), size)
    assert np.array_equal(np.sort(seg.nodes), np.arange(n))
    assert seg.starts[0] == 0 and seg.starts[-1] == n and np.all(np.diff(seg.starts) > 0)
    assert 1 <= seg.num_segments <= num_parts(n, size)
    counts = np.bincount(_assignment(seg), minlength=seg.num_segments)
    assert np.array_equal(counts, np.diff(seg.starts))


def test_contiguous_follows_topological_order():
    n, size = 200, 16
    edges = _dag(n, seed=3)
    seg = segment_graph(n, edges, size)
    assert seg.num_segments == n // size + 1  # the organisers' count
    assign = _assignment(seg)
    assert np.all(assign[edges[0]] <= assign[edges[1]])  # no edge points back to an earlier segment
    order = topo_order(n, edges[::-1].T)  # npz rows [consumer, producer]
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    assert np.all(pos[edges[0]] < pos[edges[1]])
    sizes = np.diff(seg.starts)
    assert sizes.max() - sizes.min() <= 1


def test_cache_written_once_and_keyed_by_graph(tmp_path):
    g = _graph()
    first = cached_segmentation(g, 8, tmp_path)
    path = segments_path(tmp_path, g, 8)
    assert path.is_file()
    mtime = path.stat().st_mtime_ns
    again = cached_segmentation(g, 8, tmp_path)
    assert np.array_equal(first.nodes, again.nodes) and path.stat().st_mtime_ns == mtime
    assert segments_path(tmp_path, g, 9) != path
    other = _graph(51)
    assert segments_path(tmp_path, other, 8) != path
    path.write_bytes(b"not an npz")  # a corrupt cache file is recomputed
    assert np.array_equal(cached_segmentation(g, 8, tmp_path).nodes, first.nodes)
    # no feature directory: computed in memory, nothing written
    assert cached_segmentation(g, 8, tmp_path / "missing").num_segments == first.num_segments
    assert not (tmp_path / "missing").exists()


def test_bad_size():
    with pytest.raises(ValueError, match="positive"):
        segment_graph(5, _dag(5), 0)
