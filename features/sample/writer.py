"""Dataset assembly (part of the sample generator, see ``features.sample``)."""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Sequence
import numpy as np
from tpurank.collections import BY_NAME, SPLITS, hidden_runtimes_path, npz_dir

from features.sample.constants import (KAGGLE_CONFIG_FRACTION, KAGGLE_GRAPH_FRACTION, SCALES,
                                       ScaleSpec)
from features.sample.files import (_candidates, _graph_arrays, _rng, _save, _stem,
                                   make_layout_file, write_tile_file)
from features.sample.hlo import FlatGraph
from features.sample.motifs import build_layout_graph
from features.sample.physics_alt import PHYSICS


def _sized_layout_graph(source: str, rng: np.random.Generator, node_range: tuple[int, int],
                        spec: ScaleSpec, configurable_ops: frozenset[str]) -> tuple[FlatGraph, str]:
    """A layout graph whose size is within (about) ``node_range`` and that has enough
    configurable candidates; redraws (deterministically) when a model family misses."""
    lo, hi = node_range
    for _ in range(30):
        target = int(rng.integers(lo, hi + 1))
        b, family = build_layout_graph(source, rng, target)
        fg = b.finalize()
        if (lo <= len(fg.nodes) <= 1.2 * hi
                and len(_candidates(fg, configurable_ops)) >= spec.configurable[0]):
            return fg, family
    return fg, family


def _write_scale(root: Path, spec: ScaleSpec, seed: int, hidden: dict, rows: list,
                 configurable_ops: frozenset[str], physics: str = "tpu") -> None:
    """Every tile, then every layout file of a tiny / small scale."""
    for split, count in zip(SPLITS, spec.tile_counts):
        for i in range(count):
            write_tile_file(root, _rng(seed, "tile:xla", split, i), seed, split, i, spec.tile_nodes,
                            spec.tile_configs, hidden, rows, physics)
    for source in ("xla", "nlp"):
        node_range = spec.nlp_nodes if source == "nlp" else spec.xla_nodes
        for split, count in zip(SPLITS, spec.layout_counts):
            for i in range(count):
                rng = _rng(seed, "layout", source, split, i)
                fg, family = _sized_layout_graph(source, rng, node_range, spec, configurable_ops)
                stem = _stem(family, i, 3, seed, source, split)
                base = _graph_arrays(fg, rng)
                for search in ("default", "random"):
                    coll = BY_NAME[f"layout:{source}:{search}"]
                    srng = _rng(seed, coll.name, split, i)
                    n = spec.test_configs if split == "test" and spec.test_configs else \
                        int(srng.integers(spec.layout_configs[0], spec.layout_configs[1] + 1))
                    arrays, target = make_layout_file(fg, base, search, n, spec, srng,
                                                      configurable_ops, physics)
                    _save(root, coll, split, stem, arrays, target, hidden, rows,
                          ";".join(map(str, range(n))))


ALL_SCALES = (*sorted(SCALES), "kaggle")


def generate_dataset(out_dir: str | os.PathLike, scale: str = "tiny", seed: int = 0,
                     configurable_ops: Sequence[str] = ("convolution", "dot", "reshape"),
                     config_fraction: float = KAGGLE_CONFIG_FRACTION,
                     graph_fraction: float = KAGGLE_GRAPH_FRACTION,
                     jobs: int = 1, progress: bool = False, physics: str = "tpu") -> Path:
    """Write a complete sample dataset (Kaggle layout) to ``out_dir`` and return its path;
    ``scale="kaggle"``: :mod:`features.sample.kaggle` over ``jobs`` processes (0 = all cores).

    Written into a temporary sibling renamed into place with ``.complete`` inside, so an
    interrupted run leaves nothing half-written. An existing ``out_dir`` is replaced only if it
    is empty or a previous sample (has ``.complete`` or ``npz_all``).
    """
    if scale not in ALL_SCALES:
        raise ValueError(f"unknown scale {scale!r}; expected one of {list(ALL_SCALES)}")
    if physics not in PHYSICS or (physics != "tpu" and scale == "kaggle"):
        raise ValueError(f"physics {physics!r}: expected one of {PHYSICS} (kaggle scale: tpu only)")
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()) and not ((out / ".complete").exists()
                                                     or (out / "npz_all").exists()):
        raise FileExistsError(f"{out} exists and is not a generated sample; refusing to replace")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        hidden: dict[str, np.ndarray] = {}
        rows: list[tuple[str, str]] = []
        ops = frozenset(configurable_ops)
        if scale == "kaggle":
            from features.sample import kaggle

            hidden, rows = kaggle.write_kaggle(tmp, seed, config_fraction, graph_fraction,
                                               tuple(sorted(ops)), jobs, progress)
            scale = f"kaggle config_fraction={config_fraction:g} graph_fraction={graph_fraction:g}"
        else:
            _write_scale(tmp, SCALES[scale], seed, hidden, rows, ops, physics)
        hp = hidden_runtimes_path(tmp)
        hp.parent.mkdir(parents=True, exist_ok=True)
        np.savez(hp, **hidden)
        (tmp / "sample_submission.csv").write_text(
            "".join(f"{sid},{top}\n" for sid, top in [("ID", "TopConfigs"), *sorted(rows)]))
        (tmp / ".complete").write_text(f"scale={scale} seed={seed}"
                                       + (f" physics={physics}" if physics != "tpu" else "") + "\n")
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        if out.exists():
            os.replace(out, old)
        os.replace(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m features.sample",
                                description="Write the generated TpuGraphs-like sample dataset.")
    p.add_argument("--out", dest="out_dir", metavar="DIR", required=True,
                   help="output data root (Kaggle layout)")
    p.add_argument("--scale", default="tiny", choices=ALL_SCALES,
                   help="tiny | small (quality samples) | kaggle (the real shape: a stress dataset)")
    p.add_argument("--config-fraction", type=float, default=KAGGLE_CONFIG_FRACTION,
                   help="kaggle: share of the real config counts (default 1/32)")
    p.add_argument("--graph-fraction", type=float, default=KAGGLE_GRAPH_FRACTION,
                   help="kaggle: share of the real graph counts (default 0.25)")
    p.add_argument("--jobs", type=int, default=0, help="kaggle: worker processes (0 = all cores)")
    p.add_argument("--seed", type=int, default=0, help="dataset seed (output is byte-identical per seed)")
    p.add_argument("--physics", default="tpu", choices=PHYSICS,
                   help="cost model of the runtimes: tpu, or alt (features.sample.physics_alt)")
    p.add_argument("--configurable-ops", default="convolution,dot,reshape",
                   type=lambda v: tuple(s.strip() for s in v.split(",") if s.strip()),
                   help="comma-separated opcodes that may be configurable in layout graphs")
    a = p.parse_args(argv)
    t0 = time.time()
    out = generate_dataset(**vars(a), progress=True)
    n = sum(1 for _ in npz_dir(out).rglob("*.npz"))
    print(f"wrote {n} graph files to {out} ({a.scale}, seed {a.seed}) in {time.time() - t0:.1f}s")
    return 0
