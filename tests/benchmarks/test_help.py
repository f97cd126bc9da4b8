"""Every benchmark script answers ``--help`` (the lab's entry points stay runnable)."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import ROOT
from benchmarks.__main__ import QUICK

SCRIPTS = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py")
                 if p.stem != "__main__" and 'if __name__ == "__main__"' in p.read_text())


def test_the_lab_has_its_scripts_and_quick_set() -> None:
    assert len(SCRIPTS) >= 20 and set(QUICK) <= set(SCRIPTS)
    assert not list((ROOT / "tests").glob("bench/*.py"))  # the lab moved out of the tests


@pytest.mark.filterwarnings("ignore:.*found in sys.modules:RuntimeWarning")
@pytest.mark.parametrize("name", SCRIPTS)
def test_script_help(name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(sys, "argv", [f"benchmarks/{name}.py", "--help"])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_module(f"benchmarks.{name}", run_name="__main__", alter_sys=False)
    assert exit_.value.code in (0, None)
    assert "usage:" in capsys.readouterr().out


def test_make_bench_entry_point_and_render_help() -> None:
    for module in ("benchmarks", "benchmarks.render"):
        out = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0 and "usage: python -m " + module in out.stdout, out.stderr
