"""``python -m features build``: prune, featurize and cache every graph; write tabular parquet
(outputs, cache keys and resuming: docs/features.md).

Per collection, files in parallel (:func:`features.tasks._run`): a norm pass over the train graphs
(per-graph moments of the unnormalised features, fitted into ``norm.npz``; its node stage is
reused by the graph pass), a graph pass over every graph (:func:`features.stages.process_graph`,
one tabular part per graph), then the parts concatenated into ``tabular/<split>.parquet``.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from tpurank.atomic import remove_dead_temporaries, write_json
from tpurank.collections import Collection, get_collection, parse_collections, npz_dir
from tpurank.config import load_run_config, parse_config, save_run_config
from features.buildconfig import BuildConfig
from features.io import GraphFile, discover
from features.processed import NormStats, _fit, load_norm, norm_path, tabular_path
from features.repair import NO_CONFIGURABLE_NODE, REPAIRED_SPLIT, has_no_configurable_node
from features.stages import node_feature_names
from features.tasks import (Task, _graph_cached, _graph_task, _key, _marker, _norm_cached, _norm_task,
                            _read_marker, _run, part_path)
from features.validate import load_bad_files
from features import tabular as tab


def _files(cfg: BuildConfig, colls: list[Collection], splits: list[str]) -> list[GraphFile]:
    """The files to build: bad files of the validate report skipped; test layout graphs without
    configurable nodes left out too (their configs all tie: the blend ranks them in file order,
    features.repair)."""
    files = discover(cfg.data, colls, splits)
    if cfg.skip_bad_report:
        bad = load_bad_files(cfg.skip_bad_report)
        skipped = [f for f in files if str(f.path.resolve()) in bad]
        for f in skipped:
            print(f"skipping bad file {f.path} (listed in {cfg.skip_bad_report})", file=sys.stderr)
        files = [f for f in files if str(f.path.resolve()) not in bad]
    tied = [f for f in files if f.split == REPAIRED_SPLIT and not f.collection.is_tile
            and has_no_configurable_node(f.path)]
    for f in tied:
        print(f"{f.path}: no configurable node, nothing to featurize ({NO_CONFIGURABLE_NODE})",
              file=sys.stderr)
    return [f for f in files if f not in tied]


def _fit_norm(features_dir: Path, coll: Collection, results: list[dict[str, Any]]) -> NormStats | None:
    if not results:
        try:
            return load_norm(features_dir, coll)
        except FileNotFoundError:
            return None
    node, config = [], []
    for r in sorted(results, key=lambda r: r["stem"]):
        with np.load(r["npz"], allow_pickle=False) as d:
            node.append(d["node"])
            if "config" in d.files:
                config.append(d["config"])
    mean, std = _fit(node)
    cm, cs = _fit(config) if config else (None, None)
    return NormStats(mean, std, [], cm, cs)


def build_features(cfg: BuildConfig) -> Path:
    """Build features for the configured collections/splits; returns the features directory."""
    features_dir = Path(cfg.out) if cfg.out else Path(cfg.work) / "features"
    colls = parse_collections(cfg.collections)
    splits = [s.strip() for s in cfg.splits.split(",") if s.strip()]
    jobs = cfg.jobs or os.cpu_count() or 1
    files = _files(cfg, colls, splits)
    if not files:
        raise FileNotFoundError(f"no npz files under {npz_dir(cfg.data)} for "
                                f"{cfg.collections} / {cfg.splits}")
    fd = str(features_dir)
    _sweep_dead_temporaries(features_dir, colls, splits)
    train = [Task(cfg, fd, f) for f in files if f.split == "train"]
    norm_results = _run(_norm_task, train, jobs, "norm stats", cfg.progress, _norm_cached)
    norm_keys: dict[str, str] = {}
    for coll in colls:
        stats = _fit_norm(features_dir, coll, [r for r in norm_results if r["collection"] == coll.name])
        if stats is None:
            if any(f.collection == coll for f in files):
                raise FileNotFoundError(f"{coll.name}: no train graphs and no saved {norm_path(fd, coll)}; "
                                        "build with the train split first")
            continue
        stats.node_names = node_feature_names(cfg)
        if len(stats.node_names) != len(stats.node_mean):
            raise ValueError(f"{norm_path(fd, coll)}: built with other transform parameters; "
                             "rebuild with --splits including train")
        stats.save(norm_path(fd, coll))
        norm_keys[coll.name] = stats.key()
    tasks = [Task(cfg, fd, f, norm_keys.get(f.collection.name, "")) for f in files]
    start = time.perf_counter()
    results = _run(_graph_task, tasks, jobs, "features", cfg.progress, _graph_cached)
    elapsed = time.perf_counter() - start
    for coll in colls:
        mine = [r for r in results if r["collection"] == coll.name]
        if not mine:
            continue
        slug_dir = features_dir / coll.slug
        if cfg.tabular:
            for split in splits:
                stems = sorted(r["stem"] for r in mine if r["split"] == split)
                if stems:
                    _merge_tabular(fd, coll, split, stems)
                else:  # no graphs left in this split: no stale rows either
                    tabular_path(fd, coll, split).unlink(missing_ok=True)
                    tabular_path(fd, coll, split).with_suffix(".json").unlink(missing_ok=True)
        report = reduction_report(mine)
        write_json(slug_dir / "prune_report.json", report)
        save_run_config(cfg, slug_dir, name="build.json")
        print(f"{coll.name}: {report['graphs']} graphs, nodes {report['nodes']} -> {report['kept_nodes']} "
              f"({report['node_reduction']:.1%} removed), edges {report['edges']} -> {report['kept_edges']} "
              f"({report['edge_reduction']:.1%} removed, {report['rewired']} rewired), "
              f"configs {report['source_configs']} -> {report['configs']}")
    _remove_stale(features_dir, colls, splits, {(f.collection.name, f.split, f.stem) for f in files})
    for r in results:
        if r.get("repairs"):
            print(f"repaired {r['collection']}/{r['split']}/{r['stem']}: {'; '.join(r['repairs'])}")
    fresh = [r for r in results if not r.get("cached")]
    print(f"features: {len(results)} graphs ({len(fresh)} built, {len(results) - len(fresh)} cached) "
          f"in {elapsed:.1f} s -> {features_dir}")
    return features_dir


def _sweep_dead_temporaries(features_dir: Path, colls: list[Collection], splits: list[str]) -> None:
    """Delete what writers killed mid-graph left behind (temporary graph directories, parquet
    parts, markers); a live concurrent build's temporaries are kept."""
    for coll in colls:
        slug_dir = features_dir / coll.slug
        dirs = [slug_dir, slug_dir / "tabular"]
        for split in splits:
            dirs += [slug_dir / sub / split for sub in ("graphs", "done", "norm_parts", "tabular/parts")]
        for directory in dirs:
            remove_dead_temporaries(directory)


def _remove_stale(features_dir: Path, colls: list[Collection], splits: list[str],
                  current: set[tuple[str, str, str]]) -> None:
    """Drop outputs of graphs no longer in the data (or now listed as bad) for the built splits."""
    for coll in colls:
        for split in splits:
            for d in (features_dir / coll.slug / "graphs" / split).glob("*"):  # none when absent
                if d.is_dir() and not d.name.startswith(".") and (coll.name, split, d.name) not in current:
                    shutil.rmtree(d)
                    for extra in (_marker(str(features_dir), coll, split, d.name, "done"),
                                  part_path(features_dir, coll, split, d.name)):
                        extra.unlink(missing_ok=True)


def load_build_config(features_dir: str | os.PathLike, collection: Collection | str) -> BuildConfig:
    """The :class:`BuildConfig` a feature directory was built with (to featurize new graphs the
    same way, e.g. ``process_graph(graph, coll, "test", stem, load_norm(...), cfg)``)."""
    coll = get_collection(collection) if isinstance(collection, str) else collection
    return load_run_config(BuildConfig, Path(features_dir) / coll.slug / "build.json")


def _merge_tabular(fd: str, coll: Collection, split: str, stems: list[str]) -> None:
    """Concatenate the per-graph parts; skipped when the parts are unchanged since the last merge."""
    parts = [part_path(fd, coll, split, s) for s in stems]
    out = tabular_path(fd, coll, split)
    stamp = out.with_suffix(".json")
    key = _key([(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in parts])
    if out.is_file() and _read_marker(stamp, key):
        return
    rows = tab.concat_parquet(parts, out)
    write_json(stamp, {"key": key, "rows": rows, "graphs": len(parts)})


def reduction_report(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Node/edge reduction by pruning and config dedup, summed over graphs."""
    keys = ("nodes", "edges", "kept_nodes", "kept_edges", "rewired", "configs", "source_configs",
            "duplicates")
    tot = {k: int(sum(r.get(k, 0) for r in results)) for k in keys}
    tot["graphs"] = len(results)
    tot["node_reduction"] = 1 - tot["kept_nodes"] / max(tot["nodes"], 1)
    tot["edge_reduction"] = 1 - tot["kept_edges"] / max(tot["edges"], 1)
    return tot


def main(argv: list[str] | None = None) -> int:
    build_features(parse_config(BuildConfig, argv, prog="python -m features build"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
