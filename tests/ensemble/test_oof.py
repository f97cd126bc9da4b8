"""Blending on out-of-fold predictions: nested (leave-one-fold-out) score, fold-ensemble test
predictions, complete checked submission, fold-manifest leak check."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import ensemble.blend as blend_mod
import ensemble.oof as oof_mod
from ensemble.blend import run_blend
from ensemble.weights import BlendConfig
from ensemble.submission import check_file, expected_rows, read_submission
from ensemble.truth import split_truth
from ensemble.truth import test_truth as hidden_truth
from models.cv import fold_plan, write_fold_manifest
from models.predictions import (fold_split, predictions_path, read_predictions,
                                write_fold_average, write_predictions)
from tpurank.atomic import save_npz
from tpurank.collections import COLLECTIONS, get_collection

K = 3


def _write_cv_model(root: Path, work: Path, run: str, noise: float, seed: int,
                    subset: bool = False, folds: int = K) -> None:
    """A fake K-fold model: OOF = truth + noise per held-out graph, K test-fold files, their
    average, the valid split's OOF, and a folds.json manifest. ``subset``: train graphs' OOF
    covers every other config only, listed in ``oof-config.npz`` (deduplicated train rows)."""
    rng = np.random.default_rng(seed)
    for coll in COLLECTIONS:
        plan = fold_plan(work, work / "features", coll, folds=folds, seed=0, data=root)
        truth = {**split_truth(root, coll, "train"), **split_truth(root, coll, "valid")}
        oof, index = {}, {}
        for k in range(folds):
            for split, stem in plan.held_out(k):
                t = truth[stem]
                oof[stem] = t + noise * t.std() * rng.normal(size=t.shape)
                index[stem] = np.arange(t.size)
                if subset and split == "train":
                    index[stem] = np.arange(t.size)[::-2]  # descending: order must not matter
                    oof[stem] = oof[stem][index[stem]]
        preds = work / "preds"
        write_predictions(predictions_path(preds, run, coll, "oof"), oof)
        if subset:
            save_npz(predictions_path(preds, run, coll, "oof-config"), **index)
        valid = split_truth(root, coll, "valid")
        write_predictions(predictions_path(preds, run, coll, "valid"), {s: oof[s] for s in valid})
        hidden = hidden_truth(root, coll)
        for k in range(folds):
            write_predictions(predictions_path(preds, run, coll, fold_split(k)),
                              {s: t + noise * t.std() * rng.normal(size=t.shape)
                               for s, t in hidden.items()})
        write_fold_average(preds, run, coll, folds=folds)
        write_fold_manifest(work / "models" / run / coll.slug / "folds.json", plan)


@pytest.fixture(scope="module")
def cv_work(cv_root, tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("cvwork")
    _write_cv_model(cv_root, work, "good@seed0", 0.3, 0, subset=True)
    _write_cv_model(cv_root, work, "noise@seed0", 50.0, 1)
    return work


def _cfg(root, work, **kw) -> BlendConfig:
    return BlendConfig(data=str(root), work=str(work), models="good,noise",
                       submission=str(work / "sub" / "submission.csv"), **kw)


@pytest.fixture(scope="module")
def oof_run(cv_root, cv_work):
    """One OOF blend of the fake models, recording the graphs every weight fit looked at."""
    fitted_on: list[set[str]] = []
    real_fit = blend_mod.fit_weights

    def spy(*args, stems=None, **kw):
        fitted_on.append(set(stems) if stems is not None else set(args[2]))
        return real_fit(*args, stems=stems, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(blend_mod, "fit_weights", spy)
        summary = run_blend(_cfg(cv_root, cv_work))
    return summary, fitted_on


def test_blend_on_oof_is_nested_complete_and_checked(cv_root, cv_work, oof_run):
    summary, fitted_on = oof_run
    assert summary["check"] == "ok"
    rows = read_submission(summary["submission"])
    assert set(rows) == set(expected_rows(cv_root))  # every test graph of every collection
    assert check_file(summary["submission"], cv_root) == []
    assert set(summary["oof_final"]) == {"good", "noise", "blend"}
    for name, s in summary["collections"].items():
        assert s["protocol"] == "oof"
        oof = s["oof"]
        assert oof["folds"] == K and oof["n_graphs"] == 10 and len(oof["manifests"]) == 2
        if not name.startswith("tile"):  # tile graphs here have <= 8 configs: top-5 is always 1
            assert s["weights"]["good"] > s["weights"]["noise"]
            assert oof["models"]["good"]["mean"] > oof["models"]["noise"]["mean"] + 0.5
        assert sum(oof["blend"]["scores"]["n_per_fold"].values()) == 10
        # train graphs scored on the configs both models predicted (good: every other one)
        labelled = {**split_truth(cv_root, get_collection(name), "train"),
                    **split_truth(cv_root, get_collection(name), "valid")}
        train = split_truth(cv_root, get_collection(name), "train")
        expected = sum(len(t[::2]) if st in train else len(t) for st, t in labelled.items())
        assert oof["n_configs"] == expected
    # every nested fit leaves its scored fold out; one fit per fold and one on all graphs
    coll = COLLECTIONS[1]
    plan = fold_plan(cv_work, cv_work / "features", coll, folds=K, seed=0, data=cv_root)
    nested_sets = [f for f in fitted_on if len(f) < 10]
    assert len(nested_sets) == K * len(COLLECTIONS)
    all_folds = [{st for _, st in plan.held_out(k)} for k in range(K)]
    mine = [f for f in nested_sets if f <= {st for _, st in plan.graphs()}]
    assert len(mine) == K
    for fitted, held in zip(mine, all_folds):
        assert not fitted & held and fitted | held == {st for _, st in plan.graphs()}


def test_models_with_different_fold_counts_blend_on_the_largest(cv_root, tmp_path):
    """The GNN's ``--regime`` may train 2 folds where LightGBM trains 3: each model's OOF
    predictions are its own, and the blend nests over the larger plan."""
    work = tmp_path / "work"
    _write_cv_model(cv_root, work, "good@seed0", 0.3, 0, folds=2)
    _write_cv_model(cv_root, work, "noise@seed0", 50.0, 1)
    summary = run_blend(_cfg(cv_root, work))
    assert summary["check"] == "ok"
    for s in summary["collections"].values():
        assert s["oof"]["folds"] == K and s["oof"]["n_graphs"] == 10 and len(s["oof"]["manifests"]) == 2
        assert s["oof"]["runs"]["good"]["spread"]["cells"] == 2  # its own plan's folds


def test_valid_blend_uses_the_weights_of_its_fold(cv_root, cv_work, oof_run):
    summary = oof_run[0]
    coll = COLLECTIONS[3]
    s = summary["collections"][coll.name]
    plan = fold_plan(cv_work, cv_work / "features", coll, folds=K, seed=0, data=cv_root)
    fold_of = oof_mod.stem_folds(plan)
    from ensemble.blend import load_normed
    from ensemble.weights import blend_costs

    cfg = _cfg(cv_root, cv_work)
    normed = load_normed(cfg, coll, "valid", {})
    blend_valid = read_predictions(predictions_path(cv_work / "preds", "blend", coll, "valid"))
    for stem, cost in blend_valid.items():
        w = s["oof"]["blend"]["weights"][str(fold_of[stem])]
        assert np.allclose(cost, blend_costs(normed, w, [stem])[stem], atol=1e-6)


def test_protocol_valid_fallback(cv_root, cv_work, oof_run, tmp_path):
    work = tmp_path / "w"
    shutil.copytree(cv_work / "preds", work / "preds")
    summary = run_blend(_cfg(cv_root, work, protocol="valid"))
    for s in summary["collections"].values():
        assert s["protocol"] == "valid (in-sample)" and "oof" not in s
    assert summary["oof_final"] == {}


def test_leaky_manifest_fails_the_blend(cv_root, cv_work, oof_run, tmp_path):
    work = tmp_path / "w"
    for sub in ("preds", "models", "folds"):
        shutil.copytree(cv_work / sub, work / sub)
    coll = COLLECTIONS[0]
    path = work / "models" / "good@seed0" / coll.slug / "folds.json"
    manifest = json.loads(path.read_text())
    plan = fold_plan(work, work / "features", coll, folds=K, seed=0, data=cv_root)
    sp, st = plan.held_out(0)[0]
    manifest["seen"]["0"].append(f"{sp}/{st}")
    manifest["plan"] = str(work / "folds" / coll.slug / "K3-seed0.json")
    path.write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="in-sample"):
        run_blend(_cfg(cv_root, work))


def test_report_shows_oof_and_official_valid_tables(cv_root, cv_work, oof_run):
    from ensemble.report import ReportConfig, write_report

    cfg = _cfg(cv_root, cv_work)
    rcfg = ReportConfig(data=cfg.data, work=cfg.work, models=cfg.models, submission=cfg.submission)
    run_dir = write_report(rcfg)
    md = (run_dir / "report.md").read_text()
    assert "Out-of-fold scores" in md and "Official valid split" in md
    assert "| layout:xla:random | 10 | 3 |" in md  # graphs and folds beside the OOF scores
    assert "blend (nested, ± sd over folds)" in md and "In-sample" not in md
    assert "held-out" not in md.lower()
    data = json.loads((run_dir / "report.json").read_text())
    assert data["valid_protocol"]["tile:xla"] == "oof"
    assert data["oof"]["layout:nlp:random"]["n_graphs"] == 10
    assert (run_dir / "scores_oof.png").is_file()
    # the per-graph distribution of every model and the blend, out of fold
    assert "## Per-graph score distribution" in md and (run_dir / "distribution.png").is_file()
    assert "| model | graphs | worst | worst 5% (mean) |" in md and "| noise | 10 |" in md


def test_oof_tile_portfolio_is_nested_and_submitted(cv_root, cv_work, tmp_path):
    """``--tile-top5 portfolio`` on OOF: the blend's nested tile score is the portfolio's (slots
    fitted without each fold), the average's stays beside it, and the test rows are the
    portfolio of the all-OOF slots."""
    from ensemble.blend import load_normed
    from ensemble.hedge import blend_or_portfolio

    work = tmp_path / "w"
    for sub in ("preds", "models", "folds"):
        shutil.copytree(cv_work / sub, work / sub)
    cfg = _cfg(cv_root, work, tile_top5="portfolio")
    summary = run_blend(cfg)
    tile = get_collection("tile:xla")
    s = summary["collections"][tile.name]
    assert set(s["portfolio"]["fold_slots"]) == {str(k) for k in range(K)}
    assert "average" in s["oof"] and s["oof"]["blend"]["scores"]["n_graphs"] == 10
    assert "portfolio" not in summary["collections"]["layout:xla:random"]
    slots = s["portfolio"]["slots"]
    weights = [s["weights"][m] for m in ("good", "noise")]
    test = load_normed(cfg, tile, "test", {})
    expected = blend_or_portfolio(test, weights, sorted(test[0]), slots)
    rows = read_submission(summary["submission"])
    for stem, cost in expected.items():
        assert rows[tile.submission_id(stem)] == np.argsort(cost, kind="stable")[:min(5, len(cost))].tolist()
    from ensemble.report import ReportConfig, write_report

    md = (write_report(ReportConfig(data=cfg.data, work=cfg.work, models=cfg.models,
                                    submission=cfg.submission)) / "report.md").read_text()
    assert "**tile:xla** top 5: a portfolio of good" in md and "| blend (average) | 10 |" in md
