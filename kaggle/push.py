"""Upload the bundle built by ``bundle.py`` and submit: prints the Kaggle CLI commands (dry run,
the default) or runs them (``--execute``).

    python kaggle/push.py [--build kaggle/build] [--create] [--steps datasets,kernel,submit]
                          [--message MSG] [--execute]

Steps, in order:

- ``datasets``: ``kaggle datasets create -p DIR -r zip`` for a first upload (``--create``), else
  ``kaggle datasets version -p DIR -r zip -m MSG``; ``-r zip`` uploads sub-folders (weights) as
  archives that Kaggle unpacks.
- ``kernel``: ``kaggle kernels push -p BUILD/tpurank-inference`` (runs the offline notebook on Kaggle).
- ``submit``: once the kernel has finished, ``kaggle kernels output OWNER/SLUG -p DIR`` and
  ``kaggle competitions submit predict-ai-model-runtime -f DIR/submission.csv -m MSG``.

Metadata is re-validated before anything runs; credentials are the Kaggle CLI's own business
(``~/.kaggle/kaggle.json`` or ``KAGGLE_USERNAME``/``KAGGLE_KEY``), never read here.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kaggle_metadata as kmeta  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DEFAULT_BUILD = REPO / "kaggle" / "build"
DATASETS = ("tpurank-code", "tpurank-wheels", "tpurank-weights")
KERNEL = "tpurank-inference"
STEPS = ("datasets", "kernel", "submit")
PLACEHOLDER_OWNER = "your-kaggle-username"


def plan(build: Path, steps: tuple[str, ...] = STEPS, create: bool = False,
         message: str = "tpurank update", output_dir: Path | None = None) -> list[list[str]]:
    """The Kaggle CLI command lines for ``steps`` (each a list of arguments)."""
    commands: list[list[str]] = []
    if "datasets" in steps:
        for name in DATASETS:
            folder = str(build / name)
            if create:
                commands.append(["kaggle", "datasets", "create", "-p", folder, "-r", "zip"])
            else:
                commands.append(["kaggle", "datasets", "version", "-p", folder, "-r", "zip",
                                 "-m", message])
    if "kernel" in steps:
        commands.append(["kaggle", "kernels", "push", "-p", str(build / KERNEL)])
    if "submit" in steps:
        kernel_id = json.loads((build / KERNEL / kmeta.KERNEL_FILE).read_text())["id"]
        out = str(output_dir or build / "kernel-output")
        commands.append(["kaggle", "kernels", "status", kernel_id])
        commands.append(["kaggle", "kernels", "output", kernel_id, "-p", out])
        commands.append(["kaggle", "competitions", "submit", kmeta.COMPETITION, "-f",
                         f"{out}/submission.csv", "-m", message])
    return commands


def check_build(build: Path) -> list[str]:
    """Metadata problems of every folder to be pushed (empty = ready)."""
    problems: list[str] = []
    for name in DATASETS + (KERNEL,):
        folder = build / name
        if not folder.is_dir():
            problems.append(f"{folder}: missing; run `make kaggle-bundle` first")
            continue
        problems += kmeta.validate_folder(folder)
        meta_file = folder / (kmeta.KERNEL_FILE if name == KERNEL else kmeta.DATASET_FILE)
        if meta_file.is_file() and PLACEHOLDER_OWNER in meta_file.read_text():
            problems.append(f"{meta_file}: owner is the placeholder {PLACEHOLDER_OWNER!r}; rebuild "
                            "with KAGGLE_USERNAME=<you> make kaggle-bundle")
    return problems


def execute(commands: list[list[str]]) -> int:
    if shutil.which("kaggle") is None:
        print("the Kaggle CLI is not installed: pip install kaggle (and set up an API token)",
              file=sys.stderr)
        return 2
    for cmd in commands:
        print("+", shlex.join(cmd), flush=True)
        if cmd[:3] == ["kaggle", "kernels", "status"]:
            status = subprocess.run(cmd, capture_output=True, text=True)
            print(status.stdout.strip())
            if "complete" not in status.stdout.lower():
                print("kernel not complete yet: re-run with --steps submit when it is",
                      file=sys.stderr)
                return 3
            continue
        rc = subprocess.run(cmd).returncode
        if rc != 0:
            return rc
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", type=Path, default=DEFAULT_BUILD)
    parser.add_argument("--steps", default=",".join(STEPS),
                        help=f"comma-separated subset of {','.join(STEPS)}")
    parser.add_argument("--create", action="store_true", help="first upload: datasets create")
    parser.add_argument("--message", default="tpurank update")
    parser.add_argument("--output-dir", type=Path, default=None,
                        help="where the kernel's output (submission.csv) is downloaded")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", dest="execute", action="store_false", default=False,
                      help="print the commands (default)")
    mode.add_argument("--execute", action="store_true", help="run them")
    args = parser.parse_args(argv)
    steps = tuple(s.strip() for s in args.steps.split(",") if s.strip())
    unknown = [s for s in steps if s not in STEPS]
    if unknown:
        parser.error(f"unknown step(s) {unknown}; choose from {STEPS}")
    problems = check_build(args.build)
    if problems and args.execute:
        print("not pushing:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    for problem in problems:
        print(f"# warning: {problem}")
    commands = plan(args.build, steps, args.create, args.message, args.output_dir) \
        if (args.build / KERNEL / kmeta.KERNEL_FILE).is_file() or "submit" not in steps \
        else plan(args.build, tuple(s for s in steps if s != "submit"), args.create, args.message)
    if not args.execute:
        print("# dry run: the commands `make kaggle-push PUSH=1` would run")
        for cmd in commands:
            print(shlex.join(cmd))
        return 0
    return execute(commands)


if __name__ == "__main__":
    sys.exit(main())
