"""Execute a jupytext percent-format notebook with a real kernel (nbclient), papermill style.

Imported by name (``tests/notebooks`` is on pytest's ``pythonpath``) by the notebook and Kaggle tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jupytext
import nbformat
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"


def inject_parameters(nb: nbformat.NotebookNode, params: dict[str, Any]) -> nbformat.NotebookNode:
    """Insert a cell assigning ``params`` right after the cell tagged ``parameters``."""
    index = next((i for i, c in enumerate(nb.cells)
                  if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if index is None:
        raise ValueError("notebook has no cell tagged 'parameters'")
    source = "\n".join(f"{k} = {v!r}" for k, v in params.items())
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]})
    nb.cells.insert(index + 1, cell)
    return nb


def run_notebook(name: str, params: dict[str, Any], cwd: Path, kernel_name: str = "python3",
                 timeout: int = 600) -> nbformat.NotebookNode:
    """Execute ``notebooks/<name>.py`` top to bottom; raises CellExecutionError on a failing cell."""
    nb = jupytext.read(NOTEBOOKS / f"{name}.py")
    nb = inject_parameters(nb, params)
    NotebookClient(nb, timeout=timeout, kernel_name=kernel_name,
                   resources={"metadata": {"path": str(cwd)}}).execute()
    return nb


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


def text_output(nb: nbformat.NotebookNode) -> str:
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            parts.append(out.get("text", "") or out.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)
