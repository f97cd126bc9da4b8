"""The padding-cost heuristic: sensible preferences on constructed cases, streaming, ranks."""

from __future__ import annotations

import numpy as np
import pytest

from features.heuristic import graph_costs, log_costs, rank_fraction, tile_costs
from features.io import iter_npz_rows, load_npz


def _tile(out_bounds):
    feat = np.zeros((len(out_bounds), 24), np.float32)
    for i, b in enumerate(out_bounds):
        feat[i, 8:8 + len(b)] = b
        feat[i, 15] = np.prod(b)
    return feat


def _kernel_root(shape, minor_to_major):
    node_feat = np.zeros((3, 140), np.float32)
    node_feat[:, 21:21 + len(shape)] = shape
    node_feat[:, 134:134 + len(shape)] = minor_to_major
    node_feat[2, 0] = 1  # root
    return node_feat


def test_tile_prefers_few_steps_no_overhang_and_no_spill():
    # output (4096, 1000), row-major: dim 1 is minor (bounds x128), dim 0 second-minor (x8)
    nf = _kernel_root([4096, 1000], [1, 0])
    small, good, overhang, huge = tile_costs(_tile([[1, 1], [8, 8], [8, 3], [512, 8]]), nf)
    assert good < small  # 64 grid steps instead of 4096
    assert good < overhang  # 384-wide tiles overhang 1000 columns (1152 computed)
    assert huge > small  # a 4096 x 1024 tile, double-buffered, spills far out of VMEM
    # the layout decides which bound is the 128-lane one
    row_major = tile_costs(_tile([[8, 2]]), nf)[0]
    col_major = tile_costs(_tile([[8, 2]]), _kernel_root([4096, 1000], [0, 1]))[0]
    assert row_major != pytest.approx(col_major)


def layout_file(path, layouts):
    """One configurable node of shape (300, 256) (dim 0 = 300, dim 1 = 256), default m2m (0, 1),
    whose operand (node 0) has the same shape."""
    node_feat = np.zeros((2, 140), np.float32)
    node_feat[:, 21:23] = [300, 256]
    node_feat[:, 134:136] = [0, 1]
    cfg = np.full((len(layouts), 1, 18), -1, np.float32)
    for i, lay in enumerate(layouts):
        cfg[i, 0, :len(lay)] = lay
    np.savez(path, node_feat=node_feat, node_opcode=np.array([0, 1]), edge_index=np.array([[1, 0]]),
             node_config_ids=np.array([1]), node_config_feat=cfg, config_runtime=np.ones(len(layouts)),
             node_splits=np.array([0]))
    return path


def test_layout_prefers_the_lane_aligned_minor_dim(tmp_path):
    # [1, 0]: dim 1 (256, a multiple of 128) most minor; [0, 1]: dim 0 (300) minor -> padded
    # []: all -1 = compiler default = (0, 1) -> same as [0, 1]
    cost = graph_costs(layout_file(tmp_path / "g.npz", [[1, 0], [0, 1], []]), False)
    assert cost[0] < cost[1]
    assert cost[2] == pytest.approx(cost[1])
    # input layout (slot 1) prices the operand: lane-aligned input beats a padded one
    both = graph_costs(layout_file(tmp_path / "h.npz", [[1, 0, -1, -1, -1, -1, 1, 0],
                                                        [1, 0, -1, -1, -1, -1, 0, 1]]), False)
    assert both[0] < both[1]


@pytest.mark.parametrize("compressed", [False, True])
def test_iter_npz_rows_streams_the_whole_array(tmp_path, compressed):
    arr = np.arange(5 * 3 * 4, dtype=np.float32).reshape(5, 3, 4)
    (np.savez_compressed if compressed else np.savez)(tmp_path / "a.npz", x=arr)
    chunks = list(iter_npz_rows(tmp_path / "a.npz", "x", rows=2))
    assert [len(c) for c in chunks] == [2, 2, 1]
    assert np.array_equal(np.concatenate(chunks), arr)


def test_log_costs_of_a_loaded_graph_match_the_file_costs(tmp_path):
    """The feature path (loaded / coded Graph, small chunks) prices exactly like the file path."""
    path = layout_file(tmp_path / "g.npz", [[1, 0], [0, 1], [], [1], [0]])
    expected = np.log1p(graph_costs(path, is_tile=False))
    assert np.allclose(log_costs(load_npz(path), rows=2), expected)
    from features.configcodes import load_coded
    assert np.allclose(log_costs(load_coded(path, chunk=2), rows=3), expected)


def test_rank_fraction_spans_zero_to_one_with_shared_ties():
    assert rank_fraction(np.array([3.0, 1.0, 2.0])).tolist() == [1.0, 0.0, 0.5]
    assert rank_fraction(np.array([5.0, 1.0, 1.0])).tolist() == [1.0, 0.25, 0.25]
    assert rank_fraction(np.array([7.0])).tolist() == [0.5]
    assert rank_fraction(np.zeros(0)).shape == (0,)
