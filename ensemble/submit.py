"""``python -m ensemble submit FILE``: upload a submission with the Kaggle CLI; the message carries
the run id and the blend's validation scores (from ``submissions/<run>/blend.json`` whose CSV has
FILE's content). ``--dry-run`` prints the command."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

COMPETITION = "predict-ai-model-runtime"
MAX_MESSAGE = 500


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def find_summary(submission: Path) -> dict | None:
    """The blend summary of the run that wrote ``submission`` (matched by content), or None."""
    candidates = [submission.parent / "blend.json"]
    candidates += sorted(submission.parent.glob("*/blend.json"), reverse=True)
    digest = _digest(submission)
    for path in candidates:
        csv = path.parent / "submission.csv"
        if path.is_file() and csv.is_file() and _digest(csv) == digest:
            return json.loads(path.read_text())
    return None


def build_message(summary: dict | None, extra: str | None) -> str:
    parts = []
    if summary:
        scores = {c: s["valid_score"].get("blend") for c, s in summary["collections"].items()}
        text = ", ".join(f"{c}={v:.4f}" for c, v in scores.items() if v is not None)
        final = summary.get("valid_final", {}).get("blend")
        parts.append(f"tpurank run {summary['run_id']} | valid: {text}"
                     + (f" | final={final:.4f}" if final is not None else ""))
    if extra:
        parts.append(extra)
    return " | ".join(parts)[:MAX_MESSAGE]


def credentials_present() -> bool:
    """Whether the Kaggle CLI will find credentials (existence only; nothing is read)."""
    if os.environ.get("KAGGLE_USERNAME") and os.environ.get("KAGGLE_KEY"):
        return True
    if os.environ.get("KAGGLE_API_TOKEN"):
        return True
    config_dir = Path(os.environ.get("KAGGLE_CONFIG_DIR", Path.home() / ".kaggle"))
    return (config_dir / "kaggle.json").is_file() or (config_dir / "access_token").is_file()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ensemble submit",
                                     description="Upload a submission with the Kaggle CLI.")
    parser.add_argument("submission")
    parser.add_argument("-m", "--message", default=None, help="text appended to the run's message")
    parser.add_argument("--dry-run", action="store_true", help="print the command, upload nothing")
    args = parser.parse_args(argv)
    submission = Path(args.submission)
    if not submission.is_file():
        print(f"submit: {submission}: no such file", file=sys.stderr)
        return 2
    summary = find_summary(submission)
    message = build_message(summary, args.message)
    if not message:
        print(f"submit: no run found for {submission} (no submissions/<run>/blend.json with the same "
              f"content); pass -m MESSAGE", file=sys.stderr)
        return 2
    cmd = ["kaggle", "competitions", "submit", COMPETITION, "-f", str(submission), "-m", message]
    if args.dry_run:
        print(shlex.join(cmd))
        return 0
    if shutil.which("kaggle") is None:
        print("submit: the Kaggle CLI is not installed (`pip install kaggle`), or not on PATH",
              file=sys.stderr)
        return 2
    if not credentials_present():
        print("submit: no Kaggle credentials: put kaggle.json in ~/.kaggle/ (or $KAGGLE_CONFIG_DIR), "
              "or set KAGGLE_USERNAME and KAGGLE_KEY (see https://github.com/Kaggle/kaggle-api)",
              file=sys.stderr)
        return 2
    print("+ " + shlex.join(cmd), flush=True)
    return subprocess.run(cmd, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
