"""``make bench``: run every ``tests/bench/bench_*.py`` module's ``main()`` and print its figures."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
# test helpers the benchmarks share with the tests (tests/features/bigfile.py, tests/models/lgbm/toy_features.py)
sys.path[1:1] = [str(HERE.parent / "features"), str(HERE.parent / "models" / "lgbm")]


def main() -> int:
    only = set(sys.argv[1:])
    for path in sorted(HERE.glob("bench_*.py")):
        name = path.stem.removeprefix("bench_")
        if only and name not in only:
            continue
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        assert spec.loader is not None
        spec.loader.exec_module(module)
        print(f"\n=== bench: {name} ===", flush=True)
        start = time.perf_counter()
        module.main()
        print(f"=== {name}: {time.perf_counter() - start:.1f} s ===", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
