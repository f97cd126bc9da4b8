"""Cache: round trip, int8 storage, memory-mapped return, atomicity, invalidation, CLI."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import numpy as np
import pytest

import features.cache as cache
from features.__main__ import main as features_main
from bigfile import layout_arrays, tile_arrays, write_mini_root
from features.io import BadGraphError, discover, load_npz

ARRAY_KEYS = ("node_feat", "node_opcode", "edge_index", "node_splits", "config_runtime",
              "config_feat", "config_runtime_normalizers", "node_config_ids", "node_config_feat")


def _entries(cache_dir: Path) -> list[Path]:
    return sorted(p for p in cache_dir.iterdir() if not p.name.startswith("."))


def _assert_same_graph(cached, plain) -> None:
    for key in ARRAY_KEYS:
        a, b = getattr(cached, key), getattr(plain, key)
        assert (a is None) == (b is None), key
        if a is not None:
            assert a.shape == b.shape, key
            np.testing.assert_array_equal(np.asarray(a), b, err_msg=key)


@pytest.mark.parametrize("kind", ["layout", "tile"])
@pytest.mark.parametrize("compressed", [False, True])
def test_round_trip_equals_np_load(tmp_path: Path, kind: str, compressed: bool) -> None:
    arrays = layout_arrays(80, 11, 7, seed=1) if kind == "layout" else tile_arrays(9, 6, seed=1)
    src = tmp_path / "g.npz"
    (np.savez_compressed if compressed else np.savez)(src, **arrays)
    g = cache.load_cached(src, tmp_path / "cache")
    _assert_same_graph(g, load_npz(src))
    assert g.path == src
    assert isinstance(g.node_feat, np.memmap)
    if kind == "layout":
        assert isinstance(g.node_config_feat, np.memmap)
        assert g.node_config_feat.dtype == np.int8
        assert not g.node_config_feat.flags.writeable
    else:
        assert isinstance(g.config_feat, np.memmap)


def test_int8_storage_is_four_times_smaller(tmp_path: Path) -> None:
    src = tmp_path / "g.npz"
    np.savez(src, **layout_arrays(80, 200, 30, seed=2))
    entry = cache.convert_to_cache(src, tmp_path / "cache")
    size = (entry / "node_config_feat.npy").stat().st_size
    assert size < 200 * 30 * 18 + 200  # one byte per value plus the npy header
    assert json.loads((entry / "meta.json").read_text())["node_config_feat_dtype"] == "int8"


def test_non_integer_layout_values_fall_back_to_float32(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(cache, "DEFAULT_CHUNK_BYTES", 256)  # many chunks: int8 already written
    arrays = layout_arrays(80, 11, 7, seed=1)
    arrays["node_config_feat"][10, 6, 17] = 0.5  # in the last chunk only
    src = tmp_path / "g.npz"
    np.savez(src, **arrays)
    g = cache.load_cached(src, tmp_path / "cache")
    assert g.node_config_feat.dtype == np.float32
    np.testing.assert_array_equal(g.node_config_feat, arrays["node_config_feat"])


def test_second_load_reuses_entry(tmp_path: Path, monkeypatch) -> None:
    src = tmp_path / "g.npz"
    np.savez(src, **tile_arrays(9, 6, seed=1))
    cache.load_cached(src, tmp_path / "cache")
    monkeypatch.setattr(cache, "_write_entry", lambda *a: pytest.fail("converted twice"))
    cache.load_cached(src, tmp_path / "cache")
    assert len(_entries(tmp_path / "cache")) == 1


def test_crash_mid_conversion_leaves_no_entry(tmp_path: Path, monkeypatch) -> None:
    src = tmp_path / "g.npz"
    np.savez(src, **layout_arrays(80, 11, 7, seed=1))
    cache_dir = tmp_path / "cache"
    real = cache._stream_member

    def crash(*args, **kwargs):
        real(*args, **kwargs)  # the member is fully written, then the process "dies"
        raise KeyboardInterrupt

    monkeypatch.setattr(cache, "_stream_member", crash)
    with pytest.raises(KeyboardInterrupt):
        cache.load_cached(src, cache_dir)
    assert list(cache_dir.iterdir()) == []  # no entry and no temporary directory
    monkeypatch.setattr(cache, "_stream_member", real)
    _assert_same_graph(cache.load_cached(src, cache_dir), load_npz(src))


def _killed_conversion(src: str, cache_dir: str) -> None:
    def die(*args, **kwargs):
        os._exit(3)  # a hard kill: no finally, no cleanup

    cache._stream_member = die
    cache.load_cached(src, cache_dir)


def test_killed_conversion_is_redone(tmp_path: Path) -> None:
    src = tmp_path / "g.npz"
    np.savez(src, **layout_arrays(80, 11, 7, seed=1))
    cache_dir = tmp_path / "cache"
    proc = multiprocessing.get_context("fork").Process(target=_killed_conversion,
                                                       args=(str(src), str(cache_dir)))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 3
    leftovers = list(cache_dir.iterdir())
    assert len(leftovers) == 1 and leftovers[0].name.startswith(".tmp-")  # half-written, hidden
    assert _entries(cache_dir) == []
    _assert_same_graph(cache.load_cached(src, cache_dir), load_npz(src))
    assert len(list(cache_dir.iterdir())) == 1  # the dead process's temp dir was removed


def test_changed_source_invalidates(tmp_path: Path) -> None:
    src = tmp_path / "g.npz"
    cache_dir = tmp_path / "cache"
    np.savez(src, **tile_arrays(9, 6, seed=1))
    first = cache.load_cached(src, cache_dir)
    old_runtime = np.array(first.config_runtime)
    old_entry = _entries(cache_dir)
    np.savez(src, **tile_arrays(9, 6, seed=2))
    os.utime(src, ns=(src.stat().st_atime_ns, src.stat().st_mtime_ns + 10**9))
    second = cache.load_cached(src, cache_dir)
    assert not np.array_equal(np.asarray(second.config_runtime), old_runtime)
    _assert_same_graph(second, load_npz(src))
    entries = _entries(cache_dir)
    assert len(entries) == 1 and entries != old_entry  # the stale entry was dropped


def test_same_stem_in_two_collections_do_not_collide(tmp_path: Path) -> None:
    a, b = tmp_path / "default" / "g.npz", tmp_path / "random" / "g.npz"
    for path, seed in ((a, 1), (b, 2)):
        path.parent.mkdir()
        np.savez(path, **layout_arrays(80, 11, 7, seed=seed))
    cache_dir = tmp_path / "cache"
    ga, gb = cache.load_cached(a, cache_dir), cache.load_cached(b, cache_dir)
    _assert_same_graph(ga, load_npz(a))
    _assert_same_graph(gb, load_npz(b))
    assert len(_entries(cache_dir)) == 2


def test_bad_sources_raise_bad_graph_error(tmp_path: Path) -> None:
    src = tmp_path / "cut.npz"
    np.savez(src, **tile_arrays(9, 6, seed=1))
    src.write_bytes(src.read_bytes()[:200])
    with pytest.raises(BadGraphError, match=r"cut\.npz: not a readable npz"):
        cache.load_cached(src, tmp_path / "cache")
    with pytest.raises(BadGraphError, match="file not found"):
        cache.load_cached(tmp_path / "absent.npz", tmp_path / "cache")
    arrays = tile_arrays(9, 6, seed=1)
    del arrays["node_opcode"]
    np.savez(tmp_path / "nokey.npz", **arrays)
    with pytest.raises(BadGraphError, match="missing required key 'node_opcode'"):
        cache.load_cached(tmp_path / "nokey.npz", tmp_path / "cache")
    assert _entries(tmp_path / "cache") == []


def test_cli_converts_whole_root(tmp_path: Path, capsys) -> None:
    root = write_mini_root(tmp_path / "root")
    cache_dir = tmp_path / "cache"
    assert features_main(["cache", "--data", str(root), "--cache", str(cache_dir),
                          "--jobs", "2"]) == 0
    assert "cached 15/15" in capsys.readouterr().out
    assert len(_entries(cache_dir)) == 15
    for f in discover(root):
        _assert_same_graph(cache.load_cached(f.path, cache_dir), load_npz(f.path))


def test_sample_dataset_round_trip(tiny_root: Path, tmp_path: Path) -> None:
    """Every file of the generated tiny sample survives the cache."""
    root = tiny_root
    for f in discover(root):
        g = cache.load_cached(f.path, tmp_path / "cache")
        _assert_same_graph(g, load_npz(f.path))
        if not g.is_tile:
            assert g.node_config_feat.dtype == np.int8


@pytest.mark.slow
def test_big_file_is_never_loaded_whole(tmp_path: Path) -> None:
    """Validation and conversion of a 576 MB node_config_feat stay far below its size in RSS."""
    import subprocess
    import sys

    from bigfile import write_layout_npz

    src = write_layout_npz(tmp_path / "big.npz", 5000, 40_000, 200, seed=0)
    code = f"""
import sys
from features.validate import validate_file
from features.cache import load_cached
assert validate_file({str(src)!r}) == []
g = load_cached({str(src)!r}, {str(tmp_path / "cache")!r})
assert g.node_config_feat.dtype.name == "int8" and int(g.node_config_feat[-1].sum()) is not None
print([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1])
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    peak_mb = int(out.stdout.strip().splitlines()[-1]) / 1024
    assert peak_mb < 300, f"peak RSS {peak_mb:.0f} MB for a 576 MB array"
