"""The fold-training benchmark's table: per data set and arm, Δ against base seed by seed."""

from __future__ import annotations

from benchmarks.fold_training import tables

COLLS = ("layout:nlp:default", "layout:nlp:random", "layout:xla:default", "layout:xla:random",
         "tile:xla")


def row(arm: str, seed: int, score: float) -> dict:
    return {"label": "tpu", "seed": seed, "arm": arm, "climbing": 1, "models": 12,
            "last quarter": -0.01, "tile worst 5%": {"blend": score},
            "collections": {c: {"gnn": score, "blend": score + 0.1} for c in COLLS}}


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
