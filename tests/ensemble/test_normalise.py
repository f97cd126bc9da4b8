"""Per-graph normalisations and the seed-averaging convention of models.predictions."""

from __future__ import annotations

import numpy as np
import pytest

from tpurank.collections import get_collection
from models.predictions import (model_runs, normalise_costs, predictions_path,
                                read_model_predictions, run_name, write_predictions)

COLL = get_collection("layout:xla:random")


@pytest.mark.parametrize("method", ["rank", "minmax", "zscore"])
def test_normalisations_keep_order_and_remove_scale(method):
    cost = np.array([3.0, -1.0, 10.0, 2.0, 2.0])
    out = normalise_costs(cost, method)
    assert np.array_equal(np.argsort(out, kind="stable"), np.argsort(cost, kind="stable"))
    # invariant to a positive affine change of scale
    assert np.allclose(normalise_costs(1000 * cost + 7, method), out)
    assert np.all(normalise_costs(np.full(4, 3.0), method) == 0)


def test_normalisation_values():
    cost = np.array([3.0, -1.0, 10.0, 2.0, 2.0])
    assert np.allclose(normalise_costs(cost, "rank"), [0.75, 0.0, 1.0, 0.375, 0.375])
    assert np.allclose(normalise_costs(cost, "minmax"), (cost + 1) / 11)
    z = normalise_costs(cost, "zscore")
    assert z.mean() == pytest.approx(0) and z.std() == pytest.approx(1)
    # rank ignores outliers, min-max does not
    assert normalise_costs(np.array([0.0, 1.0, 1e9]), "rank")[1] == 0.5
    assert normalise_costs(np.array([0.0, 1.0, 1e9]), "minmax")[1] < 1e-8
    with pytest.raises(ValueError, match="unknown normalisation"):
        normalise_costs(cost, "softmax")


def test_seed_runs_are_normalised_then_averaged(tmp_path):
    preds = tmp_path / "preds"
    write_predictions(predictions_path(preds, run_name("gnn", 0), COLL, "valid"),
                      {"g": np.array([0.0, 1.0, 2.0])})
    write_predictions(predictions_path(preds, run_name("gnn", 1), COLL, "valid"),
                      {"g": np.array([200.0, 0.0, 100.0])})  # other scale: must not dominate
    write_predictions(predictions_path(preds, "gnn2", COLL, "valid"), {"g": np.zeros(3)})
    assert model_runs(preds, "gnn") == ["gnn@seed0", "gnn@seed1"]
    assert model_runs(preds, "gnn@seed1") == ["gnn@seed1"]
    avg = read_model_predictions(preds, "gnn", COLL, "valid", norm="minmax")
    assert np.allclose(avg["g"], [0.5, 0.25, 0.75])
    single = read_model_predictions(preds, "gnn@seed0", COLL, "valid", norm="minmax")
    assert np.allclose(single["g"], [0.0, 0.5, 1.0])
    with pytest.raises(FileNotFoundError, match="lgbm"):
        read_model_predictions(preds, "lgbm", COLL, "valid")


def test_seed_runs_must_agree(tmp_path):
    preds = tmp_path / "preds"
    write_predictions(predictions_path(preds, "m@seed0", COLL, "test"), {"g": np.zeros(3)})
    write_predictions(predictions_path(preds, "m@seed1", COLL, "test"), {"g": np.zeros(4)})
    with pytest.raises(ValueError, match="has 4 costs"):
        read_model_predictions(preds, "m", COLL, "test")
