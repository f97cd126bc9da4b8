"""``--scale kaggle``: a dataset with the real data's counts and shapes — a stress dataset for
time, memory, open files and disk at Kaggle's volume, **not** for model quality (use ``small`` or the
real download to compare models). Generated one graph per worker, ``node_config_feat`` streamed
``chunk_configs`` configs at a time into its zip member. What it reproduces and what it costs:
docs/data.md, "Kaggle-shaped stress data".
"""

from __future__ import annotations

import math
import os
import sys
import zipfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Iterator

import numpy as np
from tqdm import tqdm

from tpurank.collections import BY_NAME, SPLITS
from features.sample.constants import KAGGLE, LAYOUT_NOISE, KaggleSpec
from features.sample.hlo import FlatGraph
from features.sample.layout_cost import LayoutCostModel
from features.sample.layout_search import _slot_spaces, encode_node_config_feat, sample_layout_configs
from features.sample.motifs import build_layout_graph
from features.sample.files import (_candidates, _choose_configurable, _graph_arrays, _int_dtype,
                                   _rng, _stem, write_tile_file)


@dataclass(frozen=True)
class KaggleJob:
    """One unit of work: a tile kernel, or one layout program (its default and random files)."""

    kind: str  # "tile" | "layout"
    source: str  # "xla" | "nlp" (layout) or "xla" (tile)
    split: str
    index: int
    searches: tuple[str, ...] = ()  # layout: which searches have a file for this program


def _scaled(count: int, fraction: float) -> int:
    return max(1, int(round(count * fraction)))


def kaggle_jobs(graph_fraction: float, spec: KaggleSpec = KAGGLE) -> list[KaggleJob]:
    """Every job of a dataset, the big (layout) ones first so the pool finishes evenly."""
    jobs: list[KaggleJob] = []
    for source in ("xla", "nlp"):
        counts = {search: c for s, search, c in spec.layout_counts if s == source}
        for k, split in enumerate(SPLITS):
            per = {search: _scaled(c[k], graph_fraction) for search, c in counts.items()}
            for i in range(max(per.values())):
                jobs.append(KaggleJob("layout", source, split, i,
                                      tuple(s for s in ("default", "random") if i < per[s])))
    for k, split in enumerate(SPLITS):
        jobs += [KaggleJob("tile", "xla", split, i)
                 for i in range(_scaled(spec.tile_counts[k], graph_fraction))]
    return jobs


def _program(rng: np.random.Generator, source: str, spec: KaggleSpec,
             ops: frozenset[str]) -> tuple[FlatGraph, str]:
    """A layout program of a gamma-drawn size (rebuilt a few times when a family misses it)."""
    mean, sd = next((m, s) for name, m, s in spec.node_moments if name == source)
    shape = (mean / sd) ** 2
    target = int(np.clip(rng.gamma(shape, mean / shape), *spec.node_range))
    for _ in range(6):
        b, family = build_layout_graph(source, rng, target)
        fg = b.finalize()
        if 0.6 * target <= len(fg.nodes) <= 1.5 * target and len(_candidates(fg, ops)) >= 20:
            break
    return fg, family


def _log_uniform(rng: np.random.Generator, bounds: tuple[int, int], fraction: float,
                 top_share: float = 0.0) -> int:
    """A config count, log-uniform from ``lo`` to ``fraction`` of ``hi``; the top (the scaled
    ``hi``) itself with probability ``top_share``."""
    lo, hi = bounds[0], max(bounds[0] + 1, int(bounds[1] * fraction))
    if top_share and rng.random() < top_share:
        return hi
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def _config_chunks(rng: np.random.Generator, spaces, n: int, search: str, dup_heavy: bool,
                   chunk: int) -> Iterator[np.ndarray]:
    """(k, nc, 3) perm-id chunks summing to ``n`` configs; a dup-heavy file repeats a small pool."""
    pool = sample_layout_configs(rng, spaces, int(rng.integers(4, 40)), search) if dup_heavy else None
    done = 0
    while done < n:
        k = min(chunk, n - done)
        if pool is not None:
            cfg = pool[rng.integers(len(pool), size=k)]
        else:
            # the pure default (row 0 of a chunk) moves; a single config is row 1 of two
            cfg = sample_layout_configs(rng, spaces, max(k, 2), search)[-k:][rng.permutation(k)]
        done += k
        yield cfg


def _write_member(zf: zipfile.ZipFile, key: str, array: np.ndarray) -> None:
    with zf.open(key + ".npy", "w", force_zip64=True) as fp:
        np.lib.format.write_array(fp, np.ascontiguousarray(array), allow_pickle=False)


def _write_layout_file(path: Path, fg: FlatGraph, base: dict[str, np.ndarray], ids: np.ndarray,
                       rng: np.random.Generator, n: int, search: str, dup_heavy: bool, chunk: int,
                       test: bool) -> np.ndarray:
    """Stream one layout npz (deflate members); returns the true runtimes (float64)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    spaces, model = _slot_spaces(fg, ids), LayoutCostModel(fg, ids)
    splits = fg.splits.astype(np.int64)
    measured = np.empty(n, np.float64)
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)), "fortran_order": False,
              "shape": (n, len(ids), 18)}
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as zf:
        for key, arr in base.items():
            _write_member(zf, key, arr)
        _write_member(zf, "node_config_ids", ids.astype(_int_dtype(rng)))
        _write_member(zf, "node_splits", splits.reshape(1, -1) if rng.random() < 0.5 else splits)
        pos = 0
        with zf.open("node_config_feat.npy", "w", force_zip64=True) as fp:
            np.lib.format.write_array_header_1_0(fp, header)
            for cfg in _config_chunks(rng, spaces, n, search, dup_heavy, chunk):
                fp.write(encode_node_config_feat(cfg, spaces).tobytes())
                true = model.runtimes(cfg[:, :, 0], cfg[:, :, 1], cfg[:, :, 2])
                measured[pos:pos + len(cfg)] = true * np.exp(rng.normal(0.0, LAYOUT_NOISE, len(cfg)))
                pos += len(cfg)
        runtime = np.round(measured).astype(np.int64)
        _write_member(zf, "config_runtime", np.zeros_like(runtime) if test else runtime)
    return runtime.astype(np.float64)


def _layout_job(job: KaggleJob, root: Path, seed: int, fraction: float, spec: KaggleSpec,
                ops: frozenset[str]) -> tuple[dict[str, np.ndarray], list[tuple[str, str]]]:
    rng = _rng(seed, "kaggle-layout", job.source, job.split, job.index)
    fg, family = _program(rng, job.source, spec, ops)
    stem = _stem(family, job.index, 3, seed, job.source, job.split)
    base = _graph_arrays(fg, rng)
    lo = int(np.clip(rng.normal(spec.configurable_mean, spec.configurable_sd), 20, 2000))
    ids = _choose_configurable(fg, rng, lo, lo, ops)
    hidden: dict[str, np.ndarray] = {}
    rows: list[tuple[str, str]] = []
    test = job.split == "test"
    for search in job.searches:
        coll = BY_NAME[f"layout:{job.source}:{search}"]
        srng = _rng(seed, "kaggle", coll.name, job.split, job.index)
        n = spec.test_configs if test else \
            _log_uniform(srng, spec.layout_configs, fraction, spec.max_config_share)
        dup_heavy = job.split == "train" and srng.random() < spec.dup_heavy_share
        target = _write_layout_file(coll.split_dir(root, job.split) / f"{stem}.npz", fg, base, ids,
                                    srng, n, search, dup_heavy, spec.chunk_configs, test)
        if test:
            hidden[coll.submission_id(stem)] = target
            rows.append((coll.submission_id(stem), ";".join(map(str, range(n)))))
    return hidden, rows


def _tile_job(job: KaggleJob, root: Path, seed: int, fraction: float, spec: KaggleSpec
              ) -> tuple[dict[str, np.ndarray], list[tuple[str, str]]]:
    rng = _rng(seed, "kaggle-tile", job.split, job.index)
    n = _log_uniform(rng, spec.tile_configs, fraction)
    if job.split == "test" and job.index < spec.tiny_test_tiles:
        n = int(rng.integers(2, 5))
    hidden: dict[str, np.ndarray] = {}
    rows: list[tuple[str, str]] = []
    write_tile_file(root, rng, seed, job.split, job.index, spec.tile_nodes, (n, n), hidden, rows)
    return hidden, rows


def run_job(job: KaggleJob, root: Path, seed: int, fraction: float, spec: KaggleSpec,
            ops: frozenset[str]) -> tuple[dict[str, np.ndarray], list[tuple[str, str]]]:
    """Write the files of one job under ``root``; returns (hidden targets, submission rows)."""
    if job.kind == "tile":
        return _tile_job(job, root, seed, fraction, spec)
    return _layout_job(job, root, seed, fraction, spec, ops)


def write_kaggle(root: Path, seed: int, config_fraction: float, graph_fraction: float,
                 configurable_ops: tuple[str, ...], jobs: int = 0, progress: bool = True,
                 spec: KaggleSpec = KAGGLE) -> tuple[dict[str, np.ndarray], list[tuple[str, str]]]:
    """Write every graph file of a kaggle-shaped dataset under ``root`` (a temporary tree);
    returns the hidden test targets and the sample-submission rows."""
    if not 0 < config_fraction <= 1 or not 0 < graph_fraction <= 1:
        raise ValueError("config and graph fractions must be in (0, 1]")
    work = kaggle_jobs(graph_fraction, spec)
    run = partial(run_job, root=root, seed=seed, fraction=config_fraction, spec=spec,
                  ops=frozenset(configurable_ops))
    hidden: dict[str, np.ndarray] = {}
    rows: list[tuple[str, str]] = []
    jobs = jobs or os.cpu_count() or 1
    pool = ProcessPoolExecutor(max_workers=jobs) if jobs > 1 else None
    try:
        results = pool.map(run, work, chunksize=1) if pool else map(run, work)
        for h, r in tqdm(results, total=len(work), desc="sample kaggle", unit="graph",
                         disable=not progress, file=sys.stderr):
            hidden.update(h)
            rows += r
    finally:
        if pool:
            pool.shutdown(cancel_futures=True)
    return hidden, rows
