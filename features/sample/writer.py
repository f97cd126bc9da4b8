"""Dataset assembly (part of the sample generator, see ``features.sample``)."""

from __future__ import annotations

import argparse
import csv
import io
import os
import shutil
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence
import numpy as np
from tpurank.collections import COLLECTIONS, hidden_runtimes_path, npz_dir

from features.sample.constants import LAYOUT_NOISE, MACHINE_SPEED, OPCODE_IDS, SCALES, ScaleSpec, TILE_NOISE
from features.sample.hlo import FlatGraph, featurize
from features.sample.motifs import build_layout_graph, build_tile_kernel
from features.sample.layout_cost import LayoutCostModel
from features.sample.layout_search import _slot_spaces, encode_node_config_feat, sample_layout_configs
from features.sample.tile_cost import sample_tile_configs, sample_tile_configs_default, tile_runtime


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
                     configurable_ops: frozenset[str]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Arrays of one layout npz and the true runtimes (ns, float)."""
    ids = _choose_configurable(lg.fg, rng, *spec.configurable, configurable_ops)
    spaces = _slot_spaces(lg.fg, ids)
    cfg = sample_layout_configs(rng, spaces, n_configs, search)
    cfg = cfg[rng.permutation(n_configs)]  # no positional leak (the pure default is not first)
    model = LayoutCostModel(lg.fg, ids)
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


def make_tile_file(rng: np.random.Generator, spec: ScaleSpec) -> tuple[str, dict, np.ndarray]:
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


def _save(path: Path, arrays: dict[str, np.ndarray]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        np.savez_compressed(fh, **arrays)


def _split_counts(counts: tuple[int, int, int]) -> dict[str, int]:
    return dict(zip(("train", "valid", "test"), counts))


def _write_tile(root: Path, spec: ScaleSpec, seed: int, hidden: dict, rows: list) -> None:
    coll = next(c for c in COLLECTIONS if c.is_tile)
    for split, count in _split_counts(spec.tile_counts).items():
        for i in range(count):
            rng = _rng(seed, coll.name, split, i)
            kind, arrays, target = make_tile_file(rng, spec)
            stem = f"{kind}_{i:04d}_{zlib.crc32(f'{seed}{split}{i}'.encode()):08x}"
            if split == "test":
                hidden[coll.submission_id(stem)] = target.astype(np.float64)
                arrays["config_runtime"] = np.zeros_like(arrays["config_runtime"])
                rows.append((coll.submission_id(stem), "0;1;2;3;4"))
            _save(coll.split_dir(root, split) / f"{stem}.npz", arrays)


def _sized_layout_graph(source: str, rng: np.random.Generator, node_range: tuple[int, int],
                        spec: ScaleSpec, configurable_ops: frozenset[str]) -> tuple[FlatGraph, str]:
    """A layout graph whose size is within (about) ``node_range`` and that has enough
    configurable candidates; redraws (deterministically) when a model family misses."""
    lo, hi = node_range
    for _ in range(30):
        target = int(rng.integers(lo, hi + 1))
        b, family = build_layout_graph(source, rng, target)
        fg = b.finalize()
        n_cands = sum(1 for u in range(fg.entry_start, len(fg.nodes))
                      if fg.nodes[u].op in configurable_ops and fg.nodes[u].shape)
        if lo <= len(fg.nodes) <= 1.2 * hi and n_cands >= spec.configurable[0]:
            return fg, family
    return fg, family


def _write_layout(root: Path, spec: ScaleSpec, seed: int, hidden: dict, rows: list,
                  configurable_ops: frozenset[str]) -> None:
    for source in ("xla", "nlp"):
        node_range = spec.nlp_nodes if source == "nlp" else spec.xla_nodes
        for split, count in _split_counts(spec.layout_counts).items():
            for i in range(count):
                rng = _rng(seed, "layout", source, split, i)
                fg, family = _sized_layout_graph(source, rng, node_range, spec, configurable_ops)
                stem = f"{family}_{i:03d}_{zlib.crc32(f'{seed}{source}{split}{i}'.encode()):08x}"
                lg = LayoutGraph(stem, fg, _graph_arrays(fg, rng))
                for search in ("default", "random"):
                    coll = next(c for c in COLLECTIONS
                                if c.source == source and c.search == search)
                    srng = _rng(seed, coll.name, split, i)
                    lo, hi = spec.layout_configs
                    n = spec.test_configs if split == "test" and spec.test_configs else \
                        int(srng.integers(lo, hi + 1))
                    arrays, target_rt = make_layout_file(lg, search, n, spec, srng,
                                                         configurable_ops)
                    if split == "test":
                        sid = coll.submission_id(stem)
                        hidden[sid] = target_rt
                        arrays["config_runtime"] = np.zeros_like(arrays["config_runtime"])
                        rows.append((sid, ";".join(map(str, range(n)))))
                    _save(coll.split_dir(root, split) / f"{stem}.npz", arrays)


def generate_dataset(out_dir: str | os.PathLike, scale: str = "tiny", seed: int = 0,
                     configurable_ops: Sequence[str] = ("convolution", "dot", "reshape")) -> Path:
    """Write a complete sample dataset (Kaggle layout) to ``out_dir`` and return its path.

    The tree is written into a temporary sibling directory and renamed into place with
    ``.complete`` already inside, so an interrupted run leaves nothing half-written. An existing
    ``out_dir`` is replaced only if it is empty or a previous sample (has ``.complete`` or
    ``npz_all``).
    """
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; expected one of {sorted(SCALES)}")
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()) and not ((out / ".complete").exists()
                                                     or (out / "npz_all").exists()):
        raise FileExistsError(f"{out} exists and is not a generated sample; refusing to replace")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        spec = SCALES[scale]
        hidden: dict[str, np.ndarray] = {}
        rows: list[tuple[str, str]] = []
        ops = frozenset(configurable_ops)
        _write_tile(tmp, spec, seed, hidden, rows)
        _write_layout(tmp, spec, seed, hidden, rows, ops)
        hp = hidden_runtimes_path(tmp)
        hp.parent.mkdir(parents=True, exist_ok=True)
        with open(hp, "wb") as fh:
            np.savez(fh, **hidden)
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["ID", "TopConfigs"])
        w.writerows(sorted(rows))
        (tmp / "sample_submission.csv").write_text(buf.getvalue())
        (tmp / ".complete").write_text(f"scale={scale} seed={seed}\n")
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m features.sample",
                                description="Write the generated TpuGraphs-like sample dataset.")
    p.add_argument("--out", required=True, help="output data root (Kaggle layout)")
    p.add_argument("--scale", default="tiny", choices=sorted(SCALES))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--configurable-ops", default="convolution,dot,reshape",
                   help="comma-separated opcodes that may be configurable in layout graphs")
    a = p.parse_args(argv)
    t0 = time.time()
    out = generate_dataset(a.out, a.scale, a.seed,
                           tuple(s.strip() for s in a.configurable_ops.split(",") if s.strip()))
    n = sum(1 for _ in npz_dir(out).rglob("*.npz"))
    print(f"wrote {n} graph files to {out} ({a.scale}, seed {a.seed}) in {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
