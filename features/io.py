"""Discover and load TpuGraphs npz files (docs/competition.md §3).

Conventions kept from the npz files: ``edge_index`` rows are ``[consumer, producer]``;
``node_splits`` is always returned 1-D; integer arrays are int64 (float runtimes stay float64).

Streaming access (no member ever fully in RAM, stored or deflated): :func:`npz_headers` reads
the npy headers, :func:`iter_npz_chunks` yields a member's values in bounded chunks; zip/npy
corruption becomes :class:`BadGraphError` naming the file.
"""

from __future__ import annotations

import os
import zipfile
import zlib
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, ContextManager, Iterable, Iterator

import numpy as np

from tpurank.collections import COLLECTIONS, SPLITS, Collection, hidden_runtimes_path

TILE_KEYS = ("node_feat", "node_opcode", "edge_index", "config_feat", "config_runtime",
             "config_runtime_normalizers")
LAYOUT_KEYS = ("node_feat", "node_opcode", "edge_index", "node_config_ids", "node_config_feat",
               "config_runtime", "node_splits")
NODE_FEAT_DIM = 140
TILE_CONFIG_DIM = 24
LAYOUT_CONFIG_DIM = 18


class BadGraphError(ValueError):
    """A graph file that cannot be used; the message is ``"<path>: <problem>"``."""

    def __init__(self, path: str | os.PathLike, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = Path(path)
        self.problem = problem


@dataclass(frozen=True)
class GraphFile:
    """One graph file found under a data root."""

    collection: Collection
    split: str
    stem: str
    path: Path

    @property
    def id(self) -> str:
        """Submission ID, e.g. ``layout:xla:random:unet_3d``."""
        return self.collection.submission_id(self.stem)


@dataclass
class Graph:
    """Arrays of one graph. Large arrays may be ``np.memmap`` (read-only)."""

    node_feat: np.ndarray  # (n, 140) float32
    node_opcode: np.ndarray  # (n,) int64
    edge_index: np.ndarray  # (m, 2) int64, [consumer, producer]
    config_runtime: np.ndarray  # (c,) int64, float64 if the file stores floats (zeros in test)
    node_splits: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # (k,)
    config_feat: np.ndarray | None = None  # tile: (c, 24) float32
    config_runtime_normalizers: np.ndarray | None = None  # tile: (c,)
    node_config_ids: np.ndarray | None = None  # layout: (nc,)
    node_config_feat: np.ndarray | None = None  # layout: (c, nc, 18) float32 or codes
    # (features.configcodes.CodedConfigs: array-like, rows decoded on access)
    path: Path | None = None

    @property
    def is_tile(self) -> bool:
        return self.config_feat is not None

    @property
    def num_nodes(self) -> int:
        return int(self.node_feat.shape[0])

    @property
    def num_configs(self) -> int:
        return int(self.config_runtime.shape[0])

    def target(self) -> np.ndarray:
        """What is ranked (lower is faster): runtime / normalizer for tile, runtime for layout."""
        return ranked_target(self.config_runtime, self.config_runtime_normalizers)


def ranked_target(runtime: np.ndarray, normalizers: np.ndarray | None = None) -> np.ndarray:
    """runtime / normalizer (tile; a zero normalizer counts as 1) or runtime (layout), float64."""
    rt = np.asarray(runtime, dtype=np.float64).reshape(-1)
    if normalizers is None:
        return rt
    norm = np.asarray(normalizers, dtype=np.float64).reshape(-1)
    return rt / np.where(norm == 0, 1.0, norm)


def discover(root: str | os.PathLike, collections: Iterable[Collection] | None = None,
             splits: Iterable[str] = SPLITS) -> list[GraphFile]:
    """All ``*.npz`` graph files under ``root`` (Kaggle layout), sorted by collection/split/stem."""
    found: list[GraphFile] = []
    for coll in collections or COLLECTIONS:
        for split in splits:  # a missing directory globs nothing
            paths = sorted(coll.split_dir(root, split).glob("*.npz"))
            found += [GraphFile(coll, split, p.stem, p) for p in paths]
    return found


def _as_1d_int(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).reshape(-1).astype(np.int64, copy=False)


def _as_1d_number(a: np.ndarray) -> np.ndarray:
    """1-D int64, or float64 when the file holds floats (never truncate 0.91 s to 0)."""
    a = np.asarray(a).reshape(-1)
    return a.astype(np.float64 if a.dtype.kind == "f" else np.int64, copy=False)


def graph_from_arrays(arrays: dict[str, np.ndarray], path: Path | None = None) -> Graph:
    """Build a :class:`Graph` from a mapping of npz arrays, normalising shapes and int dtypes; a
    missing key is a :class:`BadGraphError` naming ``path``."""
    try:
        g = Graph(
            node_feat=arrays["node_feat"],
            node_opcode=_as_1d_int(arrays["node_opcode"]),
            edge_index=np.asarray(arrays["edge_index"]).astype(np.int64, copy=False).reshape(-1, 2),
            config_runtime=_as_1d_number(arrays["config_runtime"]),
            node_splits=_as_1d_int(arrays["node_splits"]) if "node_splits" in arrays
            else np.zeros(0, np.int64),
            path=path,
        )
        if "config_feat" in arrays:
            g.config_feat = arrays["config_feat"]
            g.config_runtime_normalizers = _as_1d_number(arrays["config_runtime_normalizers"])
        else:
            g.node_config_ids = _as_1d_int(arrays["node_config_ids"])
            g.node_config_feat = arrays["node_config_feat"]
    except KeyError as exc:
        raise BadGraphError(path or "<arrays>", f"missing required key {exc.args[0]!r}") from None
    return g


def load_npz(path: str | os.PathLike) -> Graph:
    """Load a graph straight from its npz (everything in RAM; layout configs as compact codes:
    :func:`features.configcodes.load_coded`); an unreadable file or a missing key is a
    :class:`BadGraphError` naming the file."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
        raise BadGraphError(path, f"cannot read npz: {type(exc).__name__}: {exc}") from exc
    return graph_from_arrays(arrays, path)


def read_hidden_runtimes(root: str | os.PathLike) -> dict[str, np.ndarray] | None:
    """True test targets (what is ranked, float64) of a generated dataset by submission ID, None
    when the root has none (Kaggle data never has; the sample generator writes them apart)."""
    path = hidden_runtimes_path(root)
    if not path.is_file():
        return None
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k].astype(np.float64) for k in data.files}


# ---- streaming npz access -----------------------------------------------------------------------
#: errors that mean "this zip/npy stream is damaged" (truncation, bad CRC, bad deflate data)
ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError)
DEFAULT_CHUNK_BYTES = 32 << 20


@dataclass(frozen=True)
class NpyHeader:
    """What an npz member's npy header says, read without touching the data."""

    key: str  # member name without ``.npy``
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


def _read_npy_header(fp: IO[bytes]) -> tuple[tuple[int, ...], bool, np.dtype]:
    """(shape, fortran_order, dtype) from an npy stream positioned at its magic string."""
    fmt = np.lib.format
    version = fmt.read_magic(fp)
    if version == (1, 0):
        return fmt.read_array_header_1_0(fp)
    if version == (2, 0):
        return fmt.read_array_header_2_0(fp)
    # (3, 0) only differs by utf-8 field names; numpy exposes no public reader for it
    return fmt._read_array_header(fp, version)  # noqa: SLF001


def open_npz(path: str | os.PathLike) -> zipfile.ZipFile:
    """Open an npz as a zip, turning a truncated/corrupt file into :class:`BadGraphError`."""
    try:
        return zipfile.ZipFile(path)
    except FileNotFoundError:
        raise BadGraphError(path, "file not found") from None
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise BadGraphError(path, "not a readable npz (zip) file — truncated or corrupt "
                                  f"({type(exc).__name__}: {exc})") from None


def _member_header(zf: zipfile.ZipFile, info: zipfile.ZipInfo,
                   path: str | os.PathLike) -> NpyHeader:
    key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
    try:
        with zf.open(info) as fp:
            shape, fortran, dtype = _read_npy_header(fp)
            header_end = fp.tell()
    except ZIP_ERRORS as exc:
        raise BadGraphError(path, f"member {key!r} is corrupt or truncated: no readable npy header "
                                  f"({type(exc).__name__}: {exc})") from None
    if dtype.hasobject:
        raise BadGraphError(path, f"{key} has object dtype (pickled data is not accepted)")
    data_bytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    header = NpyHeader(key, tuple(int(s) for s in shape), dtype, bool(fortran))
    if header_end + data_bytes != info.file_size:
        raise BadGraphError(path, f"{key} is truncated or padded: header says shape "
                                  f"{header.shape} {dtype} = {data_bytes} bytes, member holds "
                                  f"{info.file_size - header_end}")
    return header


def _zip(path: str | os.PathLike, zf: zipfile.ZipFile | None) -> ContextManager[zipfile.ZipFile]:
    """``zf``, or the npz at ``path`` opened (and closed on exit) when ``zf`` is None."""
    return nullcontext(zf) if zf is not None else open_npz(path)


def _header_of(zf: zipfile.ZipFile, path: str | os.PathLike, key: str) -> tuple[zipfile.ZipInfo, NpyHeader]:
    try:
        info = zf.getinfo(key + ".npy")
    except KeyError:
        raise BadGraphError(path, f"missing required key {key!r}") from None
    return info, _member_header(zf, info, path)


def npz_headers(path: str | os.PathLike, zf: zipfile.ZipFile | None = None) -> dict[str, NpyHeader]:
    """Shape/dtype of every member of an npz, read from the npy headers only (cheap)."""
    with _zip(path, zf) as z:
        return {h.key: h for h in (_member_header(z, info, path) for info in z.infolist()
                                   if not info.is_dir())}


def iter_npz_chunks(path: str | os.PathLike, key: str, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                    zf: zipfile.ZipFile | None = None) -> Iterator[np.ndarray]:
    """Yield the values of member ``key`` as flat 1-D chunks in storage order.

    Memory stays at about ``chunk_bytes`` whatever the member's size; the zip CRC is checked
    by :mod:`zipfile` as the stream is consumed, so corruption surfaces as BadGraphError.
    """
    with _zip(path, zf) as z:
        info, header = _header_of(z, path, key)
        per_chunk = max(1, chunk_bytes // max(1, header.dtype.itemsize))
        try:
            with z.open(info) as fp:
                _read_npy_header(fp)
                remaining = header.size
                while remaining > 0:
                    count = min(per_chunk, remaining)
                    raw = fp.read(count * header.dtype.itemsize)
                    if len(raw) != count * header.dtype.itemsize:
                        raise EOFError(f"{key}: stream ended early")
                    remaining -= count
                    yield np.frombuffer(raw, dtype=header.dtype)
        except BadGraphError:
            raise
        except ZIP_ERRORS as exc:
            raise BadGraphError(path, f"{key} data is corrupt or truncated "
                                      f"({type(exc).__name__}: {exc})") from None


def read_npz_member(path: str | os.PathLike, key: str,
                    zf: zipfile.ZipFile | None = None) -> np.ndarray:
    """One member fully in RAM (for the small arrays), with corruption as BadGraphError."""
    with _zip(path, zf) as z:
        header = _header_of(z, path, key)[1]
        chunks = list(iter_npz_chunks(path, key, zf=z))
        flat = np.concatenate(chunks) if chunks else np.empty(0, header.dtype)
        return flat.reshape(header.shape, order="F" if header.fortran_order else "C")


def iter_npz_rows(path: str | os.PathLike, key: str, rows: int,
                  zf: zipfile.ZipFile | None = None) -> Iterator[np.ndarray]:
    """Yield member ``key`` (C order) ``rows`` leading-axis rows at a time, e.g. config batches
    of ``node_config_feat`` straight from the npz, without the whole array in RAM."""
    with _zip(path, zf) as z:
        header = _header_of(z, path, key)[1]
        if header.fortran_order and len(header.shape) > 1:
            raise BadGraphError(path, f"{key} is Fortran-ordered; it cannot be streamed by rows")
        row_shape = header.shape[1:]
        row_bytes = int(np.prod(row_shape, dtype=np.int64)) * header.dtype.itemsize
        if not header.shape or header.shape[0] == 0:
            return
        if row_bytes == 0:  # e.g. node_config_feat (c, 0, 18): c empty rows, no bytes to read
            for start in range(0, header.shape[0], max(1, rows)):
                yield np.zeros((min(max(1, rows), header.shape[0] - start),) + row_shape, header.dtype)
            return
        chunk_bytes = max(1, rows) * max(1, row_bytes)
        for chunk in iter_npz_chunks(path, key, chunk_bytes, zf=z):
            yield chunk.reshape((-1,) + row_shape)
