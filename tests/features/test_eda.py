"""features.eda: per-graph stats, opcode counts and pruning effect from headers/small members."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from matplotlib.figure import Figure

from features import eda
from features.io import discover, load_npz


@pytest.fixture(scope="module")
def stats(tiny_root: Path) -> pl.DataFrame:
    return eda.graph_stats(tiny_root)


def test_graph_stats_match_the_loaded_graphs(stats: pl.DataFrame, tiny_root: Path) -> None:
    files = discover(tiny_root)
    assert stats.height == len(files)
    for f in files[:: max(1, len(files) // 8)]:
        g = load_npz(f.path)
        row = stats.filter((pl.col("collection") == f.collection.name) & (pl.col("split") == f.split)
                           & (pl.col("stem") == f.stem)).row(0, named=True)
        assert row["nodes"] == g.num_nodes and row["edges"] == len(g.edge_index)
        assert row["configs"] == g.num_configs
        if f.split == "test":
            assert row["runtime_min"] is None and row["spread"] is None
        else:
            assert row["runtime_min"] == pytest.approx(g.target().min())
            assert row["spread"] == pytest.approx(g.target().max() / g.target().min())


def test_collection_summary_counts_graphs(stats: pl.DataFrame) -> None:
    summary = eda.collection_summary(stats)
    assert summary["graphs"].sum() == stats.height
    assert set(summary["split"]) == {"train", "valid", "test"}


def test_opcode_counts_add_up_to_nodes(tiny_root: Path, stats: pl.DataFrame) -> None:
    counts = eda.opcode_counts(tiny_root, "layout:xla:random")
    train = stats.filter((pl.col("collection") == "layout:xla:random") & (pl.col("split") == "train"))
    assert counts["count"].sum() == train["nodes"].sum()
    assert counts["configurable"].sum() == train["configurable_nodes"].sum()
    assert (counts["configurable"] <= counts["count"]).all()


def test_pruning_keeps_more_with_more_hops(tiny_root: Path) -> None:
    pruned = eda.pruning_effect(tiny_root, hops=(1, 2), collections="layout:nlp:random")
    assert pruned.height > 0 and set(pruned["hops"]) == {1, 2}
    wide = pruned.pivot(on="hops", index="stem", values="kept")
    assert (wide["2"] >= wide["1"]).all()
    assert (pruned["kept"] <= pruned["nodes"]).all()
    assert (pruned["kept"] >= pruned["configurable"]).all()
    summary = eda.pruning_summary(pruned)
    assert summary["kept_fraction"].max() <= 1.0


def test_max_per_group_subsamples(tiny_root: Path) -> None:
    small = eda.graph_stats(tiny_root, max_per_group=1)
    assert small.group_by("collection", "split").len()["len"].max() == 1


def test_empty_root_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no npz graph files"):
        eda.graph_stats(tmp_path)


def test_plots_are_figures(tiny_root: Path, stats: pl.DataFrame) -> None:
    figs = [eda.plot_graph_sizes(stats), eda.plot_configs_per_graph(stats),
            eda.plot_runtime_spread(stats),
            eda.plot_opcode_histogram(eda.opcode_counts(tiny_root, "tile:xla")),
            eda.plot_pruning(eda.pruning_effect(tiny_root, (1,), "layout:xla:default"))]
    assert all(isinstance(f, Figure) and f.axes for f in figs)
    only_test = stats.filter(pl.col("split") == "test")
    assert eda.plot_runtime_spread(only_test).axes  # "no runtimes" panel, no crash
    assert np.isfinite(stats.filter(pl.col("split") != "test")["spread"].to_numpy()).all()
