"""Hand-made tabular parquet files (the feature pipeline's format) with a learnable ranking."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpurank.collections import COLLECTIONS
from toy_features import write_toy_features


@pytest.fixture()
def toy_work(tmp_path: Path) -> Path:
    """A work dir whose ``features/`` holds toy tabular files for tile:xla and layout:xla:random."""
    work = tmp_path / "work"
    collections = tuple(c for c in COLLECTIONS if c.name in ("tile:xla", "layout:xla:random"))
    write_toy_features(work / "features", collections)
    return work
