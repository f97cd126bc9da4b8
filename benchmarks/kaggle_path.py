"""Kaggle path figures: EDA streaming speed on the small sample, code+wheels bundle time and size.

``python -m benchmarks.kaggle_path``.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _bundle_module():
    sys.path.insert(0, str(REPO / "kaggle"))
    spec = importlib.util.spec_from_file_location("kaggle_bundle", REPO / "kaggle" / "bundle.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> None:
    import argparse

    argparse.ArgumentParser(prog="python -m benchmarks.kaggle_path", description=__doc__).parse_args(argv)
    from features import eda
    from features.sample import generate_dataset

    with tempfile.TemporaryDirectory() as tmp:
        root = generate_dataset(Path(tmp) / "small", scale="small", seed=0)
        t0 = time.perf_counter()
        stats = eda.graph_stats(root)
        t_stats = time.perf_counter() - t0
        t0 = time.perf_counter()
        eda.opcode_counts(root)
        t_ops = time.perf_counter() - t0
        t0 = time.perf_counter()
        pruned = eda.pruning_effect(root, hops=(1, 2, 3), max_per_group=None)
        t_prune = time.perf_counter() - t0
        size_mb = sum(p.stat().st_size for p in Path(root).rglob("*.npz")) / 2**20
        print(f"eda.graph_stats   {stats.height} graphs ({size_mb:.1f} MiB npz) in {t_stats:.2f} s "
              f"({stats.height / t_stats:.0f} graphs/s)")
        print(f"eda.opcode_counts train graphs in {t_ops:.2f} s")
        print(f"eda.pruning_effect {pruned['stem'].n_unique()} layout graphs x 3 hop values in "
              f"{t_prune:.2f} s")

        bundle = _bundle_module()
        for name, build in (("tpurank-code", bundle.build_code),
                            ("tpurank-wheels", lambda d: bundle.build_wheels(d, "3.11", [], False))):
            out = Path(tmp) / name
            out.mkdir()
            t0 = time.perf_counter()
            build(out)
            print(f"bundle {name:15s} {bundle.human_size(bundle.folder_size(out)):>10s} in "
                  f"{time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
