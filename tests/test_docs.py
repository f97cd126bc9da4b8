"""Docs: generated sections match the committed artifacts, artifacts come from this history, links work."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from benchmarks.render.artifacts import (ARTIFACT_DIRS, ROOT, ArtifactError, artifact_path, artifact_shas,
                                       is_ancestor, load_artifact, missing_provenance, provenance)
from benchmarks.render.capture import capture, capture_seeds
from benchmarks.render.render import doc_files, render, render_section, sections, stale_sections

LINK = re.compile(r"\]\((?!https?://|#|mailto:)([^)#\s]+)(?:#[^)]*)?\)")


def _artifacts() -> list[Path]:
    return sorted(p for d in ARTIFACT_DIRS for p in (ROOT / d).glob("*.json"))


def test_marked_sections_match_the_committed_artifacts() -> None:
    stale = stale_sections()
    assert not stale, ("sections differ from their artifacts (run `make docs`, i.e. "
                       "`python -m benchmarks.render render`): " + ", ".join(stale))


@pytest.mark.parametrize("path", _artifacts(), ids=lambda p: p.name)
def test_artifact_sha_is_an_ancestor_of_head(path: Path) -> None:
    shas = artifact_shas(load_artifact(path))
    assert shas, f"{path.relative_to(ROOT)}: no git_sha"
    outside = [s for s in shas if not is_ancestor(s)]
    assert not outside, (f"{path.relative_to(ROOT)}: measured at {outside}, not ancestors of HEAD "
                         f"— its numbers come from code outside this history; measure again")


def test_every_artifact_is_shown_somewhere() -> None:
    """Rendered by a marked section, or (a superseded experiment) linked from a doc by its path."""
    shown = {name for doc in doc_files() for name, _ in sections(doc.read_text())}
    linked = {(doc.parent / target).resolve() for doc in doc_files() for target in LINK.findall(doc.read_text())}
    unshown = [p.relative_to(ROOT).as_posix() for p in _artifacts() if p.stem not in shown and p.resolve() not in linked]
    assert not unshown, f"artifacts no doc section renders or links (add <!-- results:NAME --> markers): {unshown}"


def test_benchmarks_page_is_short_with_a_headline_and_contents() -> None:
    text = (ROOT / "BENCHMARKS.md").read_text()
    assert len(text.splitlines()) <= 700, "BENCHMARKS.md: one generated section per topic, superseded ones a line"
    head = text.split("## Contents")[0]
    assert "**The defaults, and how they compare.**" in head and len(head.splitlines()) <= 45
    prose = re.sub(r"<!-- results:.*?<!-- /results:[\w.-]+ -->", "", text, flags=re.S)
    for stale in ("segment_draw", "history_fill", "--tile-hedge", "6 h", "tests/bench", "issue "):
        assert stale not in prose, f"BENCHMARKS.md names {stale!r} (gone options, work-log prose)"


def test_a_section_can_show_some_tables_of_its_artifact(tmp_path: Path) -> None:
    (tmp_path / "benchmarks").mkdir()
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    (tmp_path / "benchmarks" / "two.json").write_text(json.dumps({
        "git_sha": sha, "created": "d", "machine": "m", "command": "c", "rows": [{"x": 1}],
        "tables": {"first": {"rows": [{"a": 1}]}, "second": {"rows": [{"b": 2}]}}}))
    doc = tmp_path / "BENCHMARKS.md"
    doc.write_text("<!-- results:two tables=1 -->\n<!-- /results:two -->\n")
    assert render(tmp_path)[1] == [] and stale_sections(tmp_path) == []
    text = doc.read_text()
    assert "**second**" in text and "**first**" not in text and "| x |" not in text
    with pytest.raises(ArtifactError, match="no 'tables' entry 5"):
        render_section("two", tmp_path, "5")


def test_readme_is_a_front_page_and_links_resolve() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 160, "README.md is the front page: move details to docs/"
    broken = [f"{doc.relative_to(ROOT)} -> {target}" for doc in doc_files()
              for target in LINK.findall(doc.read_text()) if not (doc.parent / target).exists()]
    assert not broken, f"broken relative links: {broken}"


def _toy(tmp_path: Path, rows: list[dict]) -> Path:
    (tmp_path / "benchmarks").mkdir(exist_ok=True)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                         text=True).stdout.strip()
    (tmp_path / "benchmarks" / "toy.json").write_text(json.dumps({
        "meta": {"git_sha": sha + "-dirty", "created": "2026-12-01", "machine": "m", "command": "c"},
        "columns": ["what", "seconds"], "rows": rows}))
    return tmp_path / "benchmarks" / "toy.json"


def test_generator_rewrites_sections_and_detects_staleness(tmp_path: Path) -> None:
    doc = tmp_path / "README.md"
    doc.write_text("# x\n<!-- results:toy -->\nold number 42\n<!-- /results:toy -->\ntail\n"
                   "<!-- results:missing -->\n<!-- /results:missing -->\n")
    path = _toy(tmp_path, [{"what": "load", "seconds": 1.23456}])
    assert stale_sections(tmp_path) == ["README.md: results:toy", "README.md: results:missing"]
    assert render(tmp_path)[1] == []
    text = doc.read_text()
    assert "old number" not in text and "| load | 1.235 |" in text and text.endswith("tail\n" + (
        "<!-- results:missing -->\n" + render_section("missing", tmp_path) + "<!-- /results:missing -->\n"))
    assert "Not measured at this commit" in render_section("missing", tmp_path)
    assert "`c`" in text and "2026-12-01" in text and stale_sections(tmp_path) == []
    _toy(tmp_path, [{"what": "load", "seconds": 2.0}])
    assert stale_sections(tmp_path) == ["README.md: results:toy"]
    assert is_ancestor(provenance(load_artifact(path), path)["git_sha"])
    assert not is_ancestor("0" * 40)


def test_artifact_without_provenance_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "bad.json").write_text(json.dumps({"rows": [{"a": 1}]}))
    with pytest.raises(ArtifactError, match="bad.json: missing git_sha, command"):
        render_section("bad", tmp_path)
    assert artifact_path("nope", tmp_path) is None


def test_capture_turns_a_report_into_the_readme_table(tmp_path: Path) -> None:
    run = tmp_path / "submissions" / "r1"
    run.mkdir(parents=True)
    (run / "report.json").write_text(json.dumps({
        "run_id": "r1", "valid": {"tile:xla": {"gnn": 0.9, "lgbm": 0.8, "blend": 0.95}},
        "hidden_test": {"tile:xla": {"gnn": 0.7, "lgbm": 0.6, "blend": 0.75}},
        "valid_protocol": {"tile:xla": "oof"}}))
    (run / "blend.json").write_text(json.dumps({"metadata": {"git_sha": "abc123"}}))
    out = capture(run / "report.json", "make run", tmp_path / "results" / "run.json")
    saved = json.loads(out.read_text())
    assert saved["git_sha"] == "abc123" and saved["command"] == "make run" and saved["machine"]
    body = render_section("run", tmp_path)
    assert "| tile:xla | 0.900 | 0.800 | 0.950 |" in body and "hidden test" in body


def test_capture_seeds_renders_mean_and_sd_over_seeds(tmp_path: Path) -> None:
    folders = []
    for seed, (gnn, lgbm) in enumerate([(0.6, 0.7), (0.8, 0.7), (0.7, 0.7)]):
        sub = tmp_path / "submissions" / f"seed{seed}"
        run = sub / f"run-seed{seed}"
        run.mkdir(parents=True)
        fold = {"mean": gnn, "sd": 0.05, "n_graphs": 10}
        (run / "report.json").write_text(json.dumps({
            "run_id": run.name, "valid": {"tile:xla": {"gnn": gnn, "lgbm": lgbm, "blend": 0.9}},
            "hidden_test": {"tile:xla": {"gnn": gnn, "lgbm": lgbm, "blend": 0.8}},
            "valid_protocol": {"tile:xla": "oof"},
            "oof": {"tile:xla": {"n_graphs": 10, "folds": 3, "models": {"gnn": fold, "lgbm": {**fold, "mean": lgbm}},
                                 "blend_nested": {**fold, "mean": 0.85}}}}))
        (run / "blend.json").write_text(json.dumps({"metadata": {"git_sha": "abc123", "seed": seed}}))
        folders.append(sub)
    out = capture_seeds(folders, "make results", tmp_path / "results" / "seeds.json")
    saved = json.loads(out.read_text())
    assert [r["seed"] for r in saved["seeds"]] == [0, 1, 2] and saved["git_sha"] == "abc123"
    body = render_section("seeds", tmp_path)
    assert "Seeds 0, 1, 2" in body
    assert "| tile:xla | 10 | 0.700 ± 0.100 (0.050) | 0.700 ± 0.000 (0.050) | 0.850 ± 0.000 (0.050) |" in body
    assert "| tile:xla | 0.700 ± 0.100 | 0.700 ± 0.000 | 0.900 ± 0.000 |" in body
    assert "| mean on the sample's hidden test runtimes | 0.700 ± 0.100 | 0.700 ± 0.000 | 0.800 ± 0.000 |" in body
    with pytest.raises(ArtifactError, match="no <run>/report.json"):
        capture_seeds([tmp_path / "empty"], "x", tmp_path / "x.json")


@pytest.mark.parametrize("path", _artifacts(), ids=lambda p: p.name)
def test_artifact_records_date_machine_and_command(path: Path) -> None:
    missing = missing_provenance(load_artifact(path))
    assert not missing, (f"{path.relative_to(ROOT)} lacks {', '.join(missing)}: write it with "
                         f"{{**benchmarks.render.artifacts.bench_metadata(command), 'rows': [...]}}")


def test_staged_runs_render_one_row_per_stage_with_per_run_provenance(tmp_path: Path) -> None:
    (tmp_path / "benchmarks").mkdir()
    run = {"git_sha": "abc", "date": "2026-12-01T10:00:00Z", "machine": {"cpus": 2},
           "command": "python -m benchmarks.scale", "preset": "quick",
           "dataset": {"scale": "kaggle", "files": 395, "configs": 1000},
           "stages": [{"stage": "build", "wall_s": 12.5, "command": "x", "stdout_tail": ["..."]}]}
    (tmp_path / "benchmarks" / "scale.json").write_text(json.dumps({"about": "a", "runs": [run]}))
    body = render_section("scale", tmp_path)
    assert "| kaggle | 395 | 1,000 | quick | validate + build | abc | build | 12.5 |" in body
    assert "**Per run**" in body
    assert "`abc`" in body and "cpus 2" in body and "benchmarks.scale" in body
    assert artifact_shas(json.loads((tmp_path / "benchmarks" / "scale.json").read_text())) == ["abc"]


def test_capture_real_renders_the_real_record_tables(tmp_path: Path) -> None:
    from benchmarks.render.capture import capture_real

    real = tmp_path / "real_eval.json"
    tile = {"tile_kernels": {f"k{i}": (3 if i < 2 else 9) for i in range(4)},
            "layout_configs": {"unet": 112}}
    results = [{"method": "random", "collection": "tile:xla", "score": 0.5, "score_gt5": 0.4, "spread": 0.01},
               {"method": "gnn", "collection": "tile:xla", "score": 0.9, "score_gt5": 0.8},
               {"method": "lgbm", "collection": "tile:xla", "missing": "no trained LightGBM"},
               {"method": "blend", "collection": "tile:xla", "score": 0.95, "score_gt5": 0.9},
               {"method": "average", "collection": "tile:xla", "score": 0.85, "score_gt5": 0.7},
               {"method": "heuristic", "collection": "layout:real", "score": 0.1},
               {"method": "gnn", "collection": "layout:real <- layout:xla:default", "score": 0.2}]
    real.write_text(json.dumps({**tile, "results": results, "metadata": {"git_sha": "abc123"}}))
    out = capture_real(real, "make run && python -m ensemble real", tmp_path / "results" / "real.json")
    assert json.loads(out.read_text())["git_sha"] == "abc123"
    body = render_section("real", tmp_path)
    assert "| random | — | 0.500 ± 0.010 | 0.400 |" in body
    assert "| method | trained on | all 4 kernels | 2 kernels with > 5 configs |" in body
    assert "| lgbm | tile:xla | not available | not available |" in body
    assert "| gnn | layout:xla:default | 0.200 |" in body and "Kendall τ (112 configs)" in body
    assert "| blend | tile:xla | 0.950 | 0.900 |" in body and "| average | tile:xla | 0.850 | 0.700 |" in body
    assert "without the hedge" in body
