"""Test files with the three repairable problems (features.repair), written into a copy of a root.

``bad_test_root(src, out)`` copies a generated data root and rewrites three *test* files of its
layout collections: one without configurable nodes, one with an opcode id outside
``hlo_opcodes.tsv``, one with an infinite node feature. ``keep`` leaves only some collections in
the copy (and in its ``sample_submission.csv``; ``subset_root`` does only that).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from tpurank.collections import COLLECTIONS, get_collection, hidden_runtimes_path

OUTSIDE_TABLE = 999  # an opcode id hlo_opcodes.tsv does not have


def without_configurable_nodes(arrays: dict[str, np.ndarray]) -> None:
    arrays["node_config_ids"] = arrays["node_config_ids"][:0]
    arrays["node_config_feat"] = arrays["node_config_feat"][:, :0, :]


def with_unknown_opcode(arrays: dict[str, np.ndarray]) -> None:
    arrays["node_opcode"] = arrays["node_opcode"].copy()
    arrays["node_opcode"][1] = OUTSIDE_TABLE


def with_infinite_feature(arrays: dict[str, np.ndarray]) -> None:
    arrays["node_feat"] = arrays["node_feat"].copy()
    arrays["node_feat"][2, 21] = np.inf


#: (collection, index of the test file in sorted order, what is done to it)
BAD_TEST_FILES = (("layout:xla:random", 0, without_configurable_nodes),
                  ("layout:xla:random", 1, with_unknown_opcode),
                  ("layout:nlp:default", 0, with_infinite_feature))


def rewrite(path: Path, change) -> None:
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    change(arrays)
    np.savez(path, **arrays)


def subset_root(src: Path, out: Path, keep: tuple[str, ...] | None = None) -> Path:
    """A copy of the data root ``src`` at ``out`` holding only the collections in ``keep`` (all
    when None), its ``sample_submission.csv`` and hidden test runtimes filtered alike."""
    shutil.copytree(src, out)
    if keep is not None:
        for coll in COLLECTIONS:
            if coll.name not in keep:
                shutil.rmtree(coll.split_dir(out, "train").parent)
        sample = out / "sample_submission.csv"
        lines = sample.read_text().splitlines()
        sample.write_text("\n".join([lines[0]] + [ln for ln in lines[1:]
                                                  if ln.rsplit(":", 1)[0] in keep]) + "\n")
        hidden = hidden_runtimes_path(out)
        if hidden.is_file():
            with np.load(hidden) as z:
                kept = {k: z[k] for k in z.files if k.rsplit(":", 1)[0] in keep}
            np.savez(hidden, **kept)
    return out


def bad_test_root(src: Path, out: Path, keep: tuple[str, ...] | None = None) -> dict[str, Path]:
    """The copy's three rewritten files, by what was done to them."""
    subset_root(src, out, keep)
    written = {}
    for name, index, change in BAD_TEST_FILES:
        path = sorted(get_collection(name).split_dir(out, "test").glob("*.npz"))[index]
        rewrite(path, change)
        written[change.__name__] = path
    return written
