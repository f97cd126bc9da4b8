"""Per-file builders shared by every scale (part of the sample generator, see ``features.sample``):
seeds, node arrays, configurable-node choice, one layout / one tile file's arrays."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
from tpurank.collections import BY_NAME, Collection

from features.sample.constants import LAYOUT_NOISE, MACHINE_SPEED, OPCODE_IDS, ScaleSpec, TILE_NOISE
from features.sample.hlo import FlatGraph, featurize
from features.sample.motifs import build_tile_kernel
from features.sample.layout_search import _slot_spaces, encode_node_config_feat, sample_layout_configs
from features.sample.tile_cost import sample_tile_configs, sample_tile_configs_default
from features.sample.physics_alt import cost_models


def _rng(seed: int, *key: object) -> np.random.Generator:
    h = zlib.crc32("/".join(map(str, key)).encode())
    return np.random.default_rng(np.random.SeedSequence([seed, h]))


def _stem(name: str, i: int, width: int, seed: int, source: str, split: str) -> str:
    """``name_index_crc``: the crc of (seed, source, split, index) lets the oracle check a name."""
    return f"{name}_{i:0{width}d}_{zlib.crc32(f'{seed}{source}{split}{i}'.encode()):08x}"


def _save(root: Path, coll: Collection, split: str, stem: str, arrays: dict[str, np.ndarray],
          target: np.ndarray, hidden: dict, rows: list, top: str) -> None:
    """Write one npz; a test file's runtimes go to ``hidden`` (zeroed in the file) and it gets a
    sample-submission row ``top``."""
    if split == "test":
        hidden[coll.submission_id(stem)] = target.astype(np.float64)
        arrays["config_runtime"] = np.zeros_like(arrays["config_runtime"])
        rows.append((coll.submission_id(stem), top))
    path = coll.split_dir(root, split) / f"{stem}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        np.savez_compressed(fh, **arrays)


def _int_dtype(rng: np.random.Generator) -> type:
    return np.int32 if rng.random() < 0.3 else np.int64  # real files mix int32 and int64


def _graph_arrays(fg: FlatGraph, rng: np.random.Generator) -> dict[str, np.ndarray]:
    it = _int_dtype(rng)
    ops = np.array([OPCODE_IDS[nd.op] for nd in fg.nodes], it)
    return {"node_feat": featurize(fg), "node_opcode": ops, "edge_index": fg.edges.astype(it)}


def _candidates(fg: FlatGraph, ops: frozenset[str]) -> list[int]:
    """Entry nodes that may be configurable: an op in ``ops`` with a non-scalar output."""
    return [u for u in range(fg.entry_start, len(fg.nodes))
            if fg.nodes[u].op in ops and fg.nodes[u].shape]


def _choose_configurable(fg: FlatGraph, rng: np.random.Generator, lo: int, hi: int,
                         ops: frozenset[str]) -> np.ndarray:
    cands = _candidates(fg, ops)
    if not cands:
        raise RuntimeError("graph has no configurable node")
    k = min(len(cands), int(rng.integers(lo, hi + 1)))
    return np.sort(rng.choice(cands, size=k, replace=False))


def make_layout_file(fg: FlatGraph, base: dict[str, np.ndarray], search: str, n_configs: int,
                     spec: ScaleSpec, rng: np.random.Generator, configurable_ops: frozenset[str],
                     physics: str = "tpu") -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Arrays of one layout npz (graph arrays ``base``) and its measured runtimes (ns, float)."""
    ids = _choose_configurable(fg, rng, *spec.configurable, configurable_ops)
    spaces = _slot_spaces(fg, ids)
    cfg = sample_layout_configs(rng, spaces, n_configs, search)
    cfg = cfg[rng.permutation(n_configs)]  # no positional leak (the pure default is not first)
    model = cost_models(physics)[0](fg, ids)
    true = model.runtimes(cfg[:, :, 0], cfg[:, :, 1], cfg[:, :, 2])
    measured = true * np.exp(rng.normal(0.0, LAYOUT_NOISE, size=len(true)))
    splits = fg.splits.astype(np.int64)
    arrays = dict(base, node_config_ids=ids.astype(_int_dtype(rng)),  # draws in this order
                  node_config_feat=encode_node_config_feat(cfg, spaces),
                  config_runtime=np.round(measured).astype(np.int64),
                  node_splits=splits.reshape(1, -1) if rng.random() < 0.5 else splits)
    return arrays, arrays["config_runtime"].astype(np.float64)


def write_tile_file(root: Path, rng: np.random.Generator, seed: int, split: str, i: int,
                    nodes: tuple[int, int], configs: tuple[int, int], hidden: dict, rows: list,
                    physics: str = "tpu") -> None:
    """Tile npz ``i`` of ``split`` (``_save``): a kernel of ``nodes`` (lo, hi) nodes with ``configs``
    (lo, hi) configs, its target the normalized runtimes."""
    tile_runtime = cost_models(physics)[1]
    b, info = build_tile_kernel(rng, int(rng.integers(nodes[0], nodes[1] + 1)))
    fg = b.finalize()
    n = int(rng.integers(configs[0], configs[1] + 1))
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
    _save(root, BY_NAME["tile:xla"], split, _stem(info["kind"], i, 4, seed, "", split), arrays,
          runtime / norm, hidden, rows, "0;1;2;3;4")
