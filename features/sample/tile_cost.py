"""Tile cost model (part of the sample generator, see ``features.sample``)."""

from __future__ import annotations

import math
import numpy as np

from features.sample.constants import HBM_BYTES_PER_NS, OP_OVERHEAD_NS, PEAK_FLOP_PER_NS, TYPE_BYTES, VMEM_BUDGET
from features.sample.layout_cost import _mxu_pad, _sublanes


def _tile_units(info: dict) -> list[int]:
    """Elements per bound unit for each output dim: 128 (minor), sublanes (second-minor), 1."""
    shape, layout = info["out_shape"], info["layout"]
    units = [1] * len(shape)
    for d, unit in zip(layout[:2], (128, _sublanes(info["dtype"]))):
        units[d] = unit
    return units


def _default_tile(info: dict) -> tuple[list[int], list[int]]:
    """The compiler's heuristic tile: grow dims minor-first while a quarter of VMEM suffices."""
    shape, layout = info["out_shape"], info["layout"]
    units = _tile_units(info)
    in_per_out = 0.0 if info["contract"] else info["in_bytes"] / max(1, math.prod(shape))
    per_elem = 2.0 * (TYPE_BYTES[info["dtype"]] + 4.0 + 4.0 * bool(info["contract"]) + in_per_out)
    ob = [1] * len(shape)
    elems = 1.0
    for d in layout:
        cap = max(1, -(-shape[d] // units[d]))
        ob[d] = next((v for v in (cap, 64, 32, 16, 8, 4, 2, 1)
                      if v <= cap and elems * v * units[d] * per_elem <= VMEM_BUDGET / 4), 1)
        elems *= ob[d] * units[d]
    ks = info["kernel_shape"]
    limit = {len(ks) - 2: 32, len(ks) - 1: 2}
    return ob, [min(cap, limit.get(d, cap)) for d, cap in enumerate(_kernel_caps(ks))]


def _kernel_caps(ks: tuple[int, ...]) -> list[int]:
    """Most bound units of each kernel dim (units: 128 for the last, 8 for the second-last)."""
    return [max(1, -(-s // (128 if d == len(ks) - 1 else 8 if d == len(ks) - 2 else 1)))
            for d, s in enumerate(ks[:6])]


def _encode_tile(row: np.ndarray, ob: list[int], kb: list[int]) -> None:
    """A config_feat row: kernel bounds from 0, output bounds from 8, each with sum and product."""
    for start, vals in ((0, kb), (8, ob)):
        row[start:start + len(vals)] = vals
        row[start + 6] = sum(vals)
        row[start + 7] = math.prod(vals) if vals else 0


def sample_tile_configs_default(info: dict) -> np.ndarray:
    """(1, 24) config_feat of the compiler's default tile (what normalizers are measured with)."""
    feats = np.zeros((1, 24), np.float32)
    _encode_tile(feats[0], *_default_tile(info))
    return feats


def sample_tile_configs(rng: np.random.Generator, info: dict, n: int) -> np.ndarray:
    """(n, 24) tile config_feat; row 0 is the compiler default."""
    feats = np.zeros((n, 24), np.float32)
    ob0, kb0 = _default_tile(info)
    ocap = [max(1, -(-s // unit)) for s, unit in zip(info["out_shape"][:6], _tile_units(info))]
    kcap = _kernel_caps(info["kernel_shape"])

    steps = (-3, -2, -2, -1, -1, 0, 0, 0, 1, 1, 2, 2)

    def scaled(v: int, cap: int) -> int:  # the autotuner explores powers of two around v
        step = steps[int(rng.integers(len(steps)))]
        return int(min(cap, max(1, round(v * 2.0 ** step))))

    seen: set[tuple[int, ...]] = set()
    for c in range(n):
        ob, kb = ob0, kb0
        for _ in range(6 if c else 0):  # prefer configs not tried yet
            ob = [scaled(v, cap) for v, cap in zip(ob0, ocap)]
            kb = [scaled(v, cap) for v, cap in zip(kb0, kcap)]
            if tuple(ob + kb) not in seen:
                break
        seen.add(tuple(ob + kb))
        _encode_tile(feats[c], ob, kb)
    n_dup = int(round(n * float(rng.uniform(0.0, 0.08))))
    for c in rng.choice(np.arange(1, n), size=min(n_dup, n - 1), replace=False):
        feats[c] = feats[int(rng.integers(c))]
    return feats


def tile_runtime(info: dict, feats: np.ndarray) -> np.ndarray:
    """True runtime (ns) of a fused kernel for each tile config row."""
    shape = np.array(info["out_shape"], float)
    r = len(shape)
    units = np.array(_tile_units(info), float)
    nbytes = TYPE_BYTES[info["dtype"]]
    ob = np.maximum(feats[:, 8:8 + r].astype(float), 1.0)
    ext = np.minimum(ob * units, np.maximum(np.ceil(shape / units) * units, 1))
    n_tiles_d = np.ceil(shape / ext)
    n_tiles = n_tiles_d.prod(axis=1)
    padded_out = (n_tiles_d * ext).prod(axis=1)  # elements incl. tile padding waste
    tile_elems = ext.prod(axis=1)
    lane_ext = ext[:, info["layout"][0]] if r else np.ones(len(feats))
    contract = info["contract"]
    if contract:
        ks = info["kernel_shape"]
        kunits = np.array([1.0] * (len(ks) - 2) + [8.0, 128.0])
        kext = np.minimum(np.maximum(feats[:, :len(ks)].astype(float), 1.0) * kunits, np.array(ks, float))
        cin_tile = kext[:, -2]
        steps = np.ceil(info["cin"] / cin_tile)
        k_pad = steps * cin_tile / info["cin"]
        spatial = np.prod(kext[:, :-2], axis=1) if len(ks) > 2 else 1.0
        tap_steps = math.prod(ks[:-2]) / spatial  # kernel taps per spatial kernel tile
        rows = tile_elems / lane_ext
        fill = np.minimum(1.0, lane_ext / 128.0) * np.minimum(1.0, rows / 128.0) ** 0.3
        flops = 2.0 * padded_out * contract * k_pad * _mxu_pad(int(ks[-1]))
        t_compute = flops / PEAK_FLOP_PER_NS / fill
        in_tile = rows * cin_tile * spatial * nbytes
        w_tile = spatial * cin_tile * kext[:, -1] * nbytes
        total_steps = n_tiles * steps * tap_steps
        bytes_moved = total_steps * (in_tile + w_tile) + padded_out * nbytes
        ws = 2.0 * (in_tile + w_tile) + tile_elems * 4.0
    else:
        in_per_out = info["in_bytes"] / max(1.0, float(np.prod(shape)))
        total_steps = n_tiles
        bytes_moved = padded_out * (nbytes + in_per_out) * (2.0 if info.get("reduce") else 1.0)
        t_compute = padded_out * 2.0 / (PEAK_FLOP_PER_NS / 16)  # VPU
        ws = 2.0 * tile_elems * (nbytes + in_per_out)
        if info["kind"] == "copy":  # transposing copy: short lane runs cost DMA efficiency
            bytes_moved = bytes_moved * (1.0 + 128.0 / np.maximum(lane_ext, 8.0))
    step_bytes = bytes_moved / np.maximum(total_steps, 1.0)
    dma_eff = step_bytes / (step_bytes + 16384.0)
    t_mem = bytes_moved / HBM_BYTES_PER_NS / dma_eff
    spill = np.where(ws > VMEM_BUDGET, 1.0 + 2.5 * (ws / VMEM_BUDGET - 1.0), 1.0)
    # software pipeline: loads of step i+1 overlap compute of step i, but the first load and the
    # last store are exposed, and with few steps the overlap is poor
    steps = np.maximum(total_steps, 1.0)
    body = np.maximum(t_compute, t_mem) + np.minimum(t_compute, t_mem) / steps
    exposed = (step_bytes + tile_elems * nbytes) / HBM_BYTES_PER_NS
    # megacore: two TensorCores split the (parallel) output tiles; one tile leaves a core idle
    balance = np.ceil(n_tiles / 2.0) / (n_tiles / 2.0)
    return (total_steps * 350.0 / 2.0 * balance + body * balance + exposed
            + OP_OVERHEAD_NS) * spill
