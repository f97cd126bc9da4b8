"""``python -m ensemble <command>``: run | blend | check | report | score | submit | real."""

from __future__ import annotations

import sys

from tpurank.cli import dispatch

COMMANDS = {
    "run": ("ensemble.run:main", "the whole pipeline planned to a time budget (make run BUDGET=S)"),
    "blend": ("ensemble.blend:main", "blend model predictions, write and check the submission"),
    "check": ("ensemble.submission:main", "strictly check a submission CSV against a data root"),
    "report": ("ensemble.report:main", "Markdown/HTML report with plots beside the submission"),
    "score": ("ensemble.score:main", "score a submission on hidden test runtimes (samples only)"),
    "submit": ("ensemble.submit:main", "upload a submission with the Kaggle CLI"),
    "real": ("ensemble.real:main", "rank the configs of real TPU tuning records"),
}


def main(argv: list[str] | None = None) -> int:
    return dispatch("ensemble", COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
