"""The ``tpurank`` console script dispatches to the stages' own entry points."""

from __future__ import annotations

from tpurank import cli


def test_help_lists_every_group(capsys) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(word in out for word in ["run", *cli.GROUPS])


def test_dispatch_runs_the_stage_entry_point(capsys) -> None:
    assert cli.main(["features", "--help"]) == 0
    assert "validate" in capsys.readouterr().out
    assert cli.main(["sample", "--help"]) == 0
    assert "--scale" in capsys.readouterr().out


def test_unknown_command_and_bad_run_arguments_exit_2(capsys) -> None:
    assert cli.main(["bogus"]) == 2
    assert "unknown command 'bogus'" in capsys.readouterr().err
    assert cli.main(["run", "--preset", "full"]) == 2
    assert "make variables" in capsys.readouterr().err


def test_core_package_imports_no_stage() -> None:
    import ast
    from pathlib import Path

    tree = ast.parse(Path(cli.__file__).read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not {m.split(".")[0] for m in imported} & {"features", "models", "ensemble"}


def test_run_without_a_checkout_is_the_planned_run(monkeypatch, capsys) -> None:
    """From a wheel (no Makefile, e.g. a Kaggle notebook) `tpurank run` is `ensemble run`, which
    needs a budget."""
    monkeypatch.setattr(cli.shutil, "which", lambda name: None)
    calls = []
    monkeypatch.setattr(cli, "run_module", lambda module, argv: calls.append((module, argv)) or 0)
    assert cli.main(["run", "DATA=/kaggle/input/x", "PRESET=full"]) == 2
    assert "BUDGET=seconds" in capsys.readouterr().err
    assert cli.main(["run", "DATA=D", "BUDGET=3600", "COLOUR=red"]) == 2
    assert "unknown: ['COLOUR']" in capsys.readouterr().err
    assert cli.main(["run", "DATA=D", "PRESET=full", "BUDGET=3600"]) == 0
    assert calls == [("ensemble", ["run", "--data", "D", "--preset", "full", "--budget", "3600"])]
