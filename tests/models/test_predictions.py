"""Fold-split names and the fold average of test predictions."""

from __future__ import annotations

import numpy as np
import pytest

from models.predictions import (average_folds, fold_split, fold_splits, normalise_costs,
                                predictions_path, read_predictions, write_fold_average,
                                write_predictions)
from tpurank.collections import get_collection

COLL = get_collection("layout:xla:random")


def test_average_folds_is_mean_of_zscores():
    a = {"g": np.array([1.0, 2.0, 3.0]), "h": np.array([5.0, 5.0])}
    b = {"g": np.array([30.0, 10.0, 20.0]), "h": np.array([1.0, 2.0])}
    avg = average_folds([a, b])
    assert np.allclose(avg["g"], (normalise_costs(a["g"], "zscore") + normalise_costs(b["g"], "zscore")) / 2)
    assert np.allclose(avg["h"], normalise_costs(b["h"], "zscore") / 2)  # constant fold -> zeros
    with pytest.raises(ValueError, match="other graphs"):
        average_folds([a, {"g": a["g"]}])
    with pytest.raises(ValueError, match="config counts"):
        average_folds([a, {"g": a["g"][:2], "h": a["h"]}])


def test_write_fold_average(tmp_path):
    rng = np.random.default_rng(0)
    for k in (2, 0, 1):
        write_predictions(predictions_path(tmp_path, "m@seed0", COLL, fold_split(k)),
                          {"g": rng.normal(size=7)})
    assert fold_splits(tmp_path, "m@seed0", COLL) == ["test-fold0", "test-fold1", "test-fold2"]
    path = write_fold_average(tmp_path, "m@seed0", COLL, folds=3)
    assert path == predictions_path(tmp_path, "m@seed0", COLL, "test")
    assert read_predictions(path)["g"].shape == (7,)
    with pytest.raises(FileNotFoundError, match="test-fold3"):
        write_fold_average(tmp_path, "m@seed0", COLL, folds=4)


def test_read_oof_with_and_without_config_index(tmp_path):
    from models.predictions import read_oof
    from tpurank.atomic import save_npz

    write_predictions(predictions_path(tmp_path, "m", COLL, "oof"),
                      {"a": np.arange(4.0), "b": np.arange(3.0)})
    got = read_oof(tmp_path, "m", COLL)
    assert np.array_equal(got["a"][0], np.arange(4)) and np.array_equal(got["b"][1], np.arange(3.0))
    save_npz(predictions_path(tmp_path, "m", COLL, "oof-config"), a=np.array([9, 2, 5, 7]))
    got = read_oof(tmp_path, "m", COLL)
    assert got["a"][0].tolist() == [9, 2, 5, 7] and got["b"][0].tolist() == [0, 1, 2]
    save_npz(predictions_path(tmp_path, "m", COLL, "oof-config"), a=np.array([1, 2]))
    with pytest.raises(ValueError, match="2 config indices for 4"):
        read_oof(tmp_path, "m", COLL)
