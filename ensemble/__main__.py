"""``python -m ensemble <command>``: run | blend | check | report | score | submit | seeds | real."""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "run": ("ensemble.run", "main", "the whole pipeline planned to a time budget (make run BUDGET=S)"),
    "blend": ("ensemble.blend", "main", "blend model predictions, write and check the submission"),
    "check": ("ensemble.submission", "main", "strictly check a submission CSV against a data root"),
    "report": ("ensemble.report", "main", "Markdown/HTML report with plots beside the submission"),
    "score": ("ensemble.score", "main", "score a submission on hidden test runtimes (samples only)"),
    "submit": ("ensemble.submit", "main", "upload a submission with the Kaggle CLI"),
    "seeds": ("ensemble.seeds", "main", "per-seed scores of each model alone and of the blend"),
    "real": ("ensemble.real", "main", "rank the configs of real TPU tuning records"),
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        if argv and argv[0] not in ("-h", "--help"):
            print(f"unknown command {argv[0]!r}\n", file=sys.stderr)
        print("usage: python -m ensemble {" + "|".join(COMMANDS) + "} [options]\n")
        for name, (_, _, help_) in COMMANDS.items():
            print(f"  {name:8s} {help_}")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    module_name, func, _ = COMMANDS[argv[0]]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        print(f"python -m ensemble {argv[0]}: module {module_name} is not available in this "
              f"checkout ({exc})", file=sys.stderr)
        return 2
    return int(getattr(module, func)(argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
