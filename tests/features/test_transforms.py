"""Graph transforms on small hand-made graphs: pruning + rewiring, -1 padding, dot dims, dedup."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from features import columns, dot_features, pruning
from features import transforms as tf
from features.dot_features import DotDims

OP = columns.opcode_ids()


def edges(*pairs: tuple[int, int]) -> np.ndarray:
    """npz convention rows ``[consumer, producer]`` from ``(producer, consumer)`` pairs."""
    return np.array([(c, p) for p, c in pairs], dtype=np.int64).reshape(-1, 2)


def pyg_pairs(result: pruning.PruneResult) -> set[tuple[int, int]]:
    """Pruned edges as (producer, consumer) in ORIGINAL ids."""
    k = result.kept
    return {(int(k[a]), int(k[b])) for a, b in result.edge_index_pyg.T}


# ---- pruning -------------------------------------------------------------------------------
def test_prune_chain_rewires_through_removed_nodes() -> None:
    e = edges((0, 1), (1, 2), (2, 3), (3, 4))
    r0 = pruning.prune_graph(5, e, np.array([0, 4]), hops=0)
    assert r0.kept.tolist() == [0, 4]
    assert pyg_pairs(r0) == {(0, 4)} and r0.num_rewired == 1
    r1 = pruning.prune_graph(5, e, np.array([0, 4]), hops=1)
    assert r1.kept.tolist() == [0, 1, 3, 4]
    assert pyg_pairs(r1) == {(0, 1), (1, 3), (3, 4)}
    no_rewire = pruning.prune_graph(5, e, np.array([0, 4]), hops=0, rewire=False)
    assert pyg_pairs(no_rewire) == set()
    assert pruning.prune_graph(5, e, np.array([0, 4]), hops=-1).kept.tolist() == [0, 1, 2, 3, 4]


def test_prune_without_configurable_nodes_keeps_graph() -> None:
    r = pruning.prune_graph(3, edges((0, 1), (1, 2)), np.zeros(0, np.int64), hops=1)
    assert r.kept.tolist() == [0, 1, 2] and pyg_pairs(r) == {(0, 1), (1, 2)}


def test_prune_diamond_and_fan_in() -> None:
    # 0 -> 2, 1 -> 2, 2 -> 3 -> 5, 4 -> 5 ; configurable {0, 1, 5}; 4 is a separate input of 5
    e = edges((0, 2), (1, 2), (2, 3), (3, 5), (4, 5))
    r = pruning.prune_graph(6, e, np.array([0, 1, 5]), hops=0)
    assert r.kept.tolist() == [0, 1, 5]
    assert pyg_pairs(r) == {(0, 5), (1, 5)}
    assert r.positions(np.array([5, 0])).tolist() == [2, 0]
    with pytest.raises(ValueError):
        r.positions(np.array([3]))


def test_prune_both_directions() -> None:
    # configurable node 2; hops=1 keeps its producer 1 and its consumer 3, not 0 or 4
    e = edges((0, 1), (1, 2), (2, 3), (3, 4))
    r = pruning.prune_graph(5, e, np.array([2]), hops=1)
    assert r.kept.tolist() == [1, 2, 3]
    assert pyg_pairs(r) == {(1, 2), (2, 3)}


def reachability(n: int, pairs: set[tuple[int, int]]) -> np.ndarray:
    reach = np.eye(n, dtype=bool)
    for a, b in pairs:
        reach[a, b] = True
    for k in range(n):  # Floyd–Warshall closure
        reach |= reach[:, [k]] & reach[[k], :]
    return reach


@st.composite
def dags(draw: st.DrawFn) -> tuple[int, np.ndarray, np.ndarray, int]:
    n = draw(st.integers(2, 22))
    pairs = set()
    for u in range(1, n):
        for v in draw(st.lists(st.integers(0, u - 1), max_size=3)):
            pairs.add((v, u))
    seeds = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
    hops = draw(st.integers(0, 3))
    return n, edges(*sorted(pairs)), np.array(sorted(seeds)), hops


@settings(max_examples=150, deadline=None)
@given(dags())
def test_prune_property_keeps_configurable_nodes_and_dependencies(case) -> None:
    n, e, seeds, hops = case
    r = pruning.prune_graph(n, e, seeds, hops)
    assert set(seeds.tolist()) <= set(r.kept.tolist())
    orig = reachability(n, {(int(p), int(c)) for c, p in e})
    pruned = reachability(n, pyg_pairs(r))
    kept = r.kept
    # exactly the original reachability between kept nodes: nothing lost, nothing invented
    assert np.array_equal(orig[np.ix_(kept, kept)], pruned[np.ix_(kept, kept)])
    # every pruned edge is between kept nodes and points forward
    assert all(a < b for a, b in pyg_pairs(r))


def test_topo_order_handles_unsorted_files_and_depth() -> None:
    # node ids not in topological order: 2 -> 0 -> 1
    e = edges((2, 0), (0, 1))
    order = pruning.topo_order(3, e)
    assert order.tolist() == [2, 0, 1]
    depth, rdepth = pruning.node_depths(3, e)
    assert depth.tolist() == [1, 2, 0] and rdepth.tolist() == [1, 0, 2]
    with pytest.raises(ValueError, match="cycle"):
        pruning.topo_order(2, edges((0, 1), (1, 0)))


def test_structure_features() -> None:
    e = edges((0, 2), (1, 2), (2, 3))
    s = pruning.structure_features(4, e)
    assert s.shape == (4, len(pruning.STRUCTURE_NAMES))
    assert np.allclose(np.expm1(s[:, 0]), [0, 0, 2, 1])  # in-degree
    assert np.allclose(np.expm1(s[:, 1]), [1, 1, 1, 0])  # out-degree
    assert np.allclose(s[:, 2], [0, 0, 0.5, 1.0])


# ---- -1 padding ----------------------------------------------------------------------------
def node_row(shape: tuple[int, ...] = (), **cols: float) -> np.ndarray:
    x = np.zeros(140, np.float32)
    x[21:21 + len(shape)] = shape
    for k, v in cols.items():
        x[int(k[1:])] = v
    return x


def test_repad_every_block() -> None:
    conv = node_row((8, 32, 32, 16), c37=3, c38=3, c45=1, c46=1, c95=1, c96=2, c101=0, c102=1,
                    c93=0, c94=3, c134=3, c135=2, c136=1, c137=0)
    slc = node_row((4, 5, 6), c109=0, c110=1, c113=1, c114=1, c117=4, c118=5, c134=2, c135=1, c136=0)
    pad = node_row((7,), c125=0, c129=2)
    dyn = node_row((2, 3), c121=2, c122=3)
    scalar = node_row(())
    reduce_ = node_row((8,), c31=0, c32=2)  # reduce of a rank-3 operand over dims {0, 2}
    operand = node_row((8, 4, 6))
    nf = np.stack([conv, slc, pad, dyn, scalar, operand, reduce_])
    ops = np.array([OP["convolution"], OP["slice"], OP["pad"], OP["dynamic-slice"], OP["constant"],
                    OP["parameter"], OP["reduce"]])
    e = edges((5, 6))
    x = tf.repad_node_feat(nf, ops, e)
    assert x[0, 21:27].tolist() == [8, 32, 32, 16, -1, -1]
    assert x[0, 134:140].tolist() == [3, 2, 1, 0, -1, -1]  # real 0 kept, padding -1
    assert x[0, 37:43].tolist() == [3, 3, -1, -1, -1, -1]  # window rank 2
    assert x[0, 45:51].tolist() == [1, 1, -1, -1, -1, -1]
    assert x[0, 53:59].tolist() == [0, 0, -1, -1, -1, -1]  # padding low: real zeros kept
    assert x[0, 85:91].tolist() == [0, 0, -1, -1, -1, -1]
    assert x[0, 95:99].tolist() == [1, 2, -1, -1] and x[0, 101:105].tolist() == [0, 1, -1, -1]
    assert x[0, 93] == 0 and x[0, 94] == 3  # conv batch/feature numbers kept on convolutions
    assert np.all(x[1:, [93, 94, 99, 100, 105, 106]] == -1)  # ... and -1 elsewhere
    assert x[1, 109:111].tolist() == [0, 1] and x[1, 117:119].tolist() == [4, 5]
    assert np.all(x[0, [109, 110, 113, 114, 117, 118, 121, 122, 125, 126, 129, 130]] == -1)
    assert x[2, 125:127].tolist() == [0, -1] and x[2, 129:131].tolist() == [2, -1]
    assert x[3, 121:123].tolist() == [2, 3]
    assert np.all(x[4, 21:27] == -1) and np.all(x[4, 134:140] == -1) and np.all(x[4, 31:37] == -1)
    # reduce: output rank 1 but operand rank 3 -> dimensions keeps 3 entries
    assert x[6, 31:37].tolist() == [0, 2, 0, -1, -1, -1]
    assert nf[0, 25] == 0  # input untouched


def test_repad_tile_config() -> None:
    cfg = np.zeros((2, 24), np.float32)
    cfg[0, 0:3] = [4, 8, 128]
    cfg[0, 8:10] = [1, 128]
    cfg[1, 0:2] = [2, 2]
    x = tf.repad_tile_config(cfg)
    assert x[0, 0:6].tolist() == [4, 8, 128, -1, -1, -1]
    assert x[0, 8:14].tolist() == [1, 128, -1, -1, -1, -1]
    assert np.all(x[:, 16:22] == -1)  # input bounds all zero -> all -1
    assert x[0, 6] == 0 and x[0, 7] == 0  # sum/product untouched


def test_lane_features_use_minor_dim() -> None:
    nf = tf.repad_node_feat(np.stack([node_row((256, 130), c134=1, c135=0)]), np.array([OP["add"]]),
                            np.zeros((0, 2), np.int64))
    lane = tf.lane_features(nf)
    names = list(tf.LANE_NAMES)
    assert lane[0, names.index("dim0_mod128")] == 0.0
    assert lane[0, names.index("dim1_mod128")] == pytest.approx(2 / 128)
    assert lane[0, names.index("dim2_mod128")] == -1
    assert lane[0, names.index("minor_dim_mod128")] == pytest.approx(2 / 128)  # dim 1 = 130 is minor
    assert lane[0, names.index("second_minor_mod8")] == 0.0  # 256 % 8


# ---- dot-general ---------------------------------------------------------------------------
def test_infer_plain_matmul() -> None:
    d = dot_features.infer_dot_dims((32, 64), (32, 128), (128, 64))
    assert d == DotDims((1,), (0,), (), (), (32, 128), (128, 64))


def test_infer_batched_matmul() -> None:
    d = dot_features.infer_dot_dims((8, 32, 64), (8, 32, 128), (8, 128, 64))
    assert (d.lhs_batch, d.rhs_batch, d.lhs_contracting, d.rhs_contracting) == ((0,), (0,), (2,), (1,))


def test_infer_transposed_rhs_and_vector() -> None:
    d = dot_features.infer_dot_dims((32, 64), (32, 128), (64, 128))
    assert d.lhs_contracting == (1,) and d.rhs_contracting == (1,)
    v = dot_features.infer_dot_dims((32,), (32, 128), (128,))
    assert v.lhs_contracting == (1,) and v.rhs_contracting == (0,)
    square = dot_features.infer_dot_dims((16, 16), (16, 16), (16, 16))  # ambiguous: canonical chosen
    assert square.lhs_contracting == (1,) and square.rhs_contracting == (0,)
    assert dot_features.infer_dot_dims((3, 5), (4, 6), (7, 8)) is None


def test_dot_conv_features_from_graph() -> None:
    lhs = node_row((8, 32, 128))
    rhs = node_row((8, 128, 64))
    dot = node_row((8, 32, 64))
    other = node_row((4,))
    nf = np.stack([lhs, rhs, dot, other])
    ops = np.array([OP["parameter"], OP["parameter"], OP["dot"], OP["add"]])
    e = edges((0, 2), (1, 2), (2, 3))
    f = dot_features.dot_conv_features(nf, ops, e)
    names = list(dot_features.DOT_CONV_NAMES)
    row = dict(zip(names, f[2]))
    assert [row[f"dot_lhs_contract_{i}"] for i in range(4)] == [0, 0, 1, -1]
    assert [row[f"dot_rhs_contract_{i}"] for i in range(4)] == [0, 1, 0, -1]
    assert [row[f"dot_lhs_batch_{i}"] for i in range(3)] == [1, 0, 0]
    assert row["dot_dims_known"] == 1 and row["dot_dims_exact"] == 0
    assert row["dot_log_k"] == pytest.approx(np.log1p(128))
    assert row["operand1_dim_2"] == pytest.approx(np.log1p(64))
    assert np.all(f[3] == -1)
    exact = {2: DotDims((2,), (1,), (0,), (0,), (8, 32, 128), (8, 128, 64))}
    fe = dot_features.dot_conv_features(nf, ops, e, exact)
    assert fe[2, names.index("dot_dims_exact")] == 1


# ---- dedup ---------------------------------------------------------------------------------
def test_dedup_groups_and_mean() -> None:
    rows = np.array([[[0, -1]], [[1, 2]], [[0, -1]], [[5, 5]], [[1, 2]]], np.int8)
    first, inverse = tf.dedup_groups(tf.config_row_hashes(rows))
    assert first.tolist() == [0, 1, 3]
    assert inverse.tolist() == [0, 1, 0, 2, 1]
    mean = tf.group_mean(np.array([1.0, 10.0, 3.0, 7.0, 20.0]), inverse, len(first))
    assert mean.tolist() == [2.0, 15.0, 7.0]
    # rows differing only by a sign/zero are distinct
    other = np.array([[0, 0], [0, -1], [-1, 0]], np.int8)
    assert len(tf.dedup_groups(tf.config_row_hashes(other))[0]) == 3


def test_inference_matches_exact_dims_on_real_hlo(shared_data) -> None:
    """On JAX-lowered HLO (real dot dimension numbers) inference agrees wherever the shapes
    determine the answer; disagreements are only square-operand ambiguities."""
    from features import hlo

    files = sorted((shared_data / "jax-hlo").glob("*.pb"))
    if not files:
        pytest.skip("no jax-hlo protos")
    agree = total = 0
    for pb in files:
        exact = hlo.exact_dot_dims(pb)
        g = hlo.module_to_graph(hlo.read_module(pb))
        inferred = dot_features.dot_dims_for_graph(np.asarray(g.node_feat), g.node_opcode, g.edge_index)
        rank = columns.tensor_rank(np.asarray(g.node_feat))
        for node, d in exact.items():
            total += 1
            got = inferred[node][0]
            agree += got == d
            out = dot_features.shapes_of(np.asarray(g.node_feat), rank, [node])[0]
            for dims in (d, got):  # both explain the observed output shape
                assert dot_features._dot_output(dims.lhs_shape, dims.rhs_shape, dims.lhs_batch, dims.rhs_batch,
                                      dims.lhs_contracting, dims.rhs_contracting) == out
    assert total >= 10 and agree / total >= 0.75
