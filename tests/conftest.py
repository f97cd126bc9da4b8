"""Shared fixtures: generated sample data (tiny scale) built once per session."""

from __future__ import annotations

import os
import subprocess
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


@pytest.fixture
def dead_pid() -> int:
    """The id of a process that has exited (and been reaped): what a killed writer leaves."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid
