"""Per-file builders shared by every scale (part of the sample generator, see ``features.sample``):
seeds, node arrays, configurable-node choice, one layout / one tile file's arrays."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from features.sample.constants import LAYOUT_NOISE, MACHINE_SPEED, OPCODE_IDS, ScaleSpec, TILE_NOISE
from features.sample.hlo import FlatGraph, featurize
from features.sample.motifs import build_tile_kernel
from features.sample.layout_search import _slot_spaces, encode_node_config_feat, sample_layout_configs
from features.sample.tile_cost import sample_tile_configs, sample_tile_configs_default
from features.sample.physics_alt import cost_models


def _rng(seed: int, *key: object) -> np.random.Generator:
    h = zlib.crc32("/".join(map(str, key)).encode())
    return np.random.default_rng(np.random.SeedSequence([seed, h]))


def _int_dtype(rng: np.random.Generator) -> type:
    return np.int32 if rng.random() < 0.3 else np.int64  # real files mix int32 and int64


def _graph_arrays(fg: FlatGraph, rng: np.random.Generator) -> dict[str, np.ndarray]:
    it = _int_dtype(rng)
    ops = np.array([OPCODE_IDS[nd.op] for nd in fg.nodes], it)
    return {"node_feat": featurize(fg), "node_opcode": ops, "edge_index": fg.edges.astype(it)}


def _choose_configurable(fg: FlatGraph, rng: np.random.Generator, lo: int, hi: int,
                         ops: frozenset[str]) -> np.ndarray:
    cands = [u for u in range(fg.entry_start, len(fg.nodes))
             if fg.nodes[u].op in ops and fg.nodes[u].shape]
    if not cands:
        raise RuntimeError("graph has no configurable node")
    k = min(len(cands), int(rng.integers(lo, hi + 1)))
    return np.sort(rng.choice(cands, size=k, replace=False))


@dataclass
class LayoutGraph:
    stem: str
    fg: FlatGraph
    base: dict[str, np.ndarray]


def make_layout_file(lg: LayoutGraph, search: str, n_configs: int, spec: ScaleSpec,
                     rng: np.random.Generator,
                     configurable_ops: frozenset[str],
                     physics: str = "tpu") -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Arrays of one layout npz and the true runtimes (ns, float) under ``physics``."""
    ids = _choose_configurable(lg.fg, rng, *spec.configurable, configurable_ops)
    spaces = _slot_spaces(lg.fg, ids)
    cfg = sample_layout_configs(rng, spaces, n_configs, search)
    cfg = cfg[rng.permutation(n_configs)]  # no positional leak (the pure default is not first)
    model = cost_models(physics)[0](lg.fg, ids)
    true = model.runtimes(cfg[:, :, 0], cfg[:, :, 1], cfg[:, :, 2])
    measured = true * np.exp(rng.normal(0.0, LAYOUT_NOISE, size=len(true)))
    it = _int_dtype(rng)
    splits = lg.fg.splits.astype(np.int64)
    arrays = dict(lg.base)
    arrays.update(
        node_config_ids=ids.astype(it),
        node_config_feat=encode_node_config_feat(cfg, spaces),
        config_runtime=np.round(measured).astype(np.int64),
        node_splits=splits.reshape(1, -1) if rng.random() < 0.5 else splits,
    )
    return arrays, arrays["config_runtime"].astype(np.float64)


def make_tile_file(rng: np.random.Generator, spec: ScaleSpec,
                   physics: str = "tpu") -> tuple[str, dict, np.ndarray]:
    tile_runtime = cost_models(physics)[1]
    b, info = build_tile_kernel(rng, int(rng.integers(spec.tile_nodes[0], spec.tile_nodes[1] + 1)))
    fg = b.finalize()
    n = int(rng.integers(spec.tile_configs[0], spec.tile_configs[1] + 1))
    feats = sample_tile_configs(rng, info, n)
    feats = feats[rng.permutation(n)]  # the default row is not at a fixed position
    true = tile_runtime(info, feats)
    default_true = float(tile_runtime(info, sample_tile_configs_default(info))[0])
    machine = rng.integers(len(MACHINE_SPEED), size=n)
    speed = np.array(MACHINE_SPEED)[machine]
    runtime = np.round(true * speed * np.exp(rng.normal(0.0, TILE_NOISE, n))).astype(np.int64)
    norm = np.round(default_true * speed).astype(np.int64)
    arrays = _graph_arrays(fg, rng)
    arrays.update(config_feat=feats, config_runtime=runtime, config_runtime_normalizers=norm,
                  node_splits=fg.splits.astype(np.int64))
    return info["kind"], arrays, runtime / norm
