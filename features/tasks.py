"""Build tasks: cache keys, done markers, the norm and graph passes of one graph, the worker pool.

A graph's key holds its input identity (path, size, mtime), the transform parameters, the build
code digest (:mod:`features.buildconfig`), the on-disk format and the norm stats. The
``done/<split>/<stem>.json`` marker holding it is written *last*, so a killed run leaves nothing
that looks complete and a rerun redoes only what is missing or stale.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable

import numpy as np
from tqdm import tqdm

from tpurank.atomic import save_npz, write_json
from tpurank.collections import Collection, npz_dir, pb_dir
from features.buildconfig import BuildConfig, code_digest
from features.configcodes import load_coded
from features.dot_features import DotDims
from features.io import BadGraphError, Graph, GraphFile
from features.processed import FORMAT_VERSION, _moments, graph_dir, load_norm, save_processed
from features.repair import REPAIRED_SPLIT, repair_graph
from features.stages import (NodeStage, node_feature_names, node_stage, process_graph, subsample,
                             tile_config_feat)
from features import tabular as tab


def _identity(path: Path) -> dict[str, Any]:
    st = path.stat()
    return {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


def _pb_path(data: str, gf: GraphFile) -> Path:
    rel = gf.path.relative_to(npz_dir(data))
    return pb_dir(data) / rel.with_suffix(".pb")


def _exact_dims(cfg: BuildConfig, gf: GraphFile) -> dict[int, DotDims] | None:
    """Exact dot dims from the raw proto when present."""
    pb = _pb_path(cfg.data, gf)
    if not (cfg.exact_dot and cfg.dot_features) or gf.collection.is_tile or not pb.is_file():
        return None
    from features.hlo import exact_dot_dims

    return exact_dot_dims(pb)


def _load(cfg: BuildConfig, path: Path, split: str, configs: bool = True) -> tuple[Graph, list[str]]:
    """The graph and the repairs made to it (a test graph's, :mod:`features.repair`); layout
    configs streamed out of the npz into codes. ``configs=False``: nodes only (the norm pass),
    the big member is not even decompressed. A train/valid graph that would need a repair is an
    error naming the file: those are skipped (``--skip-bad-report``), never repaired (any other
    error gets the file's name from :func:`_named`)."""
    graph, repairs = repair_graph(load_coded(path, cfg.config_chunk, configs=configs))
    if repairs and split != REPAIRED_SPLIT:
        raise BadGraphError(path, f"needs a repair ({'; '.join(repairs)}), which only a test graph gets; "
                                  "skip it: features validate --skip-bad --report R, then features build "
                                  "--skip-bad-report R")
    return graph, repairs


@dataclass(frozen=True)
class Task:
    cfg: BuildConfig
    features_dir: str
    file: GraphFile
    norm_key: str = ""


def _marker(features_dir: str, coll: Collection, split: str, stem: str, kind: str) -> Path:
    return Path(features_dir) / coll.slug / kind / split / f"{stem}.json"


def _read_marker(path: Path, key: str) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if data.get("key") == key else None


def _input_key(task: Task, kind: str, *extra: Any) -> str:
    """The cache key of a pass over one graph: its inputs (the npz, and the proto when it is
    read), the transform parameters, the build code, then ``extra``."""
    cfg, gf = task.cfg, task.file
    pb = _pb_path(cfg.data, gf)
    return _key(kind, _identity(gf.path), _identity(pb) if pb.is_file() and cfg.exact_dot else None,
                cfg.transform_params(), code_digest(), *extra)


def _norm_key(task: Task) -> tuple[str, Path, Path, Path]:
    """The norm pass's key, marker, moments and saved node stage of one graph."""
    gf = task.file
    marker = _marker(task.features_dir, gf.collection, gf.split, gf.stem, "norm_parts")
    return _input_key(task, "norm"), marker, marker.with_suffix(".npz"), marker.with_suffix(".stage.npz")


def _norm_cached(task: Task) -> dict[str, Any] | None:
    key, marker, npz, _ = _norm_key(task)
    if _read_marker(marker, key) and npz.is_file():
        return {"stem": task.file.stem, "collection": task.file.collection.name, "cached": True,
                "npz": str(npz)}
    return None


def _norm_task(task: Task) -> dict[str, Any]:
    """Train graph -> moments of its (unnormalised) node / tile config features (cache hits are
    answered by :func:`_run`'s probe, :func:`_norm_cached`)."""
    cfg, gf = task.cfg, task.file
    key, marker, npz, stage = _norm_key(task)
    graph, _ = _load(cfg, gf.path, gf.split, configs=False)
    exact = _exact_dims(cfg, gf)
    ns = node_stage(graph, cfg, exact)
    arrays = {"node": _moments(ns.node_feat)}
    if graph.is_tile:
        arrays["config"] = _moments(tile_config_feat(graph, np.arange(graph.num_configs), cfg))
    _save_stage(stage, key, ns)  # the graph pass reuses it: the node stage runs once per graph
    save_npz(npz, **arrays)
    write_json(marker, {"key": key})
    return {"stem": gf.stem, "collection": gf.collection.name, "cached": False, "npz": str(npz)}


#: the arrays of a NodeStage saved by the norm pass (the optional ones only when present)
STAGE_ARRAYS = ("node_feat", "node_opcode", "edge_index", "orig_node_ids", "config_node_pos",
                "config_graph")


def _save_stage(path: Path, key: str, ns: NodeStage) -> None:
    arrays = {k: getattr(ns, k) for k in STAGE_ARRAYS if getattr(ns, k) is not None}
    save_npz(path, key=np.array(key), stats=np.array(json.dumps(ns.stats)), **arrays)


def _load_stage(task: Task) -> NodeStage | None:
    """The node stage the norm pass computed for this train graph (None when absent or stale)."""
    key, _, _, path = _norm_key(task)
    try:
        with np.load(path, allow_pickle=False) as d:
            if str(d["key"]) != key:
                return None
            return NodeStage(names=node_feature_names(task.cfg), stats=json.loads(str(d["stats"])),
                             **{k: d[k] if k in d.files else None for k in STAGE_ARRAYS})
    except (OSError, ValueError, KeyError):
        return None


def _graph_key(task: Task) -> tuple[str, Path, Path, Path]:
    fd, gf = task.features_dir, task.file
    key = _input_key(task, "graph", FORMAT_VERSION, task.norm_key)
    return (key, _marker(fd, gf.collection, gf.split, gf.stem, "done"),
            graph_dir(fd, gf.collection, gf.split, gf.stem),
            part_path(fd, gf.collection, gf.split, gf.stem))


def _graph_cached(task: Task) -> dict[str, Any] | None:
    """The summary of an up-to-date graph entry, or None when it must be (re)built."""
    key, marker, out_dir, part = _graph_key(task)
    done = _read_marker(marker, key)
    if done and (out_dir / "meta.json").is_file() and (part.is_file() or not task.cfg.tabular):
        return dict(done["summary"], cached=True)
    return None


def _graph_task(task: Task) -> dict[str, Any]:
    """One graph: processed arrays + tabular part + done marker (written last); cache hits are
    answered by :func:`_run`'s probe, :func:`_graph_cached`."""
    cfg, gf = task.cfg, task.file
    coll, split, stem = gf.collection, gf.split, gf.stem
    key, marker, out_dir, part = _graph_key(task)
    start = time.perf_counter()
    graph, repairs = _load(cfg, gf.path, split)
    exact = _exact_dims(cfg, gf)
    norm = load_norm(task.features_dir, coll) if task.norm_key else None
    frames: list[Any] = []
    names = tab.tabular_feature_names(graph.is_tile, cfg.heuristic)
    stage = _load_stage(task) if split == "train" else None
    pg = process_graph(graph, coll, split, stem, norm, cfg, exact, stage=stage,
                       tabular_sink=(lambda idx, feats: frames.append((idx, feats))) if cfg.tabular else None)
    pg.meta.update(source=_identity(gf.path), exact_dot=exact is not None,
                   node_stage_reused=stage is not None, repairs=repairs)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    save_processed(pg, out_dir)
    if cfg.tabular:
        idx_all = np.concatenate([f[0] for f in frames]) if frames else np.zeros(0, np.int64)
        feats = np.concatenate([f[1] for f in frames]) if frames else np.zeros((0, len(names)), np.float32)
        target = None if split == "test" else pg.target
        if split == "train":
            keep = tabular_train_positions(len(idx_all), cfg, coll.slug, stem)
            idx_all, feats, target = idx_all[keep], feats[keep], target[keep]
        tab.write_parquet(tab.make_frame(stem, idx_all, target, feats, names), part)
    summary = dict(pg.meta["prune"], configs=int(len(pg.config_index)),
                   source_configs=int(pg.meta["num_source_configs"]),
                   duplicates=int(pg.meta["num_duplicates"]), stem=stem, split=split, repairs=repairs,
                   collection=coll.name, seconds=round(time.perf_counter() - start, 3))
    write_json(marker, {"key": key, "summary": summary})
    _norm_key(task)[3].unlink(missing_ok=True)  # the node stage is used once: the graph is done
    return dict(summary, cached=False)


def tabular_train_positions(num_configs: int, cfg: BuildConfig, collection_slug: str,
                            stem: str) -> np.ndarray:
    """Positions, in a processed train graph's config order, of its LightGBM tabular rows: all of
    them, or the seeded subset of ``tabular_max_train_rows``. Out-of-fold predictions of train
    graphs by the other models use the same rows, so their cost stays bounded per graph and the
    blend finds every model on the same configs."""
    cap = cfg.tabular_max_train_rows
    if cap and num_configs > cap:
        return subsample(num_configs, cap, cfg.seed, f"tab/{collection_slug}/{stem}")
    return np.arange(num_configs)


def part_path(features_dir: str | os.PathLike, coll: Collection, split: str, stem: str) -> Path:
    return Path(features_dir) / coll.slug / "tabular" / "parts" / split / f"{stem}.parquet"


def _run(fn: Callable[[Task], dict[str, Any]], tasks: list[Task], jobs: int, desc: str,
         progress: bool, probe: Callable[[Task], dict[str, Any] | None]) -> list[dict[str, Any]]:
    """Run tasks (largest input first) on a process pool with a progress bar; errors name the
    file. Cache hits are answered by ``probe``, without starting workers."""
    tasks = sorted(tasks, key=lambda t: -t.file.path.stat().st_size)
    hits = [(t, probe(t)) for t in tasks]
    results = [r for _, r in hits if r is not None]
    tasks = [t for t, r in hits if r is None]
    bar = tqdm(total=len(tasks), desc=desc, unit="graph", disable=not progress or not tasks,
               file=sys.stderr)
    if jobs <= 1 or len(tasks) <= 1:
        for t in tasks:
            results.append(_named(fn, t))
            bar.update()
    else:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
            futures = [pool.submit(_named, fn, t) for t in tasks]
            try:
                for fut in as_completed(futures):
                    results.append(fut.result())
                    bar.update()
            except BaseException:  # fail fast: finished graphs stay cached for the rerun
                pool.shutdown(wait=False, cancel_futures=True)
                raise
    bar.close()
    return results


def _named(fn: Callable[[Task], dict[str, Any]], task: Task) -> dict[str, Any]:
    """Run ``fn``; any error becomes a picklable ``GraphBuildError`` whose message names the file
    (worker exceptions cross the process boundary; some, like BadGraphError, do not pickle)."""
    try:
        return fn(task)
    except Exception as exc:
        path = str(task.file.path)
        msg = str(exc) if path in str(exc) else f"{path}: {type(exc).__name__}: {exc}"
        raise GraphBuildError(f"feature build failed: {msg}\n{traceback.format_exc()}") from None


class GraphBuildError(RuntimeError):
    """A graph could not be featurized; the message names the file and the problem."""
