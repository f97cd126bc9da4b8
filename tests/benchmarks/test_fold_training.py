"""The fold-training benchmark's table: per data set and arm, Δ against base seed by seed."""

from __future__ import annotations

from benchmarks.fold_training import tables

COLLS = ("layout:nlp:default", "layout:nlp:random", "layout:xla:default", "layout:xla:random",
         "tile:xla")


def row(arm: str, seed: int, score: float, label: str = "tpu", held: float | None = None) -> dict:
    return {"label": label, "seed": seed, "arm": arm, "climbing": 1, "models": 12,
            "last quarter": -0.01, "tile worst 5%": {"blend": score},
            "collections": {c: {"gnn": score, "blend": score + 0.1} for c in COLLS},
            "held-out": {} if held is None else {c: {"gnn": held, "blend": held} for c in COLLS}}


def test_arms_are_compared_with_base_seed_by_seed():
    rows = [row("base", 0, 0.5), row("base", 1, 0.6), row("no-inner", 0, 0.6),
            row("no-inner", 1, 0.6)]
    table = tables(rows)["Out of fold, per data set and arm"]
    base, arm = table["rows"]
    assert base["arm"] == "base" and not any("Δ" in str(v) for v in base.values())
    assert "Δ" not in arm["gnn nlp:default"] and arm["blend tile worst 5%"].endswith("(Δ +0.050)")
    assert arm["gnn layout mean"] == "0.600±0.000 (Δ +0.050)"
    assert arm["blend tile"] == "0.700±0.000 (Δ +0.050)" and arm["climbing"] == "2/24"
    assert table["columns"][:4] == ["data", "arm", "seeds", "gnn nlp:default"]


def test_held_out_columns_only_where_the_runs_have_them():
    rows = [row("base", 0, 0.5), row("base", 0, 0.4, "g1", held=0.3),
            row("fast", 0, 0.4, "g1", held=0.45)]
    table = tables(rows)["Out of fold, per data set and arm"]
    by = {(r["data"], r["arm"]): r for r in table["rows"]}
    assert by[("g1", "fast")]["gnn layout held-out"] == "0.450±0.000 (Δ +0.150)"
    assert by[("tpu", "base")]["blend layout held-out"] == "—"
    assert set(table["columns"]) == set(by[("g1", "fast")])


def test_an_arm_is_compared_with_the_arm_it_builds_on():
    rows = [row("base", 0, 0.5), row("no-inner", 0, 0.6), {**row("tab", 0, 0.55), "against": "no-inner"}]
    by = {r["arm"]: r for r in tables(rows)["Out of fold, per data set and arm"]["rows"]}
    assert by["tab"]["gnn layout mean"] == "0.550±0.000 (Δ -0.050)"
    assert by["no-inner"]["gnn layout mean"] == "0.600±0.000 (Δ +0.100)"


def test_a_source_without_bench_row_is_described_on_the_command_line(monkeypatch, tmp_path):
    import benchmarks.fold_training as ft

    calls = []
    monkeypatch.setattr(ft, "train", lambda *args: calls.append(args))
    assert ft.main(["train", "--source", str(tmp_path), "--arm", "nb", "--against", "no-inner",
                    "--label", "g1", "--data", "D", "--seed", "0", "--", "--node-budget", "1"]) == 0
    (_, arm, _, options, against, run), = calls
    assert (arm, options, against) == ("nb", ["--node-budget", "1"], "no-inner")
    assert run == {"label": "g1", "data": "D", "seed": 0}


def test_collect_keeps_an_earlier_artifacts_rows_but_for_the_arms_measured_again(monkeypatch, tmp_path):
    import json

    import benchmarks.fold_training as ft

    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({"raw": [row("base", 0, 0.5), row("old", 0, 0.4)]}))
    (tmp_path / "arms" / "tpu-s0-base").mkdir(parents=True)
    (tmp_path / "arms" / "tpu-s0-base" / "arm.json").write_text("{}")
    monkeypatch.setattr(ft, "arm_row", lambda work: row("base", 0, 0.7))
    out = tmp_path / "out.json"
    assert ft.main(["collect", "--root", str(tmp_path / "arms"), "--earlier", str(earlier),
                    "--out", str(out)]) == 0
    raw = json.loads(out.read_text())["raw"]
    kept = sorted((r["arm"], r["collections"]["tile:xla"]["gnn"]) for r in raw)
    assert kept == [("base", 0.7), ("old", 0.4)]
    assert ft.main(["collect", "--root", str(tmp_path / "arms"), "--earlier", str(earlier),
                    "--retire", "old", "--out", str(out)]) == 0
    assert [r["arm"] for r in json.loads(out.read_text())["raw"]] == ["base"]
