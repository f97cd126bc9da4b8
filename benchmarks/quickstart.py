"""How long the README's commands take on this machine: a fresh clone of HEAD, then ``make
setup``, ``make test``, ``make run`` and ``make kaggle-rehearsal`` in it, each timed (wall
seconds; the whole command, as a user runs it). Writes ``benchmarks/quickstart.json`` (the
README's table, ``make docs``).

    python -m benchmarks.quickstart [--out benchmarks/quickstart.json] [--clone /tmp/tpurank-quickstart]
                                    [--targets setup,test,run,kaggle-rehearsal]

The clone has nothing beside it (no ``../shared``) and no ``.venv``: ``make setup`` installs
everything, from pip's cache when this machine has one (said in the artifact's notes).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.render.artifacts import bench_metadata

REPO = Path(__file__).resolve().parent.parent
WHAT = {"setup": "creates .venv and installs torch, then tpurank with its dev extras",
        "test": "the fast test suite (sets up .venv first when missing)",
        "run": "the whole pipeline on the generated sample (quick preset) -> a checked submission",
        "kaggle-rehearsal": "the Kaggle route offline: bundle, train kernel, inference kernel"}


def timed(target: str, clone: Path, log: Path) -> dict[str, object]:
    """``make TARGET`` in the clone: wall seconds, exit code, and the log's last line."""
    t0 = time.monotonic()
    with log.open("w") as out:
        rc = subprocess.run(["make", target], cwd=clone, stdout=out, stderr=subprocess.STDOUT,
                            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}).returncode
    seconds = time.monotonic() - t0
    last = [ln for ln in log.read_text().splitlines() if ln.strip()][-1:] or [""]
    print(f"make {target}: {seconds:,.0f} s (rc {rc})", flush=True)
    return {"command": f"make {target}", "what": WHAT.get(target, ""), "wall": f"{seconds / 60:.1f} min",
            "seconds": round(seconds), "exit code": rc, "last line": last[0][:100]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "quickstart.json")
    p.add_argument("--clone", type=Path, default=Path("/tmp/tpurank-quickstart") / "tpurank",
                   help="where the fresh clone goes (deleted first; nothing may sit beside it)")
    p.add_argument("--targets", default="setup,test,run,kaggle-rehearsal", help="make targets, in order")
    args = p.parse_args(argv)
    shutil.rmtree(args.clone, ignore_errors=True)
    args.clone.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "-q", str(REPO), str(args.clone)], check=True)
    rows = [timed(t, args.clone, args.clone.parent / f"{t}.log") for t in args.targets.split(",")]
    meta = bench_metadata("python -m benchmarks.quickstart " + " ".join(argv or sys.argv[1:]))
    meta["git_sha"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=args.clone, capture_output=True,
                                     text=True, check=True).stdout.strip()  # the clone's commit
    notes = ("One run each, in this order, in a fresh clone of the commit above. `make setup` "
             "depends on the network and pip's cache: on this machine torch's CPU wheel lies on "
             "local disk; a CUDA wheel from PyPI is GBs. `make run` trains to the quick preset's "
             "time limits, so its time changes little with the machine's speed.")
    args.out.write_text(json.dumps({**meta, "notes": notes, "rows": rows}, indent=2) + "\n")
    return 0 if all(r["exit code"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
