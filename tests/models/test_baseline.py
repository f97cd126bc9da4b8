"""The heuristic baseline CLI: predictions for every graph, equal to the features.heuristic costs
(the cost itself is tested in tests/features/test_heuristic.py)."""

from __future__ import annotations

import numpy as np

from tpurank.collections import COLLECTIONS
from features.heuristic import graph_costs
from features.io import discover
from models.baseline import main
from models.predictions import predictions_path, read_predictions


def test_cli_writes_predictions_for_every_valid_and_test_graph(tiny_root, tmp_path):
    assert main(["predict", "--data", str(tiny_root), "--work", str(tmp_path)]) == 0
    for coll in COLLECTIONS:
        for split in ("valid", "test"):
            files = discover(tiny_root, [coll], [split])
            preds = read_predictions(predictions_path(tmp_path / "preds", "baseline", coll, split))
            assert set(preds) == {gf.stem for gf in files}
            for gf in files:
                with np.load(gf.path) as data:
                    assert preds[gf.stem].shape == data["config_runtime"].shape
                assert np.allclose(preds[gf.stem], graph_costs(gf.path, coll.is_tile), rtol=1e-5)
    assert main([]) == 2
