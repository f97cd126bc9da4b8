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
