"""The lab's comparison tools (``python -m benchmarks.compare gnn|preds``): the variant grammar,
the tables, and scoring prediction runs against a tabular valid file."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from tpurank.collections import get_collection
from features.processed import tabular_path
from models.predictions import predictions_path, write_predictions
from benchmarks.compare import format_table, main, parse_variants, score_runs, to_markdown

TILE = get_collection("tile:xla")


def test_parse_variants():
    v = parse_variants("xattn:cross_attn=true,hidden=128; plain:cross_attn=false")
    assert v == {"xattn": {"cross_attn": "true", "hidden": "128"}, "plain": {"cross_attn": "false"}}
    assert parse_variants("base:") == {"base": {}}
    with pytest.raises(ValueError, match="no variants"):
        parse_variants(" ; ")


def test_markdown_table_has_mean_and_sd():
    results = {"tile:xla": {"reference": {"baseline": 0.87, "random": 0.8},
                            "variants": {"a": {"scores": [0.9, 1.0], "mean": 0.95, "sd": 0.0707}}}}
    table = to_markdown(results, {"a": {}})
    assert "| tile:xla | 0.870 | 0.800 | 0.950 ± 0.071 |" in table


def test_prediction_runs_are_scored_per_seed(tmp_path):
    work = tmp_path / "work"
    path = tabular_path(work / "features", TILE, "valid")
    path.parent.mkdir(parents=True)
    pl.DataFrame({"graph": ["g"] * 20, "config": list(range(20)),
                  "target": np.arange(20.0, 0.0, -1.0)}).write_parquet(path)
    preds = work / "preds"
    write_predictions(predictions_path(preds, "m@seed0", TILE, "valid"), {"g": np.arange(20.0)[::-1]})
    write_predictions(predictions_path(preds, "m@seed1", TILE, "valid"), {"g": np.arange(20.0)})
    table = score_runs(str(work), ["m"], "tile:xla")
    scores = table["m"]["tile:xla"]
    assert set(scores) == {"m@seed0", "m@seed1"} and scores["m@seed0"] > scores["m@seed1"]
    assert "runs: m=2" in format_table(table)
    assert main(["preds", "--work", str(work), "--models", "m", "--collections", "tile:xla"]) == 0
