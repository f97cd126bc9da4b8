"""``python -m ensemble real``: the real TPU records scored by random, heuristic and trained
models (a tiny plumbing-only GNN; its score means nothing)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np

from ensemble.real import RealGraph, format_report, prepare, random_scores

_spec = importlib.util.spec_from_file_location(
    "_rp", Path(__file__).resolve().parent.parent / "models" / "gnn" / "real_pipeline.py")
_rp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_rp)
pipeline = _rp.load_helper()


def test_prepare_converts_all_records(shared_data, tmp_path):
    data = prepare(shared_data, tmp_path)
    assert len(data.tile) == 15 and sum(len(g.target) for g in data.tile) == 752
    assert [len(g.target) for g in data.layout] == [112]
    assert all(g.path.is_file() for g in data.tile + data.layout)


def test_random_baseline_expectation():
    # 10 configs, best (1.0) is config 0, the rest 2.0: a random top-5 holds it with probability
    # 1/2 (score 1), else its best is 2.0 (score 2 - 2/1 = 0): expected 0.5
    g = RealGraph("k", Path("k.npz"), np.array([1.0] + [2.0] * 9), True)
    s = random_scores([g], "tile:xla", draws=2000, seed=0)
    assert abs(s.per_graph["k"] - 0.5) < 0.05
    lay = RealGraph("l", Path("l.npz"), np.arange(50, dtype=float), False)
    assert abs(random_scores([lay], "layout", draws=300, seed=0).per_graph["l"]) < 0.03


def test_real_cli_end_to_end(shared_data, capsys):
    from ensemble.real import main

    work = pipeline.trained_work(shared_data)
    assert main(["--work", str(work), "--shared", str(shared_data), "--draws", "50"]) == 0
    out = capsys.readouterr().out
    report = json.loads((work / "reports" / "real" / "real_eval.json").read_text())
    by = {(r["collection"], r["method"]): r for r in report["results"]}
    assert by[("tile:xla", "random")]["n"] == 15 and by[("tile:xla", "random")]["n_gt5"] == 8
    assert 0.5 < by[("tile:xla", "heuristic")]["score"] <= 1.0
    gnn = by[("layout:real <- layout:xla:random", "gnn")]
    assert -1.0 <= gnn["score"] <= 1.0 and "missing" not in gnn
    assert "no trained" in by[("tile:xla", "gnn")]["missing"]  # only a layout model was trained
    assert "not available" in out and "heuristic" in format_report(report)
