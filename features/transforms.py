"""Re-padding, lane/log transforms and config deduplication of the feature pipeline (the other
transforms live by concern: :mod:`features.columns`, :mod:`features.pruning`,
:mod:`features.dot_features`; what each does: docs/features.md, "Transforms").

Conventions: ``edge_index`` arguments are the npz convention ``(m, 2)`` rows ``[consumer, producer]``
unless the name says ``pyg``; every function returns new arrays (inputs may be read-only memmaps).
"""

from __future__ import annotations

import hashlib

import numpy as np

from features.columns import (CONV_INPUT_SPATIAL, CONV_KERNEL_SPATIAL, CONV_SCALAR,
                              DIMENSIONS, DYN_SLICE_SIZES, LOG_COLUMNS, MAX_RANK, MINOR_TO_MAJOR,
                              PAD_BLOCKS, SHAPE_DIMS, SLICE_BLOCKS, WINDOW_BLOCK_STARTS,
                              WINDOW_REVERSAL, WINDOW_SIZE, opcode_ids, signed_log1p,
                              tensor_rank)
from features.pruning import Csr, producers_csr


# ---- -1 re-padding -----------------------------------------------------------------------------
def _pad_beyond(x: np.ndarray, start: int, width: int, rank: np.ndarray) -> None:
    """In place: columns ``start + i`` for ``i >= rank`` (per row) become -1."""
    cols = np.arange(width)
    mask = cols[None, :] >= np.minimum(rank, width)[:, None]
    block = x[:, start:start + width]
    block[mask] = -1.0


def operand_max_rank(rank: np.ndarray, csr: Csr) -> np.ndarray:
    """Largest rank among each node's operands (0 without operands)."""
    n = len(rank)
    counts = np.diff(csr.indptr)
    out = np.zeros(n, np.int64)
    if csr.indices.size:
        has = counts > 0
        out[has] = np.maximum.reduceat(rank[csr.indices], csr.indptr[:-1][has])
    return out


def repad_node_feat(node_feat: np.ndarray, node_opcode: np.ndarray, edge_index: np.ndarray) -> np.ndarray:
    """Copy of ``node_feat`` with ``-1`` in every per-dimension entry beyond the relevant rank.

    Ranks used per block (docs/competition.md §4):
    - shape dims, minor_to_major: the output rank (non-zero shape dims);
    - ``dimensions``: max(output rank, operand ranks) — reduce/broadcast list operand dims;
    - window fields, reversal, conv spatial dim numbers: the window rank (non-zero window sizes);
      conv batch/feature dim numbers are -1 on nodes that are not convolutions;
    - slice start/stride/limit, dynamic-slice sizes, pad low/high: min(rank, 2) on slice /
      dynamic-slice / pad nodes, all -1 elsewhere.
    """
    x = np.array(node_feat, dtype=np.float32, copy=True)
    op = np.asarray(node_opcode, dtype=np.int64)
    n = x.shape[0]
    rank = tensor_rank(x)
    csr = producers_csr(n, edge_index)
    _pad_beyond(x, SHAPE_DIMS.start, MAX_RANK, rank)
    _pad_beyond(x, MINOR_TO_MAJOR.start, MAX_RANK, rank)
    _pad_beyond(x, DIMENSIONS.start, MAX_RANK, np.maximum(rank, operand_max_rank(rank, csr)))
    wrank = np.count_nonzero(x[:, WINDOW_SIZE], axis=1)
    for start in (*WINDOW_BLOCK_STARTS, WINDOW_REVERSAL.start):
        _pad_beyond(x, start, MAX_RANK, wrank)
    _pad_beyond(x, CONV_INPUT_SPATIAL.start, 4, wrank)
    _pad_beyond(x, CONV_KERNEL_SPATIAL.start, 4, wrank)
    ids = opcode_ids()
    x[np.ix_(op != ids["convolution"], CONV_SCALAR)] = -1.0
    two = np.minimum(rank, 2)
    for opcode, starts in ("slice", SLICE_BLOCKS), ("dynamic-slice", (DYN_SLICE_SIZES,)), ("pad", PAD_BLOCKS):
        for start in starts:
            _pad_beyond(x, start, 2, np.where(op == ids[opcode], two, 0))
    return x


def repad_tile_config(config_feat: np.ndarray) -> np.ndarray:
    """Tile config (c, 24): in each 6-dim bounds block, entries after the last non-zero one -> -1.

    Bounds are sizes (>= 1 where defined), so trailing zeros are beyond the kernel's rank; an
    all-zero block (e.g. input bounds) becomes all -1. Sums/products are kept.
    """
    x = np.array(config_feat, dtype=np.float32, copy=True)
    cols = np.arange(MAX_RANK)
    for start in (0, 8, 16):
        block = x[:, start:start + MAX_RANK]
        nz = block != 0
        last = np.where(nz.any(axis=1), MAX_RANK - 1 - np.argmax(nz[:, ::-1], axis=1), -1)
        block[cols[None, :] > last[:, None]] = -1.0
    return x


# ---- lane alignment and log transforms --------------------------------------------------------
LANE_NAMES = tuple([f"dim{i}_mod128" for i in range(6)] + [f"dim{i}_div128" for i in range(6)]
                   + ["log_minor_dim", "minor_dim_mod128", "second_minor_mod8"])


def lane_features(node_feat_padded: np.ndarray) -> np.ndarray:
    """(n, 15): ``dim % 128 / 128`` and ``log1p(dim // 128)`` of each shape dim (TPU lanes), and the
    size / alignment of the most-minor (lane) and second-minor (sublane, % 8) dims of the default
    layout. ``-1`` beyond the rank. Expects -1-padded features (shape dims < 0 are absent)."""
    x = node_feat_padded
    dims = x[:, SHAPE_DIMS]
    present = dims > 0
    mod = np.where(present, np.mod(dims, 128) / 128.0, -1.0)
    div = np.where(present, np.log1p(np.floor_divide(np.maximum(dims, 0), 128)), -1.0)
    m2m = x[:, MINOR_TO_MAJOR].astype(np.int64)
    rows = np.arange(x.shape[0])
    minor = np.where(m2m[:, 0] >= 0, dims[rows, np.clip(m2m[:, 0], 0, 5)], -1.0)
    second = np.where(m2m[:, 1] >= 0, dims[rows, np.clip(m2m[:, 1], 0, 5)], -1.0)
    extra = np.stack([np.where(minor > 0, np.log1p(np.maximum(minor, 0)), -1.0),
                      np.where(minor > 0, np.mod(minor, 128) / 128.0, -1.0),
                      np.where(second > 0, np.mod(second, 8) / 8.0, -1.0)], axis=1)
    return np.concatenate([mod, div, extra], axis=1).astype(np.float32)


def log_transform_columns(node_feat: np.ndarray) -> np.ndarray:
    """Copy with :data:`LOG_COLUMNS` replaced by their signed log1p."""
    x = np.array(node_feat, dtype=np.float32, copy=True)
    x[:, LOG_COLUMNS] = signed_log1p(x[:, LOG_COLUMNS])
    return x


# ---- config deduplication ---------------------------------------------------------------------
def config_row_hashes(rows: np.ndarray) -> np.ndarray:
    """(c, 2) uint64: a 128-bit BLAKE2b digest of each flattened config row (equal rows always
    collide; distinct rows practically never do). Rows should share one dtype, e.g. int8."""
    flat = np.ascontiguousarray(rows).reshape(rows.shape[0], -1)
    out = np.empty((flat.shape[0], 2), np.uint64)
    raw = out.view(np.uint8).reshape(-1, 16)
    for i in range(flat.shape[0]):
        raw[i] = np.frombuffer(hashlib.blake2b(flat[i].data, digest_size=16).digest(), np.uint8)
    return out


def dedup_groups(hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(first, inverse)``: ``first`` = sorted index of the first occurrence of each distinct row,
    ``inverse[i]`` = position in ``first`` of row ``i``'s group."""
    h = np.ascontiguousarray(hashes).view(np.dtype((np.void, hashes.dtype.itemsize * hashes.shape[1])))
    _, first, inverse = np.unique(h.reshape(-1), return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank_of = np.empty_like(order)
    rank_of[order] = np.arange(len(order))
    return first[order].astype(np.int64), rank_of[inverse.reshape(-1)].astype(np.int64)


def group_mean(values: np.ndarray, inverse: np.ndarray, num_groups: int) -> np.ndarray:
    """Mean of ``values`` per group (for runtimes of duplicate configs)."""
    sums = np.bincount(inverse, weights=np.asarray(values, np.float64), minlength=num_groups)
    counts = np.bincount(inverse, minlength=num_groups)
    return sums / np.maximum(counts, 1)
