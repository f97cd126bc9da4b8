"""Generated numbers in the docs: every results/benchmark table is written from a committed artifact.

A Markdown file marks a generated section with ``<!-- results:NAME -->`` ... ``<!-- /results:NAME -->``;
``python -m tpurank.results render`` (``make docs``) rewrites every marked section of ``README.md``, ``BENCHMARKS.md``
and ``docs/*.md`` from the artifact of that name, and ``--check`` only reports sections that differ
(what ``tests/test_docs.py`` asserts). Nothing between the markers is ever edited by hand.

(A few lines over 400: the renderers of every artifact kind sit together so a new table is added in one place.)

Artifacts (JSON, committed):

* ``results/NAME.json`` — scores, written by ``python -m tpurank.results capture`` from the
  ``report.json`` of ``python -m ensemble report`` (one run), or by ``capture-seeds`` from one
  report per seed (``results/seeds.json``, written by ``make results``, feeds the README tables);
* ``benchmarks/NAME.json`` — written by a benchmark command. The contract: top-level ``git_sha``,
  ``created`` (or ``date``), ``machine``, ``command`` (also accepted under ``meta``;
  :func:`bench_metadata` makes all four), and the figures as ``rows`` (or ``cases``: a list of
  objects, one level of nesting is flattened; ``columns`` orders them), ``tables``
  (``{title: {"columns": [...], "rows": [...]}}``) and/or top-level objects of figures (e.g.
  ``summary``: name -> value, one table each); an optional ``notes`` string is printed under them.

A missing artifact renders as "not measured at this commit", never as an old number. The git SHA
an artifact carries must be an ancestor of HEAD (``git merge-base --is-ancestor``; a ``-dirty``
SHA counts as its base commit): numbers measured on code that is not in the history are stale.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterable

from tpurank.atomic import write_json, write_text
from tpurank.config import git_sha

ROOT = Path(__file__).resolve().parent.parent
ARTIFACT_DIRS = ("results", "benchmarks")
DOC_FILES = ("README.md", "BENCHMARKS.md", "docs/*.md")
MARK = re.compile(r"(<!-- results:(?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /results:(?P=name) -->)",
                  re.S)
MODEL_ORDER = ("gnn", "lgbm", "baseline", "blend")
#: where a benchmark artifact may hold its table rows (the first present wins)
ROW_KEYS = ("rows", "cases", "results", "records", "runs")


class ArtifactError(ValueError):
    """An artifact that cannot be rendered; the message names the file and what is missing."""


# --- artifacts ---------------------------------------------------------------------------------

def artifact_path(name: str, root: Path = ROOT) -> Path | None:
    """``results/NAME.json`` or ``benchmarks/NAME.json`` (the first that exists), else None."""
    for folder in ARTIFACT_DIRS:
        path = root / folder / f"{name}.json"
        if path.is_file():
            return path
    return None


def load_artifact(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ArtifactError(f"{path}: expected a JSON object at the top level")
    return data


REQUIRED = ("git_sha", "command")  # without these an artifact cannot be rendered at all
RECORDED = ("created", "machine")  # shown as "not recorded" when absent; tests/test_docs.py insists


def _meta_sources(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Where provenance may sit: the top level (or its ``meta``), else every row of the table."""
    top = {**data.get("meta", {}), **data} if isinstance(data.get("meta"), dict) else data
    if any(top.get(k) for k in REQUIRED):
        return [top]
    key = next((k for k in ROW_KEYS if isinstance(data.get(k), list)), None)
    rows = [r for r in data.get(key, []) if isinstance(r, dict)] if key else []
    return rows or [top]


def _field(sources: list[dict[str, Any]], name: str) -> list[str]:
    values: dict[str, None] = {}
    for src in sources:
        value = src.get(name) or (src.get("date") if name == "created" else None)
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        if value:
            values[str(value)] = None
    return list(values)


def artifact_shas(data: dict[str, Any]) -> list[str]:
    """Every git SHA an artifact's figures were measured at (one per run when rows carry their own)."""
    return _field(_meta_sources(data), "git_sha")


def provenance(data: dict[str, Any], path: Path) -> dict[str, str]:
    """git_sha, created, machine, command of an artifact: top level, under ``meta``, or per row."""
    sources = _meta_sources(data)
    found = {k: _field(sources, k) for k in REQUIRED + RECORDED}
    missing = [k for k in REQUIRED if not found[k]]
    if missing:
        raise ArtifactError(f"{path}: missing {', '.join(missing)} (every artifact carries git_sha, "
                            f"created, machine and command: tpurank.results.bench_metadata)")
    shown = {k: "; ".join(v) for k, v in found.items()}
    shown["git_sha"] = ", ".join(s[:12] for s in found["git_sha"])
    return {k: v or f"{'date' if k == 'created' else k} not recorded" for k, v in shown.items()}


def missing_provenance(data: dict[str, Any]) -> list[str]:
    """The provenance fields an artifact lacks (empty when it carries all four)."""
    sources = _meta_sources(data)
    return [k for k in REQUIRED + RECORDED if not _field(sources, k)]


def base_sha(sha: str) -> str:
    return sha.removesuffix("-dirty")


def is_ancestor(sha: str, root: Path = ROOT) -> bool:
    """Whether commit ``sha`` (``-dirty`` stripped) is an ancestor of (or is) HEAD."""
    out = subprocess.run(["git", "merge-base", "--is-ancestor", base_sha(sha), "HEAD"], cwd=root,
                         capture_output=True, text=True, timeout=30)
    return out.returncode == 0


def machine_description() -> str:
    """What a captured artifact records as its machine: OS, CPU, core count (and GPU when torch sees one)."""
    desc = f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPU cores"
    cpu = platform.processor()
    if not cpu and Path("/proc/cpuinfo").is_file():
        names = [ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                 if ln.startswith("model name")]
        cpu = names[0] if names else ""
    return f"{desc} ({cpu})" if cpu else desc


# --- rendering ---------------------------------------------------------------------------------

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


def _bench_body(data: dict[str, Any], path: Path) -> str:
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
                         "stage": stage.get("stage"),
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
                     "wall_s (without generation)": round(sum(s.get("wall_s", 0) for s in stages), 1),
                     "peak_tree_rss_mb (max stage)": max((s.get("peak_tree_rss_mb", 0) for s in stages), default=0),
                     "peak_open_fds (max stage)": max((s.get("peak_open_fds", 0) for s in stages), default=0),
                     "input_mb": round(sizes.get("input_bytes", 0) / 2**20, 1),
                     "work_mb": round(sizes.get("work_bytes", 0) / 2**20, 1),
                     "work_over_input": sizes.get("work_over_input"),
                     **{f"hidden test {m}": v for m, v in (run.get("hidden_test") or {}).items()
                        if m in ("blend", "baseline")}})
    return rows


def bench_metadata(command: str) -> dict[str, str]:
    """The provenance every benchmark artifact carries: ``{**bench_metadata(cmd), "rows": [...]}``."""
    return {"git_sha": git_sha(), "created": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": machine_description(), "command": command}


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


def _run_body(data: dict[str, Any]) -> str:
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


def _seeds_body(data: dict[str, Any]) -> str:
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


def render_section(name: str, root: Path = ROOT) -> str:
    """The text between the markers of section ``name``, from its artifact."""
    path = artifact_path(name, root)
    if path is None:
        where = " or ".join(f"`{d}/{name}.json`" for d in ARTIFACT_DIRS)
        return f"_Not measured at this commit: no {where} yet._\n"
    data = load_artifact(path)
    prov = provenance(data, path)
    rel = path.relative_to(root).as_posix()
    head = (f"_Generated by `make docs` from `{rel}` — measured at commit `{prov['git_sha']}` on "
            f"{prov['created']}, {prov['machine']}, with `{prov['command']}`._")
    in_results = path.parent.name == "results"
    body = (_seeds_body(data) if in_results and "seeds" in data else
            _run_body(data) if in_results and "valid" in data else _bench_body(data, path))
    notes = f"\n\n{data['notes']}" if isinstance(data.get("notes"), str) and data["notes"] else ""
    return f"{head}\n\n{body}{notes}\n"


def doc_files(root: Path = ROOT) -> list[Path]:
    files: list[Path] = []
    for pattern in DOC_FILES:
        files += sorted(root.glob(pattern))
    return files


def sections(text: str) -> list[tuple[str, str]]:
    """``(name, body)`` of every marked section of a document."""
    return [(m["name"], m["body"]) for m in MARK.finditer(text)]


def rendered(text: str, root: Path = ROOT, errors: list[str] | None = None) -> str:
    """``text`` with every marked section rewritten from its artifact.

    A section whose artifact cannot be rendered keeps its old text; the error goes to ``errors``
    (raised when ``errors`` is None).
    """
    def one(m: re.Match) -> str:
        try:
            return m.group(1) + render_section(m["name"], root) + m.group(4)
        except ArtifactError as exc:
            if errors is None:
                raise
            errors.append(str(exc))
            return m.group(0)
    return MARK.sub(one, text)


def stale_sections(root: Path = ROOT) -> list[str]:
    """``file: section`` for every marked section that differs from what :func:`render` writes
    (or whose artifact cannot be rendered: ``file: section (error)``)."""
    stale = []
    for path in doc_files(root):
        text = path.read_text()
        for name, body in sections(text):
            rel = path.relative_to(root)
            try:
                if render_section(name, root) != body:
                    stale.append(f"{rel}: results:{name}")
            except ArtifactError as exc:
                stale.append(f"{rel}: results:{name} ({exc})")
    return stale


def render(root: Path = ROOT) -> tuple[list[Path], list[str]]:
    """Rewrite the marked sections of every doc file; returns (files changed, artifact errors)."""
    changed: list[Path] = []
    errors: list[str] = []
    for path in doc_files(root):
        text = path.read_text()
        new = rendered(text, root, errors)
        if new != text:
            write_text(path, new)
            changed.append(path)
    return changed, sorted(set(errors))


# --- capture -----------------------------------------------------------------------------------

def capture(report: Path, command: str, out: Path) -> Path:
    """``results/<name>.json`` from the ``report.json`` of ``python -m ensemble report``.

    The git SHA is the one the blend recorded (``blend.json`` beside the report), so the numbers
    are attributed to the code that produced them, not to the commit they are captured at.
    """
    write_json(out, captured(report, command))
    return out


def captured(report: Path, command: str) -> dict[str, Any]:
    """The artifact :func:`capture` writes: the report's tables with provenance and the run's
    ``seed``, both from the blend metadata beside the report."""
    data = json.loads(report.read_text())
    blend = report.parent / "blend.json"
    meta = json.loads(blend.read_text()).get("metadata", {}) if blend.is_file() else {}
    sha = meta.get("git_sha", "")
    return {
        "git_sha": sha or git_sha(),
        "created": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(report.stat().st_mtime)),
        "machine": machine_description(),
        "command": command,
        "run_id": data.get("run_id"),
        "valid": data["valid"],
        "valid_protocol": data.get("valid_protocol", {}),
        "hidden_test": data.get("hidden_test", {}),
        "oof": data.get("oof", {}),
        "seed": meta.get("seed", meta.get("config", {}).get("seed")),
    }


def newest_report(path: Path) -> Path:
    """``path`` itself when a file, else the newest ``*/report.json`` under the folder (the
    ``ensemble report`` run folders beside a submission)."""
    if path.is_file():
        return path
    found = sorted(path.glob("*/report.json"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise ArtifactError(f"{path}: no <run>/report.json (run `make run SUBMISSION={path}/submission.csv`)")
    return found[-1]


def capture_seeds(reports: list[Path], command: str, out: Path) -> Path:
    """``results/<name>.json`` from one ``ensemble report`` per seed (report files or the folders
    that hold them); the seed is read from each run's blend metadata."""
    runs = [captured(newest_report(path), command) for path in reports]
    shas = sorted({r["git_sha"] for r in runs})
    write_json(out, {"git_sha": shas[0] if len(shas) == 1 else ", ".join(shas),
                     "created": max(r["created"] for r in runs), "machine": machine_description(),
                     "command": command, "seeds": runs})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tpurank.results", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", required=True)
    r = sub.add_parser("render", help="rewrite the marked sections of README.md and docs/*.md")
    r.add_argument("--check", action="store_true", help="only list stale sections; exit 1 if any")
    c = sub.add_parser("capture", help="results/NAME.json from an ensemble report.json")
    c.add_argument("report", help="submissions/<run>/report.json of `python -m ensemble report`")
    c.add_argument("--command", required=True, help="the command that made the run, e.g. 'make run'")
    c.add_argument("--out", default=str(ROOT / "results" / "run.json"), help="artifact written")
    cs = sub.add_parser("capture-seeds", help="results/NAME.json from one ensemble report per seed")
    cs.add_argument("reports", nargs="+", help="report.json files, or the submission folders holding <run>/report.json")
    cs.add_argument("--command", required=True, help="the command that made the runs, e.g. 'make results'")
    cs.add_argument("--out", default=str(ROOT / "results" / "seeds.json"), help="artifact written")
    args = parser.parse_args(argv)
    if args.action == "capture-seeds":
        print(capture_seeds([Path(p) for p in args.reports], args.command, Path(args.out)))
        return 0
    if args.action == "capture":
        print(capture(Path(args.report), args.command, Path(args.out)))
        return 0
    try:
        if args.check:
            stale = stale_sections()
            for s in stale:
                print(f"stale: {s}", file=sys.stderr)
            return 1 if stale else 0
        changed, errors = render()
        for path in changed:
            print(f"rewrote {path.relative_to(ROOT)}")
        for error in errors:
            print(f"python -m tpurank.results: section left as it was: {error}", file=sys.stderr)
        return 1 if errors else 0
    except ArtifactError as exc:
        print(f"python -m tpurank.results: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
