"""Ground truth and config counts, read without touching the large arrays of a graph file.

A layout npz can hold several GB of ``node_config_feat``; the ensemble only ever needs
``config_runtime`` (and the tile normalisers). ``np.load`` on an npz reads members lazily, and
:func:`config_count` reads just the ``.npy`` header of ``config_runtime``.

Valid truth comes from the npz files; *test* truth exists only for generated samples
(:func:`features.io.read_hidden_runtimes`) and is used for scoring, never for fitting.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np

from features.collections import Collection
from features.io import discover, read_hidden_runtimes


def read_target(path: str | os.PathLike) -> np.ndarray:
    """What is ranked for one graph file (lower = faster): runtime/normaliser (tile) or runtime."""
    with np.load(path, allow_pickle=False) as data:
        runtime = np.asarray(data["config_runtime"], dtype=np.float64).reshape(-1)
        if "config_runtime_normalizers" in data.files:
            norm = np.asarray(data["config_runtime_normalizers"], dtype=np.float64).reshape(-1)
            return runtime / np.where(norm == 0, 1.0, norm)
    return runtime


def config_count(path: str | os.PathLike) -> int:
    """Number of configs of a graph file, from the ``config_runtime`` header only."""
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as zf, zf.open("config_runtime.npy") as fh:
            version = np.lib.format.read_magic(fh)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, _, _ = read_header(fh)
    except KeyError:
        raise ValueError(f"{path}: no config_runtime array in the file") from None
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ValueError(f"{path}: unreadable graph file ({exc})") from exc
    return int(np.prod(shape)) if shape else 1


def split_truth(root: str | os.PathLike, collection: Collection, split: str) -> dict[str, np.ndarray]:
    """``{stem: target}`` for every graph of a labelled split (train/valid) of one collection."""
    return {gf.stem: read_target(gf.path) for gf in discover(root, [collection], [split])}


def test_truth(root: str | os.PathLike, collection: Collection) -> dict[str, np.ndarray] | None:
    """``{stem: target}`` of the hidden test runtimes (generated samples only), else None."""
    hidden = read_hidden_runtimes(root)
    if hidden is None:
        return None
    prefix = collection.name + ":"
    return {key[len(prefix):]: value for key, value in hidden.items() if key.startswith(prefix)}


def truth(root: str | os.PathLike, collection: Collection, split: str) -> dict[str, np.ndarray] | None:
    """Truth of ``split``: from the files for train/valid, from the hidden runtimes for test."""
    return test_truth(root, collection) if split == "test" else split_truth(root, collection, split)
