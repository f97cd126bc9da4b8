"""tpurank.monitor: a stage's wall time, peak RSS and open files, and its exit status passed on."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tpurank.monitor import main


def read_log(log):
    return [json.loads(line) for line in log.read_text().splitlines()]

CHILD = """
import os, sys, time
files = [open(os.devnull) for _ in range(40)]
block = bytearray(64 * 2**20)
time.sleep(0.8)
print("child done")
sys.exit(int(sys.argv[1]))
"""


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs /proc")
def test_monitor_records_peaks_and_passes_the_exit_status(tmp_path, capfd):
    log = tmp_path / "stages.jsonl"
    assert main(["--log", str(log), "--stage", "ok", "--interval", "0.05", "--",
                 sys.executable, "-c", CHILD, "0"]) == 0
    assert main(["--log", str(log), "--stage", "bad", "--", sys.executable, "-c", CHILD, "3"]) == 3
    assert "child done" in capfd.readouterr().out  # the command's output passes through
    ok, bad = read_log(log)
    assert ok["stage"] == "ok" and ok["rc"] == 0 and bad["rc"] == 3
    assert ok["peak_open_fds"] >= 40 and ok["peak_tree_rss_mb"] >= 64
    assert ok["wall_s"] >= 0.8  # the child sleeps that long: a lower bound, never a deadline


def test_usage_without_a_command():
    assert main(["--log", "x", "--stage", "y"]) == 2
