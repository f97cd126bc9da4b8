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


def test_a_graph_without_its_layout_context_is_named(graph_factory):
    """A processed graph without ``layout_context.npz`` (built before it existed): a model that
    reads layout patterns names the graph and the rebuild."""
    import torch

    from models.gnn.infer import embed_configs
    from models.gnn.data import graph_tensors
    from models.gnn.model import ModelArgs, RankerGNN
    from tpurank.collections import get_collection

    g = graph_factory(get_collection("layout:xla:random"), "train", "old", seed=1)
    g.layout_context = None
    model = RankerGNN(ModelArgs(kind="layout", node_dim=g.node_feat.shape[1], config_dim=18,
                                hidden=8, arch="factorized", head_patterns=True))
    cpu = torch.device("cpu")
    with pytest.raises(ValueError, match="xla:random/train/old: no layout_context.npz.*rebuild"):
        embed_configs(model, g, graph_tensors(g, cpu), np.arange(3), cpu)
