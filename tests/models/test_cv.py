"""Fold plans: twins grouped, deterministic per seed, a partition, inner-valid outside held-out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from models.cv import (assign_stems, check_manifest, family_of, fold_plan, load_plan, plan_path,
                       write_fold_manifest)
from tpurank.atomic import write_json
from tpurank.collections import get_collection

XD = get_collection("layout:xla:default")
XR = get_collection("layout:xla:random")
TILE = get_collection("tile:xla")

FAMILIES = ("resnet", "unet3d", "efficientnet", "bert")


def _touch(root: Path, coll, split: str, stem: str) -> None:
    d = coll.split_dir(root, split)
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{stem}.npz").write_bytes(b"")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """xla default/random twins (a few stems in one search only), plus tile kernels."""
    r = tmp_path / "data"
    for i in range(14):
        stem = f"{FAMILIES[i % 4]}_{i:03d}_ab{i:02d}"
        split = "valid" if i % 5 == 0 else "train"
        if i != 3:
            _touch(r, XD, split, stem)
        if i != 7:
            _touch(r, XR, split, stem)
        _touch(r, XD, "test", f"test_{i}")  # never in a plan
    for i in range(20):
        _touch(r, TILE, "train" if i < 16 else "valid", f"{('conv', 'dot')[i % 2]}_{i:04d}_ff")
    return r


def test_family_of() -> None:
    assert family_of("resnet50.4x4.fp16") == "resnet"
    assert family_of("unet3d_001_abcd") == "unet"
    assert family_of("talking-heads_large_batch_size_16_train") == "talking-heads"
    assert family_of("bert_en_cased_L-12") == "bert"
    assert family_of("0a1b2c3d") == ""


def test_twins_share_a_fold_and_inner_choice(root: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    d = fold_plan(work, tmp_path / "nofeatures", XD, folds=3, seed=1, data=root)
    r = fold_plan(work, tmp_path / "nofeatures", XR, folds=3, seed=1, data=root)
    fd = {st: f for (sp, st), f in ((k.split("/", 1), v) for k, v in d.assignment.items())}
    fr = {st: f for (sp, st), f in ((k.split("/", 1), v) for k, v in r.assignment.items())}
    common = set(fd) & set(fr)
    assert len(common) == 12 and all(fd[s] == fr[s] for s in common)
    for k in range(3):
        inner_d = {st for _, st in d.inner_valid(k)}
        inner_r = {st for _, st in r.inner_valid(k)}
        assert inner_d & common == inner_r & common


def test_partition_and_inner_disjoint(root: Path, tmp_path: Path) -> None:
    for coll in (XD, TILE):
        plan = fold_plan(tmp_path / "w", tmp_path / "nf", coll, folds=4, seed=0, data=root)
        everything = plan.graphs()
        assert all(sp in ("train", "valid") for sp, _ in everything)
        held = [g for k in range(4) for g in plan.held_out(k)]
        assert sorted(held) == everything  # every labelled graph in exactly one fold
        for k in range(4):
            ho, tr, iv = set(plan.held_out(k)), set(plan.training(k)), set(plan.inner_valid(k))
            assert ho and tr and iv
            assert not (iv & ho) and not (tr & ho) and not (tr & iv)
            assert ho | tr | iv == set(everything)
        sizes = [len(plan.held_out(k)) for k in range(4)]
        # balanced over the stem universe; xla:default lacks one of its twin's stems
        assert max(sizes) - min(sizes) <= (1 if coll is TILE else 2)


def test_stratified_by_family() -> None:
    stems = [f"{fam}_{i}" for fam in ("resnet", "bert") for i in range(6)]
    fold = assign_stems(stems, 3, seed=5)
    for fam in ("resnet", "bert"):
        counts = [sum(1 for s in stems if s.startswith(fam) and fold[s] == k) for k in range(3)]
        assert counts == [2, 2, 2]


def test_deterministic_saved_and_seeded(root: Path, tmp_path: Path) -> None:
    a = fold_plan(tmp_path / "a", tmp_path / "nf", XD, folds=3, seed=2, data=root)
    path = plan_path(tmp_path / "a", XD, 3, 2)
    assert path == tmp_path / "a" / "folds" / "layout-xla-default" / "K3-seed2.json"
    assert load_plan(path).assignment == a.assignment
    b = fold_plan(tmp_path / "b", tmp_path / "nf", XD, folds=3, seed=2, data=root)
    assert a.assignment == b.assignment and a.inner == b.inner
    mtime = path.stat().st_mtime_ns
    again = fold_plan(tmp_path / "a", tmp_path / "nf", XD, folds=3, seed=2, data=root)
    assert path.stat().st_mtime_ns == mtime and again.assignment == a.assignment
    other = [fold_plan(tmp_path / "c", tmp_path / "nf", XD, folds=3, seed=s, data=root).assignment
             for s in range(3, 8)]
    assert any(o != a.assignment for o in other)


def test_data_root_from_build_json_and_no_data_reload(root: Path, tmp_path: Path) -> None:
    features = tmp_path / "features"
    (features / XD.slug).mkdir(parents=True)
    (features / XD.slug / "build.json").write_text(json.dumps({"config": {"data": str(root)}}))
    plan = fold_plan(tmp_path / "w", features, XD, folds=3, seed=0)
    assert len(plan.graphs()) == 13
    # without any data the saved plan is still loaded
    again = fold_plan(tmp_path / "w", tmp_path / "empty", XD, folds=3, seed=0)
    assert again.assignment == plan.assignment


def test_errors(root: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot fill"):
        fold_plan(tmp_path / "w", tmp_path / "nf", XD, folds=20, seed=0, data=root)
    with pytest.raises(FileNotFoundError, match="no labelled graphs"):
        fold_plan(tmp_path / "w", tmp_path / "nf", XD, folds=3, seed=0, data=tmp_path / "none")
    with pytest.raises(IndexError):
        fold_plan(tmp_path / "w", tmp_path / "nf", XD, folds=3, seed=0, data=root).held_out(3)


def test_manifest_detects_leak(root: Path, tmp_path: Path) -> None:
    plan = fold_plan(tmp_path / "w", tmp_path / "nf", XD, folds=3, seed=0, data=root)
    path = tmp_path / "models" / "folds.json"
    write_fold_manifest(path, plan)
    check_manifest(path, plan)
    leaky = {k: plan.training(k) + plan.held_out(k)[:1] for k in range(3)}
    clean = path.read_text()
    with pytest.raises(ValueError, match="in-sample"):
        write_fold_manifest(path, plan, leaky)
    assert path.read_text() == clean  # a leaking manifest is never written
    write_json(tmp_path / "plan.json", plan.to_json())
    assert load_plan(tmp_path / "plan.json").assignment == plan.assignment
