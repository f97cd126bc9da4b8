"""The budget benchmark's layout table: the blend's and each model's layout scores per run."""

from __future__ import annotations

from benchmarks.budget import layout_rows


def run_row(run: str, seed: int, score: float) -> dict:
    colls = {c: {"blend": score, "gnn": score - 0.1, "lgbm": score - 0.2}
             for c in ("layout:nlp:default", "layout:nlp:random", "layout:xla:default", "layout:xla:random")}
    colls["tile:xla"] = {"blend": 1.0, "gnn": 1.0, "lgbm": 1.0}
    colls["layout:nlp:random"] = {"blend": score + 0.4, "gnn": score, "lgbm": score}
    return {"label": "tpu", "seed": seed, "run": run, "oof": {"collections": colls}}


def test_layout_rows_average_the_layout_collections_only_over_seeds():
    rows = layout_rows([run_row("2700-seeds", 0, 0.5), run_row("2700-seeds", 1, 0.7),
                        run_row("2700-seeds (old)", 0, 0.4)])
    new, old = rows
    assert (new["run"], new["seeds"], old["run"]) == ("2700-seeds", 2, "2700-seeds (old)")
    assert new["blend layout mean"].startswith("0.7000 ± 0.14")
    assert new["blend nlp:random"].startswith("1.0000") and "blend tile:xla" not in new
    assert old["gnn layout mean"] == "0.3250 ± 0.0000"  # (3 x 0.3 + 0.4) / 4


def test_earlier_rows_come_from_an_artifact_too(tmp_path):
    """``--earlier TAG=FILE.json``: the earlier artifact's rows of the label, seed and run, the
    plain-named run renamed after TAG, the tagged ones kept."""
    import json

    from benchmarks.budget import earlier_rows

    raw = [{"label": label, "seed": seed, "run": run} for label, seed, run in (
        ("tpu", 0, "2700-seeds"), ("tpu", 0, "2700-seeds (9bb7146)"), ("tpu", 1, "2700-seeds"),
        ("alt", 0, "2700-seeds"), ("tpu", 0, "quick"))]
    (tmp_path / "old.json").write_text(json.dumps({"raw": raw}))
    rows = earlier_rows("tpu", 0, "2700-seeds", [f"fdad40d={tmp_path / 'old.json'}"])
    assert [r["run"] for r in rows] == ["2700-seeds (fdad40d)", "2700-seeds (9bb7146)"]
