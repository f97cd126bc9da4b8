"""bundle.py: the weights/kernel folders (fast) and the whole offline path (slow).

The slow test is the Kaggle flow end to end, offline, with the *default* bundle: the models the
train notebook trained on the tiny sample are bundled; a fresh virtual environment is given
exactly the packages of the Kaggle image (``kaggle/image_packages.txt`` and what they depend
on, at the listed versions); the inference notebook then runs in it, installs tpurank from the
bundle with ``pip install --no-index`` and writes a checked submission.
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


def test_the_default_bundle_ships_what_the_image_lacks_and_never_torch() -> None:
    missing = bundle.missing_from_image()
    assert missing == ["torch-geometric", "xxhash"]  # pymetis is an optional extra, not shipped
    assert "torch" in bundle.image_names() and not {"torch", "pymetis"} & set(missing)


def test_the_image_list_pins_every_package_at_the_installed_version() -> None:
    """The list is also `make setup`'s constraints: the tests run on the versions it assumes."""
    for line in bundle.image_requirements():
        req = Requirement(line)
        assert len(req.specifier) == 1 and next(iter(req.specifier)).operator == "==", line
        installed = importlib.metadata.version(req.name)
        assert req.specifier.contains(installed, prereleases=True), (
            f"kaggle/image_packages.txt says {line}, this environment has {installed}")


def image_distributions(requirements: list[str]) -> list[importlib.metadata.Distribution]:
    """The installed distributions of the image list and everything they depend on (markers
    evaluated here, no extras): what the Kaggle image holds for tpurank."""
    seen: dict[str, importlib.metadata.Distribution] = {}
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        key = req.name.lower().replace("_", "-")
        if key in seen:
            continue
        dist = importlib.metadata.distribution(req.name)
        assert req.specifier.contains(dist.version, prereleases=True), (req, dist.version)
        seen[key] = dist
        for line in dist.requires or []:
            dep = Requirement(line)
            if dep.marker is None or dep.marker.evaluate({"extra": ""}):
                todo.append(dep)
    return list(seen.values())


def image_environment(tmp_path: Path) -> Path:
    """A fresh venv holding exactly the image's packages; returns its python.

    The packages are not copied: a folder of symlinks to their installed files is added to the
    venv's ``sys.path`` by a ``.pth`` file, so pip inside the venv sees them as installed and the
    environment takes seconds to make."""
    layer = tmp_path / "kaggle-image"
    layer.mkdir()
    for dist in image_distributions(bundle.image_requirements()):
        site = Path(dist.locate_file(""))
        for top in {p.parts[0] for p in dist.files or [] if p.parts[0] != ".."}:
            link = layer / top
            if not link.exists() and (site / top).exists():
                link.symlink_to(site / top)
    venv = tmp_path / "venv"  # without pip: the image's pip (in the list) does the install
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "kaggle_image.pth").write_text(f"import site; site.addsitedir({str(layer)!r})\n")
    return py


@pytest.mark.slow
def test_default_bundle_installs_offline_on_the_kaggle_image_and_runs_inference(
        train_notebook: tuple[Path, object], tiny_root: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    trained, _ = train_notebook
    # 1. the default bundle of the trained models
    build = tmp_path / "build"
    sizes = bundle.bundle(trained, build, owner="tpurank-ci")
    assert set(sizes) == {bundle.CODE, bundle.WHEELS, bundle.WEIGHTS, bundle.KERNEL}
    for name in sizes:
        assert kmeta.validate_folder(build / name) == []
    wheels = sorted(p.name.split("-")[0] for p in (build / bundle.WHEELS).glob("*.whl"))
    assert wheels == ["torch_geometric", "xxhash"]
    # 2. a fresh environment with the Kaggle image's packages only; pip sees no index
    py = image_environment(tmp_path)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    check = [str(py), "-c", "import torch, lightgbm, polars; import features"]
    assert subprocess.run(check, capture_output=True, cwd=tmp_path).returncode != 0  # no tpurank yet
    kernels = tmp_path / "jupyter" / "kernels" / "kaggle-image"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [str(py), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Kaggle image", "language": "python"}))
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
    assert str(tmp_path / "venv") in location  # installed from the wheel, not the repo checkout
    from ensemble.submission import check_file

    assert check_file(work / "submission.csv", tiny_root) == []
