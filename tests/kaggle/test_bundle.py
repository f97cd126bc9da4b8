"""bundle.py: the weights/kernel folders (fast) and the whole offline path (slow).

The slow test is the Kaggle flow end to end, offline: train on the tiny sample, build the
bundle, create a fresh virtual environment holding only torch and a Jupyter kernel (what the
Kaggle image provides), then execute the inference notebook in it; the notebook installs tpurank
and its dependencies with ``pip install --no-index`` from the bundle and writes a submission.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


kaggle_scripts = _load("kaggle_scripts", HERE / "kaggle_scripts.py")
bundle = kaggle_scripts.load("bundle")
kmeta = kaggle_scripts.load("kaggle_metadata")
nbrun = _load("nbrun", HERE.parent / "notebooks" / "nbrun.py")

TINY_TRAIN = {
    "features": {"jobs": 1, "progress": False},
    "gnn-train": {"steps": 8, "eval_every": 4, "hidden": 16, "layers": 2, "configs_per_step": 16,
                  "val_max_configs": 32, "threads": 1},
    "lgbm-train": {"num_boost_round": 10, "early_stopping_rounds": 5, "threads": 1},
}


def _fake_trained_work(work: Path) -> Path:
    """A work dir shaped like a trained one (files only; enough to test what is packed)."""
    (work / "models" / "gnn" / "tile-xla" / "seed0").mkdir(parents=True)
    (work / "models" / "gnn" / "tile-xla" / "seed0" / "config.json").write_text(
        json.dumps({"git_sha": "abc", "seed": 0, "config": {"preset": "quick"}}))
    (work / "models" / "gnn" / "tile-xla" / "seed0" / "best.pt").write_bytes(b"weights")
    (work / "models" / "gnn" / "tile-xla" / "seed0" / "last.pt").write_bytes(b"optimizer state")
    feats = work / "features" / "tile-xla"
    (feats / "graphs" / "train" / "g0").mkdir(parents=True)
    (feats / "graphs" / "train" / "g0" / "node_feat.npy").write_bytes(b"big")
    (feats / "tabular").mkdir()
    (feats / "tabular" / "train.parquet").write_bytes(b"big")
    np.savez(feats / "norm.npz", node_mean=np.zeros(3))
    (feats / "build.json").write_text("{}")
    return work


def test_weights_hold_models_and_feature_stats_but_no_features(tmp_path: Path) -> None:
    work = _fake_trained_work(tmp_path / "work")
    out = tmp_path / "weights"
    out.mkdir()
    bundle.build_weights(out, work)
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert files == ["MANIFEST.json", "features/tile-xla/build.json", "features/tile-xla/norm.npz",
                     "models/gnn/tile-xla/seed0/best.pt", "models/gnn/tile-xla/seed0/config.json"]
    manifest = json.loads((out / "MANIFEST.json").read_text())
    assert manifest["preset"] == "quick" and manifest["git_sha"] == "abc"


def test_weights_need_trained_models(tmp_path: Path) -> None:
    out = tmp_path / "weights"
    out.mkdir()
    with pytest.raises(SystemExit, match="no trained models"):
        bundle.build_weights(out, tmp_path / "untrained")


def test_kernel_folder_has_the_inference_notebook_and_valid_metadata(tmp_path: Path) -> None:
    bundle.build_kernel(tmp_path)
    nb = json.loads((tmp_path / "inference.ipynb").read_text())
    assert nb["nbformat"] == 4
    sources = "".join("".join(c["source"]) for c in nb["cells"])
    assert "--no-index" in sources
    assert bundle.write_metadata(tmp_path, bundle.KERNEL, "alice") == []


def test_closure_never_includes_torch() -> None:
    roots = {r.lower() for r in bundle.closure_roots()}
    assert "torch" not in roots
    assert {"torch-geometric", "lightgbm", "numpy"} <= roots


def _torch_wheel_dir() -> Path | None:
    """A local folder holding the installed torch's wheel (pip's find-links, e.g. /opt/wheels)."""
    version = importlib.metadata.version("torch")
    dirs = [d for d in os.environ.get("PIP_FIND_LINKS", "").split() if d] + ["/opt/wheels"]
    for d in dirs:
        if list(Path(d).glob(f"torch-{version}-*.whl")):
            return Path(d)
    return None


@pytest.mark.slow
def test_bundle_installs_offline_and_runs_inference(tiny_root: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    torch_dir = _torch_wheel_dir()
    if torch_dir is None:
        pytest.skip("no local torch wheel to stand in for the Kaggle image's torch")
    from ensemble import pipeline

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    # 1. train on the tiny sample
    trained = tmp_path / "trained"
    pipeline.train(pipeline.Run(data=str(tiny_root), work=str(trained), overrides=TINY_TRAIN))
    # 2. bundle: a bare interpreter needs the whole closure (+ a kernel to run the notebook)
    build = tmp_path / "build"
    sizes = bundle.bundle(trained, build, owner="tpurank-ci", self_contained=True,
                          extras=["ipykernel"])
    assert set(sizes) == {bundle.CODE, bundle.WHEELS, bundle.WEIGHTS, bundle.KERNEL}
    for name in sizes:
        assert kmeta.validate_folder(build / name) == []
    assert not list((build / bundle.WHEELS).glob("torch-*.whl"))
    # 3. a fresh venv with only what the Kaggle image has: torch and a kernel; pip sees no index
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-index",
                    "--find-links", str(torch_dir), "--find-links", str(build / bundle.WHEELS),
                    f"torch=={importlib.metadata.version('torch')}", "ipykernel"], check=True)
    assert subprocess.run([str(py), "-c", "import features"], capture_output=True,
                          cwd=tmp_path).returncode != 0  # tpurank not there yet
    kernels = tmp_path / "jupyter" / "kernels" / "tpurank-fresh"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [str(py), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "fresh venv", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    # 4. the inference notebook installs tpurank from the bundle and writes the submission
    work = tmp_path / "work"
    nb = nbrun.run_notebook("inference", {
        "DATA": str(tiny_root), "CODE_DIR": str(build / bundle.CODE),
        "WHEELS_DIR": str(build / bundle.WHEELS), "WEIGHTS": str(build / bundle.WEIGHTS),
        "WORK": str(work), "INSTALL": True,
        "OVERRIDES": {"features": {"splits": "valid,test", "jobs": 1, "progress": False},
                      "gnn-predict": {"threads": 1}, "lgbm-predict": {"threads": 1}},
    }, cwd=tmp_path, kernel_name="tpurank-fresh")
    assert "image/png" in nbrun.output_types(nb)
    installed = nbrun.text_output(nb)
    assert "Successfully installed" in installed and "tpurank-" in installed  # by the notebook
    location = subprocess.run([str(py), "-c", "import features; print(features.__file__)"],
                              capture_output=True, text=True, cwd=tmp_path, check=True).stdout
    assert str(venv) in location  # installed from the wheel, not the repo checkout
    from ensemble.submission import check_file

    assert check_file(work / "submission.csv", tiny_root) == []
