"""Upload the bundle built by ``bundle.py``, run the kernels and submit: prints the Kaggle CLI
commands (dry run, the default) or runs them (``--execute``), each step only once what it
needs is ready (the steps: docs/kaggle.md).

A step waits up to ``--wait`` seconds for what it needs; then, or at once when a kernel failed,
it refuses and prints the command that goes on from there. Credentials are the Kaggle CLI's own
business (``~/.kaggle/kaggle.json`` or ``KAGGLE_USERNAME``/``KAGGLE_KEY``), never read here.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kaggle_metadata as kmeta  # noqa: E402
from kaggle_metadata import BUNDLE_FILE, DEFAULT_BUILD, DEFAULT_OWNER, INFERENCE, TRAIN  # noqa: E402

STEPS = ("datasets", "train", "inference", "submit")
DONE = {"dataset": "ready", "kernel": "complete"}  # the status a step waits for
#: a kernel pushed by this run may still report its previous version's "complete" for a while:
#: that status counts once the new run was seen queued or running, or after this many seconds
FRESH_PUSH_GRACE = 180.0


@dataclass
class Step:
    """One step: what must be ready first (``(kind, id)``: dataset or kernel), its commands and
    the id of the kernel it pushes (if any)."""

    name: str
    needs: list[tuple[str, str]]
    commands: list[list[str]]
    pushes: str | None = None


def read_bundle(build: Path) -> dict:
    """``BUILD/BUNDLE.json`` (route, owner, datasets); a missing file is an unbuilt bundle."""
    path = build / BUNDLE_FILE
    if not path.is_file():
        raise SystemExit(f"{path}: missing; run `make kaggle-bundle` first")
    return json.loads(path.read_text())


def meta_id(build: Path, name: str) -> str:
    """The Kaggle id of the dataset or kernel folder ``build/name``."""
    path = kmeta.metadata_file(build / name)
    if path is None:
        raise SystemExit(f"{build / name}: no Kaggle metadata; run `make kaggle-bundle` first")
    return json.loads(path.read_text())["id"]


def plan(build: Path, steps: tuple[str, ...], create: bool, message: str, output_dir: Path | None,
         accelerator: str | None) -> list[Step]:
    """The steps of ``steps`` that the bundle's route has (the weights route trains nowhere on
    Kaggle), with their prerequisites and commands."""
    bundle = read_bundle(build)
    local = bundle["route"] == "local"
    ready = [("dataset", meta_id(build, d)) for d in bundle["datasets"]]
    train, inference = meta_id(build, TRAIN), meta_id(build, INFERENCE)
    verb = ["create"] if create else ["version", "-m", message]
    folder = str(output_dir or build / "kernel-output")
    table = [
        Step("datasets", [], [["kaggle", "datasets", verb[0], "-p", str(build / d), "-r", "zip", *verb[1:]]
                              for d in bundle["datasets"]]),
        Step("train", ready, [["kaggle", "kernels", "push", "-p", str(build / TRAIN),
                               *(["--accelerator", accelerator] if accelerator else [])]], train),
        Step("inference", ready if local else [("kernel", train)],
             [["kaggle", "kernels", "push", "-p", str(build / INFERENCE)]], inference),
        Step("submit", [("kernel", inference)], [
            ["kaggle", "kernels", "output", inference, "-p", folder],
            ["kaggle", "competitions", "submit", kmeta.COMPETITION, "-f", f"{folder}/submission.csv",
             "-m", message]]),
    ]
    return [step for step in table if step.name in steps and not (local and step.name == "train")]


def check_build(build: Path) -> list[str]:
    """Metadata problems of every folder to be pushed (empty = ready)."""
    try:
        bundle = read_bundle(build)
    except SystemExit as err:
        return [str(err)]
    problems: list[str] = []
    for name in bundle["datasets"] + [TRAIN, INFERENCE]:
        folder = build / name
        if not folder.is_dir():
            problems.append(f"{folder}: missing; run `make kaggle-bundle` first")
            continue
        problems += kmeta.validate_folder(folder)
        meta_file = kmeta.metadata_file(folder)
        if meta_file and DEFAULT_OWNER in meta_file.read_text():
            problems.append(f"{meta_file}: owner is the placeholder {DEFAULT_OWNER!r}; rebuild "
                            "with KAGGLE_USERNAME=<you> make kaggle-bundle")
    return problems


def status(kind: str, ident: str) -> str:
    """``ready``/``pending``/``error`` of a dataset, ``queued``/``running``/``complete``/``error``
    (or ``cancel...``) of a kernel, as the Kaggle CLI prints it; ``unknown`` when it fails."""
    proc = subprocess.run(["kaggle", f"{kind}s", "status", ident], capture_output=True, text=True)
    text = (proc.stdout + proc.stderr).lower()
    words = ("error", "cancel", "complete", "running", "queued", "ready", "pending")
    return next((w for w in words if w in text), "unknown") if proc.returncode == 0 else "unknown"


def wait_ready(kind: str, ident: str, wait: float, poll: float, pushed_at: float | None) -> str:
    """Poll until ``ident`` is :data:`DONE`, failed, or ``wait`` is over; returns the last status.
    A kernel this run pushed must be seen running first (or the grace of
    :data:`FRESH_PUSH_GRACE` pass): before, "complete" may be its previous version's."""
    deadline, seen_running = time.monotonic() + wait, pushed_at is None
    while True:
        state = status(kind, ident)
        seen_running |= state in ("queued", "running")
        fresh = seen_running or time.monotonic() - (pushed_at or 0.0) > FRESH_PUSH_GRACE
        if (state == DONE[kind] and fresh) or state in ("error", "cancel") or time.monotonic() >= deadline:
            return state if state != DONE[kind] or fresh else "running"
        print(f"  waiting for {kind} {ident}: {state}", flush=True)
        time.sleep(poll)


def execute(steps: list[Step], wait: float, poll: float, create: bool) -> int:
    if shutil.which("kaggle") is None:
        print("the Kaggle CLI is not installed: pip install kaggle (and set up an API token)",
              file=sys.stderr)
        return 2
    pushed: dict[str, float] = {}  # kernel id -> when this run pushed it
    for i, step in enumerate(steps):
        retry = (f'make kaggle-push PUSH=1 PUSH_ARGS="--steps {",".join(s.name for s in steps[i:])}'
                 f'{" --create" if create and step.name == "datasets" else ""}"')
        for kind, ident in step.needs:
            state = wait_ready(kind, ident, wait, poll, pushed.get(ident))
            if state not in ("ready", "complete"):
                failed = state in ("error", "cancel")
                what = "failed" if failed else f"is not ready yet ({state})"
                log = f"; its log: kaggle kernels output {ident} -p kernel-log" if failed \
                    and kind == "kernel" else ""
                print(f"not running step {step.name!r}: {kind} {ident} {what}{log}\n"
                      f"when it is {DONE[kind]}, run: {retry}", file=sys.stderr)
                return 3
        for cmd in step.commands:
            print("+", shlex.join(cmd), flush=True)
            rc = subprocess.run(cmd).returncode
            if rc != 0:
                print(f"step {step.name!r} failed ({rc}); to retry: {retry}", file=sys.stderr)
                return rc
        if step.pushes:
            pushed[step.pushes] = time.monotonic()
    return 0


def print_plan(steps: list[Step]) -> None:
    print("# dry run: the commands `make kaggle-push PUSH=1` would run")
    for step in steps:
        for kind, ident in step.needs:
            print(f"# {step.name}: wait until `kaggle {kind}s status {ident}` says {DONE[kind]}")
        for cmd in step.commands:
            print(shlex.join(cmd))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", type=Path, default=DEFAULT_BUILD, help="the bundle (make kaggle-bundle)")
    parser.add_argument("--steps", default=",".join(STEPS),
                        help=f"comma-separated subset of {','.join(STEPS)}")
    parser.add_argument("--create", action="store_true", help="first upload: datasets create")
    parser.add_argument("--message", default="tpurank update", help="dataset version and submission message")
    parser.add_argument("--output-dir", type=Path, default=None,
                        help="where the inference kernel's output (submission.csv) is downloaded")
    parser.add_argument("--accelerator", default=None,
                        help="the train kernel's accelerator (kaggle kernels push --accelerator), "
                             "e.g. NvidiaTeslaT4; default: the metadata's GPU")
    parser.add_argument("--wait", type=float, default=1800.0,
                        help="seconds a step waits for what it needs before it refuses (default 1800)")
    parser.add_argument("--poll", type=float, default=30.0, help="seconds between status checks")
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
    if problems and (args.execute or not (args.build / BUNDLE_FILE).is_file()):
        print("not pushing:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    for problem in problems:
        print(f"# warning: {problem}")
    planned = plan(args.build, steps, args.create, args.message, args.output_dir, args.accelerator)
    if not args.execute:
        print_plan(planned)
        return 0
    return execute(planned, args.wait, args.poll, args.create)


if __name__ == "__main__":
    sys.exit(main())
