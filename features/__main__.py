"""``python -m features <command>``: validate | build | sample | cache."""

from __future__ import annotations

import sys

from tpurank.cli import dispatch

COMMANDS = {
    "validate": ("features.validate_root:main", "check every npz file under a data root"),
    "build": ("features.build:main", "build pruned graph features and tabular features"),
    "sample": ("features.sample:main", "write the generated sample dataset"),
    "cache": ("features.cache:main", "convert npz files to the memory-mappable cache"),
}


def main(argv: list[str] | None = None) -> int:
    return dispatch("features", COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
