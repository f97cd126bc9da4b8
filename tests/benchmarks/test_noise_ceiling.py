"""The noise ceiling regenerates a sample without measurement noise and scores against it."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.noise_ceiling import collection_row, noiseless_sample, true_runtimes
from features.sample.writer import main as generate
from models.predictions import write_predictions
from tpurank.collections import get_collection

NAME = "layout:nlp:random"


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    root = tmp_path_factory.mktemp("samples")
    generate(["--out", str(root / "measured"), "--scale", "tiny", "--seed", "0"])
    generate(["--out", str(root / "other"), "--scale", "tiny", "--seed", "1"])
    return root / "measured", noiseless_sample(root / "clean", "tiny", 0, "tpu"), root / "other"


def labelled(data, name=NAME):
    coll = get_collection(name)
    folder = data / "npz_all" / "npz" / coll.kind / coll.source / coll.search
    return sorted(p for split in ("train", "valid") for p in (folder / split).glob("*.npz"))


def test_true_runtimes_are_the_measured_ones_without_noise(samples):
    measured, clean, other = samples
    for path in labelled(measured):
        true = true_runtimes(measured, clean, NAME, path.stem)
        runtime = np.load(path)["config_runtime"]
        assert true.shape == runtime.shape and np.ptp(np.log(runtime / true)) > 0
        assert np.abs(np.log(runtime / true)).max() < 0.02
    with pytest.raises((ValueError, FileNotFoundError)):
        true_runtimes(other, clean, NAME, labelled(other)[0].stem)


def test_a_ranker_that_knows_the_true_runtimes_scores_the_ceiling(samples, tmp_path):
    measured, clean, _ = samples
    preds = tmp_path / "preds" / "gnn@seed0" / get_collection(NAME).slug
    oof, configs, target = {}, {}, {}
    for path in labelled(measured):
        rows = np.arange(0, len(np.load(path)["config_runtime"]), 2)  # a subset, as a run may score
        configs[path.stem] = rows
        target[path.stem] = np.load(path)["config_runtime"][rows]
        oof[path.stem] = true_runtimes(measured, clean, NAME, path.stem)[rows]  # lower = faster
    for part, arrays in (("oof", oof), ("oof-config", configs), ("oof-target", target)):
        write_predictions(preds / f"{part}.npz", arrays)
    row = collection_row("tpu", measured, clean, tmp_path, NAME)
    assert row["graphs"] == len(oof) and row["gnn vs true"] == pytest.approx(1.0)
    assert row["gnn oof"] == pytest.approx(row["ceiling"]) and 0.5 < row["ceiling"] < 1.0
