"""A hand-made data root for ensemble tests: every collection, valid + test, hidden runtimes.

Small and fast (no generator needed). Arrays carry just what the ensemble and the baseline read;
runtimes are random, so scores here test plumbing, not quality.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tpurank.collections import COLLECTIONS, hidden_runtimes_path

N_GRAPHS = {"valid": 4, "test": 3}


def _graph_arrays(rng: np.random.Generator, is_tile: bool, n_configs: int) -> dict[str, np.ndarray]:
    n = 12
    node_feat = np.zeros((n, 140), np.float32)
    node_feat[:, 21:23] = rng.choice([7, 64, 128, 300], size=(n, 2))
    node_feat[:, 134:136] = [1, 0]
    arrays = {"node_feat": node_feat, "node_opcode": rng.integers(0, 100, n),
              "edge_index": np.stack([np.arange(1, n), np.arange(0, n - 1)], 1),
              "config_runtime": rng.integers(1000, 5000, n_configs)}
    if is_tile:
        cfg = np.zeros((n_configs, 24), np.float32)
        cfg[:, 8:10] = rng.choice([1, 8, 16, 128, 256], size=(n_configs, 2))
        cfg[:, 15] = cfg[:, 8] * cfg[:, 9]
        arrays.update(config_feat=cfg, config_runtime_normalizers=rng.integers(90, 110, n_configs))
    else:
        arrays.update(node_config_ids=np.array([3, 5, 8]),
                      node_config_feat=rng.choice([-1, 0, 1], size=(n_configs, 3, 18)).astype(np.float32),
                      node_splits=np.array([[0, 6]]))
    return arrays


def make_root(root: Path, seed: int = 0, counts: dict[str, int] | None = None) -> Path:
    rng = np.random.default_rng(seed)
    hidden = {}
    for coll in COLLECTIONS:
        for split, count in (counts or N_GRAPHS).items():
            d = coll.split_dir(root, split)
            d.mkdir(parents=True, exist_ok=True)
            for i in range(count):
                n_configs = int(rng.integers(3, 9)) if coll.is_tile else 20
                arrays = _graph_arrays(rng, coll.is_tile, n_configs)
                stem = f"{coll.slug}-{split}-{i}"
                if split == "test":
                    rt = arrays["config_runtime"].astype(np.float64)
                    hidden[coll.submission_id(stem)] = (
                        rt / arrays["config_runtime_normalizers"] if coll.is_tile else rt)
                    arrays["config_runtime"] = np.zeros_like(arrays["config_runtime"])
                np.savez(d / f"{stem}.npz", **arrays)
    path = hidden_runtimes_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **hidden)
    return root


@pytest.fixture(scope="session")
def fake_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_root(tmp_path_factory.mktemp("fake") / "root")


@pytest.fixture(scope="session")
def cv_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Like ``fake_root`` with a train split too (7 train, 3 valid, 3 test graphs each)."""
    return make_root(tmp_path_factory.mktemp("cv") / "root", seed=3,
                     counts={"train": 7, "valid": 3, "test": 3})


# ---- a feature store for the planner's tests (ensemble.plan, ensemble.run) ----------------------
def _write_graph(features: Path, coll, split: str, stem: str, configs: int, nodes: int,
                 target: bool = True) -> Path:
    """The arrays of one processed graph that the planner reads (configs, nodes, targets)."""
    d = features / coll.slug / "graphs" / split / stem
    d.mkdir(parents=True)
    np.save(d / "config_index.npy", np.arange(configs))
    np.save(d / "node_opcode.npy", np.zeros(nodes, np.int32))
    if target:
        np.save(d / "target.npy", np.linspace(1.0, 2.0, configs))
    return d


def _fake_features(features: Path, tabular_cap: int = 100) -> Path:
    """tile:xla and layout:xla:random: train graphs of 50, 150 and 250 configs, 3 valid graphs of
    40 configs, 2 test graphs of 30 (tile) or 1000 (layout) configs; the build's tabular cap."""
    import json

    from tpurank.collections import get_collection

    for coll in (get_collection("tile:xla"), get_collection("layout:xla:random")):
        (features / coll.slug).mkdir(parents=True)
        (features / coll.slug / "build.json").write_text(
            json.dumps({"config": {"tabular_max_train_rows": tabular_cap}}))
        (features / coll.slug / "norm.npz").write_bytes(b"n")
        for i, n in enumerate((50, 150, 250)):
            _write_graph(features, coll, "train", f"t{i}", n, 10 + i)
        for i in range(3):
            _write_graph(features, coll, "valid", f"v{i}", 40, 5 * (i + 1))
        for i in range(2):
            _write_graph(features, coll, "test", f"x{i}", 30 if coll.is_tile else 1000, 7, target=False)
    return features


@pytest.fixture
def write_graph():
    return _write_graph


@pytest.fixture
def fake_features():
    return _fake_features
