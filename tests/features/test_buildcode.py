"""The feature cache knows its code (features.buildconfig) and one table of node blocks
(features.stages.NODE_BLOCKS) makes the node features, their names and the key's flags."""

from __future__ import annotations

import dataclasses
import itertools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from bigfile import write_mini_root

from features.buildconfig import build_modules
from features.buildconfig import BuildConfig
from features.io import load_npz
from features.stages import NODE_BLOCKS, node_feature_names, node_stage
from tpurank.collections import get_collection

#: the BuildConfig fields that switch node blocks on or off
NODE_FLAGS = tuple(dict.fromkeys(b.flag for b in NODE_BLOCKS if b.flag))

ROOT = Path(__file__).resolve().parents[2]
LAYOUT = get_collection("layout:xla:random")


def test_the_build_path_is_read_from_the_imports() -> None:
    modules = build_modules()
    for module in ("features.tasks", "features.stages", "features.transforms", "features.pruning",
                   "features.dot_features", "features.tabular", "features.repair", "features.hlo.convert"):
        assert module in modules, module
    assert not {"features.sample", "features.validate", "features.build"} & set(modules)


def test_one_table_makes_the_node_features_their_names_and_the_key(tmp_path: Path) -> None:
    root = write_mini_root(tmp_path / "root")
    graph = load_npz(next(LAYOUT.split_dir(root, "train").glob("*.npz")))
    assert set(NODE_FLAGS) == {"engineered", "dot_features"}
    for values in itertools.product((False, True), repeat=len(NODE_FLAGS)):
        cfg = dataclasses.replace(BuildConfig(), **dict(zip(NODE_FLAGS, values)))
        names = node_feature_names(cfg)
        on = [b for b in NODE_BLOCKS if b.flag is None or getattr(cfg, b.flag)]
        assert names == [c for b in on for c in b.columns]
        assert node_stage(graph, cfg).node_feat.shape[1] == len(names)
        assert set(NODE_FLAGS) <= set(cfg.transform_params())
    assert node_feature_names(BuildConfig())[-1] == "is_configurable"


def _build(src: Path, root: Path, work: Path) -> dict[str, int]:
    """``features build`` run from a copy of the packages in ``src``; the built / cached counts."""
    out = subprocess.run([sys.executable, "-m", "features", "build", "--data", str(root), "--work",
                          str(work), "--collections", LAYOUT.name, "--jobs", "1", "--progress", "false"],
                         cwd=src, capture_output=True, text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(src)})
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("features: "))
    built, cached = (int(line.split("(")[1].split(" built")[0]), int(line.split(", ")[1].split(" cached")[0]))
    return {"built": built, "cached": cached}


def test_a_changed_featurizer_rebuilds_the_cached_graphs(tmp_path: Path) -> None:
    src = tmp_path / "src"
    for package in ("features", "tpurank"):
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    root, work = write_mini_root(tmp_path / "root"), tmp_path / "work"
    first = _build(src, root, work)
    assert first["built"] == 3 and _build(src, root, work) == {"built": 0, "cached": 3}
    node_file = next((work / "features" / LAYOUT.slug / "graphs" / "valid").glob("*/node_feat.npy"))
    before = np.load(node_file)
    transforms = src / "features" / "transforms.py"  # a featurizer changes: lane features squared
    text = transforms.read_text()
    marker = "def lane_features(node_feat_padded: np.ndarray) -> np.ndarray:\n"
    assert marker in text
    transforms.write_text(text.replace(marker, marker.replace("def lane_features", "def _lane_features_v1"))
                          + "\n\ndef lane_features(node_feat_padded):\n"
                            "    return _lane_features_v1(node_feat_padded) ** 2\n")
    assert _build(src, root, work) == {"built": 3, "cached": 0}
    after = np.load(node_file)
    names = json.loads((node_file.parent / "meta.json").read_text())["node_feature_names"]
    lane = [i for i, n in enumerate(names) if "mod128" in n or "div128" in n]
    assert not np.allclose(before[:, lane], after[:, lane])
