"""``--scale kaggle`` at tiny fractions (and a small node-size spec): counts, shapes, structure."""

from __future__ import annotations

import dataclasses
import zipfile
from pathlib import Path

import numpy as np
import pytest

from features.io import discover, npz_headers, read_hidden_runtimes
from features.sample import kaggle
from features.sample.constants import KAGGLE
from tpurank.collections import COLLECTIONS

SMALL = dataclasses.replace(KAGGLE, node_moments=(("xla", 900.0, 400.0), ("nlp", 500.0, 200.0)),
                            node_range=(300, 2000), configurable_mean=40.0, configurable_sd=10.0,
                            chunk_configs=256, test_configs=120, dup_heavy_share=0.5)


def test_job_counts_follow_the_real_counts() -> None:
    jobs = kaggle.kaggle_jobs(1.0)
    tile = [j for j in jobs if j.kind == "tile"]
    assert [sum(j.split == s for j in tile) for s in kaggle.SPLITS] == [5709, 676, 844]
    for source, search, counts in KAGGLE.layout_counts:
        files = [j for j in jobs if j.kind == "layout" and j.source == source and search in j.searches]
        assert [sum(j.split == s for j in files) for s in kaggle.SPLITS] == list(counts)
    assert len(tile) + sum(len(j.searches) for j in jobs if j.kind == "layout") == 7868
    assert jobs[0].kind == "layout"  # big jobs first


@pytest.fixture(scope="module")
def kroot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kaggle")
    hidden, rows = kaggle.write_kaggle(root, 0, 0.004, 0.004, ("convolution", "dot", "reshape"),
                                       jobs=1, progress=False, spec=SMALL)
    np.savez(root / "hidden.npz", **hidden)
    return root


def test_tiny_fraction_counts_shapes_and_structure(kroot: Path) -> None:
    hidden = dict(np.load(kroot / "hidden.npz"))
    stems: dict[str, set[str]] = {}
    real = {None: KAGGLE.tile_counts, **{f"{s}/{q}": c for s, q, c in KAGGLE.layout_counts}}
    for coll in COLLECTIONS:
        for k, split in enumerate(kaggle.SPLITS):
            files = discover(kroot, [coll], [split])
            count = real[None if coll.is_tile else f"{coll.source}/{coll.search}"][k]
            assert len(files) == max(1, round(count * 0.004)), (coll.name, split)
            gf = files[-1]
            with zipfile.ZipFile(gf.path) as zf:
                assert all(i.compress_type == zipfile.ZIP_DEFLATED for i in zf.infolist())
            h = npz_headers(gf.path)
            n = h["node_feat"].shape[0]
            assert h["node_feat"].shape == (n, 140)
            if coll.is_tile:
                assert h["config_feat"].shape[1] == 24
                continue
            stems.setdefault(f"{coll.source}/{split}", set()).add(gf.stem)
            assert 0.6 * 300 <= n <= 1.5 * 2000
            c, nc, w = h["node_config_feat"].shape
            assert w == 18 and nc == h["node_config_ids"].shape[0] >= 20
            if split == "test":
                assert c == SMALL.test_configs and gf.id in hidden
                assert len(hidden[gf.id]) == c
            else:
                assert 20 <= c <= max(21, int(100_000 * 0.004))
            with np.load(gf.path) as d:
                cfg = d["node_config_feat"]
                assert set(np.unique(cfg).tolist()) <= set(range(-1, 6))
                if split == "test":
                    assert not d["config_runtime"].any()
                else:
                    assert (d["config_runtime"] > 0).all()
                    assert len(np.unique(cfg.reshape(c, -1), axis=0)) < c  # duplicate configs
    assert all(len(s) == 1 for s in stems.values())  # default and random share the stem


def test_cli_writes_a_complete_kaggle_root(tmp_path: Path, monkeypatch) -> None:
    from features.__main__ import main as features_main

    monkeypatch.setattr(kaggle, "KAGGLE", SMALL)
    monkeypatch.setattr(kaggle.write_kaggle, "__defaults__",
                        kaggle.write_kaggle.__defaults__[:-1] + (SMALL,))
    out = tmp_path / "k"
    assert features_main(["sample", "--out", str(out), "--scale", "kaggle", "--config-fraction",
                          "0.002", "--graph-fraction", "0.002", "--jobs", "1"]) == 0
    assert (out / ".complete").read_text().startswith("scale=kaggle config_fraction=0.002")
    hidden = read_hidden_runtimes(out)
    assert hidden is not None and len(hidden) == 6  # 2 tile (844 x 0.002) + 4 layout
    assert len((out / "sample_submission.csv").read_text().splitlines()) == 7
