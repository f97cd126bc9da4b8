"""On-disk, memory-mappable cache of npz graphs (``python -m features cache``; ``features build``
reads through it only with ``--use-cache true``). Entry layout, keys, int8 storage and atomicity:
docs/data.md, "Cache".

``load_cached(npz_path, cache_dir)`` converts a graph on first use and returns a :class:`Graph`
whose arrays are ``np.load(..., mmap_mode="r")`` views, so a 100k-config layout graph costs almost
no RAM until its configs are sliced. Conversion never holds a big member in RAM (each member is
streamed in bounded chunks). Two processes converting the same file race harmlessly: the loser
discards its copy.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import IO, Iterable

import numpy as np
from tqdm import tqdm

from tpurank.atomic import pid_alive
from tpurank.collections import parse_collections
from features.io import (DEFAULT_CHUNK_BYTES, LAYOUT_KEYS, TILE_KEYS, BadGraphError, Graph,
                         discover, graph_from_arrays, iter_npz_chunks, npz_headers, open_npz,
                         read_npz_member)

__all__ = ["CACHE_VERSION", "cache_entry_dir", "convert_to_cache", "load_cached", "main"]

CACHE_VERSION = 1
META = "meta.json"
TMP_PREFIX = ".tmp-"
BIG_KEY = "node_config_feat"


def _source_identity(npz_path: Path) -> dict[str, object]:
    st = npz_path.stat()
    return {"source": str(npz_path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "cache_version": CACHE_VERSION, "numpy": np.__version__}


def _entry_for(npz_path: Path, cache_dir: Path, identity: dict[str, object]) -> Path:
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir / f"{npz_path.stem}-{key}"


def cache_entry_dir(npz_path: str | os.PathLike, cache_dir: str | os.PathLike) -> Path:
    """Where the cache entry of ``npz_path`` lives (whether or not it exists yet)."""
    npz_path = Path(npz_path)
    return _entry_for(npz_path, Path(cache_dir), _source_identity(npz_path))


def _write_npy_header(fp: IO[bytes], shape: tuple[int, ...], dtype: np.dtype,
                      fortran_order: bool) -> None:
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
              "fortran_order": fortran_order, "shape": tuple(shape)}
    np.lib.format.write_array_header_2_0(fp, header)


def _fsync_close(fp: IO[bytes]) -> None:
    fp.flush()
    os.fsync(fp.fileno())
    fp.close()


def _stream_member(npz_path: Path, zf, key: str, out: Path, dtype: np.dtype,
                   exact: bool) -> bool:
    """Stream member ``key`` into ``out`` as ``dtype``; with ``exact``, give up (False) when a
    value does not survive the cast unchanged."""
    header = npz_headers(npz_path, zf)[key]
    fp = open(out, "wb")  # plain writes, not a memmap: written pages must not count as our RSS
    try:
        _write_npy_header(fp, header.shape, dtype, header.fortran_order)
        for chunk in iter_npz_chunks(npz_path, key, DEFAULT_CHUNK_BYTES, zf=zf):
            cast = chunk.astype(dtype, copy=False)
            if exact and not np.array_equal(cast, chunk):
                return False
            fp.write(cast.tobytes())
    finally:
        _fsync_close(fp)
    return True


def _normalised_small_arrays(npz_path: Path, zf, keys: Iterable[str]) -> dict[str, np.ndarray]:
    """Small members, normalised exactly as :func:`graph_from_arrays` would present them."""
    arrays = {k: read_npz_member(npz_path, k, zf=zf) for k in keys}
    arrays.setdefault(BIG_KEY, np.zeros((0, 0, 0), np.float32))  # placeholder, not stored
    g = graph_from_arrays(arrays)
    out = {k: getattr(g, k) for k in TILE_KEYS + LAYOUT_KEYS if getattr(g, k) is not None}
    out.pop(BIG_KEY, None)
    out["node_feat"] = np.asarray(out["node_feat"], np.float32)
    if out.get("config_feat") is not None:
        out["config_feat"] = np.asarray(out["config_feat"], np.float32)
    return out


def _write_entry(npz_path: Path, tmp: Path) -> dict[str, object]:
    """Write every array of ``npz_path`` into directory ``tmp``; returns the metadata."""
    with open_npz(npz_path) as zf:
        headers = npz_headers(npz_path, zf)
        is_layout = BIG_KEY in headers
        required = LAYOUT_KEYS if is_layout else TILE_KEYS
        missing = [k for k in required if k not in headers and k != "node_splits"]
        if missing:
            raise BadGraphError(npz_path, f"missing required key {missing[0]!r}")
        small = [k for k in required + ("node_splits",) if k in headers and k != BIG_KEY]
        for key, array in _normalised_small_arrays(npz_path, zf, dict.fromkeys(small)).items():
            with open(tmp / f"{key}.npy", "wb") as fp:
                np.save(fp, np.ascontiguousarray(array), allow_pickle=False)
                fp.flush()
                os.fsync(fp.fileno())
        meta: dict[str, object] = {"kind": "layout" if is_layout else "tile"}
        if is_layout:
            out = tmp / f"{BIG_KEY}.npy"
            dtype = np.dtype(np.int8)
            if not _stream_member(npz_path, zf, BIG_KEY, out, dtype, exact=True):
                dtype = np.dtype(np.float32)  # documented fallback: values not int8-exact
                _stream_member(npz_path, zf, BIG_KEY, out, dtype, exact=False)
            meta["node_config_feat_dtype"] = dtype.name
    return meta


def _remove_dead_tmp_dirs(cache_dir: Path, entry_name: str) -> None:
    """Drop temporary directories left by conversions whose process died (killed, OOM)."""
    for tmp in cache_dir.glob(f"{TMP_PREFIX}{entry_name}-*"):
        try:
            pid = int(tmp.name[len(TMP_PREFIX) + len(entry_name) + 1:].split("-", 1)[0])
        except ValueError:
            continue
        if not pid_alive(pid):
            shutil.rmtree(tmp, ignore_errors=True)


def _remove_stale_entries(cache_dir: Path, entry: Path, source: str) -> None:
    """Older entries of the same source file (it changed, or the cache version did)."""
    stem = entry.name.rsplit("-", 1)[0]
    for other in cache_dir.glob(f"{stem}-*"):
        if other == entry or not (other / META).is_file():
            continue
        try:
            if json.loads((other / META).read_text()).get("source") == source:
                shutil.rmtree(other, ignore_errors=True)
        except (OSError, ValueError):
            continue


def convert_to_cache(npz_path: str | os.PathLike, cache_dir: str | os.PathLike) -> Path:
    """Make sure the cache entry of ``npz_path`` exists; returns its directory."""
    npz_path = Path(npz_path)
    cache_dir = Path(cache_dir)
    if not npz_path.is_file():
        raise BadGraphError(npz_path, "file not found")
    identity = _source_identity(npz_path)
    entry = _entry_for(npz_path, cache_dir, identity)
    if (entry / META).is_file():
        return entry
    cache_dir.mkdir(parents=True, exist_ok=True)
    _remove_dead_tmp_dirs(cache_dir, entry.name)
    tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{entry.name}-{os.getpid()}-", dir=cache_dir))
    try:
        meta = _write_entry(npz_path, tmp)
        meta.update(identity, created=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        with open(tmp / META, "w") as fp:
            json.dump(meta, fp, indent=2, sort_keys=True)
            fp.flush()
            os.fsync(fp.fileno())
        try:
            os.replace(tmp, entry)
        except OSError:
            if not (entry / META).is_file():  # not a lost race: a real error
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _remove_stale_entries(cache_dir, entry, str(identity["source"]))
    return entry


def load_entry(entry: str | os.PathLike, path: Path | None = None) -> Graph:
    """A :class:`Graph` of memory-mapped (read-only) arrays from a cache entry directory."""
    entry = Path(entry)
    arrays = {p.stem: np.load(p, mmap_mode="r", allow_pickle=False) for p in entry.glob("*.npy")}
    return graph_from_arrays(arrays, path)


def load_cached(npz_path: str | os.PathLike, cache_dir: str | os.PathLike) -> Graph:
    """Load ``npz_path`` through the cache (converting on first use); arrays are memory-mapped,
    ``node_config_feat`` is int8 (float32 when the file holds values int8 cannot represent)."""
    npz_path = Path(npz_path)
    return load_entry(convert_to_cache(npz_path, cache_dir), npz_path)


def _convert_task(args: tuple[str, str]) -> tuple[str, str | None]:
    path, cache_dir = args
    try:
        convert_to_cache(path, cache_dir)
        return path, None
    except BadGraphError as exc:
        return path, exc.problem


def main(argv: list[str] | None = None) -> int:
    """CLI: convert every npz under ``--data`` into ``--cache``; exit 1 if any file failed."""
    parser = argparse.ArgumentParser(prog="python -m features cache",
                                     description="convert npz files to the memory-mappable cache")
    parser.add_argument("--data", required=True, help="data root (contains npz_all/npz)")
    parser.add_argument("--cache", required=True, help="cache directory (e.g. WORK/cache)")
    parser.add_argument("--collections", default="all", help="collections to convert (comma-separated names or all)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--report", default=None,
                        help="validate report: skip the bad files it lists")
    args = parser.parse_args(argv)

    files = discover(args.data, parse_collections(args.collections))
    if args.report:
        from features.validate_report import load_bad_files

        bad = load_bad_files(args.report)
        files = [f for f in files if str(f.path.resolve()) not in bad]
    tasks = [(str(f.path), args.cache) for f in files]
    failures: list[tuple[str, str]] = []
    start = time.perf_counter()
    with tqdm(total=len(tasks), desc="cache", unit="file", file=sys.stderr) as bar:
        if args.jobs > 1:
            with ProcessPoolExecutor(max_workers=args.jobs) as pool:
                results = pool.map(_convert_task, tasks, chunksize=4)
                for path, problem in results:
                    failures += [(path, problem)] if problem else []
                    bar.update()
        else:
            for task in tasks:
                path, problem = _convert_task(task)
                failures += [(path, problem)] if problem else []
                bar.update()
    print(f"cached {len(tasks) - len(failures)}/{len(tasks)} files into {args.cache} "
          f"in {time.perf_counter() - start:.1f} s")
    for path, problem in failures:
        print(f"FAILED {path}: {problem}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
