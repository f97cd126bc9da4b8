"""Kaggle metadata templates and the validator of the fields the Kaggle CLI documents."""

from __future__ import annotations

import json
from pathlib import Path

import kaggle_scripts  # tests/kaggle is on pytest's pythonpath
import pytest

kmeta = kaggle_scripts.load("kaggle_metadata")

DATASETS = ("tpurank-code", "tpurank-wheels", "tpurank-weights")


@pytest.mark.parametrize("name", DATASETS)
def test_dataset_templates_are_valid_once_filled(name: str) -> None:
    meta = kmeta.load_template(name, "alice")
    assert meta["id"] == f"alice/{name}"
    assert kmeta.validate_dataset_metadata(meta) == []


@pytest.mark.parametrize("name", ["tpurank-train", "tpurank-inference"])
def test_kernel_templates_are_valid_and_offline_with_code_and_wheels(name: str, tmp_path: Path) -> None:
    meta = kmeta.load_template(name, "alice")
    (tmp_path / meta["code_file"]).write_text("{}")
    assert kmeta.validate_kernel_metadata(meta, tmp_path) == []
    assert meta["enable_internet"] == "false"
    assert meta["competition_sources"] == ["predict-ai-model-runtime"]
    assert sorted(meta["dataset_sources"]) == ["alice/tpurank-code", "alice/tpurank-wheels"]


def test_the_train_kernel_has_the_gpu_and_the_inference_kernel_its_output() -> None:
    train = kmeta.load_template("tpurank-train", "alice")
    inference = kmeta.load_template("tpurank-inference", "alice")
    assert train["enable_gpu"] == "true" and train["code_file"] == "train.ipynb"
    assert inference["kernel_sources"] == [train["id"]]


def test_unfilled_owner_is_rejected() -> None:
    raw = json.loads((kmeta.TEMPLATES / "tpurank-code" / "dataset-metadata.json").read_text())
    problems = kmeta.validate_dataset_metadata(raw)
    assert any("id" in p for p in problems)


@pytest.mark.parametrize("change, expected", [
    ({"title": "abc"}, "title"),
    ({"title": "x" * 51}, "title"),
    ({"id": "no-slash"}, "id"),
    ({"id": "alice/ab"}, "slug"),
    ({"licenses": []}, "licenses"),
    ({"licenses": [{"name": "CC0-1.0"}, {"name": "other"}]}, "licenses"),
    ({"licenses": [{"name": "WTFPL"}]}, "licence"),
    ({"subtitle": "too short"}, "subtitle"),
    ({"keywords": "tpu"}, "keywords"),
    ({"resources": [{"path": "missing.csv"}]}, "resources"),
])
def test_dataset_validator_catches(change: dict, expected: str, tmp_path: Path) -> None:
    meta = kmeta.load_template("tpurank-code", "alice") | change
    problems = kmeta.validate_dataset_metadata(meta, tmp_path)
    assert problems and any(expected in p for p in problems), problems


@pytest.mark.parametrize("change, expected", [
    ({"title": "Another Title"}, "slugifies"),
    ({"code_file": "missing.ipynb"}, "code_file"),
    ({"language": "julia"}, "language"),
    ({"kernel_type": "app"}, "kernel_type"),
    ({"enable_internet": "no"}, "enable_internet"),
    ({"dataset_sources": ["just-a-slug"]}, "dataset_sources"),
    ({"competition_sources": ["Predict AI"]}, "competition_sources"),
    ({"id": "alice"}, "id"),
])
def test_kernel_validator_catches(change: dict, expected: str, tmp_path: Path) -> None:
    meta = kmeta.load_template("tpurank-inference", "alice")
    (tmp_path / meta["code_file"]).write_text("{}")
    problems = kmeta.validate_kernel_metadata(meta | change, tmp_path)
    assert problems and any(expected in p for p in problems), problems


def test_slugify_matches_kaggle_clean_urls() -> None:
    assert kmeta.slugify("tpurank inference") == "tpurank-inference"
    assert kmeta.slugify("  My  Awesome_Kernel! ") == "my-awesome-kernel"


def test_validate_folder_reports_bad_json_and_missing_metadata(tmp_path: Path) -> None:
    assert "no dataset-metadata.json" in kmeta.validate_folder(tmp_path)[0]
    (tmp_path / "dataset-metadata.json").write_text("{not json")
    assert "not valid JSON" in kmeta.validate_folder(tmp_path)[0]
