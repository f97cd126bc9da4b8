"""Markdown tables, and the tables of a benchmark artifact (``benchmarks/*.json``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from tpurank.registry import MODELS
from benchmarks.render.artifacts import ROW_KEYS, ArtifactError

#: column order of the score tables: the models of the registry, then the blend
MODEL_ORDER = tuple(m.name for m in MODELS) + ("blend",)


def _cell(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return "—" if value is None else str(value).lower()
    if isinstance(value, float):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.1f}" if abs(value) >= 10 else f"{value:.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value).replace("|", "\\|")


def markdown_table(columns: list[str], rows: Iterable[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def _columns(rows: list[dict[str, Any]], columns: list[str] | None) -> list[str]:
    if columns:
        return list(columns)
    seen: dict[str, None] = {}
    for r in rows:
        seen.update(dict.fromkeys(r))
    return list(seen)


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    """One level of nesting flattened (``{"a": {"b": 1}}`` -> ``{"a.b": 1}``) for table cells."""
    out: dict[str, Any] = {}
    for k, v in row.items():
        if isinstance(v, dict):
            out.update({f"{k}.{k2}": v2 for k2, v2 in v.items()})
        else:
            out[k] = v
    return out


def bench_body(data: dict[str, Any], path: Path, tables: list[int] | None = None) -> str:
    """The tables of a benchmark artifact: its rows, its ``tables`` and its objects of figures;
    with ``tables``, only the ``tables`` entries at those positions."""
    if tables is not None:
        entries = list((data.get("tables") or {}).items())
        if not entries or max(tables) >= len(entries):
            raise ArtifactError(f"{path}: no 'tables' entry {max(tables)} (it has {len(entries)})")
        return "\n\n".join(f"**{title}**\n\n" + markdown_table(_columns(rows, table.get("columns")), rows)
                           for title, table in (entries[i] for i in tables)
                           for rows in [[_flat(r) for r in table.get("rows", [])]])
    parts = []
    key = next((k for k in ROW_KEYS if isinstance(data.get(k), list)), None)
    if key == "runs" and any(isinstance(r, dict) and "stages" in r for r in data["runs"]):
        rows = _stage_rows(data)
        parts.append(markdown_table(_columns(rows, None), rows))
        totals = _run_totals(data)
        parts.append("**Per run** (WORK after the run against the input's compressed npz size)\n\n"
                     + markdown_table(_columns(totals, None), totals))
    elif key:
        rows = [_flat(r) for r in data[key] if isinstance(r, dict)]
        parts.append(markdown_table(_columns(rows, data.get("columns")), rows))
    if isinstance(data.get("tables"), dict):
        for title, table in data["tables"].items():
            rows = [_flat(r) for r in table.get("rows", [])]
            parts.append(f"**{title}**\n\n" + markdown_table(_columns(rows, table.get("columns")), rows))
    for name, block in data.items():  # e.g. summary, measured, assumptions: name -> value tables
        if isinstance(block, dict) and block and name not in ("meta", "machine", "tables"):
            parts.append(markdown_table([name, "value"], [{name: k, "value": v}
                                                          for k, v in _flat(block).items()]))
    if not parts:
        raise ArtifactError(f"{path}: nothing to render: no {'/'.join(ROW_KEYS)} (a list of objects), "
                            f"'tables' or object of figures")
    return "\n\n".join(parts)


def _stage_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows of a staged benchmark (``runs[*].stages[*]``, e.g. ``benchmarks/scale.json``): one per
    run and stage, with the run's dataset and preset beside the stage's own figures."""
    rows = []
    for run in data["runs"]:
        ds = run.get("dataset", {})
        for stage in run.get("stages", []):
            rows.append({"scale": ds.get("scale"), "graphs": ds.get("files"), "configs": ds.get("configs"),
                         "preset": run.get("preset"), "pipeline": run.get("pipeline", "validate + build"),
                         "commit": str(run.get("git_sha") or "—")[:7], "stage": stage.get("stage"),
                         **{k: v for k, v in stage.items()
                            if k not in ("stage", "command", "stdout_tail", "make", "started", "rc")
                            and not isinstance(v, (list, dict))}})
    return rows


def _run_totals(data: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per staged run: what ran, its summed stage wall time and WORK against the input."""
    rows = []
    for run in data["runs"]:
        ds, sizes = run.get("dataset", {}), run.get("sizes", {})
        stages = [s for s in run.get("stages", []) if s.get("stage") != "generate"]
        rows.append({"scale": ds.get("scale"), "graph_fraction": ds.get("graph_fraction"),
                     "config_fraction": ds.get("config_fraction"), "graphs": ds.get("files"),
                     "preset": run.get("preset"), "pipeline": run.get("pipeline", "validate + build"),
                     "commit": str(run.get("git_sha") or "—")[:7],
                     "wall_s (without generation)": round(sum(s.get("wall_s", 0) for s in stages), 1),
                     "peak_tree_rss_mb (max stage)": max((s.get("peak_tree_rss_mb", 0) for s in stages), default=0),
                     "peak_open_fds (max stage)": max((s.get("peak_open_fds", 0) for s in stages), default=0),
                     "input_mb": round(sizes.get("input_bytes", 0) / 2**20, 1),
                     "work_mb": round(sizes.get("work_bytes", 0) / 2**20, 1),
                     "work_over_input": sizes.get("work_over_input"),
                     **{f"hidden test {m}": v for m, v in (run.get("hidden_test") or {}).items()
                        if m in MODEL_ORDER}})
    return rows
