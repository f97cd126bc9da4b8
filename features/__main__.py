"""``python -m features <command>``: validate | build | sample."""

from __future__ import annotations

import sys

from tpurank.cli import dispatch

COMMANDS = {
    "validate": ("features.validate:main", "check every npz file under a data root"),
    "build": ("features.build:main", "build pruned graph features and tabular features"),
    "sample": ("features.sample:main", "write the generated sample dataset"),
}


def main(argv: list[str] | None = None) -> int:
    return dispatch("features", COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
