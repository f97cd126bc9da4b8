"""bundle.py: the weights/kernel folders (fast) and route 2 offline (slow).

The slow test is the *train anywhere else* route end to end, offline: the models the train
notebook trained on the tiny sample are bundled as the weights dataset; a fresh virtual
environment is given exactly the packages of the Kaggle image (``kaggle/image_packages.txt`` and
what they depend on, at the listed versions); the inference notebook then runs in it, installs
tpurank from the bundle with ``pip install --no-index`` and writes a checked submission. The
*train on Kaggle* route is ``test_rehearsal.py`` (``make kaggle-rehearsal``).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import kaggle_scripts
import nbrun
import numpy as np
import pytest
from packaging.requirements import Requirement
bundle = kaggle_scripts.load("bundle")
kmeta = kaggle_scripts.load("kaggle_metadata")
rehearsal = kaggle_scripts.load("rehearsal")


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


@pytest.mark.parametrize("name", ["tpurank-train", "tpurank-inference"])
def test_kernel_folders_hold_their_notebook_and_valid_metadata(name: str, tmp_path: Path) -> None:
    bundle.build_kernel(tmp_path, name)
    assert bundle.write_metadata(tmp_path, name, "alice") == []
    meta = json.loads((tmp_path / kmeta.KERNEL_FILE).read_text())
    nb = json.loads((tmp_path / meta["code_file"]).read_text())
    assert nb["nbformat"] == 4
    sources = "".join("".join(c["source"]) for c in nb["cells"])
    assert "--no-index" in sources and "TPURANK_KAGGLE_ROOT" in sources


def test_the_inference_kernel_reads_the_train_kernel_or_the_weights_dataset(tmp_path: Path) -> None:
    bundle.build_kernel(tmp_path, bundle.INFERENCE)
    bundle.write_metadata(tmp_path, bundle.INFERENCE, "alice")
    meta = json.loads((tmp_path / kmeta.KERNEL_FILE).read_text())
    assert meta["kernel_sources"] == ["alice/tpurank-train"]
    assert "alice/tpurank-weights" not in meta["dataset_sources"]
    assert bundle.write_metadata(tmp_path, bundle.INFERENCE, "alice", weights=True) == []
    meta = json.loads((tmp_path / kmeta.KERNEL_FILE).read_text())
    assert meta["kernel_sources"] == [] and "alice/tpurank-weights" in meta["dataset_sources"]


def test_a_bundle_without_trained_models_has_code_wheels_and_both_kernels(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Route 1 needs no trained model; a weights folder of an earlier bundle is removed."""
    monkeypatch.setattr(bundle, "build_code", lambda d: (d / "tpurank-0.1.0-py3-none-any.whl").write_bytes(b"w"))
    monkeypatch.setattr(bundle, "build_wheels", lambda d, *_: (d / "WHEELS.json").write_text("{}"))
    (tmp_path / bundle.WEIGHTS).mkdir()
    sizes = bundle.bundle(tmp_path, owner="alice")
    assert set(sizes) == {bundle.CODE, bundle.WHEELS, bundle.TRAIN, bundle.INFERENCE}
    assert not (tmp_path / bundle.WEIGHTS).exists()
    route = json.loads((tmp_path / bundle.BUNDLE_FILE).read_text())
    assert route["route"] == "kaggle" and route["datasets"] == [bundle.CODE, bundle.WHEELS]


def test_the_default_bundle_ships_what_the_image_lacks_and_never_torch() -> None:
    missing = bundle.missing_from_image()
    assert missing == ["torch-geometric", "xxhash"]
    assert "torch" in {Requirement(line).name for line in bundle.image_requirements()}
    assert not {"torch", "pymetis"} & set(missing)


def test_the_image_list_pins_every_package_at_the_installed_version() -> None:
    """The list is also `make setup`'s constraints: the tests run on the versions it assumes."""
    for line in bundle.image_requirements():
        req = Requirement(line)
        assert len(req.specifier) == 1 and next(iter(req.specifier)).operator == "==", line
        installed = importlib.metadata.version(req.name)
        assert req.specifier.contains(installed, prereleases=True), (
            f"kaggle/image_packages.txt says {line}, this environment has {installed}")


@pytest.mark.slow
def test_default_bundle_installs_offline_on_the_kaggle_image_and_runs_inference(
        train_notebook: tuple[Path, object], tiny_root: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    trained, _ = train_notebook
    # 1. the default bundle of the trained models
    build = tmp_path / "build"
    sizes = bundle.bundle(build, owner="tpurank-ci", weights_from=trained)
    assert set(sizes) == {bundle.CODE, bundle.WHEELS, bundle.WEIGHTS, bundle.TRAIN, bundle.INFERENCE}
    for name in sizes:
        assert kmeta.validate_folder(build / name) == []
    wheels = sorted(p.name.split("-")[0] for p in (build / bundle.WHEELS).glob("*.whl"))
    assert wheels == ["torch_geometric", "xxhash"]
    # 2. a fresh environment with the Kaggle image's packages only; pip sees no index
    py = rehearsal.image_environment(tmp_path / "image")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    check = [str(py), "-c", "import torch, lightgbm, polars; import features"]
    assert subprocess.run(check, capture_output=True, cwd=tmp_path).returncode != 0  # no tpurank yet
    rehearsal.kernel_spec(py, tmp_path / "jupyter")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    # 3. the inference notebook installs tpurank from the bundle and writes the submission
    work = tmp_path / "work"
    nb = nbrun.run_notebook("inference", {
        "DATA": str(tiny_root), "CODE_DIR": str(build / bundle.CODE),
        "WHEELS_DIR": str(build / bundle.WHEELS), "WEIGHTS": str(build / bundle.WEIGHTS),
        "WORK": str(work), "INSTALL": True,
        "OVERRIDES": {"features": {"splits": "valid,test", "jobs": 1, "progress": False},
                      "gnn-predict": {"threads": 1}, "lgbm-predict": {"threads": 1}},
    }, cwd=tmp_path, kernel_name="kaggle-image")
    assert "image/png" in nbrun.output_types(nb)
    installed = nbrun.text_output(nb)
    assert "Successfully installed" in installed and "tpurank-" in installed  # by the notebook
    assert "torch_geometric" in installed.replace("-", "_") and "pymetis" not in installed
    location = subprocess.run([str(py), "-c", "import features; print(features.__file__)"],
                              capture_output=True, text=True, cwd=tmp_path, check=True).stdout
    assert str(tmp_path / "image" / "venv") in location  # installed from the wheel, not the repo checkout
    from ensemble.submission import check_file

    assert check_file(work / "submission.csv", tiny_root) == []
