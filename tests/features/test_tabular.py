"""Tabular (LightGBM) features on hand-made graphs."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from features import tabular as tab
from features import columns, dot_features
from features.io import Graph

OP = columns.opcode_ids()


def _row(shape: tuple[int, ...]) -> np.ndarray:
    x = np.zeros(140, np.float32)
    x[21:21 + len(shape)] = shape
    x[28] = np.prod(shape) if shape else 1
    return x


def layout_graph(configs: np.ndarray) -> Graph:
    """param(256,128) -> conv A (256,128) -> add -> conv B (256,128); both convs configurable."""
    nf = np.stack([_row((256, 128)), _row((3, 3)), _row((256, 128)), _row((256, 128)), _row((3, 3)),
                   _row((256, 128))])
    ops = np.array([OP["parameter"], OP["parameter"], OP["convolution"], OP["add"], OP["parameter"],
                    OP["convolution"]])
    e = np.array([[2, 0], [2, 1], [3, 2], [5, 3], [5, 4]], np.int64)  # [consumer, producer]
    return Graph(node_feat=nf, node_opcode=ops, edge_index=e,
                 config_runtime=np.arange(len(configs), dtype=np.int64) + 1,
                 node_config_ids=np.array([2, 5]), node_config_feat=configs.astype(np.float32))


def cfg_row(out_a, in_a, out_b, in_b) -> np.ndarray:
    def pad(v):
        return list(v) + [-1] * (6 - len(v))
    return np.array([pad(out_a) + pad(in_a) + pad([]), pad(out_b) + pad(in_b) + pad([])], np.int8)


def test_layout_patterns_and_mismatch() -> None:
    configs = np.stack([
        cfg_row([], [], [], []),  # all default
        cfg_row([1, 0], [1, 0], [1, 0], [1, 0]),  # row-major everywhere, consistent
        cfg_row([0, 1], [1, 0], [1, 0], [1, 0]),  # A outputs dim 0 minor, B reads dim 1 minor
    ])
    g = layout_graph(configs)
    ctx = tab.layout_context(g)
    assert ctx.pairs.tolist() == [[0, 1]]  # A feeds B through the add
    f = tab.layout_chunk_features(ctx, configs)
    names = tab.layout_feature_names()
    assert f.shape == (3, len(names))
    col = {n: f[:, i] for i, n in enumerate(names)}
    assert col["f_conv_out_default_n"].tolist() == [2, 0, 0]
    assert col["f_conv_out_minor_last_n"].tolist() == [0, 2, 1]
    assert col["f_conv_out_minor_first_n"].tolist() == [0, 0, 1]
    assert col["f_conv_out_largest_minor_n"].tolist() == [0, 0, 1]  # dim 0 (256) is the largest
    assert col["f_conv_out_minor_aligned128_n"].tolist() == [0, 2, 2]
    assert col["f_conv_out_minor_last_w"][1] == pytest.approx(2 * np.log1p(256 * 128), rel=1e-5)
    assert col["f_mismatch_n"].tolist() == [0, 0, 1]
    assert col["f_pairs"].tolist() == [1, 1, 1]
    assert col["f_nondefault_n"].tolist() == [0, 2, 2]
    assert col["f_g_n_conv"].tolist() == [2, 2, 2]
    assert np.all(col["f_dot_out_default_n"] == 0)


def test_contract_minor_uses_dot_dims() -> None:
    nf = np.stack([_row((32, 128)), _row((128, 64)), _row((32, 64))])
    ops = np.array([OP["parameter"], OP["parameter"], OP["dot"]])
    e = np.array([[2, 0], [2, 1]], np.int64)
    configs = np.array([[[1, 0, -1, -1, -1, -1, 1, 0, -1, -1, -1, -1] + [-1] * 6],
                        [[1, 0, -1, -1, -1, -1, 0, 1, -1, -1, -1, -1] + [-1] * 6]], np.int8)
    g = Graph(node_feat=nf, node_opcode=ops, edge_index=e, config_runtime=np.ones(2, np.int64),
              node_config_ids=np.array([2]), node_config_feat=configs)
    dots = dot_features.dot_dims_for_graph(nf, ops, e)
    names = tab.layout_feature_names()
    f = tab.layout_chunk_features(tab.layout_context(g, dots), configs)
    # lhs (32, 128) contracts dim 1: minor in config 0, not in config 1
    assert f[:, names.index("f_dot_in_contract_minor_n")].tolist() == [1, 0]
    f0 = tab.layout_chunk_features(tab.layout_context(g, None), configs)
    assert f0[:, names.index("f_dot_in_contract_minor_n")].tolist() == [0, 0]


def test_tile_features_ratios_and_waste() -> None:
    nf = np.stack([_row((100, 256)), _row((100, 256))])
    nf[1, 0] = 1  # root
    cfg = np.zeros((2, 24), np.float32)
    cfg[0, 8:10] = [50, 128]  # divides evenly -> no waste, 4 tiles
    cfg[1, 8:10] = [64, 128]  # ceil(100/64)=2 -> 128 rows padded for 100 -> waste 0.28
    for r in range(2):
        cfg[r, 15] = cfg[r, 8] * cfg[r, 9]
    g = Graph(node_feat=nf, node_opcode=np.array([OP["parameter"], OP["add"]]),
              edge_index=np.array([[1, 0]]), config_runtime=np.array([5, 6]),
              config_runtime_normalizers=np.array([1, 2]), config_feat=cfg)
    names = tab.tile_feature_names()
    f = tab.tile_tabular_features(g, np.arange(2))
    assert f.shape == (2, len(names))
    col = {n: f[:, i] for i, n in enumerate(names)}
    assert col["f_output_ratio_0"].tolist() == pytest.approx([0.5, 0.64])
    assert col["f_output_ratio_2"].tolist() == [-1, -1]
    assert col["f_output_log_tiles"].tolist() == pytest.approx([np.log(4), np.log(4)])
    assert col["f_output_waste"].tolist() == pytest.approx([0.0, 128 / 100 - 1], abs=1e-5)
    assert col["f_cfg_10"].tolist() == [-1, -1]  # -1 padded bounds


def test_make_frame_contract(tmp_path) -> None:
    feats = np.arange(6, dtype=np.float32).reshape(3, 2)
    test = tab.make_frame("g", np.array([0, 2, 5]), None, feats, ["f_a", "f_b"])
    assert test.schema == pl.Schema({"graph": pl.String, "config": pl.Int64, "target": pl.Float64,
                                     "f_a": pl.Float32, "f_b": pl.Float32})
    assert test["target"].null_count() == 3
    train = tab.make_frame("h", np.array([1]), np.array([2.5]), feats[:1], ["f_a", "f_b"])
    tab.write_parquet(test, tmp_path / "parts" / "a.parquet")
    tab.write_parquet(train, tmp_path / "parts" / "b.parquet")
    n = tab.concat_parquet([tmp_path / "parts" / "a.parquet", tmp_path / "parts" / "b.parquet"],
                           tmp_path / "all.parquet")
    out = pl.read_parquet(tmp_path / "all.parquet")
    assert n == 4 and out["graph"].to_list() == ["g", "g", "g", "h"]
    with pytest.raises(ValueError):
        tab.make_frame("g", np.array([0]), None, feats[:1], ["f_a"])


def test_tuple_root_kernel_takes_its_largest_operand_as_output_shape() -> None:
    """A multi-output fusion's root is a tuple (no shape): the largest operand stands for it.

    Found on the real TPU kernel ``fusion.191`` whose tile ratios were all -1 before.
    """
    small, large = _row((8, 128)), _row((32, 12, 12, 192))
    root = np.zeros(140, np.float32)
    root[0] = 1.0  # is_root, tuple: no shape dims
    root[29] = 2.0  # tuple size
    g = Graph(node_feat=np.stack([small, large, root]), node_opcode=np.array([63, 63, 100]),
              edge_index=np.array([[2, 0], [2, 1]]), config_runtime=np.ones(2, np.int64),
              config_feat=np.zeros((2, 24), np.float32),
              config_runtime_normalizers=np.ones(2, np.int64))
    assert tab.kernel_output_shape(g).tolist() == [32, 12, 12, 192, -1, -1]


def test_heuristic_table_and_names() -> None:
    """f_heur_cost = log1p(padded elements), f_heur_rank its within-graph rank in [0, 1]."""
    nf = np.stack([_row((32, 128)), _row((128, 64)), _row((32, 64))])
    ops = np.array([OP["parameter"], OP["parameter"], OP["dot"]])

    def lay(*pairs):
        return sum((list(p) + [-1] * 4 for p in pairs), [])
    configs = np.array([[lay((1, 0), (1, 0), (1, 0))],  # out 64-minor (2x), rhs 64-minor (2x)
                        [lay((0, 1), (1, 0), (1, 0))],  # out 32-minor (4x)
                        [lay((1, 0), (0, 1), (0, 1))]], np.int8)  # lhs 32-minor (4x), rhs aligned
    g = Graph(node_feat=nf, node_opcode=ops, edge_index=np.array([[2, 0], [2, 1]], np.int64),
              config_runtime=np.ones(3, np.int64), node_config_ids=np.array([2]), node_config_feat=configs)
    table = tab.heuristic_table(g, chunk=2)
    assert table.dtype == np.float32
    padded = [2 * 2048 + 4096 + 2 * 8192, 4 * 2048 + 4096 + 2 * 8192, 2 * 2048 + 4 * 4096 + 8192]
    assert table[:, 0] == pytest.approx(np.log1p(padded), rel=1e-6)
    assert table[:, 1].tolist() == [0.0, 0.75, 0.75]
    assert tab.tabular_feature_names(False, True) == tab.layout_feature_names() + ["f_heur_cost", "f_heur_rank"]
    assert tab.tabular_feature_names(True, False) == tab.tile_feature_names()
