"""Atomic writes and the sweep of temporaries left by killed writers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tpurank.atomic import atomic_path, remove_dead_temporaries, temp_sibling, write_json


def test_atomic_path_leaves_only_the_final_file(tmp_path: Path) -> None:
    write_json(tmp_path / "a.json", {"x": 1})
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_a_failed_write_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError):
        with atomic_path(tmp_path / "a.txt") as tmp:
            tmp.write_text("half")
            raise RuntimeError("crash")
    assert list(tmp_path.iterdir()) == []


def test_temporaries_name_their_writer(tmp_path: Path) -> None:
    with atomic_path(tmp_path / "model.txt", suffix=".txt") as tmp:
        assert tmp.name.startswith(f".model.txt.tmp-{os.getpid()}-")
        assert remove_dead_temporaries(tmp_path) == 0  # our own (live) temporary is kept
        assert tmp.exists()
    assert temp_sibling(tmp_path / "g1").name == f".g1.tmp-{os.getpid()}"


def test_dead_writers_temporaries_are_swept(tmp_path: Path, dead_pid: int) -> None:
    dead = dead_pid
    (tmp_path / f".g7.tmp-{dead}").mkdir()
    (tmp_path / f".g7.tmp-{dead}" / "node_feat.npy").write_bytes(b"half")
    (tmp_path / f".part.parquet.tmp-{dead}-x1y2.parquet").write_bytes(b"half")
    live = tmp_path / f".g8.tmp-{os.getpid()}"
    live.mkdir()
    (tmp_path / "g9").mkdir()
    (tmp_path / ".hidden").write_text("not a temporary")
    assert remove_dead_temporaries(tmp_path) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([".hidden", live.name, "g9"])
    assert remove_dead_temporaries(tmp_path / "missing") == 0
