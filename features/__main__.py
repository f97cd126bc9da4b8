"""``python -m features <command>``: validate | build | sample | cache."""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "validate": ("features.validate_root", "main", "check every npz file under a data root"),
    "build": ("features.build", "main", "build pruned graph features and tabular features"),
    "sample": ("features.sample", "main", "write the generated sample dataset"),
    "cache": ("features.cache", "main", "convert npz files to the memory-mappable cache"),
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print("usage: python -m features {" + "|".join(COMMANDS) + "} [options]\n")
        for name, (_, _, help_) in COMMANDS.items():
            print(f"  {name:10s} {help_}")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    module, func, _ = COMMANDS[argv[0]]
    return int(getattr(importlib.import_module(module), func)(argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
