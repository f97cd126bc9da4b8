"""`score` on hidden runtimes, `submit --dry-run`, the command dispatch."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from ensemble import score, submit
from ensemble.__main__ import main as ensemble_main
from ensemble.submission import submission_rows, write_submission
from ensemble.truth import truth
from tpurank.collections import COLLECTIONS
from models.metrics import kendall_tau


def _oracle_rows(root):
    rows = {}
    for coll in COLLECTIONS:
        rows.update(submission_rows(coll, truth(root, coll, "test")))
    return rows


def test_score_of_a_perfect_and_a_reversed_submission(fake_root, tmp_path, capsys):
    rows = _oracle_rows(fake_root)
    path = write_submission(tmp_path / "perfect.csv", rows)
    assert score.main([str(path), "--data", str(fake_root)]) == 0
    out = capsys.readouterr().out
    assert "final (mean)" in out and "1.0000" in out
    scores = score.score_rows(rows, score.read_hidden_runtimes(fake_root))
    assert scores["final"] == pytest.approx(1.0, abs=1e-3)  # runtime ties keep τ-b a hair below 1
    # reversed layout rows: τ = -1 on graphs without ties
    coll = COLLECTIONS[2]
    t = truth(fake_root, coll, "test")
    rev = {**rows, **submission_rows(coll, {s: -v for s, v in t.items()})}
    scores = score.score_rows(rev, score.read_hidden_runtimes(fake_root))
    expected = np.mean([kendall_tau(-v, v) for v in t.values()])
    assert scores["collections"][coll.name] == pytest.approx(expected)


def test_score_without_ground_truth_exits_0(fake_root, tmp_path, capsys):
    root = tmp_path / "root"
    shutil.copytree(fake_root, root)
    rows = _oracle_rows(fake_root)
    shutil.rmtree(root / "hidden")
    path = write_submission(tmp_path / "s.csv", rows)
    assert score.main([str(path), "--data", str(root)]) == 0
    assert "no ground truth" in capsys.readouterr().out


def test_score_rejects_an_invalid_submission(fake_root, tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("ID,TopConfigs\n")
    assert score.main([str(path), "--data", str(fake_root)]) == 1


def _run_dir_with_summary(tmp_path):
    rows = {"tile:xla:a": [0, 1]}
    sub = write_submission(tmp_path / "submission.csv", rows)
    run = tmp_path / "20260101-000000-x-quick-seed0"
    write_submission(run / "submission.csv", rows)
    (run / "blend.json").write_text(
        '{"run_id": "20260101-000000-x-quick-seed0", "valid_final": {"blend": 0.5},'
        ' "collections": {"tile:xla": {"valid_score": {"blend": 0.75}}}}')
    return sub


def test_submit_dry_run_prints_the_command_with_run_and_scores(tmp_path, capsys):
    sub = _run_dir_with_summary(tmp_path)
    assert submit.main([str(sub), "--dry-run", "-m", "note"]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"kaggle competitions submit predict-ai-model-runtime -f {sub} -m ")
    assert "20260101-000000-x-quick-seed0" in out and "tile:xla=0.7500" in out
    assert "final=0.5000" in out and "note" in out


def test_submit_without_cli_or_credentials_is_a_clear_error(tmp_path, capsys, monkeypatch):
    sub = _run_dir_with_summary(tmp_path)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert submit.main([str(sub)]) == 2
    assert "Kaggle CLI is not installed" in capsys.readouterr().err
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/kaggle")
    monkeypatch.delenv("KAGGLE_USERNAME", raising=False)
    monkeypatch.delenv("KAGGLE_KEY", raising=False)
    monkeypatch.delenv("KAGGLE_API_TOKEN", raising=False)
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(tmp_path / "nowhere"))
    assert submit.main([str(sub)]) == 2
    assert "no Kaggle credentials" in capsys.readouterr().err


def test_submit_unknown_run_needs_a_message(tmp_path, capsys):
    sub = write_submission(tmp_path / "lonely.csv", {"tile:xla:a": [0]})
    assert submit.main([str(sub), "--dry-run"]) == 2
    assert "pass -m" in capsys.readouterr().err
    assert submit.main([str(sub), "--dry-run", "-m", "hello"]) == 0


def test_dispatch(capsys, monkeypatch):
    assert ensemble_main([]) == 2
    assert ensemble_main(["--help"]) == 0
    assert "blend|check|report|score|submit|real" in capsys.readouterr().out
    monkeypatch.setitem(__import__("sys").modules, "ensemble.real", None)  # simulate a missing module
    assert ensemble_main(["real"]) == 2
    assert "not available" in capsys.readouterr().err
