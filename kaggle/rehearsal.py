"""The whole Kaggle route, rehearsed offline: ``make kaggle-rehearsal`` (docs/kaggle.md).

A folder stands in for ``/kaggle`` (``TPURANK_KAGGLE_ROOT``, which the notebooks read): its
``input/`` holds the tiny generated sample and the datasets of a fresh bundle, its ``working/``
each kernel's output. The train kernel's notebook runs in a fresh environment of exactly the
image's packages with pip allowed no index; its ``working/`` becomes ``input/tpurank-train/`` for
the inference kernel's notebook, run the same way. Both submissions must pass ``ensemble check``,
and the GNN must have trained on the device the pipeline picks (CUDA when present, else the CPU).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bundle  # noqa: E402  (kaggle/ is a folder of scripts, not a package)

REPO = bundle.REPO
DEFAULT_ROOT = REPO / "work" / "kaggle-rehearsal"
#: the tiny sample's settings: a handful of steps and rounds, one worker process
TINY_OVERRIDES: dict[str, dict[str, Any]] = {
    "features": {"jobs": 1, "progress": False},
    "gnn-train": {"steps": 8, "eval_every": 4, "hidden": 16, "layers": 2, "configs_per_step": 16,
                  "val_max_configs": 32, "threads": 1},
    "gnn-predict": {"threads": 1},
    "lgbm-train": {"num_boost_round": 20, "early_stopping_rounds": 5, "threads": 1},
    "lgbm-predict": {"threads": 1},
}


def image_distributions(requirements: list[str]) -> list[Any]:
    """The installed distributions of the image list and everything they depend on: what the
    Kaggle image holds for tpurank."""
    seen: dict[str, importlib.metadata.Distribution] = {}
    todo = [bundle.Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        key = bundle.canonicalize_name(req.name)
        if key in seen:
            continue
        dist = importlib.metadata.distribution(req.name)
        if not req.specifier.contains(dist.version, prereleases=True):
            raise SystemExit(f"{req} is assumed by kaggle/image_packages.txt, {dist.version} is "
                             "installed here: run `make setup`")
        seen[key] = dist
        todo += bundle.runtime_requirements(req.name)
    return list(seen.values())


def image_environment(folder: Path) -> Path:
    """A fresh venv in ``folder`` holding exactly the image's packages; returns its python.

    The packages are not copied: a folder of symlinks to their installed files is added to the
    venv's ``sys.path`` by a ``.pth`` file, so pip inside the venv sees them as installed and the
    environment takes seconds to make."""
    layer = folder / "kaggle-image"
    layer.mkdir(parents=True)
    for dist in image_distributions(bundle.image_requirements()):
        site = Path(dist.locate_file(""))
        for top in {p.parts[0] for p in dist.files or [] if p.parts[0] != ".."}:
            link = layer / top
            if not link.exists() and (site / top).exists():
                link.symlink_to(site / top)
    venv = folder / "venv"  # without pip: the image's pip (in the list) does the install
    bundle.run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    py = venv / "bin" / "python"
    purelib = bundle.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip()
    (Path(purelib) / "kaggle_image.pth").write_text(f"import site; site.addsitedir({str(layer)!r})\n")
    return py


def kernel_spec(python: Path, jupyter_dir: Path, name: str = "kaggle-image") -> str:
    """A Jupyter kernel named ``name`` that runs ``python`` (found through ``JUPYTER_PATH``)."""
    folder = jupyter_dir / "kernels" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Kaggle image", "language": "python"}))
    return name


def inject_parameters(nb: Any, params: dict[str, Any]) -> Any:
    """Insert a cell assigning ``params`` right after the cell tagged ``parameters`` (papermill)."""
    import nbformat

    index = next((i for i, c in enumerate(nb.cells)
                  if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if index is None:
        raise ValueError("notebook has no cell tagged 'parameters'")
    source = "\n".join(f"{k} = {v!r}" for k, v in params.items())
    nb.cells.insert(index + 1, nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]}))
    return nb


def execute_notebook(path: Path, params: dict[str, Any], cwd: Path, kernel_name: str = "python3",
                     timeout: int = 900) -> Any:
    """Execute a notebook (.ipynb or jupytext .py) top to bottom with a real kernel; the
    executed notebook is returned (a failing cell raises CellExecutionError)."""
    import jupytext
    from nbclient import NotebookClient

    nb = inject_parameters(jupytext.read(path), params)
    NotebookClient(nb, timeout=timeout, kernel_name=kernel_name,
                   resources={"metadata": {"path": str(cwd)}}).execute()
    return nb


def text_output(nb: Any) -> str:
    """Every stream and text output of an executed notebook, in order."""
    return "\n".join(out.get("text", "") or out.get("data", {}).get("text/plain", "")
                     for cell in nb.cells for out in cell.get("outputs", []))


def check_submission(path: Path, data: Path) -> None:
    """``python -m ensemble check`` (the submission stage's own check); fails loudly."""
    out = bundle.run([sys.executable, "-m", "ensemble", "check", str(path), "--data", str(data)], cwd=REPO)
    print(f"  ensemble check {path}: {out.strip().splitlines()[-1]}")


def check_device(work: Path) -> str:
    """Every GNN model trained on the device the pipeline chooses: CUDA when present, else CPU."""
    import torch

    expected = "cuda" if torch.cuda.is_available() else "cpu"
    devices = {json.loads(p.read_text()).get("device", "?").split(":")[0]
               for p in (work / "models" / "gnn").rglob("config.json")}
    if devices != {expected}:
        raise SystemExit(f"{work}: GNN models trained on {sorted(devices)}, expected {expected}")
    return expected


def run_kernel(name: str, build: Path, kaggle: Path, scratch: Path, params: dict[str, Any]) -> Any:
    """A kernel of the bundle run as Kaggle runs it: a fresh image environment, ``working/`` as
    the current folder, its notebook from the bundle; the sandbox as /kaggle, pip with no index,
    one thread."""
    jupyter = scratch / name / "jupyter"
    kernel = kernel_spec(image_environment(scratch / name), jupyter)
    code_file = json.loads((build / name / bundle.kmeta.KERNEL_FILE).read_text())["code_file"]
    with mock.patch.dict(os.environ, TPURANK_KAGGLE_ROOT=str(kaggle), PIP_NO_INDEX="1",
                         PIP_CONFIG_FILE=os.devnull, JUPYTER_PATH=str(jupyter), OMP_NUM_THREADS="1",
                         MPLBACKEND="module://matplotlib_inline.backend_inline"):
        for key in ("PYTHONPATH", "PIP_FIND_LINKS", "PIP_INDEX_URL"):
            os.environ.pop(key, None)
        return execute_notebook(build / name / code_file, params, kaggle / "working", kernel)


def rehearse(root: Path = DEFAULT_ROOT, budget: float = 120.0) -> dict[str, Any]:
    """Bundle, train kernel, inference kernel, both submissions checked; returns a summary."""
    from features.sample import generate_dataset

    t0 = time.monotonic()
    shutil.rmtree(root, ignore_errors=True)
    kaggle, scratch, build = root / "kaggle", root / "scratch", root / "build"
    data = kaggle / "input" / bundle.kmeta.COMPETITION
    generate_dataset(data, scale="tiny", seed=0)
    (kaggle / "working").mkdir(parents=True)
    print("[rehearsal] bundle (no trained model):", flush=True)
    sizes = bundle.bundle(build, owner="rehearsal")
    for name in (bundle.CODE, bundle.WHEELS):
        shutil.copytree(build / name, kaggle / "input" / name)
    print(f"[rehearsal] train kernel (budget {budget:.0f} s) in a fresh image environment", flush=True)
    train_nb = run_kernel(bundle.TRAIN, build, kaggle, scratch,
                          {"BUDGET": budget, "OVERRIDES": TINY_OVERRIDES})
    check_submission(kaggle / "working" / "submission.csv", data)
    device = check_device(kaggle / "working" / "work")
    shutil.move(kaggle / "working", kaggle / "input" / bundle.TRAIN)  # mounted as a kernel source
    (kaggle / "working").mkdir()
    print("[rehearsal] inference kernel on the train kernel's output", flush=True)
    infer_nb = run_kernel(bundle.INFERENCE, build, kaggle, scratch,
                          {"OVERRIDES": {"features": {"splits": "valid,test", "jobs": 1, "progress": False}}})
    check_submission(kaggle / "working" / "submission.csv", data)
    summary = {"seconds": round(time.monotonic() - t0, 1), "device": device, "bundle_bytes": sizes,
               "train_output_bytes": bundle.folder_size(kaggle / "input" / bundle.TRAIN),
               "train_log": text_output(train_nb), "inference_log": text_output(infer_nb)}
    (root / "rehearsal.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="the sandbox (deleted first)")
    parser.add_argument("--budget", type=float, default=120.0, help="the train kernel's BUDGET, seconds")
    parser.add_argument("--keep", action="store_true", help="keep the sandbox (default: delete it when it passed)")
    args = parser.parse_args(argv)
    summary = rehearse(args.root, args.budget)
    print(f"[rehearsal] passed in {summary['seconds']:.0f} s on {summary['device']}: both submissions "
          f"checked; the train kernel's output is {bundle.human_size(summary['train_output_bytes'])}")
    if not args.keep:
        shutil.rmtree(args.root / "scratch", ignore_errors=True)
        shutil.rmtree(args.root / "kaggle", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
