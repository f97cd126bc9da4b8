"""Training loop, checkpoints/resume, predictions and CLI on hand-made processed graphs."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

from tpurank.collections import get_collection
from tpurank.config import with_preset
from features.processed import iter_processed
from models.gnn.__main__ import main as gnn_main
from models.gnn.config import GnnConfig
from models.gnn.infer import load_trained, load_trained_dir, predict_collection, predict_costs
from models.gnn.train import choose_regime, fit, train_collection
from models.predictions import read_predictions
from models.training import DistContext, load_checkpoint

TINY = dict(hidden=8, layers=1, configs_per_step=8, steps=12, eval_every=4,
            warmup_steps=2, patience=0, val_max_configs=0, predict_batch=8, threads=1, lr=5e-3)


def _cfg(tmp_path, features, **kw) -> GnnConfig:
    return dataclasses.replace(GnnConfig(), work=str(tmp_path / "work"), features=str(features),
                               **{**TINY, **kw})


@pytest.mark.parametrize("name", ["tile:xla", "layout:xla:random"])
def test_train_then_predict_covers_every_graph_and_config(tmp_path, toy_features, name):
    coll = get_collection(name)
    cfg = _cfg(tmp_path, toy_features)
    report = train_collection(cfg, coll)
    out = cfg.model_dir(coll)
    for f in ("config.json", "best.pt", "last.pt", "report.json", "valid_scores.png", "curves.png"):
        assert (out / f).is_file(), f
    assert report["n_graphs"] == 2 and np.isfinite(report["score"])
    assert set(json.loads((out / "report.json").read_text())["per_graph"]) == {"g0", "g1"}
    saved = json.loads((out / "config.json").read_text())  # where it trained: the Kaggle check reads it
    assert (saved["device"], saved["amp"]) == ("cpu", False)
    paths = predict_collection(cfg, coll)
    for split in ("valid", "test"):
        preds = read_predictions(paths[split])
        graphs = {g.stem: g.num_configs for g in iter_processed(toy_features, coll, split)}
        assert {k: len(v) for k, v in preds.items()} == graphs
    assert paths["test"].parent.parent.name == "gnn@seed0"
    model, saved = load_trained(cfg.work, name)
    g = next(iter_processed(toy_features, coll, "test"))
    np.testing.assert_allclose(predict_costs(model, g, saved.predict_batch),
                               read_predictions(paths["test"])[g.stem], rtol=1e-5, atol=1e-5)
    assert model.inference_options.context == cfg.predict_context == 1024  # saved at training
    # prediction follows the predicting run's --predict-context, not the one saved at training
    assert load_trained_dir(cfg.model_dir(coll), context=5)[0].inference_options.context == 5


@pytest.mark.parametrize("arch", ["factorized", "copy"])
def test_resume_gives_identical_model_and_predictions(tmp_path, toy_features, arch):
    coll = get_collection("layout:xla:default")
    straight = _cfg(tmp_path / "a", toy_features, arch=arch)
    train_collection(straight, coll)
    interrupted = _cfg(tmp_path / "b", toy_features, step_budget=6, arch=arch)
    train_collection(interrupted, coll)
    assert load_checkpoint(interrupted.model_dir(coll) / "last.pt")["step"] == 4  # last eval
    train_collection(dataclasses.replace(interrupted, step_budget=0), coll)
    a = load_checkpoint(straight.model_dir(coll) / "last.pt")
    b = load_checkpoint(interrupted.model_dir(coll) / "last.pt")
    assert a["step"] == b["step"] == 12
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    g = next(iter_processed(toy_features, coll, "test"))
    pa = predict_costs(load_trained_dir(straight.model_dir(coll))[0], g)
    pb = predict_costs(load_trained_dir(interrupted.model_dir(coll))[0], g)
    np.testing.assert_array_equal(pa, pb)


def test_gnn_learns_toy_layout_ranking(tmp_path, learnable_features):
    """The toy runtime is a function of the layout values: on held-out graphs τ must become
    clearly positive, and the training loss must decrease."""
    coll = get_collection("layout:xla:random")
    cfg = _cfg(tmp_path, learnable_features, steps=100, eval_every=50, hidden=16,
               configs_per_step=16, cross_attn=False, lr=2e-2)
    report = train_collection(cfg, coll)
    losses = [h["loss"] for h in report["history"]]
    assert losses[-1] < 0.85 * losses[0]
    assert report["score"] > 0.4, report["per_graph"]


def test_factorized_gnn_learns_toy_layout_ranking(tmp_path, learnable_features):
    """The factorized architecture (trunk once per graph, head over the configurable nodes)
    ranks the held-out toy graphs' configs almost perfectly."""
    coll = get_collection("layout:xla:random")
    cfg = _cfg(tmp_path, learnable_features, steps=300, eval_every=100, hidden=16,
               configs_per_step=16, cross_attn=False, lr=2e-2, arch="factorized")
    report = train_collection(cfg, coll)
    assert report["score"] >= 0.9, report["per_graph"]


def test_factorized_trunk_runs_once_per_graph_per_step(tmp_path, toy_features, monkeypatch):
    from models.gnn.model import RankerGNN

    calls: list[bool] = []
    trunk = RankerGNN.trunk
    monkeypatch.setattr(RankerGNN, "trunk",
                        lambda self, *a: calls.append(self.training) or trunk(self, *a))
    cfg = _cfg(tmp_path, toy_features, arch="factorized", steps=6, eval_every=100,
               configs_per_step=8)
    train_collection(cfg, get_collection("layout:xla:random"))
    assert sum(calls) == 6  # training: one trunk per step (one layout graph), whatever its configs
    assert len(calls) - sum(calls) == 2 * 2  # evaluation at the last step + final report: 2 graphs each


def test_cli_train_and_predict(tmp_path, toy_features, capsys):
    args = ["--work", str(tmp_path / "w"), "--features", str(toy_features), "--collection",
            "tile:xla", "--seed", "3"] + [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    assert gnn_main(["train", *args]) == 0
    assert gnn_main(["predict", *args]) == 0
    assert "tile:xla/test" in capsys.readouterr().out
    assert (tmp_path / "w" / "preds" / "gnn@seed3" / "tile-xla" / "test.npz").is_file()
    assert (tmp_path / "w" / "models" / "gnn" / "summary-seed3.json").is_file()
    assert gnn_main([]) == 2


def test_missing_features_error_names_the_directory(tmp_path):
    cfg = _cfg(tmp_path, tmp_path / "nothing")
    with pytest.raises(FileNotFoundError, match="features build"):
        train_collection(cfg, get_collection("tile:xla"))
    with pytest.raises(FileNotFoundError, match="no trained GNN"):
        load_trained(tmp_path / "nowork", "tile:xla")


def test_source_order_restores_file_order_and_rejects_dedup(graph_factory):
    from models.gnn.infer import source_order

    g = graph_factory(get_collection("tile:xla"), "test", "x", seed=1, configs=4)
    g.config_index = np.array([2, 0, 3, 1])
    np.testing.assert_array_equal(source_order(g, np.array([0.2, 0.0, 0.3, 0.1])), [0.0, 0.1, 0.2, 0.3])
    g.config_index = np.array([0, 0, 1, 2])
    with pytest.raises(ValueError, match="permutation"):
        source_order(g, np.zeros(4))


def test_time_budget_stops_cleanly_and_a_rerun_does_not_train_more(tmp_path, toy_features):
    coll = get_collection("layout:xla:default")
    cfg = _cfg(tmp_path, toy_features, steps=10**6, eval_every=10**5, time_budget=3.0)
    report = train_collection(cfg, coll)
    assert report["stopped_by"] == "time_budget" and report["last_step"] > 1
    assert report["train_seconds"] < 3.0 + 1.5
    assert report["history"] and report["history"][-1]["step"] == report["last_step"]
    state = load_checkpoint(cfg.model_dir(coll) / "last.pt")
    assert state["step"] == report["last_step"] and state["stopped_by"] == "time_budget"
    again = train_collection(cfg, coll)
    assert again["last_step"] == report["last_step"] and again["score"] == report["score"]


@pytest.mark.parametrize("keep", ["best", "last"])
def test_keep_chooses_the_weights_saved_as_best(tmp_path, toy_features, keep):
    coll = get_collection("tile:xla")
    cfg = _cfg(tmp_path, toy_features, keep=keep)
    report = train_collection(cfg, coll)
    best = load_checkpoint(cfg.model_dir(coll) / "best.pt")
    last = load_checkpoint(cfg.model_dir(coll) / "last.pt")
    assert report["keep"] == keep
    assert best["step"] == (last["step"] if keep == "last" else report["best_step"])
    if keep == "last":
        for key in last["model"]:
            assert torch.equal(best["model"][key], last["model"][key]), key


def test_node_budget_bounds_configs_per_step():
    cfg = dataclasses.replace(GnnConfig(), configs_per_step=64, node_budget=100_000, arch="copy")
    assert cfg.configs_per_step_for(1_000, is_tile=False) == 64
    assert cfg.configs_per_step_for(10_000, is_tile=False) == 10
    assert cfg.configs_per_step_for(40_000, is_tile=False) == 8  # floor
    assert cfg.configs_per_step_for(40_000, is_tile=True) == 64  # tile: one graph pass
    assert dataclasses.replace(cfg, node_budget=0).configs_per_step_for(40_000, False) == 64
    # factorized: the trunk's nodes once, then the configurable nodes per config
    fac = dataclasses.replace(cfg, arch="factorized", configs_per_step=512)
    assert fac.configs_per_step_for(10_000, False, config_nodes=350) == 257  # (100k - 10k) // 350
    assert fac.configs_per_step_for(1_000, False, config_nodes=50) == 512
    assert fac.configs_per_step_for(99_000, False, config_nodes=350) == 8  # floor
    # links count a quarter of a configurable node each: (100k - 10k) // (350 + 1400 // 4)
    assert fac.configs_per_step_for(10_000, False, config_nodes=350, config_links=1_400) == 128


def test_quick_node_budget_bounds_steps_on_real_sized_graphs_only():
    quick = with_preset(GnnConfig, "quick")
    # the samples' largest layout graphs (153 configurable nodes + links / 4): every config
    assert quick.configs_per_step_for(400, False, config_nodes=120, config_links=130) == 64
    # a mean real-shaped xla graph (G=1): 1,163 kept nodes, 312 configurable, 1,468 links
    assert quick.configs_per_step_for(1_163, False, config_nodes=312, config_links=1_468) == 27


def test_activation_checkpointing_trains_like_plain(tmp_path, toy_features):
    coll = get_collection("layout:xla:random")
    plain = train_collection(_cfg(tmp_path / "a", toy_features, steps=4, eval_every=4), coll)
    ckpt = train_collection(_cfg(tmp_path / "b", toy_features, steps=4, eval_every=4,
                                 activation_checkpointing=True), coll)
    assert plain["history"][-1]["loss"] == pytest.approx(ckpt["history"][-1]["loss"], rel=1e-5)


@pytest.fixture(scope="module")
def fold_features(tmp_path_factory):
    """Twin layout collections with distinct stems per split (OOF files are keyed by stem)."""
    from features.processed import graph_dir, save_processed
    from tests.models.gnn.conftest import make_graph

    root = tmp_path_factory.mktemp("gnn-folds") / "features"
    seed = 100
    for name in ("layout:xla:random", "layout:xla:default"):
        coll = get_collection(name)
        for split, stems in (("train", ["resnet_a", "resnet_b", "bert_a", "bert_b", "unet_a"]),
                             ("valid", ["resnet_v", "bert_v"]), ("test", ["t0", "t1"])):
            for stem in stems:
                seed += 1
                g = make_graph(coll, split, stem, seed, configs=20, with_target=split != "test")
                if split == "train":  # as the build's dedup does: some source configs dropped
                    keep = np.arange(0, 20, 2)[::-1].copy()
                    g.config_feat, g.target = g.config_feat[keep], g.target[keep]
                    g.config_index = keep
                save_processed(g, graph_dir(root, coll, split, stem))
    return root


def test_folds_train_oof_and_fold_ensemble(tmp_path, fold_features, capsys):
    from models.cv import check_manifest, fold_plan
    from models.predictions import predictions_path, read_oof

    work = tmp_path / "w"
    args = ["--work", str(work), "--features", str(fold_features), "--collection",
            "layout:xla:random", "--folds", "3"] + \
        [f"--{k.replace('_', '-')}={v}" for k, v in {**TINY, "steps": 4, "eval_every": 2}.items()]
    assert gnn_main(["train", *args]) == 0
    assert gnn_main(["predict", *args]) == 0
    coll = get_collection("layout:xla:random")
    plan = fold_plan(work, fold_features, coll, folds=3, seed=0)
    models = work / "models" / "gnn" / "layout-xla-random" / "seed0"
    check_manifest(models / "folds.json", plan)  # no fold model saw its held-out graphs
    seen = json.loads((models / "folds.json").read_text())["seen"]
    for k in range(3):
        assert (models / f"fold{k}" / "best.pt").is_file()
        held = {st for _, st in plan.held_out(k)}
        assert held and not held & {s.split("/", 1)[1] for s in seen[str(k)]}
        saved = json.loads((models / f"fold{k}" / "config.json").read_text())
        assert saved["fold"] == k and saved["config"]["folds"] == 3
    oof = read_oof(work / "preds", "gnn@seed0", coll)
    assert set(oof) == {st for _, st in plan.graphs()}
    idx, cost = oof["resnet_a"]
    np.testing.assert_array_equal(idx, np.arange(0, 20, 2))  # source config order
    assert len(oof["resnet_v"][0]) == 20 and len(cost) == 10
    test_fold = [read_predictions(predictions_path(work / "preds", "gnn@seed0", coll, f"test-fold{k}"))
                 for k in range(3)]
    test = read_predictions(predictions_path(work / "preds", "gnn@seed0", coll, "test"))
    assert set(test) == {"t0", "t1"}

    def z(c):
        return (c - c.mean()) / c.std()

    np.testing.assert_allclose(test["t0"], np.mean([z(t["t0"]) for t in test_fold], axis=0),
                               rtol=1e-4, atol=1e-4)
    valid = read_predictions(predictions_path(work / "preds", "gnn@seed0", coll, "valid"))
    assert set(valid) == {"resnet_v", "bert_v"}
    assert "OOF" in capsys.readouterr().out


def test_fold_models_without_inner_valid_train_on_it_and_watch_held_out_graphs(fold_features):
    from models.gnn.folds import fold_training, labelled_graphs, watches_held_out
    from models.cv import fold_plan

    coll = get_collection("layout:xla:random")
    cfg = GnnConfig(features=str(fold_features), folds=3, keep="last", patience=0)
    plan = fold_plan(fold_features.parent / "w", fold_features, coll, folds=3, seed=0)
    graphs = labelled_graphs(cfg, coll)
    for k in range(3):
        inner = {key for key in plan.inner_valid(k)}
        train, watched = fold_training(dataclasses.replace(cfg, inner_valid=False), coll, plan, k,
                                       graphs)
        keys = {(g.split, g.stem) for g in train}
        assert inner <= keys and not keys & set(plan.held_out(k))
        assert {(g.split, g.stem) for g in watched} <= set(plan.held_out(k))
        assert len(watched) == max(1, len(inner))
    tile = get_collection("tile:xla")
    assert watches_held_out(dataclasses.replace(cfg, inner_valid=False), coll)
    assert not watches_held_out(dataclasses.replace(cfg, inner_valid=False), tile)
    with pytest.raises(ValueError, match="--keep last --patience 0"):
        fold_training(dataclasses.replace(cfg, inner_valid=False, keep="best"), coll, plan, 0,
                      graphs)


def test_fold_models_watching_held_out_graphs_spend_no_time_on_a_final_evaluation(tmp_path,
                                                                                  fold_features):
    """The watched graphs only draw the learning curve: the report takes its last periodic score
    instead of evaluating again after training (time the share would otherwise pay)."""
    args = ["--work", str(tmp_path / "w"), "--features", str(fold_features), "--collection",
            "layout:xla:random", "--folds", "3", "--inner-valid", "false", "--keep", "last"] + \
        [f"--{k.replace('_', '-')}={v}" for k, v in {**TINY, "steps": 4, "eval_every": 2}.items()]
    assert gnn_main(["train", *args]) == 0
    for k in range(3):
        fold = tmp_path / "w" / "models" / "gnn" / "layout-xla-random" / "seed0" / f"fold{k}"
        report = json.loads((fold / "report.json").read_text())
        assert report["score"] == report["history"][-1]["valid"]
        assert "per_graph" not in report and report["last_step"] == 4


def test_oof_rows_of_train_graphs_are_capped_and_seeded(fold_features):
    from models.gnn.data import load_graphs
    from models.gnn.folds import oof_rows

    coll = get_collection("layout:xla:random")
    g = next(iter(load_graphs(fold_features, coll, "train")))
    cfg = GnnConfig(features=str(fold_features), oof_max_configs=4)
    rows = oof_rows(cfg, coll, g, "train")
    assert len(rows) == 4 and np.all(np.diff(rows) > 0) and rows.max() < g.num_configs
    np.testing.assert_array_equal(rows, oof_rows(cfg, coll, g, "train"))  # deterministic
    assert oof_rows(cfg, coll, g, "valid") is None  # official valid graphs: every config
    assert len(oof_rows(dataclasses.replace(cfg, oof_max_configs=0), coll, g, "train")) == g.num_configs


def test_tile_models_get_their_weighted_share_of_the_time_budget():
    from models.budget import TimeBudget

    cfg = GnnConfig(tile_budget_weight=0.5)
    assert cfg.budget_weight(get_collection("tile:xla")) == 0.5
    assert cfg.budget_weight(get_collection("layout:nlp:random")) == 1.0
    budget = TimeBudget(100.0, clock=lambda: 0.0)
    # 3 tile folds (weight 0.5) + 1 layout model: 2.5 units; a tile fold gets 0.5 of them
    assert budget.share(2.5, 0.5) == pytest.approx(20.0)
    assert budget.share(1.0, 1.0) == pytest.approx(100.0)


def test_eval_reserve_counts_the_capped_final_evaluation():
    from types import SimpleNamespace

    from models.gnn.train import EvalReserve

    graphs = [SimpleNamespace(num_configs=10, target=np.zeros(10)),
              SimpleNamespace(num_configs=3, target=np.zeros(3)),
              SimpleNamespace(num_configs=50, target=None)]  # unlabelled: never scored
    assert EvalReserve(graphs, 4).final_ratio == pytest.approx(13 / 7)  # final: every config
    assert EvalReserve(graphs, 4, final_max_configs=6).final_ratio == pytest.approx(9 / 7)


def test_final_report_scores_at_most_final_val_max_configs(tmp_path, toy_features, monkeypatch):
    """The report after training scores a bounded subset per graph (its time must not grow with
    the config count); periodic evaluations keep their own cap."""
    import models.gnn.train as train_module

    caps: list[int] = []
    real = train_module.evaluate

    def spy(model, collection, graphs, cfg, cache=None, max_configs=0):
        caps.append(max_configs)
        return real(model, collection, graphs, cfg, cache, max_configs)

    monkeypatch.setattr(train_module, "evaluate", spy)
    cfg = _cfg(tmp_path, toy_features, val_max_configs=4, final_val_max_configs=6)
    report = train_collection(cfg, get_collection("layout:xla:random"))
    assert caps[-1] == 6 and set(caps[:-1]) == {4}
    assert report["final_val_max_configs"] == 6 and np.isfinite(report["score"])


def test_eval_reserve_speed_leaves_out_the_first_step():
    """A slow first step (warm-up) must not make the reserve stop a short share after one step."""
    from types import SimpleNamespace

    from models.gnn.train import EvalReserve

    reserve = EvalReserve([SimpleNamespace(num_configs=100, target=np.zeros(100))], 50)
    assert reserve.seconds_per_config(0.0, 0) == 0.0  # nothing trained yet
    assert reserve.seconds_per_config(1.0, 64) == 0.0  # after the first step: no estimate
    assert reserve.seconds_per_config(1.2, 128) == pytest.approx(0.2 / 64)  # from step 2 on
    assert reserve.seconds_per_config(1.4, 192) == pytest.approx(0.4 / 128)


@pytest.mark.parametrize("budget, chosen", [(0.5, {"folds": 2, "dropout": 0.0}),
                                            (1e6, {"folds": 3, "dropout": 0.1})])
def test_regime_chooses_folds_and_dropout_from_the_timed_passes_once(tmp_path, toy_features, budget,
                                                                     chosen):
    coll = get_collection("layout:xla:random")
    cfg = _cfg(tmp_path, toy_features, folds=3, regime=True, time_budget=budget)
    choose_regime(cfg, [coll], torch.device("cpu"))
    path = cfg.collection_dir(coll) / "regime.json"
    assert json.loads(path.read_text())["options"] == chosen
    assert (cfg.regimed(coll).folds, cfg.regimed(coll).dropout) == (chosen["folds"], chosen["dropout"])
    choose_regime(dataclasses.replace(cfg, time_budget=1e6 + 0.5 - budget), [coll], torch.device("cpu"))
    assert json.loads(path.read_text())["options"] == chosen  # once per WORK: every seed follows it
    off = dataclasses.replace(cfg, regime=False)
    assert off.regimed(coll) == off
    path.write_text('{"options": {"folds": 2')  # truncated by hand: named, not a bare traceback
    with pytest.raises(ValueError, match="regime.json: unreadable regime"):
        cfg.regimed(coll)


def test_a_fold_model_of_another_plan_is_trained_afresh_not_resumed(tmp_path, toy_features):
    coll = get_collection("layout:xla:default")
    cfg = _cfg(tmp_path, toy_features, step_budget=6, eval_every=2)
    train = [g for g in iter_processed(toy_features, coll, "train")]
    valid = [g for g in iter_processed(toy_features, coll, "valid")]
    out = tmp_path / "fold0"
    for plan, steps in (("K3-seed0.json", 6), ("K3-seed0.json", 12), ("K2-seed0.json", 6)):
        fit(cfg, coll, train, valid, out, math.inf, DistContext(), torch.device("cpu"),
            extra_config={"fold": 0, "fold_plan": f"w/folds/x/{plan}"})
        assert load_checkpoint(out / "last.pt", "cpu")["step"] == steps  # resumed only on its own plan
