"""Weight fitting (known answers), the simplex grid, and blend end to end on a hand-made root."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from ensemble.blend import run_blend
from ensemble.weights import BlendConfig, fit_weights, simplex_grid
from ensemble.submission import check_file, read_submission
from tpurank.collections import get_collection
from tpurank.config import parse_config
from models.metrics import kendall_tau
from models.predictions import (normalise_costs, predictions_path, read_predictions,
                                write_predictions)

LAYOUT = get_collection("layout:nlp:random")


def test_simplex_grid():
    grid = simplex_grid(3, 0.25)
    assert grid.shape == (15, 3)
    assert np.allclose(grid.sum(axis=1), 1) and (grid >= 0).all()
    assert len(simplex_grid(2, 0.1)) == 11
    with pytest.raises(ValueError):
        simplex_grid(2, 0.3)


def _constructed(n_graphs: int, seed: int = 0):
    """Model 'good' knows the truth; 'noise' is pure noise; 'half' is truth + heavy noise."""
    rng = np.random.default_rng(seed)
    truth, good, noise, half = {}, {}, {}, {}
    for g in range(n_graphs):
        rt = rng.normal(size=60)
        truth[f"g{g}"] = rt
        good[f"g{g}"] = normalise_costs(rt)
        noise[f"g{g}"] = normalise_costs(rng.normal(size=60))
        half[f"g{g}"] = normalise_costs(rt + 2 * rng.normal(size=60))
    return truth, good, noise, half


def test_fit_puts_all_weight_on_the_perfect_model():
    truth, good, noise, half = _constructed(8)
    grid_optimum = fit_weights(LAYOUT, [noise, good, half], truth, alphas=(0.0,))
    assert grid_optimum.weights == pytest.approx([0.0, 1.0, 0.0])
    fit = fit_weights(LAYOUT, [noise, good, half], truth)
    # the others are worse on the tail: the anchor is the perfect model alone, so shrinkage
    # cannot move weight to them
    assert fit.anchor == pytest.approx([0.0, 1.0, 0.0])
    assert fit.weights == pytest.approx([0.0, 1.0, 0.0])
    assert fit.loo["0"] == pytest.approx(1.0) == fit.loo["1"]


def test_fit_on_a_config_subset_finds_the_same_answer():
    truth, good, noise, half = _constructed(6)
    fit = fit_weights(LAYOUT, [noise, good, half], truth, max_configs=25)
    assert fit.weights == pytest.approx([0.0, 1.0, 0.0])


def test_fit_equal_models_gives_equal_weights():
    """Two independent, equally noisy views of the truth: their average beats either."""
    rng = np.random.default_rng(1)
    truth, a, b = {}, {}, {}
    for g in range(10):
        rt = rng.normal(size=200)
        truth[f"g{g}"] = rt
        a[f"g{g}"] = normalise_costs(rt + rng.normal(size=200), "zscore")
        b[f"g{g}"] = normalise_costs(rt + rng.normal(size=200), "zscore")
    fit = fit_weights(LAYOUT, [a, b], truth)
    assert fit.weights[0] == pytest.approx(0.5, abs=0.15)
    single = max(np.mean([kendall_tau(m[s], truth[s]) for s in truth]) for m in (a, b))
    assert fit.in_sample[f"{fit.alpha:g}"] > single + 0.02


def test_fit_with_too_few_graphs_or_one_model_is_equal():
    truth, good, noise, _ = _constructed(2)
    assert fit_weights(LAYOUT, [noise, good], truth).weights == [0.5, 0.5]
    truth, good, _, _ = _constructed(5)
    fit = fit_weights(LAYOUT, [good], truth)
    assert fit.weights == [1.0] and fit.method.startswith("equal")


def test_tile_fit_uses_top5_score():
    rng = np.random.default_rng(2)
    tile = get_collection("tile:xla")
    truth, good, bad = {}, {}, {}
    for g in range(6):
        rt = rng.uniform(1, 2, size=30)
        truth[f"t{g}"] = rt
        good[f"t{g}"] = normalise_costs(rt)
        bad[f"t{g}"] = normalise_costs(-rt)  # ranks the best config last
    fit = fit_weights(tile, [bad, good], truth)
    # bad = 1 - good exactly, so every weight > 0.5 on good ranks perfectly: the fit must find
    # one of those (it keeps the one closest to equal weights), and equal weights (a tie) must lose
    assert fit.weights[1] > 0.5
    assert fit.in_sample[f"{fit.alpha:g}"] == pytest.approx(1.0)


def _write_model(fake_root, work, name, transform, seed):
    rng = np.random.default_rng(seed)
    from ensemble.truth import truth as read_truth
    from tpurank.collections import COLLECTIONS
    from features.io import discover
    for coll in COLLECTIONS:
        for split in ("valid", "test"):
            costs = {}
            for gf in discover(fake_root, [coll], [split]):
                rt = read_truth(fake_root, coll, split)[gf.stem]
                costs[gf.stem] = transform(rt, rng)
            write_predictions(predictions_path(work / "preds", name, coll, split), costs)


def test_blend_end_to_end(fake_root, tmp_path):
    work = tmp_path / "work"
    # "oracle" is good on every collection, "noise" is noise (two seeds): the blend must follow oracle
    _write_model(fake_root, work, "oracle",
                 lambda rt, rng: rt + 0.1 * rng.normal(size=rt.shape) * rt.std(), 0)
    for seed in (0, 1):
        _write_model(fake_root, work, f"noise@seed{seed}",
                     lambda rt, rng: rng.normal(size=rt.shape), seed + 5)
    sub = tmp_path / "subs" / "submission.csv"
    cfg = parse_config(BlendConfig, ["--data", str(fake_root), "--work", str(work), "--preset", "quick",
                                     "--models", "oracle,noise", "--submission", str(sub), "--protocol", "valid"])
    summary = run_blend(cfg)
    assert summary["check"] == "ok" and check_file(sub, fake_root) == []
    assert summary["runs"]["noise"] == ["noise@seed0", "noise@seed1"]
    for name, coll in summary["collections"].items():
        assert coll["weights"]["oracle"] >= 0.5, name
        assert coll["valid_score"]["blend"] >= coll["valid_score"]["noise"] - 1e-9, name
    run_dir = sub.parent / summary["run_id"]
    assert (run_dir / "submission.csv").read_text() == sub.read_text()
    assert json.loads((work / "blend" / "summary.json").read_text())["run_id"] == summary["run_id"]
    rows = read_submission(sub)
    blended = read_predictions(predictions_path(work / "preds", "blend", LAYOUT, "test"))
    for stem, cost in blended.items():
        assert rows[LAYOUT.submission_id(stem)] == list(np.argsort(cost, kind="stable"))


def test_blend_reports_missing_model(fake_root, tmp_path):
    cfg = parse_config(BlendConfig, ["--data", str(fake_root), "--work", str(tmp_path),
                                     "--models", "nope", "--submission", str(tmp_path / "s.csv")])
    with pytest.raises(FileNotFoundError, match="no predictions of model 'nope'"):
        run_blend(cfg)


def test_baseline_only_pipeline_on_the_generated_sample(tiny_root, tmp_path, capsys):
    """What `make run MODELS=baseline` does after training: predict, blend, check, score."""
    from ensemble import score
    from ensemble.submission import main as check_main
    from models.baseline import main as baseline_main
    work, sub = tmp_path / "work", tmp_path / "subs" / "submission.csv"
    assert baseline_main(["predict", "--data", str(tiny_root), "--work", str(work)]) == 0
    cfg = parse_config(BlendConfig, ["--data", str(tiny_root), "--work", str(work), "--models", "baseline",
                                     "--submission", str(sub)])
    with pytest.raises(FileNotFoundError, match=r"baseline \(training-free: it writes none\).*--protocol valid"):
        run_blend(cfg)  # the default protocol needs out-of-fold predictions: said, not switched
    summary = run_blend(dataclasses.replace(cfg, protocol="valid"))
    assert summary["check"] == "ok"
    assert check_main([str(sub), "--data", str(tiny_root)]) == 0
    assert check_main([str(tiny_root / "sample_submission.csv"), "--data", str(tiny_root)]) == 0
    assert score.main([str(sub), "--data", str(tiny_root)]) == 0
    assert "final (mean)" in capsys.readouterr().out


def test_blend_rejects_stale_predictions_by_name(fake_root, tmp_path):
    work = tmp_path / "work"
    _write_model(fake_root, work, "m", lambda rt, rng: np.append(rt, 0.0), 0)  # one cost too many
    cfg = parse_config(BlendConfig, ["--data", str(fake_root), "--work", str(work), "--models", "m",
                                     "--submission", str(tmp_path / "s.csv"), "--protocol", "valid"])
    stale = r"tile:xla/valid, model m: graph 'tile-xla-valid-0' has \d+ predicted"
    with pytest.raises(ValueError, match=stale):
        run_blend(cfg)


def test_blend_with_the_tile_portfolio_submits_its_top5(fake_root, tmp_path, capsys):
    """``--tile-top5 portfolio`` (fitted on valid here): each tile row is the portfolio of the two
    models and their average with the slots the summary records (the rule itself is tested in
    test_hedge.py); other collections are untouched and the submission passes the checker."""
    from ensemble.blend import load_normed
    from ensemble.hedge import blend_or_portfolio
    from features.io import discover
    from tpurank.collections import get_collection

    tile = get_collection("tile:xla")
    work = tmp_path / "work"
    _write_model(fake_root, work, "oracle", lambda rt, rng: rt + 0.1 * rng.normal(size=rt.shape) * rt.std(), 0)
    _write_model(fake_root, work, "noise", lambda rt, rng: rng.normal(size=rt.shape), 1)
    sub = tmp_path / "s.csv"
    cfg = parse_config(BlendConfig, ["--data", str(fake_root), "--work", str(work), "--models",
                                     "oracle,noise", "--submission", str(sub), "--tile-top5", "portfolio",
                                     "--protocol", "valid"])
    summary = run_blend(cfg)
    tile_summary = summary["collections"]["tile:xla"]
    assert summary["check"] == "ok" and "portfolio" not in summary["collections"][LAYOUT.name]
    slots = tile_summary["portfolio"]["slots"]
    assert tile_summary["portfolio"]["members"] == ["oracle", "noise", "blend"] and sum(slots) == 5
    rows = read_submission(sub)
    weights = [tile_summary["weights"][m] for m in ("oracle", "noise")]
    stems = [gf.stem for gf in discover(fake_root, [tile], ["test"])]
    test = load_normed(cfg, tile, "test", {})
    expected = blend_or_portfolio(test, weights, stems, slots)
    for stem in stems:
        n = min(5, len(expected[stem]))
        assert rows[tile.submission_id(stem)] == np.argsort(expected[stem], kind="stable")[:n].tolist()
    with pytest.raises(SystemExit):
        parse_config(BlendConfig, ["--tile-top5", "best"])
    assert "--tile-top5" in capsys.readouterr().err
