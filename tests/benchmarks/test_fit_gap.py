"""The fit-gap benchmark scores each fold model on the graphs it saw and on the others."""

from __future__ import annotations

import json

from benchmarks.fit_gap import fold_rows
from features.processed import graph_dir, save_processed
from models.gnn.__main__ import main as gnn_main
from tests.models.gnn.conftest import make_graph
from tpurank.collections import get_collection

TINY = ["--hidden", "8", "--layers", "1", "--configs-per-step", "8", "--steps", "3", "--eval-every", "3",
        "--warmup-steps", "1", "--val-max-configs", "0", "--threads", "1"]


def test_each_fold_model_is_scored_in_sample_and_held_out(tmp_path):
    coll = get_collection("layout:xla:random")
    stems = {"train": ["a0", "a1", "b0", "b1", "c0"], "valid": ["v0", "v1"]}
    for seed, (split, stem) in enumerate((sp, st) for sp, sts in stems.items() for st in sts):
        save_processed(make_graph(coll, split, stem, seed, configs=12),
                       graph_dir(tmp_path / "features", coll, split, stem))
    assert gnn_main(["train", "--work", str(tmp_path), "--collection", coll.name, "--folds", "3", *TINY]) == 0
    models = tmp_path / "models" / "gnn" / coll.slug / "seed0"
    rows = fold_rows(tmp_path, coll.name, models)
    seen = json.loads((models / "folds.json").read_text())["seen"]
    assert [r["fold"] for r in rows] == [0, 1, 2] and {r["seed"] for r in rows} == {0}
    for r in rows:
        assert r["graphs seen"] == len(seen[str(r["fold"])]) and r["graphs seen"] + r["graphs held out"] == 7
        assert -1 <= r["held-out"] <= 1 and -1 <= r["in-sample"] <= 1
