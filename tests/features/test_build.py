"""End-to-end feature build on small generated roots: outputs, caching, resume, bad files."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from bigfile import layout_arrays, write_mini_root
from features.build import build_features, load_build_config
from features.buildconfig import BuildConfig
from features.stages import node_feature_names, process_graph
from tpurank.collections import COLLECTIONS, get_collection
from features.heuristic import log_costs, rank_fraction
from features.io import discover, load_npz
from features import tabular as tab
from features.processed import graph_dir, iter_processed, load_norm, load_processed, tabular_path

LAYOUT = get_collection("layout:xla:random")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_mini_root(tmp_path_factory.mktemp("mini") / "root", seed=3)
    # one extra train graph with duplicated configs (rows 0 and 9 identical, 1 and 10 identical)
    arrays = layout_arrays(80, 9, 6, seed=11)
    cfg = arrays["node_config_feat"]
    arrays["node_config_feat"] = np.concatenate([cfg, cfg[:2]])
    arrays["config_runtime"] = np.concatenate([arrays["config_runtime"], arrays["config_runtime"][:2] + 100])
    np.savez(LAYOUT.split_dir(root, "train") / "dups.npz", **arrays)
    return root


def config(root: Path, work: Path, **kw) -> BuildConfig:
    base = BuildConfig(data=str(root), work=str(work), preset="full", jobs=1, progress=False,
                       max_train_configs=0)
    return dataclasses.replace(base, **kw)


@pytest.fixture(scope="module")
def built(root: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[BuildConfig, Path]:
    cfg = config(root, tmp_path_factory.mktemp("work"))
    return cfg, build_features(cfg)


def test_outputs_for_every_collection_and_split(root: Path, built) -> None:
    cfg, fd = built
    for gf in discover(root):
        pg = load_processed(graph_dir(fd, gf.collection, gf.split, gf.stem))
        graph = load_npz(gf.path)
        assert pg.node_feat.dtype == np.float32 and pg.node_feat.shape[1] == len(node_feature_names(cfg))
        assert np.isfinite(pg.node_feat).all()
        assert pg.edge_index.shape[0] == 2 and pg.edge_index.max(initial=-1) < pg.num_nodes
        assert np.array_equal(graph.node_opcode[pg.orig_node_ids], pg.node_opcode)
        if gf.split == "test":
            assert pg.target is None
        if gf.split != "train":  # valid/test keep every config in the source order
            assert pg.config_index.tolist() == list(range(graph.num_configs))
        if gf.collection.is_tile:
            assert pg.config_node_pos is None and pg.config_feat.dtype == np.float32
        else:
            assert pg.config_feat.dtype == np.int8
            assert pg.config_feat.shape[1:] == (len(graph.node_config_ids), 18)
            assert np.array_equal(pg.orig_node_ids[pg.config_node_pos], graph.node_config_ids)
            assert np.array_equal(pg.config_feat, graph.node_config_feat[pg.config_index].astype(np.int8))
        if gf.split == "valid":
            assert np.allclose(pg.target, graph.target())
    for coll in COLLECTIONS:
        assert (fd / coll.slug / "norm.npz").is_file() and (fd / coll.slug / "build.json").is_file()
        for split in ("train", "valid", "test"):
            frame = pl.read_parquet(tabular_path(fd, coll, split))
            n = sum(g.num_configs for g in iter_processed(fd, coll, split))
            assert frame.height == n
            assert frame.columns[:3] == ["graph", "config", "target"]
            assert frame.columns[3:] == tab.tabular_feature_names(coll.is_tile, with_heuristic=True)
            assert all(frame.schema[c] == pl.Float32 for c in frame.columns[3:])
            assert (frame["target"].null_count() == n) == (split == "test")


def test_train_dedup_averages_runtimes(root: Path, built) -> None:
    _, fd = built
    pg = load_processed(graph_dir(fd, LAYOUT, "train", "dups"))
    graph = load_npz(LAYOUT.split_dir(root, "train") / "dups.npz")
    rt = graph.config_runtime.astype(float)
    assert pg.config_index.tolist() == list(range(9))
    assert pg.target[0] == pytest.approx((rt[0] + rt[9]) / 2)
    assert pg.target[2] == pytest.approx(rt[2])
    frame = pl.read_parquet(tabular_path(fd, LAYOUT, "train")).filter(pl.col("graph") == "dups")
    assert frame["config"].to_list() == pg.config_index.tolist()
    assert np.allclose(frame["target"].to_numpy(), pg.target)
    # heuristic columns: costs of the kept rows, ranked among all 11 source configs
    cost = log_costs(graph)
    assert np.allclose(frame["f_heur_cost"].to_numpy(), cost[:9], rtol=1e-5)
    assert np.allclose(frame["f_heur_rank"].to_numpy(), rank_fraction(cost)[:9], atol=1e-6)
    assert frame["f_heur_rank"].min() >= 0 and frame["f_heur_rank"].max() <= 1


def test_heuristic_switch_is_part_of_the_cache_key(root: Path, tmp_path: Path, capsys) -> None:
    cfg = config(root, tmp_path, collections="tile:xla", splits="train,valid")
    fd = build_features(cfg)
    on = pl.read_parquet(tabular_path(fd, get_collection("tile:xla"), "valid"))
    off_cfg = dataclasses.replace(cfg, heuristic=False)
    assert off_cfg.transform_params() != cfg.transform_params()
    capsys.readouterr()
    build_features(off_cfg)
    assert "(0 built," not in capsys.readouterr().out
    off = pl.read_parquet(tabular_path(fd, get_collection("tile:xla"), "valid"))
    assert off.columns == [c for c in on.columns if not c.startswith("f_heur_")]
    assert off.columns[3:] == tab.tile_feature_names()
    for stem, rows in on.group_by("graph"):
        graph = load_npz(get_collection("tile:xla").split_dir(root, "valid") / f"{stem[0]}.npz")
        assert np.allclose(rows.sort("config")["f_heur_cost"].to_numpy(), log_costs(graph), rtol=1e-5)


def test_norm_fitted_on_train_only(built) -> None:
    cfg, fd = built
    norm = load_norm(fd, LAYOUT)
    assert norm.node_names == node_feature_names(cfg)
    # the train graphs' normalised node features have mean 0 over all their nodes
    train = np.concatenate([np.asarray(g.node_feat) for g in iter_processed(fd, LAYOUT, "train")])
    assert np.allclose(train.mean(0), 0, atol=1e-3)


def test_rerun_is_cached_and_killed_run_resumes(root: Path, built, capsys, dead_pid: int) -> None:
    cfg, fd = built
    capsys.readouterr()
    build_features(cfg)
    assert "(0 built," in capsys.readouterr().out
    # simulate a run killed after writing one graph's arrays but before its done marker,
    # plus a leftover temporary directory
    marker = fd / LAYOUT.slug / "done" / "valid"
    victim = sorted(marker.glob("*.json"))[0]
    victim.unlink()
    leftover = fd / LAYOUT.slug / "graphs" / "valid" / f".{victim.stem}.tmp-{dead_pid}"
    leftover.mkdir()
    build_features(cfg)
    assert "(1 built," in capsys.readouterr().out
    assert victim.is_file()
    assert not leftover.exists()  # the killed writer's temporary directory is swept


def test_changed_parameter_rebuilds(root: Path, tmp_path: Path, capsys) -> None:
    cfg = config(root, tmp_path, collections="layout:xla:random", splits="train,valid")
    build_features(cfg)
    n_train_valid = len(discover(root, [LAYOUT], ("train", "valid")))
    capsys.readouterr()
    cfg2 = dataclasses.replace(cfg, prune_hops=0, pad_minus_one=False, dot_features=False)
    fd = build_features(cfg2)
    assert f"({n_train_valid} built," in capsys.readouterr().out
    pg = next(iter_processed(fd, LAYOUT, "valid"))
    assert pg.node_feat.shape[1] == len(node_feature_names(cfg2))
    # hops=0 keeps only the configurable nodes
    assert pg.num_nodes == len(pg.config_node_pos)


def test_parallel_build_and_bad_file(root: Path, tmp_path: Path) -> None:
    bad_root = tmp_path / "bad"
    write_mini_root(bad_root, seed=5)
    bad = LAYOUT.split_dir(bad_root, "valid") / "broken.npz"
    bad.write_bytes(b"not a zip file")
    cfg = config(bad_root, tmp_path / "w", collections="layout:xla:random", jobs=2)
    with pytest.raises(Exception, match="broken.npz"):
        build_features(cfg)
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"bad_files": [{"path": str(bad), "problems": ["corrupt"]}]}))
    fd = build_features(dataclasses.replace(cfg, skip_bad_report=str(report)))
    stems = [g.stem for g in iter_processed(fd, LAYOUT, "valid")]
    assert "broken" not in stems and len(stems) == 1


def test_process_graph_single_new_program(root: Path, built) -> None:
    cfg, fd = built
    gf = discover(root, [LAYOUT], ("test",))[0]
    pg = process_graph(load_npz(gf.path), LAYOUT, "test", "new", load_norm(fd, LAYOUT), cfg)
    saved = load_processed(graph_dir(fd, LAYOUT, "test", gf.stem))
    assert np.allclose(pg.node_feat, saved.node_feat)
    assert np.array_equal(pg.config_feat, saved.config_feat)
    assert pg.target is None and pg.meta["node_feature_names"] == node_feature_names(cfg)


def test_removed_graph_outputs_are_dropped(root: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_mini_root(data, seed=7)
    cfg = config(data, tmp_path / "w", collections="layout:xla:random")
    fd = build_features(cfg)
    victim = discover(data, [LAYOUT], ("valid",))[0]
    victim.path.unlink()
    build_features(cfg)
    assert not graph_dir(fd, LAYOUT, "valid", victim.stem).exists()
    assert not tabular_path(fd, LAYOUT, "valid").exists()  # the split's only graph is gone
    assert load_build_config(fd, LAYOUT) == cfg


def test_exact_dot_dims_from_raw_proto(shared_data, tmp_path: Path) -> None:
    """ROOT/pb/<same relative path>.pb: its exact dot dims replace the inferred ones."""
    from features import hlo

    pb = shared_data / "jax-hlo" / "transformer_fwd.post.hlo.pb"
    if not pb.is_file():
        pytest.skip("no transformer proto")
    coll = get_collection("layout:nlp:random")
    g = hlo.module_to_graph(hlo.read_module(pb))
    arrays = {"node_feat": g.node_feat, "node_opcode": g.node_opcode, "edge_index": g.edge_index,
              "node_config_ids": g.node_config_ids, "node_splits": g.node_splits,
              "node_config_feat": np.repeat(g.node_config_feat, 3, axis=0),
              "config_runtime": np.array([3, 1, 2], np.int64)}
    for split in ("train", "valid"):
        d = coll.split_dir(tmp_path / "root", split)
        d.mkdir(parents=True)
        np.savez(d / "tr.npz", **arrays)
    pb_copy = tmp_path / "root" / "pb" / coll.rel_dir / "valid" / "tr.pb"
    pb_copy.parent.mkdir(parents=True)
    pb_copy.write_bytes(pb.read_bytes())
    cfg = config(tmp_path / "root", tmp_path / "w", collections=coll.name)
    fd = build_features(cfg)
    valid = load_processed(graph_dir(fd, coll, "valid", "tr"))
    train = load_processed(graph_dir(fd, coll, "train", "tr"))
    assert valid.meta["exact_dot"] is True and train.meta["exact_dot"] is False
    assert train.num_configs == 1  # three identical configs deduplicated, runtimes averaged
    assert train.target.tolist() == [2.0]
    pg = process_graph(g, coll, "valid", "tr", None, cfg, hlo.exact_dot_dims(pb))
    col = pg.meta["node_feature_names"].index("dot_dims_exact")
    dots = pg.node_opcode == 34
    assert dots.any() and np.all(pg.node_feat[dots, col] == 1)


def test_build_on_generated_sample(tiny_root: Path, tmp_path: Path) -> None:
    """The sample generator's data (all five collections) goes through the whole build."""
    cfg = config(tiny_root, tmp_path / "w")
    fd = build_features(cfg)
    for coll in COLLECTIONS:
        report = json.loads((fd / coll.slug / "prune_report.json").read_text())
        assert report["graphs"] == len(discover(tiny_root, [coll]))
        if not coll.is_tile:
            assert 0 < report["kept_nodes"] < report["nodes"]
        for split in ("train", "valid", "test"):
            frame = pl.read_parquet(tabular_path(fd, coll, split))
            assert frame.height == sum(g.num_configs for g in iter_processed(fd, coll, split)) > 0
            assert not frame.select(pl.col("^f_.*$").is_nan().any()).row(0).count(True)


def _snapshot(fd: Path) -> dict[str, object]:
    """Every processed array and tabular frame of a feature directory (paths made relative)."""
    snap: dict[str, object] = {}
    for meta in sorted(fd.glob("*/graphs/*/*/meta.json")):
        pg = load_processed(meta.parent)
        key = str(meta.parent.relative_to(fd))
        for name in ("node_feat", "node_opcode", "edge_index", "orig_node_ids", "config_index",
                     "config_node_pos", "target"):
            snap[f"{key}/{name}"] = getattr(pg, name)
        snap[f"{key}/config_feat"] = np.asarray(pg.config_feat)
        for name, table in (pg.layout_context or {}).items():
            snap[f"{key}/layout_context/{name}"] = table
    for part in sorted(fd.glob("*/tabular/*.parquet")):
        snap[str(part.relative_to(fd))] = pl.read_parquet(part)
    return snap


def test_killed_build_subprocess_resumes_to_the_same_outputs(root: Path, built, tmp_path: Path) -> None:
    """SIGKILL a `features build` mid-way, rerun it: the outputs equal an uninterrupted build and
    finished graphs are not redone."""
    import signal
    import subprocess
    import sys
    import time

    cfg, fd_ref = built
    work = tmp_path / "work"
    cmd = [sys.executable, "-m", "features", "build", "--data", str(root), "--work", str(work),
           "--preset", "full", "--jobs", "1", "--progress", "false", "--max-train-configs", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            cwd=Path(__file__).resolve().parents[2])
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if len(list((work / "features").glob("*/done/*/*.json"))) >= 4:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the build finished before it could be killed: " + \
        proc.stderr.read().decode()[-2000:]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = len(list((work / "features").glob("*/done/*/*.json")))
    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                           cwd=Path(__file__).resolve().parents[2])
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    built_now = int(rerun.stdout.split("graphs (")[1].split(" built")[0])
    total = len(discover(root))
    assert built_now <= total - done_before  # finished graphs were not redone
    assert not list((work / "features").glob("*/graphs/*/.*"))  # no temporary leftovers
    ref, got = _snapshot(fd_ref), _snapshot(work / "features")
    assert ref.keys() == got.keys()
    for k, v in ref.items():
        if isinstance(v, pl.DataFrame):
            assert v.equals(got[k]), k
        elif v is None:
            assert got[k] is None, k
        else:
            assert np.array_equal(v, got[k]), k


def test_node_stage_of_train_graphs_runs_once(root: Path, tmp_path: Path, monkeypatch) -> None:
    import features.stages as stages
    import features.tasks as tasks

    calls: list[int] = []
    real = stages.node_stage
    counting = lambda *a, **k: calls.append(1) or real(*a, **k)  # noqa: E731
    monkeypatch.setattr(stages, "node_stage", counting)
    monkeypatch.setattr(tasks, "node_stage", counting)
    fd = build_features(config(root, tmp_path, collections="layout:xla:random", splits="train"))
    assert len(calls) == len(discover(root, [LAYOUT], ["train"]))
    assert not list((fd / LAYOUT.slug / "norm_parts").glob("*/*.stage.npz"))  # used, then dropped


def test_tabular_train_rows_capped_valid_complete(root: Path, tmp_path: Path) -> None:
    cfg = config(root, tmp_path, collections="layout:xla:random", splits="train,valid",
                 tabular_max_train_rows=3)
    fd = build_features(cfg)
    train = pl.read_parquet(tabular_path(fd, LAYOUT, "train"))
    assert train.group_by("graph").len()["len"].max() == 3
    valid = pl.read_parquet(tabular_path(fd, LAYOUT, "valid"))
    sources = {gf.stem: load_npz(gf.path).num_configs for gf in discover(root, [LAYOUT], ["valid"])}
    assert dict(valid.group_by("graph").len().iter_rows()) == sources
    # the GNN still sees every (deduplicated) train config
    assert sum(g.num_configs for g in iter_processed(fd, LAYOUT, "train")) > 3 * len(train["graph"].unique())
