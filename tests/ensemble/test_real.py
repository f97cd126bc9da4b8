"""``python -m ensemble real``: the real TPU records scored by random, heuristic and trained
models (a tiny plumbing-only GNN; its score means nothing)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from ensemble.real import RealGraph, format_report, prepare, random_scores

_spec = importlib.util.spec_from_file_location(
    "_rp", Path(__file__).resolve().parent.parent / "models" / "gnn" / "real_pipeline.py")
_rp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_rp)
pipeline = _rp.load_helper()


def test_prepare_converts_all_records(shared_data, tmp_path):
    tile, layout = prepare(shared_data, tmp_path)
    assert len(tile) == 15 and sum(len(g.target) for g in tile) == 752
    assert [len(g.target) for g in layout] == [112]
    assert all(g.path.is_file() for g in tile + layout)


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
    assert main(["--work", str(work), "--records", str(shared_data), "--draws", "50"]) == 0
    out = capsys.readouterr().out
    report = json.loads((work / "reports" / "real" / "real_eval.json").read_text())
    by = {(r["collection"], r["method"]): r for r in report["results"]}
    assert by[("tile:xla", "random")]["n"] == 15 and by[("tile:xla", "random")]["n_gt5"] == 8
    assert 0.5 < by[("tile:xla", "heuristic")]["score"] <= 1.0
    gnn = by[("layout:real <- layout:xla:random", "gnn")]
    assert -1.0 <= gnn["score"] <= 1.0 and "missing" not in gnn
    assert "no trained" in by[("tile:xla", "gnn")]["missing"]  # only a layout model was trained
    assert "not available" in out and "heuristic" in format_report(report)


def test_real_scores_the_fold_models_of_a_cross_validated_run(shared_data, tmp_path, capsys):
    """A default (cross-validated) run keeps ``seed<k>/fold<j>/``: those models are found, their
    costs averaged per graph as for test; identical folds score as the single model did."""
    import shutil

    from ensemble.real import evaluate, main, trained_models
    from models.lgbm.__main__ import main as lgbm_main

    single = pipeline.trained_work(shared_data)
    work = tmp_path / "work"
    shutil.copytree(single, work, ignore=shutil.ignore_patterns("real", "reports"))
    common = ["--data", str(single.parent / "data"), "--work", str(work), "--collections",
              _rp.COLLECTION, "--threads", "1"]
    assert lgbm_main(["train", *common, "--folds", "0", "--num-boost-round", "5", "--min-rounds", "1"]) == 0
    before = {(r["method"]): r for r in evaluate(work, shared_data, draws=5)["results"]
              if r["collection"].endswith(_rp.COLLECTION)}
    for model, marker in (("gnn", "best.pt"), ("lgbm", "model.txt")):
        seed_dir = work / "models" / model / "layout-xla-random" / "seed0"
        files = [p for p in seed_dir.iterdir() if p.is_file()]
        for k in range(2):  # the same model twice, as two folds
            (seed_dir / f"fold{k}").mkdir()
            for f in files:
                shutil.copy2(f, seed_dir / f"fold{k}" / f.name)
        for f in files:
            f.unlink()
        assert [p.name for p in trained_models(seed_dir.parent, marker)[0]] == ["fold0", "fold1"]
    assert main(["--work", str(work), "--records", str(shared_data), "--draws", "5"]) == 0
    out = capsys.readouterr().out
    report = json.loads((work / "reports" / "real" / "real_eval.json").read_text())
    after = {r["method"]: r for r in report["results"] if r["collection"].endswith(_rp.COLLECTION)}
    for model in ("gnn", "lgbm"):
        assert "2 fold models averaged" in after[model]["note"]
        assert after[model]["score"] == pytest.approx(before[model]["score"], abs=1e-9)
    assert out.count("2 fold models averaged") == 2


def _blend_summary(work: Path, weights: dict[str, float], slots: list[int] | None,
                   norm: str = "minmax") -> None:
    coll = {"weights": weights, **({"portfolio": {"slots": slots}} if slots else {})}
    (work / "blend").mkdir(parents=True)
    (work / "blend" / "summary.json").write_text(json.dumps(
        {"models": list(weights), "norm": norm, "collections": {"tile:xla": coll}}))


def test_blend_on_the_real_records_uses_the_runs_weights_and_hedge(tmp_path):
    """The blend row is what the run would submit: the fitted weights, and on tile the fitted
    slots, over the models' seed-averaged costs; the hedge keeps the other model's best pick
    where the heavier model ranks a kernel's best configs last."""
    from ensemble.real import Scores, blend_scores
    from models.predictions import average_runs
    from tpurank.collections import get_collection

    coll = get_collection("tile:xla")
    target = np.arange(1.0, 11.0)  # config 0 fastest
    graphs = [RealGraph("k", tmp_path / "k.npz", target, True)]
    blind = {0: {"k": -target}}  # ranks the fastest configs last
    right = {0: {"k": target}, 1: {"k": target ** 2}}  # two seeds, the same order
    models = {"gnn": Scores("gnn", "tile:xla", costs=right), "lgbm": Scores("lgbm", "tile:xla", costs=blind)}
    _blend_summary(tmp_path, {"gnn": 0.2, "lgbm": 0.8}, [1, 4, 0])
    by = {s.method: s for s in blend_scores(tmp_path, graphs, coll, "tile:xla", models)}
    assert by["blend"].per_graph["k"] == 1.0  # gnn's slot holds config 0
    assert by["average"].per_graph["k"] < 1.0  # 0.8 on the blind model: its picks
    assert "slots [1, 4, 0]" in by["blend"].note
    averaged = average_runs(list(right.values()))["k"]
    assert np.allclose(averaged, (target - 1) / 9 * 0.5 + (target ** 2 - 1) / 99 * 0.5, atol=1e-6)


def test_blend_on_the_real_records_says_what_it_lacks(tmp_path):
    from ensemble.real import Scores, blend_scores
    from tpurank.collections import get_collection

    coll = get_collection("tile:xla")
    graphs = [RealGraph("k", tmp_path / "k.npz", np.arange(1.0, 8.0), True)]
    models = {"gnn": Scores("gnn", "tile:xla", missing="no trained GNN")}
    [gap] = blend_scores(tmp_path, graphs, coll, "tile:xla", models)
    assert "no blend summary" in gap.missing
    _blend_summary(tmp_path, {"gnn": 0.5, "lgbm": 0.5}, None)
    [gap] = blend_scores(tmp_path, graphs, coll, "tile:xla", models)
    assert "['gnn', 'lgbm']" in gap.missing
    [gap] = blend_scores(tmp_path, graphs, get_collection("layout:xla:random"), "layout", models)
    assert "no blend weights for layout:xla:random" in gap.missing
