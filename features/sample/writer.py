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
from pathlib import Path
from typing import Sequence
import numpy as np
from tpurank.collections import COLLECTIONS, hidden_runtimes_path, npz_dir

from features.sample.constants import SCALES, ScaleSpec
from features.sample.files import LayoutGraph, _graph_arrays, _rng, make_layout_file, make_tile_file
from features.sample.hlo import FlatGraph
from features.sample.motifs import build_layout_graph
from features.sample.physics_alt import PHYSICS


def _save(path: Path, arrays: dict[str, np.ndarray]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        np.savez_compressed(fh, **arrays)


def _split_counts(counts: tuple[int, int, int]) -> dict[str, int]:
    return dict(zip(("train", "valid", "test"), counts))


def _write_tile(root: Path, spec: ScaleSpec, seed: int, hidden: dict, rows: list,
                physics: str = "tpu") -> None:
    coll = next(c for c in COLLECTIONS if c.is_tile)
    for split, count in _split_counts(spec.tile_counts).items():
        for i in range(count):
            rng = _rng(seed, coll.name, split, i)
            kind, arrays, target = make_tile_file(rng, spec, physics)
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
                  configurable_ops: frozenset[str], physics: str = "tpu") -> None:
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
                                                         configurable_ops, physics)
                    if split == "test":
                        sid = coll.submission_id(stem)
                        hidden[sid] = target_rt
                        arrays["config_runtime"] = np.zeros_like(arrays["config_runtime"])
                        rows.append((sid, ";".join(map(str, range(n)))))
                    _save(coll.split_dir(root, split) / f"{stem}.npz", arrays)


ALL_SCALES = (*sorted(SCALES), "kaggle")


def generate_dataset(out_dir: str | os.PathLike, scale: str = "tiny", seed: int = 0,
                     configurable_ops: Sequence[str] = ("convolution", "dot", "reshape"),
                     config_fraction: float | None = None, graph_fraction: float | None = None,
                     jobs: int = 1, progress: bool = False, physics: str = "tpu") -> Path:
    """Write a complete sample dataset (Kaggle layout) to ``out_dir`` and return its path.

    ``scale="kaggle"`` writes the real data's shape (:mod:`features.sample.kaggle`, a stress
    dataset) with ``config_fraction`` of the real config counts and ``graph_fraction`` of the
    real graph counts, over ``jobs`` worker processes (0 = all cores).

    The tree is written into a temporary sibling directory and renamed into place with
    ``.complete`` already inside, so an interrupted run leaves nothing half-written. An existing
    ``out_dir`` is replaced only if it is empty or a previous sample (has ``.complete`` or
    ``npz_all``).
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

            cf = kaggle.DEFAULT_CONFIG_FRACTION if config_fraction is None else config_fraction
            gf = kaggle.DEFAULT_GRAPH_FRACTION if graph_fraction is None else graph_fraction
            hidden, rows = kaggle.write_kaggle(tmp, seed, cf, gf, tuple(sorted(ops)), jobs,
                                               progress)
            scale = f"kaggle config_fraction={cf:g} graph_fraction={gf:g}"
        else:
            spec = SCALES[scale]
            _write_tile(tmp, spec, seed, hidden, rows, physics)
            _write_layout(tmp, spec, seed, hidden, rows, ops, physics)
        hp = hidden_runtimes_path(tmp)
        hp.parent.mkdir(parents=True, exist_ok=True)
        with open(hp, "wb") as fh:
            np.savez(fh, **hidden)
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["ID", "TopConfigs"])
        w.writerows(sorted(rows))
        (tmp / "sample_submission.csv").write_text(buf.getvalue())
        (tmp / ".complete").write_text(f"scale={scale} seed={seed}"
                                       + (f" physics={physics}" if physics != "tpu" else "") + "\n")
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
    p.add_argument("--scale", default="tiny", choices=ALL_SCALES,
                   help="tiny | small (quality samples) | kaggle (the real shape: a stress dataset)")
    p.add_argument("--config-fraction", type=float, default=None,
                   help="kaggle: share of the real config counts (default 1/32)")
    p.add_argument("--graph-fraction", type=float, default=None,
                   help="kaggle: share of the real graph counts (default 0.25)")
    p.add_argument("--jobs", type=int, default=0, help="kaggle: worker processes (0 = all cores)")
    p.add_argument("--seed", type=int, default=0, help="dataset seed (output is byte-identical per seed)")
    p.add_argument("--physics", default="tpu", choices=PHYSICS,
                   help="cost model of the runtimes: tpu, or alt (features.sample.physics_alt)")
    p.add_argument("--configurable-ops", default="convolution,dot,reshape",
                   help="comma-separated opcodes that may be configurable in layout graphs")
    a = p.parse_args(argv)
    t0 = time.time()
    out = generate_dataset(a.out, a.scale, a.seed,
                           tuple(s.strip() for s in a.configurable_ops.split(",") if s.strip()),
                           a.config_fraction, a.graph_fraction, a.jobs, progress=True,
                           physics=a.physics)
    n = sum(1 for _ in npz_dir(out).rglob("*.npz"))
    print(f"wrote {n} graph files to {out} ({a.scale}, seed {a.seed}) in {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
