"""The score tables of ``results/*.json``: one run (``capture``), several seeds (``capture-seeds``),
the real TPU records (``capture-real``)."""

from __future__ import annotations

from typing import Any

from benchmarks.render.tables import MODEL_ORDER, markdown_table


def _oof_table(oof: dict[str, Any]) -> str:
    """Out-of-fold scores per collection: each model's mean ± sd over folds and the blend's nested
    (leave-one-fold-out) score, with the number of labelled graphs and folds."""
    models = sorted({m for c in oof.values() for m in c.get("models", {})},
                    key=lambda m: (MODEL_ORDER.index(m) if m in MODEL_ORDER else len(MODEL_ORDER), m))

    def cell(entry: dict[str, Any] | None) -> str:
        return "—" if not entry else f"{entry['mean']:.3f} ± {entry['sd']:.3f}"

    rows = [{"collection": c, "graphs": v.get("n_graphs"), "folds": v.get("folds"),
             **{m: cell(v.get("models", {}).get(m)) for m in models},
             "blend (nested)": cell(v.get("blend_nested"))} for c, v in sorted(oof.items())]
    means = {m: [v["models"][m]["mean"] for v in oof.values() if m in v.get("models", {})] for m in models}
    blend = [v["blend_nested"]["mean"] for v in oof.values() if v.get("blend_nested")]
    rows.append({"collection": "**mean**", **{m: f"{sum(x) / len(x):.3f}" if len(x) == len(oof) else "—"
                                              for m, x in means.items()},
                 "blend (nested)": f"{sum(blend) / len(blend):.3f}" if len(blend) == len(oof) else "—"})
    return markdown_table(["collection", "graphs", "folds", *models, "blend (nested)"], rows)


def run_body(data: dict[str, Any]) -> str:
    """The README tables: out-of-fold scores (when the run cross-validated), then the official
    valid score per collection and model, the mean, and the hidden-test mean."""
    oof = data.get("oof") or {}
    head = ("**Out-of-fold** (train + valid graphs, each scored by a fold model that never saw it; "
            "mean ± sd over folds):\n\n" + _oof_table(oof) + "\n\n**Official valid split**:\n\n") if oof else ""
    return head + _valid_body(data)


def collection_mean(scores: dict[str, dict[str, float]], model: str) -> float | None:
    """Mean over collections of ``scores[collection][model]``; None unless every collection has it."""
    vals = [v[model] for v in scores.values() if model in v]
    return sum(vals) / len(vals) if vals and len(vals) == len(scores) else None


def _valid_body(data: dict[str, Any]) -> str:
    valid: dict[str, dict[str, float]] = data["valid"]
    models = [m for m in MODEL_ORDER if any(m in v for v in valid.values())]
    models += sorted({m for v in valid.values() for m in v} - set(models))
    rows = [{"collection": c, **{m: v.get(m) for m in models}} for c, v in valid.items()]
    mean = collection_mean
    rows.append({"collection": "**mean (valid)**", **{m: mean(valid, m) for m in models}})
    test = data.get("hidden_test") or {}
    if test:
        rows.append({"collection": "mean on the sample's hidden test runtimes",
                     **{m: mean(test, m) for m in models}})
    table = markdown_table(["collection"] + models, rows)
    protocols = sorted(set((data.get("valid_protocol") or {}).values()))
    note = f"\n\nBlend weights fitted on: {', '.join(protocols)}." if protocols else ""
    return table + note


def _spread(values: list[float]) -> tuple[float, float]:
    """Mean and sample sd (0 for a single value)."""
    n = len(values)
    mean = sum(values) / n
    sd = (sum((v - mean) ** 2 for v in values) / (n - 1)) ** 0.5 if n > 1 else 0.0
    return mean, sd


def _seed_cell(values: list[float], folds_sd: list[float] | None = None) -> str:
    if not values:
        return "—"
    mean, sd = _spread(values)
    cell = f"{mean:.3f} ± {sd:.3f}"
    return cell + (f" ({sum(folds_sd) / len(folds_sd):.3f})" if folds_sd else "")


def _seed_models(runs: list[dict[str, Any]], key: str) -> list[str]:
    found = {m for r in runs for c in (r.get(key) or {}).values()
             for m in (c.get("models", {}) if key == "oof" else c)}
    return [m for m in MODEL_ORDER if m in found] + sorted(found - set(MODEL_ORDER))


def _seeds_oof_table(runs: list[dict[str, Any]]) -> str:
    """OOF per collection and model over seeds: mean ± sd of the seeds' fold means, and in
    brackets the mean over seeds of the sd over folds; the blend's nested score alike."""
    models = _seed_models(runs, "oof")
    colls = sorted({c for r in runs for c in r.get("oof", {})})

    def entry(r: dict[str, Any], c: str, m: str) -> dict[str, Any] | None:
        v = r.get("oof", {}).get(c, {})
        return v.get("blend_nested") if m == "blend (nested)" else v.get("models", {}).get(m)

    cols = [*models, "blend (nested)"]
    rows = []
    for c in colls:
        row: dict[str, Any] = {"collection": c, "graphs": runs[0]["oof"].get(c, {}).get("n_graphs")}
        for m in cols:
            es = [e for e in (entry(r, c, m) for r in runs) if e]
            row[m] = _seed_cell([e["mean"] for e in es], [e["sd"] for e in es]) if len(es) == len(runs) else "—"
        rows.append(row)
    mean_row: dict[str, Any] = {"collection": "**mean**"}
    for m in cols:  # per seed: the mean over collections; then mean ± sd over seeds
        per_seed = [[entry(r, c, m) for c in colls] for r in runs]
        ok = all(all(per) for per in per_seed)
        mean_row[m] = _seed_cell([sum(e["mean"] for e in per) / len(per) for per in per_seed]) if ok else "—"
    rows.append(mean_row)
    return markdown_table(["collection", "graphs", *cols], rows)


def _seeds_valid_table(runs: list[dict[str, Any]]) -> str:
    """Official valid per collection and model (mean ± sd over seeds), the mean over collections
    and the same mean on the sample's hidden test runtimes."""
    models = _seed_models(runs, "valid")
    colls = list(runs[0]["valid"])

    rows = [{"collection": c, **{m: _seed_cell([r["valid"][c][m] for r in runs
                                                if m in r["valid"].get(c, {})]) for m in models}}
            for c in colls]
    for key, label in (("valid", "**mean (valid)**"), ("hidden_test", "mean on the sample's hidden test runtimes")):
        if all(r.get(key) for r in runs):
            vals = {m: [collection_mean(r[key], m) for r in runs] for m in models}
            rows.append({"collection": label, **{m: _seed_cell(v) if None not in v else "—"
                                                 for m, v in vals.items()}})
    return markdown_table(["collection", *models], rows)


def seeds_body(data: dict[str, Any]) -> str:
    """The README tables of a multi-seed artifact (``capture-seeds``)."""
    runs = data["seeds"]
    seeds = ", ".join(str(r.get("seed")) for r in runs)
    oof = all(r.get("oof") for r in runs)
    head = (f"Seeds {seeds}: each cell is the mean ± sd over the {len(runs)} seeds.\n\n")
    if oof:
        head += ("**Out-of-fold** (train + valid graphs, each scored by a fold model that never saw "
                 "it; in brackets the sd over folds, averaged over seeds):\n\n"
                 + _seeds_oof_table(runs) + "\n\n")
    protocols = sorted({p for r in runs for p in (r.get("valid_protocol") or {}).values()})
    note = f"\n\nBlend weights fitted on: {', '.join(protocols)}." if protocols else ""
    return head + "**Official valid split**:\n\n" + _seeds_valid_table(runs) + note


def _real_cell(r: dict[str, Any], key: str = "score") -> str:
    if "missing" in r:
        return "not available"
    value = r.get(key)
    if value is None:
        return "—"
    spread = f" ± {r['spread']:.3f}" if key == "score" and r.get("spread") is not None else ""
    return f"{value:.3f}{spread}"


def real_body(data: dict[str, Any]) -> str:
    """The tables of ``ensemble real`` (``results/real.json``): tile top-5 score over every kernel
    and over those with more than 5 configs; layout Kendall τ over the record's configs."""
    kernels = data["tile_kernels"]
    many = sum(n > 5 for n in kernels.values())
    configs = ", ".join(str(n) for n in data["layout_configs"].values())
    tile_rows, layout_rows = [], []
    for r in data["results"]:
        trained = r["collection"].split(" <- ")[1] if " <- " in r["collection"] else (
            r["collection"] if r["method"] in (*MODEL_ORDER, "average") else "—")
        if r["collection"].startswith("tile"):
            tile_rows.append({"method": r["method"], "trained on": trained,
                              f"all {len(kernels)} kernels": _real_cell(r),
                              f"{many} kernels with > 5 configs": _real_cell(r, "score_gt5")})
        else:
            layout_rows.append({"method": r["method"], "models of": trained,
                                f"Kendall τ ({configs} configs)": _real_cell(r)})
    notes = ("Random: the mean of random rankings (± the sd of that mean over draws); a trained "
             "model: the mean over its seeds (± their sd when there are several), each seed's "
             "fold models averaged per graph as for the test split.")
    if any(r["method"] == "blend" for r in data["results"]):
        notes += (" Blend: what the run's blend would submit (its out-of-fold weights and, on tile, "
                  "hedged top 5); average: its weighted average without the hedge.")
    return ("**Tile** (top-5 score):\n\n" + markdown_table(list(tile_rows[0]), tile_rows)
            + "\n\n**Layout** (the UNet record):\n\n" + markdown_table(list(layout_rows[0]), layout_rows)
            + "\n\n" + notes)

