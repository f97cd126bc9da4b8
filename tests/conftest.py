"""Shared fixtures: generated sample data (tiny scale) built once per session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"

os.environ.setdefault("OMP_NUM_THREADS", "2")


@pytest.fixture(scope="session")
def tiny_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A complete tiny dataset in the Kaggle layout (all five collections, hidden test runtimes)."""
    from features.sample import generate_dataset

    out = tmp_path_factory.mktemp("sample") / "tiny"
    generate_dataset(out, scale="tiny", seed=0)
    return out


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` (real TPU records, JAX HLO); tests using it skip when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder not found at {SHARED_DATA}")
    return SHARED_DATA
