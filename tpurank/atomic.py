"""Atomic file writes: write to a temporary sibling, fsync, then ``os.replace``.

A crash never leaves a half-written file under the final name, so caches and outputs can be
trusted on resume. Every temporary name carries its writer's process id (``.NAME.tmp-PID…``), so
what a killed run left behind is recognised and swept by :func:`remove_dead_temporaries`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import psutil


_TEMP_NAME = re.compile(r"^\..+\.tmp-(\d+)(?:-.*)?$")


def temp_sibling(path: str | os.PathLike) -> Path:
    """This process's temporary name for ``path`` (same directory): ``.NAME.tmp-PID``."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def remove_dead_temporaries(directory: str | os.PathLike) -> int:
    """Delete the temporary files and directories in ``directory`` whose writer process is gone
    (killed, out of memory); returns how many. Live writers' temporaries are left alone."""
    dead = [entry for entry in Path(directory).glob(".*.tmp-*")
            if (match := _TEMP_NAME.match(entry.name)) and not psutil.pid_exists(int(match.group(1)))]
    for entry in dead:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    return len(dead)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path in the same directory; on success rename it to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-{os.getpid()}-", suffix=suffix,
                               dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp_path, path)
    finally:
        tmp_path.unlink(missing_ok=True)


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def save_npz(path: str | os.PathLike, compressed: bool = False, **arrays: np.ndarray) -> None:
    with atomic_path(path, suffix=".npz") as tmp:
        (np.savez_compressed if compressed else np.savez)(tmp, **arrays)
