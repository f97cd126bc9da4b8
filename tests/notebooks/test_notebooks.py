"""The three notebooks run top to bottom on the tiny sample with a real kernel (nbclient)."""

from __future__ import annotations

from pathlib import Path

import nbrun
import pytest


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")


def test_eda_notebook_runs_and_plots(tiny_root: Path, tmp_path: Path) -> None:
    nb = nbrun.run_notebook("eda", {"DATA": str(tiny_root)}, cwd=tmp_path)
    kinds = nbrun.output_types(nb)
    assert "error" not in kinds
    assert kinds.count("image/png") >= 5  # sizes, opcodes, configs, spread, pruning
    text = nbrun.text_output(nb)
    for name in ("tile:xla", "layout:nlp:default", "layout:xla:random"):
        assert name in text


@pytest.mark.slow  # the train notebook trains 30 fold models (about a minute on 2 cores)
def test_train_notebook_trains_every_stage(train_notebook: tuple[Path, object]) -> None:
    work, nb = train_notebook
    kinds = nbrun.output_types(nb)
    assert "error" not in kinds
    assert "image/png" in kinds  # training curves
    assert "lgbm@seed0" in nbrun.text_output(nb)  # the validation table
    # the quick preset cross-validates: 3 fold models per collection and model, one run summary each
    assert len(list((work / "models" / "gnn").rglob("fold*/best.pt"))) == 5 * 3
    assert len(list((work / "models" / "lgbm").rglob("fold*/metrics.json"))) == 5 * 3
    assert len(list((work / "models" / "lgbm").glob("*/seed0/metrics.json"))) == 5
    assert len(list(work.glob("features/*/norm.npz"))) == 5


@pytest.mark.slow  # needs the train notebook's models
def test_inference_notebook_writes_a_checked_submission(train_notebook: tuple[Path, object],
                                                         tiny_root: Path, tmp_path: Path) -> None:
    weights, _ = train_notebook
    work = tmp_path / "work"
    overrides = {"features": {"splits": "valid,test", "jobs": 1, "progress": False},
                 "gnn-predict": {"threads": 1}, "lgbm-predict": {"threads": 1}}
    nb = nbrun.run_notebook("inference", {
        "DATA": str(tiny_root), "WEIGHTS": str(weights), "WORK": str(work), "INSTALL": False,
        "OVERRIDES": overrides}, cwd=tmp_path)
    submission = work / "submission.csv"
    lines = submission.read_text().splitlines()
    assert lines[0] == "ID,TopConfigs"
    assert len(lines) > 5
    assert "image/png" in nbrun.output_types(nb)
    # the weights were copied, not trained again: no train features were built here
    assert not list(work.glob("features/*/graphs/train"))
    from ensemble.submission import check_file

    assert check_file(submission, tiny_root) == []


def test_parameters_cell_is_tagged_in_every_notebook() -> None:
    import jupytext

    for name in ("eda", "train", "inference"):
        nb = jupytext.read(nbrun.NOTEBOOKS / f"{name}.py")
        tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(tagged) == 1, name
        assert "DATA" in tagged[0].source
