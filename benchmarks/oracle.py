"""The true runtime of *any* config of a graph of the sample generator (``features.sample``): an
oracle that judges an autotuner (``models.gnn.search``, in ``benchmarks/search_oracle.py``), never
one it uses.

A generated file stores only the runtimes of the configs the generator drew; the cost models
(``layout_cost``/``tile_cost`` or ``physics_alt``) can price any other config. Every graph draws
from its own seeded stream (``files._rng``), so replaying that stream for the file's index
rebuilds the same graph and kernel exactly; the scale, seed and physics come from the sample's
``.complete`` stamp, the index and split from the file name (checked against its crc).

    oracle = load_oracle("data/sample-small/npz_all/npz/layout/xla/random/test/resnet_001_....npz")
    oracle.runtimes(configs)       # (c, nc, 18) layout or (c, 24) tile -> (c,) ns, no noise
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from features.sample.constants import SCALES
from features.sample.files import _rng, _stem
from features.sample.layout_cost import PERM_ID, complete_layout
from features.sample.physics_alt import cost_models
from features.sample.tile_cost import sample_tile_configs_default

OPS = frozenset(("convolution", "dot", "reshape"))


def sample_stamp(root: Path) -> dict[str, str]:
    """``scale``, ``seed`` (and ``physics``) of a generated data root, from ``.complete``."""
    stamp = root / ".complete"
    if not stamp.is_file():
        raise FileNotFoundError(f"{root}: no .complete stamp; not a generated sample")
    fields = dict(kv.split("=", 1) for kv in stamp.read_text().split() if "=" in kv)
    if fields.get("scale") not in SCALES:
        raise ValueError(f"{root}: scale {fields.get('scale')!r} has no oracle (tiny/small only)")
    return {"physics": "tpu", **fields}


def decode_layouts(configs: np.ndarray, ranks: list[tuple[int, int, int]]) -> np.ndarray:
    """(c, nc, 18) configs -> (c, nc, 3) perm ids (out, in, kernel), -1 = compiler default; a
    tensor given by its most-minor dims only is completed like the generator (rest descending)."""
    configs = np.asarray(configs).astype(np.int64)
    c, nc, _ = configs.shape
    out = np.full((c, nc, 3), -1, np.int64)
    cache: dict[tuple, int] = {}
    for j in range(nc):
        for t in range(3):
            r = ranks[j][t]
            if not r:
                continue
            block = configs[:, j, 6 * t:6 * t + 6]
            keys, inverse = np.unique(block, axis=0, return_inverse=True)
            for k, key in enumerate(map(tuple, keys)):
                minor = [v for v in key if v >= 0]
                if not minor:
                    continue
                if (key, r) not in cache:
                    cache[key, r] = PERM_ID[r][complete_layout(minor[:r], r)]
                out[inverse.reshape(-1) == k, j, t] = cache[key, r]
    return out


@dataclass
class Oracle:
    """True runtimes (ns, noise-free) of configs of one generated graph."""

    kind: str  # "layout" | "tile"
    runtimes_fn: Callable[[np.ndarray], np.ndarray]
    default: np.ndarray  # the compiler's default config (18 per node, or 24)

    def runtimes(self, configs: np.ndarray) -> np.ndarray:
        return np.asarray(self.runtimes_fn(np.asarray(configs)), np.float64)


def _index(stem: str, seed: int, source: str, split: str) -> int:
    name, i, _ = stem.rsplit("_", 2)
    if _stem(name, int(i), len(i), seed, source, split) != stem:
        raise ValueError(f"{stem}: name does not match seed {seed} / {source} / {split}")
    return int(i)


def load_oracle(npz_path: str | Path, configurable_ops: frozenset[str] = OPS) -> Oracle:
    """The oracle of one generated npz (data root = the folder above ``npz_all``)."""
    from features.sample.layout_search import _slot_spaces
    from features.sample.motifs import build_tile_kernel
    from features.sample.writer import _sized_layout_graph

    path = Path(npz_path)
    split, parts = path.parent.name, path.parent.parts
    root = path.parents[6] if parts[-4] == "layout" else path.parents[5]
    stamp = sample_stamp(root)
    spec, seed, physics = SCALES[stamp["scale"]], int(stamp["seed"]), stamp["physics"]
    layout_model, tile_fn = cost_models(physics)
    if parts[-3] == "tile":
        i = _index(path.stem, seed, "", split)
        rng = _rng(seed, "tile:xla", split, i)
        _, info = build_tile_kernel(rng, int(rng.integers(spec.tile_nodes[0], spec.tile_nodes[1] + 1)))
        return Oracle("tile", lambda f: tile_fn(info, f), sample_tile_configs_default(info)[0])
    source = parts[-3]
    i = _index(path.stem, seed, source, split)
    rng = _rng(seed, "layout", source, split, i)
    node_range = spec.nlp_nodes if source == "nlp" else spec.xla_nodes
    fg, _ = _sized_layout_graph(source, rng, node_range, spec, configurable_ops)
    ids = np.load(path)["node_config_ids"].astype(np.int64)
    ranks = [s.ranks for s in _slot_spaces(fg, ids)]
    model = layout_model(fg, ids)

    def layout_runtimes(configs: np.ndarray) -> np.ndarray:
        ids3 = decode_layouts(configs, ranks)
        return model.runtimes(ids3[:, :, 0], ids3[:, :, 1], ids3[:, :, 2])

    return Oracle("layout", layout_runtimes, np.full((len(ids), 18), -1, np.float32))


def check_oracle(npz_path: str | Path, oracle: Oracle | None = None) -> float:
    """Largest relative gap between the oracle and a train/valid file's stored runtimes (the
    generator adds 0.15 % layout / 0.5 % tile noise and machine speeds for tile): a self-check."""
    arrays: Any = np.load(npz_path)
    oracle = oracle or load_oracle(npz_path)
    if oracle.kind == "tile":
        true = oracle.runtimes(arrays["config_feat"])
        measured = arrays["config_runtime"] / arrays["config_runtime_normalizers"]
        true = true / oracle.runtimes(oracle.default[None])[0]
    else:
        true = oracle.runtimes(arrays["node_config_feat"])
        measured = arrays["config_runtime"].astype(np.float64)
    return float(np.max(np.abs(measured / true - 1.0)))
