"""The alt cost physics: its terms behave as documented, and a tiny alt dataset has the same
graphs and configs as the tpu one with other runtimes."""

from __future__ import annotations

import numpy as np
import pytest

from features.sample.hlo import HloBuilder
from features.sample.layout_cost import PERM_ID, PERMS, desc_id
from features.sample.physics_alt import (AltLayoutCostModel, alt_tile_runtime, copy_cost,
                                         cost_models, stored_bytes)


def test_stored_bytes_pad_to_64_lanes_and_row_tiles():
    rm = desc_id(2)
    assert stored_bytes((16, 64), "f32")[rm] == 16 * 64 * 4  # exact tiles, full bursts
    assert stored_bytes((16, 3), "f32")[rm] == 16 * 64 * 4  # minor 3 padded to 64 lanes
    # bf16: 64 lanes are 128 bytes, half a 256-byte burst
    assert stored_bytes((32, 64), "bf16")[rm] == 32 * 256


def test_copy_cost_rules():
    shape = (64, 128, 256)
    ids = {p: i for i, p in enumerate(PERMS[3])}
    a = ids[(2, 1, 0)]
    assert copy_cost(shape, "f32", a, a) == 0.0
    major = copy_cost(shape, "f32", a, ids[(2, 0, 1)])  # minor kept
    swap = copy_cost(shape, "f32", a, ids[(1, 2, 0)])  # two minor dims swapped
    gather = copy_cost(shape, "f32", a, ids[(0, 2, 1)])
    assert 0 < major < swap < gather


def _dot_graph():
    b = HloBuilder()
    x = b.param((256, 512), "bf16")
    w = b.param((512, 1024), "bf16")
    y = b.dot(x, w, (1,), (0,))
    t = b.transpose(y, (1, 0))
    b.ew("negate", t)
    return b.finalize()


def test_layout_runtimes_follow_the_dot_rules():
    fg = _dot_graph()
    dot = next(u for u, nd in enumerate(fg.nodes) if nd.op == "dot")
    model = AltLayoutCostModel(fg, np.array([dot]))
    rm, cm = desc_id(2), PERM_ID[2][(0, 1)]
    # (default, default), input column-major (contraction dim 1 second-minor: x1.15),
    # output M-minor (write x1.3, but then the transpose becomes a bitcast)
    out = np.array([[-1], [-1], [cm]])
    inp = np.array([[-1], [cm], [-1]])
    rt = model.runtimes(out, inp, np.full((3, 1), -1))
    assert rt.shape == (3,) and np.all(np.isfinite(rt)) and np.all(rt > 0)
    assert rt[1] > rt[0]  # a copy of the LHS plus the second-minor contraction penalty
    assert rt[2] != rt[0]
    again = model.runtimes(out, inp, np.full((3, 1), -1))
    assert np.array_equal(rt, again)


def test_tile_runtime_spill_and_steps():
    info = {"kind": "dot", "dtype": "bf16", "contract": 1024, "cin": 1024, "kernel_shape": (1024, 2048),
            "out_shape": (4096, 2048), "layout": (1, 0), "in_bytes": 2 * (4096 * 1024 + 1024 * 2048)}
    feats = np.zeros((3, 24), np.float32)
    feats[:, 0:2] = [[128, 16], [128, 16], [128, 16]]  # full contraction per step
    feats[0, 8:10] = [1, 1]  # 8 x 128 tiles: many steps
    feats[1, 8:10] = [32, 4]  # 256 x 512
    feats[2, 8:10] = [512, 16]  # 4096 x 2048: one step, spills the 8 MiB local memory
    rt = alt_tile_runtime(info, feats)
    assert np.all(np.isfinite(rt)) and rt[1] < rt[0] and rt[1] < rt[2]


def test_cost_models_registry():
    from features.sample.layout_cost import LayoutCostModel

    assert cost_models("tpu")[0] is LayoutCostModel
    assert cost_models("alt")[0] is AltLayoutCostModel
    with pytest.raises(ValueError, match="unknown physics"):
        cost_models("gpu")


def test_tiny_alt_dataset_same_graphs_other_runtimes(tmp_path, tiny_root):
    from features.sample import generate_dataset
    from tpurank.collections import npz_dir

    alt = generate_dataset(tmp_path / "alt", scale="tiny", seed=0, physics="alt")
    assert "physics=alt" in (alt / ".complete").read_text()
    files = sorted(p.relative_to(npz_dir(tiny_root)) for p in npz_dir(tiny_root).rglob("*.npz"))
    assert files == sorted(p.relative_to(npz_dir(alt)) for p in npz_dir(alt).rglob("*.npz"))
    differ = 0
    for rel in files:
        with np.load(npz_dir(tiny_root) / rel) as a, np.load(npz_dir(alt) / rel) as b:
            cfg = "config_feat" if "config_feat" in a.files else "node_config_feat"
            assert np.array_equal(a[cfg], b[cfg]) and np.array_equal(a["node_feat"], b["node_feat"])
            if a["config_runtime"].any():
                assert (b["config_runtime"] > 0).all()
                differ += not np.array_equal(np.argsort(a["config_runtime"]), np.argsort(b["config_runtime"]))
    assert differ > len(files) // 3
    with pytest.raises(ValueError, match="physics"):
        generate_dataset(tmp_path / "bad", scale="tiny", physics="gpu")
