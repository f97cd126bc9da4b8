"""The docs/competition.md §4 column blocks of ``node_feat``, opcode ids, and the helpers every transform reads them with."""

from __future__ import annotations

import functools
from importlib import resources

import numpy as np

# ---- docs/competition.md §4 column blocks ---------------------------------------------------------------------
SHAPE_DIMS = slice(21, 27)
DIMENSIONS = slice(31, 37)
WINDOW_BLOCK_STARTS = (37, 45, 53, 61, 69, 77)  # size, stride, pad low, pad high, dilations (6 each)
WINDOW_SIZE = slice(37, 43)
WINDOW_REVERSAL = slice(85, 91)
CONV_SCALAR = (93, 94, 99, 100, 105, 106)  # batch/feature dim numbers (not per-dimension)
CONV_INPUT_SPATIAL = slice(95, 99)
CONV_KERNEL_SPATIAL = slice(101, 105)
SLICE_BLOCKS = (109, 113, 117)  # start, stride, limit: 2 dims each
DYN_SLICE_SIZES = 121
PAD_BLOCKS = (125, 129)  # low, high: 2 dims each
MINOR_TO_MAJOR = slice(134, 140)
MAX_RANK = 6

# Columns with a large range that get a signed log1p (dims, sums, products, counts, window fields,
# slice/pad values). Dimension *indices* (dimensions, dim numbers, minor_to_major) stay raw.
LOG_COLUMNS = np.r_[21:31, 37:85, 107:109, 109:133]


#: the shared unknown-opcode bucket: no opcode of ``hlo_opcodes.tsv`` has it (ids start at 1); the
#: HLO converter gives it to an opcode missing from the table, ``features.repair`` to an id outside it
UNKNOWN_OPCODE_ID = 0


@functools.lru_cache(maxsize=1)
def opcode_ids() -> dict[str, int]:
    """HLO opcode name -> id, from ``features/data/hlo_opcodes.tsv`` (Kaggle numbering)."""
    text = resources.files("features").joinpath("data/hlo_opcodes.tsv").read_text()
    rows = (line.split("\t") for line in text.splitlines()[1:])
    return {p[1].strip(): int(p[0]) for p in rows if len(p) >= 2 and p[0].strip().isdigit()}


def signed_log1p(x: np.ndarray) -> np.ndarray:
    """``sign(x) * log1p(|x|)``: compresses large ranges, keeps ``-1`` padding negative and distinct."""
    x = np.asarray(x, dtype=np.float32)
    return (np.sign(x) * np.log1p(np.abs(x))).astype(np.float32)


def tensor_rank(node_feat: np.ndarray) -> np.ndarray:
    """Rank of each node's output = number of non-zero shape dims (scalars and tuples: 0)."""
    return np.count_nonzero(np.asarray(node_feat)[:, SHAPE_DIMS], axis=1).astype(np.int64)
