"""Execute a jupytext percent-format notebook with a real kernel (nbclient), papermill style:
the notebook runner of ``kaggle/rehearsal.py``, for the notebooks of ``notebooks/``.

Imported by name (``tests/notebooks`` is on pytest's ``pythonpath``) by the notebook and Kaggle tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kaggle_scripts  # tests/kaggle is on pytest's pythonpath
import nbformat

rehearsal = kaggle_scripts.load("rehearsal")
REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
inject_parameters = rehearsal.inject_parameters
text_output = rehearsal.text_output


def run_notebook(name: str, params: dict[str, Any], cwd: Path, kernel_name: str = "python3",
                 timeout: int = 600) -> nbformat.NotebookNode:
    """Execute ``notebooks/<name>.py`` top to bottom; raises CellExecutionError on a failing cell."""
    return rehearsal.execute_notebook(NOTEBOOKS / f"{name}.py", params, cwd, kernel_name, timeout)


def output_types(nb: nbformat.NotebookNode) -> list[str]:
    """Every MIME type (or ``stream``/``error``) among the outputs, one entry per output."""
    kinds = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                kinds.append("stream")
            elif out.get("output_type") == "error":
                kinds.append("error")
            else:
                kinds.extend(out.get("data", {}).keys())
    return kinds
