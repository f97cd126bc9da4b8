"""Every model option has evidence (a preset, a measured artifact, or a run-setting mark), and
docs/options.md is what ``python -m models.options`` writes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from models.options import ARTIFACT, PAGE, evidence, model_configs, options_page
from tpurank.config import field_help

ROOT = Path(__file__).resolve().parents[2]
# options whose measurement exists but has no artifact in benchmarks/ yet (say why in the mark)
PENDING: set[str] = set()
CONFIGS = [cls for _, _, cls in model_configs()]


def missing_evidence(cls: type) -> list[str]:
    """Options of ``cls`` with no evidence at all (a pending mark counts: PENDING limits those)."""
    return [f.name for f in dataclasses.fields(cls) if not evidence(cls, f.name)]


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_every_option_has_evidence(cls):
    assert missing_evidence(cls) == [], f"{cls.__name__}: options without a preset, a measured " \
        "artifact ([measured: benchmarks/x.json \"section\"]) or [run]; earn them or remove them"
    pending = {f"{cls.__name__}.{f.name}" for f in dataclasses.fields(cls)
               if any(e.startswith("pending") for e in evidence(cls, f.name))}
    assert pending <= PENDING


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_cited_artifacts_exist(cls):
    for name, text in field_help(cls).items():
        for artifact in ARTIFACT.findall(text):
            assert (ROOT / artifact).is_file(), f"{cls.__name__}.{name} cites missing {artifact}"


def test_a_field_without_evidence_is_caught():
    @dataclasses.dataclass
    class Toy:
        PRESETS = {"quick": {"a": 1}}
        a: int = 0  # set by a preset
        b: int = 0  # a path [run]
        c: int = 0  # measured [measured: benchmarks/keep.json "Weights kept"]
        d: int = 0  # nobody measured this

    assert missing_evidence(Toy) == ["d"]


def test_both_models_name_the_features_directory_alike():
    for cls in CONFIGS:
        names = {f.name for f in dataclasses.fields(cls)}
        assert "features" in names and "features_dir" not in names
        assert cls(work="W").features_dir() == Path("W") / "features"


def test_options_page_is_up_to_date():
    assert PAGE.read_text(encoding="utf-8") == options_page(), \
        "docs/options.md is stale: run python -m models.options"
