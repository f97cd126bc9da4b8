"""Shared fixtures: generated sample data (tiny scale) built once per session."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import kaggle_scripts  # tests/kaggle is on pytest's pythonpath
import pytest

REPO = Path(__file__).resolve().parent.parent
REAL_DATA = REPO / "data"  # the real TPU records and JAX HLO modules (data/README.md)

os.environ.setdefault("OMP_NUM_THREADS", "2")


@pytest.fixture(scope="session")
def tiny_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A complete tiny dataset in the Kaggle layout (all five collections, hidden test runtimes)."""
    from features.sample import generate_dataset

    out = tmp_path_factory.mktemp("sample") / "tiny"
    generate_dataset(out, scale="tiny", seed=0)
    return out


#: tiny-sample settings of the notebooks: a handful of steps/rounds, one worker process (tests
#: share 2 cores); the quick preset still cross-validates (3 folds). The rehearsal's own.
TINY_OVERRIDES = kaggle_scripts.load("rehearsal").TINY_OVERRIDES


@pytest.fixture
def tiny_overrides() -> dict[str, dict[str, object]]:
    """Per-stage overrides of the notebooks' tiny settings (a fresh copy to change)."""
    import copy

    return copy.deepcopy(TINY_OVERRIDES)


@pytest.fixture(scope="session")
def train_notebook(tiny_root: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    """The train notebook run once on the tiny sample with the quick preset (3 folds: 30 fold
    models, about a minute): (its work dir, the executed notebook). For slow tests only."""
    import nbrun

    work = tmp_path_factory.mktemp("nb-train") / "work"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "1")
        mp.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
        nb = nbrun.run_notebook("train", {"DATA": str(tiny_root), "WORK": str(work), "PRESET": "quick",
                                          "COLLECTIONS": "all", "OVERRIDES": TINY_OVERRIDES},
                                cwd=work.parent)
    return work, nb


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The repository's ``data/`` (``real-tpu/`` records, ``jax-hlo/`` modules): tracked, so a
    checkout without them fails here instead of skipping."""
    missing = [d for d in ("real-tpu", "jax-hlo") if not (REAL_DATA / d).is_dir()]
    if missing:
        pytest.fail(f"{REAL_DATA}: missing {', '.join(missing)} (tracked in git, see data/README.md)")
    return REAL_DATA


@pytest.fixture
def dead_pid() -> int:
    """The id of a process that has exited (and been reaped): what a killed writer leaves."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid
