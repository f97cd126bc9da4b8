"""Run one pipeline stage and record what it cost: wall time, peak RSS and peak open file
descriptors of its whole process tree (sampled with psutil), and its exit status.

    python -m tpurank.monitor --log WORK/stages.jsonl --stage gnn-train -- python -m models.gnn train ...

The command's output passes through untouched (progress bars included); one JSON line per stage is
appended to ``--log`` when it ends, and the monitor exits with the command's status. ``make run
MON="python -m tpurank.monitor --log FILE"`` runs every stage of the pipeline this way
(``benchmarks/scale.py --run`` does, for ``make bench-scale``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil


def monitored(cmd: list[str], interval: float = 0.2, **popen: Any) -> dict[str, Any]:
    """Run ``cmd`` to completion; its wall time, exit status, and the peaks of its process tree's
    summed RSS (MB) and open descriptors (processes gone meanwhile skipped)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, **popen)
    root = psutil.Process(proc.pid)
    peak_rss = peak_fds = 0
    while proc.poll() is None:
        rss = fds = 0
        with contextlib.suppress(psutil.Error):
            for member in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    rss, fds = rss + member.memory_info().rss, fds + member.num_fds()
        peak_rss, peak_fds = max(peak_rss, rss), max(peak_fds, fds)
        time.sleep(interval)
    return {"command": " ".join(cmd), "rc": proc.returncode,
            "wall_s": round(time.perf_counter() - start, 1),
            "peak_tree_rss_mb": round(peak_rss / 2**20, 1), "peak_open_fds": peak_fds,
            "proc": proc}


def append_record(log: Path, record: dict[str, Any]) -> None:
    """One JSON line, written with a single ``write`` of a file opened for appending."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as fh:
        fh.write(json.dumps(record, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        print("usage: python -m tpurank.monitor --log FILE --stage NAME -- COMMAND ...", file=sys.stderr)
        return 2
    cut = argv.index("--")
    p = argparse.ArgumentParser(prog="python -m tpurank.monitor", description=__doc__.split("\n\n")[0])
    p.add_argument("--log", required=True, help="JSON-lines file one record per stage is appended to")
    p.add_argument("--stage", required=True, help="the stage's name in the record")
    p.add_argument("--interval", type=float, default=0.2, help="seconds between /proc samples")
    a = p.parse_args(argv[:cut])
    cmd = argv[cut + 1:]
    if not cmd:
        p.error("no command after --")
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    record = monitored(cmd, interval=a.interval)
    record.pop("proc")
    append_record(Path(a.log), {"stage": a.stage, "started": started, **record})
    return int(record["rc"])


if __name__ == "__main__":
    sys.exit(main())
