"""The commands README.md and docs/kaggle.md name are the ones the Makefile runs: the stage list is
`make run`'s, every `make TARGET` exists, and the Kaggle targets call the scripts their tests run
(tests/kaggle: bundle, push against a stand-in Kaggle CLI, and the rehearsal)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = (ROOT / "README.md", ROOT / "docs" / "kaggle.md")


def make_n(*args: str) -> list[str]:
    """What `make -n ARGS` would run (no virtualenv: the recipes as written)."""
    proc = subprocess.run(["make", "-s", "-n", "-C", str(ROOT), "NO_VENV=1", *args],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return [" ".join(line.split()) for line in proc.stdout.splitlines()]


def stage_commands(lines: list[str]) -> list[tuple[str, str]]:
    """``(module, sub-command)`` of every ``-m MODULE SUB`` line, ``train|predict`` expanded."""
    out = []
    for line in lines:
        m = re.search(r"-m ([\w.]+) ([\w|]+)", line)
        if m:
            out += [(m[1], sub) for sub in m[2].split("|")]
    return out


def test_the_readme_stage_list_is_what_make_run_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("`make run` runs these stages in order"):]
    block = block[block.index("```bash"):block.index("```", block.index("```bash") + 3)]
    assert stage_commands(block.splitlines()) == stage_commands(make_n("run", "DATA=D", "WORK=W"))


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_make_target_the_docs_name_exists(doc: Path) -> None:
    for target in sorted(set(re.findall(r"\bmake ([a-z][\w-]*)", doc.read_text()))):
        make_n(target, "DATA=D")  # fails when the Makefile has no such target


def test_the_kaggle_targets_call_the_scripts_their_tests_run() -> None:
    assert make_n("kaggle-bundle") == ["python3 kaggle/bundle.py"]
    weights = make_n("kaggle-bundle", "WEIGHTS=1", "DATA=data/kaggle", "PRESET=full")
    assert weights == ["python3 kaggle/bundle.py --weights-from work/kaggle-full"]
    assert make_n("kaggle-push") == ["python3 kaggle/push.py --dry-run"]
    assert make_n("kaggle-push", "PUSH=1", 'PUSH_ARGS=--steps inference,submit') == [
        "python3 kaggle/push.py --execute --steps inference,submit"]
    assert make_n("kaggle-rehearsal") == ["python3 kaggle/rehearsal.py --budget 120"]
    for test in ("test_bundle.py", "test_push.py", "test_rehearsal.py"):
        assert (ROOT / "tests" / "kaggle" / test).is_file()
