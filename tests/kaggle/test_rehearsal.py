"""``make kaggle-rehearsal``: the *train on Kaggle* route end to end, offline (slow; CI runs it)."""

from __future__ import annotations

import json
from pathlib import Path

import kaggle_scripts  # tests/kaggle is on pytest's pythonpath
import pytest

rehearsal = kaggle_scripts.load("rehearsal")


@pytest.mark.slow
def test_the_train_kernel_then_the_inference_kernel_run_offline_and_submit(tmp_path: Path) -> None:
    import torch

    root = tmp_path / "rehearsal"
    assert rehearsal.main(["--root", str(root), "--budget", "120", "--keep"]) == 0
    summary = json.loads((root / "rehearsal.json").read_text())
    assert summary["device"] == ("cuda" if torch.cuda.is_available() else "cpu")
    for log in (summary["train_log"], summary["inference_log"]):
        assert "Successfully installed" in log and "tpurank-" in log  # from the bundle, no index
    assert "preset='full'" in summary["train_log"]  # the train kernel's Kaggle default
    assert "WORK slimmed" in summary["train_log"]
    kaggle = root / "kaggle"
    output = kaggle / "input" / "tpurank-train"  # the train kernel's working/, as a kernel source
    assert (output / "submission.csv").is_file() and (output / "work" / "MANIFEST.json").is_file()
    assert list(output.glob("*/report.html"))
    assert not list((output / "work" / "features").glob("*/graphs"))  # slimmed: caches gone
    assert list((output / "work" / "preds").glob("*/*/test.npz"))
    assert (kaggle / "working" / "submission.csv").is_file()  # the inference kernel's


def test_notebook_parameters_are_injected_after_the_parameters_cell() -> None:
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
                                         nbformat.v4.new_code_cell("print(x)")])
    rehearsal.inject_parameters(nb, {"x": 2})
    assert [c.source for c in nb.cells] == ["x = 1", "x = 2", "print(x)"]
    with pytest.raises(ValueError, match="parameters"):
        rehearsal.inject_parameters(nbformat.v4.new_notebook(cells=[]), {"x": 2})
