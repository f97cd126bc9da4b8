"""ensemble.plan: the plan's records, workload counts from the feature store, the GNN probe's
reading and the training shares."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ensemble import plan as P
from tpurank.collections import get_collection

TILE, LAYOUT = get_collection("tile:xla"), get_collection("layout:xla:random")
def test_gnn_predict_configs_counts_what_the_predict_stage_scores(tmp_path: Path, fake_features) -> None:
    features = fake_features(tmp_path / "features")
    # K folds: test x K, every valid config, train graphs capped by the tabular rows (100) and
    # --oof-max-configs (120): 50 + 100 + 100
    # config-nodes: each config times its graph's nodes (test 7, valid 5/10/15, train 10/11/12)
    assert P.predict_configs(features, LAYOUT, 3, 120) == {
        "test": 3 * 2000, "valid": 120, "oof": 250, "total": 6370,
        "config_nodes": 3 * 2000 * 7 + 40 * (5 + 10 + 15) + 50 * 10 + 100 * 11 + 100 * 12}
    assert P.predict_configs(features, LAYOUT, 3, 60)["oof"] == 50 + 60 + 60
    assert P.predict_configs(features, TILE, 0, 60) == {
        "test": 60, "valid": 120, "oof": 0, "total": 180, "config_nodes": 60 * 7 + 40 * 30}
    assert P.run_configs(features, [TILE]) == 450 + 120 + 60


def test_spread_takes_smallest_largest_and_between() -> None:
    sizes = {f"g{i}": i for i in range(10)}
    assert P.spread(sizes, 3) == ["g0", "g4", "g9"] or P.spread(sizes, 3) == ["g0", "g5", "g9"]
    assert P.spread({"a": 2, "b": 1}, 6) == ["b", "a"]


def test_probe_features_links_a_few_valid_graphs_and_one_train_graph(tmp_path: Path, fake_features) -> None:
    features = fake_features(tmp_path / "features")
    out = tmp_path / "probe"
    linked = P.probe_features(features, out, [TILE, LAYOUT], graphs=2)
    graphs = {"v0": P.ProbeGraph(40, 5), "v2": P.ProbeGraph(40, 15)}  # (configs, nodes)
    assert linked == {"tile:xla": graphs, "layout:xla:random": graphs}
    assert sorted(p.name for p in (out / "tile-xla" / "graphs" / "valid").iterdir()) == ["v0", "v2"]
    assert [p.name for p in (out / "tile-xla" / "graphs" / "train").iterdir()] == ["t0"]
    assert (out / "tile-xla" / "build.json").is_symlink() and (out / "tile-xla" / "norm.npz").is_file()
    assert not (out / "tile-xla" / "graphs" / "test").exists()


def test_probe_leaves_out_a_collection_without_scorable_valid_graphs(tmp_path: Path, write_graph) -> None:
    features = tmp_path / "features"
    write_graph(features, TILE, "train", "t0", 10, 3)
    write_graph(features, TILE, "valid", "v0", 1, 3)  # one config: nothing to rank
    assert P.probe_features(features, tmp_path / "probe", [TILE]) == {}


def test_read_probe_and_the_predict_estimate(tmp_path: Path, fake_features) -> None:
    features = fake_features(tmp_path / "features")
    linked = {"tile:xla": {"v0": P.ProbeGraph(40, 5), "v2": P.ProbeGraph(40, 15)},
              "layout:xla:random": {"v0": P.ProbeGraph(400, 10), "v2": P.ProbeGraph(40, 10)}}
    reports = {"tile:xla": {"per_graph": {"v0": 1.0, "v2": 1.0}, "final_eval_seconds": 0.8},
               "layout:xla:random": {"per_graph": {"v0": 0.1, "v2": 0.2}, "final_eval_seconds": 2.96}}
    probe = P.read_probe(reports, linked, 256, wall=20.0)
    # tile: 0.8 s over 40 x 5 + 40 x 15 config-nodes; layout: 400 configs capped at 256
    assert probe.seconds_per_config_node == pytest.approx({"tile:xla": 0.001, "layout:xla:random": 0.001})
    assert probe.overhead == pytest.approx(20.0 - 3.76)
    seconds, basis = P.probed_predict_estimate(features, [TILE, LAYOUT], 3, 0, probe, start=probe.overhead)
    tile = P.predict_configs(features, TILE, 3, 0)
    layout = P.predict_configs(features, LAYOUT, 3, 0)
    assert seconds == pytest.approx(probe.overhead + 0.001 * (tile["config_nodes"] + layout["config_nodes"]))
    assert f"{tile['total'] + layout['total']:,} configs" in basis
    # a collection the probe did not score takes the slowest of its kind
    one = P.ProbeResult({"tile:xla": 0.001}, 1.0)
    assert P.config_node_seconds(one, LAYOUT) == 0.001
    with pytest.raises(ValueError, match="scored no collection"):
        P.config_node_seconds(P.ProbeResult({}, 1.0), LAYOUT)


def test_the_estimate_scales_with_the_graphs_it_predicts(tmp_path: Path, write_graph) -> None:
    """Probed on small valid graphs, a collection whose test graphs are ten times larger is
    estimated ten times slower per config (a rate per config would call them equal)."""
    probe = P.ProbeResult({"layout:xla:random": 1e-5}, 0.0)
    times = {}
    for nodes in (10, 100):
        features = tmp_path / f"n{nodes}"
        write_graph(features, LAYOUT, "valid", "v0", 100, 10)
        write_graph(features, LAYOUT, "test", "x0", 1000, nodes, target=False)
        times[nodes], _ = P.probed_predict_estimate(features, [LAYOUT], 0, 0, probe, start=0.0)
    assert times[100] - 100 * 10 * 1e-5 == pytest.approx(10 * (times[10] - 100 * 10 * 1e-5))


def test_plan_records_round_trip_and_eta(tmp_path: Path) -> None:
    plan = P.Plan(budget=100.0, started_at=1000.0)
    plan.add(P.StageRecord("validate", 2.0, "measured", given=2.0, start=0.0, actual=2.0))
    plan.add(P.StageRecord("gnn-train", 50.0, "the rest", options={"time_budget": 45.0}))
    plan.add(P.StageRecord("report", 10.0, "estimate"))
    assert plan.pending_seconds() == 60.0
    assert plan.eta(elapsed=5.0) == 1065.0
    plan.get("gnn-train").given = 40.0  # re-planned when it started
    assert plan.pending_seconds(exclude=["report"]) == 40.0
    rows = plan.rows()
    assert rows[1][:5] == ["gnn-train", "50", "40", "—", "—"] and "time_budget=45.0" in rows[1][5]
    assert "planned s" in plan.table().splitlines()[0]
    plan.save(tmp_path / "plan.json")
    again = P.Plan.load(tmp_path / "plan.json")
    assert again.to_json() == plan.to_json()


def test_training_shares_and_stage_budgets() -> None:
    shares = P.training_shares
    assert shares(1000.0, ["lgbm", "gnn"], ["lgbm"], 0.3) == pytest.approx({"lgbm": 300.0, "gnn": 700.0})
    assert shares(1000.0, ["gnn"], [], 0.3) == {"gnn": 1000.0}
    assert shares(1000.0, ["lgbm"], ["lgbm"], 0.3) == {"lgbm": 1000.0}
    assert shares(1000.0, [], [], 0.3) == {}
    assert shares(1000.0, ["lgbm", "toy", "gnn"], ["lgbm", "toy"], 0.3) == pytest.approx(
        {"lgbm": 150.0, "toy": 150.0, "gnn": 700.0})
    seconds, basis = P.fixed_estimate("blend", 2_000_000)
    a, b = P.FIXED_COSTS["blend"]
    assert seconds == pytest.approx(a + 2 * b) and "2,000,000" in basis
