"""``tpurank``: one console script in front of the stages' ``python -m`` entry points
(``tpurank gnn train ...`` = ``python -m models.gnn train ...``) and ``make run`` (``tpurank run``).

Stages are named by module strings and run with :mod:`runpy`, so this core package imports no
stage (the layers go tpurank -> features -> models -> ensemble). ``python -m`` keeps working: this
is only a shorter spelling of it.
"""

from __future__ import annotations

import importlib
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

from tpurank.registry import MODELS

#: console word -> (module run as ``__main__``, what it does); one word per registered model
GROUPS: dict[str, tuple[str, str]] = {
    "features": ("features", "validate | build | sample: the feature stage"),
    **{m.name: (m.module, m.help) for m in MODELS},
    "ensemble": ("ensemble", "blend | check | report | score | submit | real | run"),
    "hlo": ("features.hlo", "info | convert: raw HLO protos"),
    "sample": ("features.sample", "write the generated sample dataset"),
}


def dispatch(prog: str, commands: dict[str, tuple[str, str]], argv: list[str] | None = None) -> int:
    """``python -m <prog> <command> [options]``: every stage module's sub-commands. ``commands``:
    name -> ("module:function" run with the rest of the command line, help); usage on ``--help``
    (0), on no or an unknown command (2)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in commands:
        helping = bool(argv) and argv[0] in ("-h", "--help")
        if argv and not helping:
            print(f"unknown command {argv[0]!r}\n", file=sys.stderr)
        print(f"usage: python -m {prog} {{{'|'.join(commands)}}} [options]\n")
        print("\n".join(f"  {name:10s} {help_}" for name, (_, help_) in commands.items()))
        return 0 if helping else 2
    module, func = commands[argv[0]][0].split(":")
    try:
        target = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        print(f"python -m {prog} {argv[0]}: module {module} is not available in this checkout ({exc})",
              file=sys.stderr)
        return 2
    return int(getattr(target, func)(argv[1:]) or 0)


def usage() -> str:
    lines = ["usage: tpurank {run," + ",".join(GROUPS) + "} [options]", "",
             f"  {'run':9s} the whole pipeline (make run; VAR=value arguments are passed on; "
             "without a checkout: the run planned to BUDGET=seconds)"]
    lines += [f"  {word:9s} {help_}" for word, (_, help_) in GROUPS.items()]
    lines += ["", "Each command's --help lists its options (e.g. tpurank gnn train --help)."]
    return "\n".join(lines)


#: ``tpurank run`` variables outside a checkout -> options of the planned run (python -m ensemble run)
PLANNED_RUN_VARS = ("DATA", "WORK", "PRESET", "SEED", "MODELS", "PROTOCOL", "SUBMISSION", "BUDGET")


def run_pipeline(args: list[str]) -> int:
    """``make run`` with ``args`` (``DATA=... PRESET=...``): the Makefile is the one definition.
    Installed from a wheel (a Kaggle notebook, a pip install: no Makefile), the same stages run as
    the planned run, ``python -m ensemble run``, which needs ``BUDGET``."""
    bad = [a for a in args if "=" not in a]
    if bad:
        print(f"tpurank run: arguments are make variables (DATA=root PRESET=full ...), got {bad}",
              file=sys.stderr)
        return 2
    root = Path(__file__).resolve().parent.parent
    make = shutil.which("make")
    if make is not None and (root / "Makefile").is_file():
        return subprocess.run([make, "-C", str(root), "run", *args]).returncode
    values = dict(a.split("=", 1) for a in args)
    unknown = sorted(set(values) - set(PLANNED_RUN_VARS))
    if "BUDGET" not in values or unknown:
        print(f"tpurank run: without a checkout's Makefile the pipeline runs planned to a time budget: "
              f"tpurank run BUDGET=seconds [{'=... '.join(PLANNED_RUN_VARS[:-1])}=...]"
              + (f"; unknown: {unknown}" if unknown else ""), file=sys.stderr)
        return 2
    options = [arg for key, value in values.items() for arg in (f"--{key.lower()}", value)]
    return run_module("ensemble", ["run", *options])


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    word, rest = argv[0], argv[1:]
    if word == "run":
        return run_pipeline(rest)
    if word not in GROUPS:
        print(f"tpurank: unknown command {word!r}\n\n{usage()}", file=sys.stderr)
        return 2
    return run_module(GROUPS[word][0], rest)


def run_module(module: str, argv: list[str]) -> int:
    """``python -m module argv`` in this process (runpy sets ``sys.argv[0]``); its exit code."""
    saved = sys.argv
    sys.argv = [module, *argv]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = saved
    return 0


if __name__ == "__main__":
    sys.exit(main())
