"""Loader: discovery on every collection, node_splits shapes, int dtypes, streaming helpers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bigfile import layout_arrays, tile_arrays, write_mini_root
from tpurank.collections import COLLECTIONS, SPLITS
from features.io import (BadGraphError, discover, graph_from_arrays, iter_npz_chunks, iter_npz_rows,
                         load_npz, npz_headers, read_npz_member)


@pytest.fixture()
def hand_root(tmp_path: Path) -> Path:
    return write_mini_root(tmp_path / "root")


def test_discover_and_load_every_collection(hand_root: Path) -> None:
    files = discover(hand_root)
    assert len(files) == len(COLLECTIONS) * len(SPLITS)
    assert {f.collection for f in files} == set(COLLECTIONS)
    for f in files:
        g = load_npz(f.path)
        assert g.is_tile == f.collection.is_tile
        assert g.node_feat.shape == (g.num_nodes, 140)
        assert g.node_opcode.shape == (g.num_nodes,) and g.node_opcode.dtype == np.int64
        assert g.edge_index.ndim == 2 and g.edge_index.shape[1] == 2
        assert g.target().shape == (g.num_configs,)
        if not g.is_tile:
            assert g.node_config_feat.shape[:2] == (g.num_configs, g.node_config_ids.size)
        assert f.id == f"{f.collection.name}:{f.stem}"


def test_discover_filters_collections(hand_root: Path) -> None:
    tile = [c for c in COLLECTIONS if c.is_tile]
    files = discover(hand_root, tile, splits=("valid",))
    assert [f.collection for f in files] == tile and files[0].split == "valid"


def test_sample_dataset_loads(tiny_root: Path) -> None:
    """Every collection of the generated tiny sample loads."""
    root = tiny_root
    files = discover(root)
    assert {f.collection for f in files} == set(COLLECTIONS)
    for f in files:
        g = load_npz(f.path)
        assert g.num_configs > 0 and g.num_nodes > 0


@pytest.mark.parametrize("splits_shape", ["k", "1k"])
@pytest.mark.parametrize("int_dtype", [np.int32, np.int64, np.uint32])
def test_node_splits_shapes_and_int_dtypes(tmp_path: Path, splits_shape: str, int_dtype) -> None:
    arrays = layout_arrays(60, 9, 6)
    ref = graph_from_arrays(dict(arrays))
    for key in ("node_opcode", "edge_index", "node_config_ids", "node_splits"):
        arrays[key] = arrays[key].astype(int_dtype)
    if splits_shape == "1k":
        arrays["node_splits"] = arrays["node_splits"].reshape(1, -1)
    np.savez_compressed(tmp_path / "g.npz", **arrays)
    g = load_npz(tmp_path / "g.npz")
    assert g.node_splits.shape == ref.node_splits.shape and g.node_splits.ndim == 1
    for key in ("node_opcode", "edge_index", "node_config_ids", "node_splits"):
        assert getattr(g, key).dtype == np.int64
        np.testing.assert_array_equal(getattr(g, key), getattr(ref, key))


def test_float_runtimes_are_not_truncated() -> None:
    arrays = tile_arrays(5, 4, 0)
    arrays["config_runtime"] = np.array([0.91, 0.92, 0.5, 1.5])
    g = graph_from_arrays(arrays)
    assert g.config_runtime.dtype == np.float64 and g.config_runtime[0] == pytest.approx(0.91)


def test_load_npz_truncated_names_file(tmp_path: Path) -> None:
    path = tmp_path / "cut.npz"
    np.savez(path, **tile_arrays(8, 5, 0))
    path.write_bytes(path.read_bytes()[:300])
    with pytest.raises(BadGraphError, match="cut.npz"):
        load_npz(path)


def test_load_npz_missing_key_names_file(tmp_path: Path) -> None:
    arrays = tile_arrays(8, 5, 0)
    del arrays["config_runtime"]
    np.savez(tmp_path / "nokey.npz", **arrays)
    with pytest.raises(BadGraphError, match=r"nokey\.npz: missing required key 'config_runtime'"):
        load_npz(tmp_path / "nokey.npz")


@pytest.mark.parametrize("compressed", [False, True])
def test_streaming_helpers(tmp_path: Path, compressed: bool) -> None:
    big = np.arange(5000, dtype=np.float32).reshape(50, 10, 10)
    fortran = np.asfortranarray(np.arange(12, dtype=np.int32).reshape(3, 4))
    (np.savez_compressed if compressed else np.savez)(tmp_path / "a.npz", big=big, f=fortran)
    headers = npz_headers(tmp_path / "a.npz")
    assert headers["big"].shape == (50, 10, 10) and headers["big"].dtype == np.float32
    assert headers["f"].fortran_order
    chunks = list(iter_npz_chunks(tmp_path / "a.npz", "big", chunk_bytes=4000))
    assert len(chunks) == 5 and all(c.size == 1000 for c in chunks)
    np.testing.assert_array_equal(np.concatenate(chunks), big.reshape(-1))
    np.testing.assert_array_equal(read_npz_member(tmp_path / "a.npz", "f"), fortran)
    with pytest.raises(BadGraphError, match="missing required key 'nope'"):
        next(iter_npz_chunks(tmp_path / "a.npz", "nope"))


def test_real_reference_files_load(shared_data: Path) -> None:
    paths = sorted((shared_data / "real-tpu" / "reference").glob("*.npz"))
    assert paths
    for path in paths:
        g = load_npz(path)
        assert g.num_configs > 0
        assert g.is_tile == path.name.startswith("op_tuning")


def test_iter_npz_rows(tmp_path: Path) -> None:
    arrays = layout_arrays(60, 9, 6)
    np.savez_compressed(tmp_path / "g.npz", **arrays)
    blocks = list(iter_npz_rows(tmp_path / "g.npz", "node_config_feat", rows=4))
    assert [b.shape for b in blocks] == [(4, 6, 18), (4, 6, 18), (1, 6, 18)]
    np.testing.assert_array_equal(np.concatenate(blocks), arrays["node_config_feat"])
