"""End to end on generated data: features build -> GNN train -> predict (all five collections)."""

from __future__ import annotations

import numpy as np
import pytest

from tpurank.collections import COLLECTIONS
from features.io import discover
from models.gnn.__main__ import main as gnn_main
from models.predictions import predictions_path, read_predictions


@pytest.mark.slow  # 15 fold models of all five collections (tests/ensemble/test_pipeline.py runs the
# same stages on two collections in make test)
def test_real_feature_pipeline_to_predictions(tiny_root, tmp_path):
    from features.build import main as build_main

    work = tmp_path / "work"
    common = ["--data", str(tiny_root), "--work", str(work), "--preset", "quick", "--seed", "0"]
    assert build_main([*common, "--jobs", "1", "--tabular", "false", "--progress", "false"]) == 0
    tiny = ["--steps", "6", "--eval-every", "3", "--hidden", "8", "--configs-per-step", "8"]
    assert gnn_main(["train", *common, *tiny]) == 0
    assert gnn_main(["predict", *common, *tiny]) == 0
    for coll in COLLECTIONS:
        for split in ("valid", "test"):
            preds = read_predictions(predictions_path(work / "preds", "gnn@seed0", coll, split))
            for gf in discover(tiny_root, [coll], [split]):
                with np.load(gf.path) as data:
                    assert len(preds[gf.stem]) == len(data["config_runtime"]), gf.path


def test_tabular_join_matches_the_lightgbm_table_and_trains(tiny_root, tmp_path):
    """``--tabular true``: the GNN's per-config features of a layout graph equal the LightGBM
    table's descriptor columns for the same configs, and a model joining them trains, reloads
    and predicts every config."""
    import polars as pl
    import torch

    from features.build import main as build_main
    from features.columns import signed_log1p
    from features.processed import iter_processed, tabular_path
    from features.tabular import config_descriptor_columns, layout_feature_names
    from models.gnn.data import config_rows, config_tabular, graph_tensors
    from models.gnn.infer import load_trained
    from tpurank.collections import get_collection

    coll = get_collection("layout:nlp:random")
    work = tmp_path / "work"
    common = ["--data", str(tiny_root), "--work", str(work), "--preset", "quick", "--seed", "0",
              "--collections", coll.name]
    assert build_main([*common, "--jobs", "1", "--progress", "false"]) == 0
    g = next(iter(iter_processed(work / "features", coll, "valid")))
    table = pl.read_parquet(tabular_path(work / "features", coll, "valid")).filter(
        pl.col("graph") == g.stem)
    names = [layout_feature_names()[i] for i in config_descriptor_columns()]
    by_config = dict(zip(table["config"].to_list(), table.select(names).to_numpy()))
    rows = np.arange(min(5, g.num_configs))
    cpu = torch.device("cpu")
    got = config_tabular(graph_tensors(g, cpu), config_rows(g, rows, cpu)).numpy()
    want = signed_log1p(np.stack([by_config[int(c)] for c in np.asarray(g.config_index)[rows]]))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)

    tiny = ["--steps", "6", "--eval-every", "3", "--hidden", "8", "--configs-per-step", "8",
            "--folds", "0", "--tabular", "true"]
    assert gnn_main(["train", *common, *tiny]) == 0
    assert gnn_main(["predict", *common, *tiny]) == 0
    model, _ = load_trained(work, coll, seed=0)
    assert model.uses_tabular and model.args.tabular_dim == len(names)
    preds = read_predictions(predictions_path(work / "preds", "gnn@seed0", coll, "test"))
    for gf in discover(tiny_root, [coll], ["test"]):
        with np.load(gf.path) as data:
            assert len(preds[gf.stem]) == len(data["config_runtime"])
            assert np.isfinite(preds[gf.stem]).all()


def test_tabular_join_needs_the_layout_context(graph_factory):
    """A processed graph without ``layout_context.npz`` (built before it existed) is named."""
    import pytest
    import torch

    from models.gnn.data import config_rows, config_tabular, graph_tensors
    from tpurank.collections import get_collection

    g = graph_factory(get_collection("layout:xla:random"), "train", "old", seed=1)
    g.layout_context = None
    cpu = torch.device("cpu")
    with pytest.raises(ValueError, match="old.*rebuild features"):
        config_tabular(graph_tensors(g, cpu), config_rows(g, np.arange(3), cpu), where="x/train/old")
