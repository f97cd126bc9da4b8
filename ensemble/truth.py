"""Ground truth and config counts, read without touching a graph file's large arrays (``np.load``
reads npz members lazily; :func:`config_count` reads only npy headers). Test truth exists only for
generated samples (:func:`features.io.read_hidden_runtimes`): for scoring, never for fitting."""

from __future__ import annotations

import os

import numpy as np

from tpurank.collections import Collection
from features.io import BadGraphError, discover, npz_headers, ranked_target, read_hidden_runtimes


def read_target(path: str | os.PathLike) -> np.ndarray:
    """What is ranked for one graph file (lower = faster): runtime/normaliser (tile) or runtime."""
    with np.load(path, allow_pickle=False) as data:
        norm = data["config_runtime_normalizers"] if "config_runtime_normalizers" in data.files else None
        return ranked_target(data["config_runtime"], norm)


def config_count(path: str | os.PathLike) -> int:
    """Number of configs of a graph file, from the npy headers only (no array data is read)."""
    headers = npz_headers(path)
    if "config_runtime" not in headers:
        raise BadGraphError(path, "no config_runtime array in the file")
    return headers["config_runtime"].size


def test_sizes(root: str | os.PathLike, collection: Collection) -> tuple[dict[str, int], dict[str, int]]:
    """``(ranked, tied)``: ``{stem: config count}`` of the test graphs the models rank, and of those
    without configurable nodes, whose configs all tie (no model sees them; the submission keeps
    their file order: :mod:`features.repair`)."""
    from features.repair import has_no_configurable_node

    ranked: dict[str, int] = {}
    tied: dict[str, int] = {}
    for gf in discover(root, [collection], ["test"]):
        no_config = not collection.is_tile and has_no_configurable_node(gf.path)
        (tied if no_config else ranked)[gf.stem] = config_count(gf.path)
    return ranked, tied


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
