"""Layout configs as small integer codes: the one compact copy of the configs in WORK.

Within one graph only a few distinct per-node 18-vectors occur, so a graph's ``(c, nc, 18)``
configs are stored as ``table`` (t, 18) int8, the distinct vectors, and ``codes`` (c, nc) uint8
(uint16 / int32 for bigger tables), the row of ``table`` each (config, node) uses: 9–18× smaller
than int8, decoded on row access (``CodedConfigs[idx]``). Each 18-vector is packed into one int64
key (3 bits per value) so encoding a chunk is a few vectorised numpy calls; :func:`load_coded`
streams ``node_config_feat`` out of the npz in row chunks, never the whole member in RAM.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from features.io import (BadGraphError, Graph, _member_header, graph_from_arrays, iter_npz_rows,
                         load_npz, open_npz, read_npz_member)

BITS = 3  # values -1..6 -> 0..7
WIDTH = 18
MIN_VALUE, MAX_VALUE = -1, 6
_SHIFTS = (np.arange(WIDTH, dtype=np.int64) * BITS)


def pack_keys(block: np.ndarray) -> np.ndarray:
    """(k, nc, 18) small integers -> (k, nc) int64 keys (bijective for values -1..6)."""
    v = np.asarray(block, dtype=np.int64) - MIN_VALUE
    return (v << _SHIFTS).sum(axis=-1)


def unpack_keys(keys: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pack_keys`: (t,) keys -> (t, 18) int8."""
    keys = np.asarray(keys, dtype=np.int64)
    return (((keys[:, None] >> _SHIFTS) & ((1 << BITS) - 1)) + MIN_VALUE).astype(np.int8)


class CodeTable:
    """Distinct keys of one graph, codes assigned in order of first appearance (stable across
    chunks, so codes can be written as the chunks stream by)."""

    def __init__(self) -> None:
        self.keys = np.zeros(0, np.int64)  # by code
        self._sorted = np.zeros(0, np.int64)
        self._order = np.zeros(0, np.int64)  # code of each sorted key

    def encode(self, keys: np.ndarray) -> np.ndarray:
        """Codes (int64, same shape) of ``keys``, adding the keys not seen before."""
        flat = keys.reshape(-1)
        new = np.setdiff1d(flat, self._sorted)  # sorted
        if len(new):
            self.keys = np.concatenate([self.keys, new])
            order = np.argsort(self.keys, kind="stable")
            self._sorted, self._order = self.keys[order], order
        return self._order[np.searchsorted(self._sorted, flat)].reshape(keys.shape)

    def table(self) -> np.ndarray:
        return unpack_keys(self.keys)


def code_dtype(table_size: int) -> np.dtype:
    """The smallest code type for a table: uint8 (<= 256 distinct vectors), uint16, int32."""
    for dtype in (np.uint8, np.uint16):
        if table_size <= np.iinfo(dtype).max + 1:
            return np.dtype(dtype)
    return np.dtype(np.int32)


class CodedConfigs:
    """Array-like (c, nc, 18) int8 view of coded configs; rows decoded on access.

    ``codes`` may be an ndarray, a memmap or any object with ``shape`` and ``__getitem__``
    returning arrays (:class:`features.processed.LazyNpy`).
    """

    dtype = np.dtype(np.int8)
    ndim = 3

    def __init__(self, codes: Any, table: np.ndarray) -> None:
        self.codes = codes
        self.table = np.asarray(table, np.int8).reshape(-1, WIDTH)

    @property
    def shape(self) -> tuple[int, int, int]:
        c, nc = self.codes.shape
        return int(c), int(nc), WIDTH

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, idx: Any) -> np.ndarray:
        if isinstance(idx, tuple):  # e.g. [rows, nodes] or [rows, :, :6]
            rows = self[idx[0]]
            return rows[(slice(None),) + idx[1:]] if rows.ndim == 3 else rows[idx[1:]]
        codes = np.asarray(self.codes[idx])
        return self.table[codes.astype(np.intp, copy=False)]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self[:]
        return out if dtype is None else out.astype(dtype)


def _check_small_ints(block: np.ndarray, path: str | os.PathLike) -> np.ndarray:
    cast = block.astype(np.int8, copy=False) if block.dtype != np.int8 else block
    if block.dtype.kind == "f" and not np.array_equal(cast, block):
        raise BadGraphError(path, "node_config_feat holds values that are not integers "
                                  "(layout values are the small integers -1..5)")
    if cast.size and (cast.min() < MIN_VALUE or cast.max() > MAX_VALUE):
        raise BadGraphError(path, f"node_config_feat values outside {MIN_VALUE}..{MAX_VALUE}")
    return cast


def encode_array(configs: np.ndarray, chunk: int = 4096,
                 path: str | os.PathLike = "<array>") -> CodedConfigs:
    """Codes of an in-RAM or memory-mapped (c, nc, 18) array, ``chunk`` rows at a time."""
    c, nc = int(configs.shape[0]), int(configs.shape[1])
    return encode_blocks((np.asarray(configs[s:s + chunk]) for s in range(0, c, chunk)), c, nc, path)


def encode_blocks(blocks: Iterable[np.ndarray], c: int, nc: int,
                  path: str | os.PathLike = "<array>") -> CodedConfigs:
    """Codes of ``c`` configs of ``nc`` nodes given as consecutive row blocks (k, nc, 18)."""
    table = CodeTable()
    codes = np.empty((c, nc), np.int32)
    pos = 0
    for block in blocks:
        block = _check_small_ints(np.asarray(block).reshape(-1, nc, WIDTH), path)
        codes[pos:pos + len(block)] = table.encode(pack_keys(block))
        pos += len(block)
    if pos != c:
        raise BadGraphError(path, f"node_config_feat has {pos} rows, expected {c}")
    dtype = code_dtype(len(table.keys))
    return CodedConfigs(codes.astype(dtype) if dtype != codes.dtype else codes, table.table())


def load_coded(path: str | os.PathLike, chunk: int = 4096, configs: bool = True) -> Graph:
    """A :class:`Graph` straight from its npz whose layout ``node_config_feat`` is a
    :class:`CodedConfigs` (streamed: never the float32 member in RAM); tile graphs load as is.

    ``configs=False`` skips the layout configs (an empty placeholder with the right node count):
    for passes that only need the nodes, without decompressing the big member."""
    zf = open_npz(path)
    try:
        names = [n[:-4] for n in zf.namelist() if n.endswith(".npy")]
        if "node_config_feat" not in names:  # tile: small, one plain read
            zf.close()
            return load_npz(path)
        arrays = {k: read_npz_member(path, k, zf=zf) for k in names if k != "node_config_feat"}
        shape = _member_header(zf, zf.getinfo("node_config_feat.npy"), path).shape
        if len(shape) != 3 or shape[2] != WIDTH:
            raise BadGraphError(path, f"node_config_feat has shape {shape}, expected (c, nc, 18)")
        if shape[1] == 0:
            raise BadGraphError(path, "node_config_ids is empty: the graph has no configurable nodes "
                                      "(a test graph's configs all tie and are not featurized; skip a "
                                      "train/valid one: features validate --skip-bad)")
        arrays["node_config_feat"] = encode_blocks(
            iter_npz_rows(path, "node_config_feat", chunk, zf=zf), shape[0], shape[1], path) \
            if configs else CodedConfigs(np.zeros((0, shape[1]), np.uint8), np.zeros((0, WIDTH), np.int8))
        return graph_from_arrays(arrays, Path(path))
    finally:
        zf.close()
