"""features.repair: a test graph with a repairable problem is built (repaired), a train/valid one
is refused naming the file, a test graph without configurable nodes is left out of the build."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import bad_graphs
import numpy as np
import pytest
from bigfile import write_mini_root

from features import repair
from features.build import build_features
from features.columns import UNKNOWN_OPCODE_ID
from features.buildconfig import BuildConfig
from features.io import iter_npz_rows, load_npz
from features.tasks import GraphBuildError
from features.processed import graph_dir, iter_processed, load_processed
from tpurank.collections import get_collection

LAYOUT = get_collection("layout:xla:random")


def test_repair_nodes_pads_non_finite_values_and_buckets_unknown_opcodes() -> None:
    feat = np.ones((3, 4), np.float32)
    feat[0, 1], feat[2, 3] = np.inf, np.nan
    opcode = np.array([2, bad_graphs.OUTSIDE_TABLE, -3])
    fixed, ops, done = repair.repair_nodes(feat, opcode)
    assert fixed[0, 1] == fixed[2, 3] == repair.PADDING_VALUE and np.isfinite(fixed).all()
    assert ops.tolist() == [2, UNKNOWN_OPCODE_ID, UNKNOWN_OPCODE_ID]
    assert done == [repair.NON_FINITE, repair.UNKNOWN_OPCODE]
    same_feat, same_ops, nothing = repair.repair_nodes(fixed, np.array([2, 2, 2]))
    assert nothing == [] and same_feat is fixed  # nothing to repair: no copy


def test_zero_width_rows_stream_as_empty_rows(tmp_path: Path) -> None:
    path = tmp_path / "g.npz"
    np.savez(path, node_config_feat=np.zeros((7, 0, 18), np.float32))
    chunks = list(iter_npz_rows(path, "node_config_feat", 3))
    assert [c.shape for c in chunks] == [(3, 0, 18), (3, 0, 18), (1, 0, 18)]


def _config(root: Path, work: Path, **kw) -> BuildConfig:
    return dataclasses.replace(BuildConfig(data=str(root), work=str(work), preset="full", jobs=1,
                                           progress=False, collections=LAYOUT.name), **kw)


def test_build_repairs_test_graphs_and_refuses_train_ones(tmp_path: Path, capsys) -> None:
    root = write_mini_root(tmp_path / "root", seed=2)
    test_file = next(LAYOUT.split_dir(root, "test").glob("*.npz"))
    bad_graphs.rewrite(test_file, bad_graphs.with_infinite_feature)
    bad_graphs.rewrite(test_file, bad_graphs.with_unknown_opcode)
    fd = build_features(_config(root, tmp_path / "w"))
    assert f"repaired {LAYOUT.name}/test/{test_file.stem}" in capsys.readouterr().out
    pg = load_processed(graph_dir(fd, LAYOUT, "test", test_file.stem))
    assert np.isfinite(pg.node_feat).all() and pg.meta["repairs"] == [repair.NON_FINITE, repair.UNKNOWN_OPCODE]
    kept = load_npz(test_file).node_opcode[pg.orig_node_ids]  # the pruned graph's nodes, unrepaired
    assert np.array_equal(pg.node_opcode == UNKNOWN_OPCODE_ID, kept == bad_graphs.OUTSIDE_TABLE)

    train_file = next(LAYOUT.split_dir(root, "train").glob("*.npz"))
    bad_graphs.rewrite(train_file, bad_graphs.with_infinite_feature)
    with pytest.raises(GraphBuildError, match=f"{train_file.name}: needs a repair.*only a test graph gets"):
        build_features(_config(root, tmp_path / "w2"))


def test_a_test_graph_without_configurable_nodes_is_not_built(tmp_path: Path, capsys) -> None:
    root = write_mini_root(tmp_path / "root", seed=4)
    test_file = next(LAYOUT.split_dir(root, "test").glob("*.npz"))
    bad_graphs.rewrite(test_file, bad_graphs.without_configurable_nodes)
    assert repair.has_no_configurable_node(test_file)
    fd = build_features(_config(root, tmp_path / "w"))
    assert "no configurable node, nothing to featurize" in capsys.readouterr().err
    assert [g.stem for g in iter_processed(fd, LAYOUT, "test")] == []
    assert len(list(iter_processed(fd, LAYOUT, "valid"))) == 1
    valid_file = next(LAYOUT.split_dir(root, "valid").glob("*.npz"))
    bad_graphs.rewrite(valid_file, bad_graphs.without_configurable_nodes)
    with pytest.raises(GraphBuildError, match=f"{valid_file.name}: node_config_ids is empty"):
        build_features(_config(root, tmp_path / "w2"))
