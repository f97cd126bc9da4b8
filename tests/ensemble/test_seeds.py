"""`ensemble seeds`: per-seed scores of each model and of the blend, plus the seed average."""

from __future__ import annotations

import json

import numpy as np

from ensemble.seeds import main
from ensemble.truth import truth as read_truth
from tpurank.collections import COLLECTIONS
from features.io import discover
from models.predictions import predictions_path, write_predictions


def test_seeds_table(fake_root, tmp_path, capsys):
    rng = np.random.default_rng(0)
    work = tmp_path / "work"
    for run, noise in (("good@seed0", 0.5), ("good@seed1", 0.5), ("bad@seed0", 5.0), ("bad@seed1", 5.0),
                       ("baseline", 1.0)):
        for coll in COLLECTIONS:
            for split in ("valid", "test"):
                t = read_truth(fake_root, coll, split)
                costs = {gf.stem: t[gf.stem] + noise * t[gf.stem].std() * rng.normal(size=len(t[gf.stem]))
                         for gf in discover(fake_root, [coll], [split])}
                write_predictions(predictions_path(work / "preds", run, coll, split), costs)
    assert main(["--data", str(fake_root), "--work", str(work), "--models", "good,bad,baseline",
                 "--seeds", "0,1"]) == 0
    out = capsys.readouterr().out
    assert "hidden test (generated sample only)" in out and "good seed-avg" in out
    result = json.loads((work / "reports" / "seeds.json").read_text())
    coll = result["collections"]["layout:nlp:random"]
    assert set(coll["per_seed"]) == {"0", "1"}
    valid = coll["per_seed"]["0"]["valid"]
    assert set(valid) == {"good", "bad", "baseline", "blend"}
    assert valid["good"] > valid["bad"]
    assert (work / "reports" / "seeds.md").is_file()
