"""``make bench`` (``python -m benchmarks``): the quick set, end to end, on a fresh clone.

Five benchmarks that need no data and no earlier run, a few minutes on two CPU cores:

* ``feature_build``: the generated tiny sample written, then ``features build`` (quick preset)
  cold and unchanged, wall time and peak RSS;
* ``hlo``: a synthetic 40,000-instruction HLO module converted to npz arrays;
* ``gnn``: one training step and a 1,000-config prediction of the default layout model;
* ``lgbm``: LightGBM fit (100 rounds) and prediction per ranking mode on toy tabular files;
* ``ensemble_fit``: the blend's weight fit at real-data scale and the strict submission check.

Each prints its figures as it goes; the table of all of them is printed at the end and written
with its provenance (commit, date, machine, command) to ``--out``. The other benchmarks need
trained runs or hours and are run one by one (``python -m benchmarks.NAME --help``; BENCHMARKS.md
names the command of every table).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from pathlib import Path

from benchmarks import ROOT

QUICK = ("feature_build", "hlo", "gnn", "lgbm", "ensemble_fit")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("names", nargs="*", metavar="NAME",
                   help=f"only these of the quick set ({', '.join(QUICK)})")
    p.add_argument("--out", default=str(ROOT / "work" / "bench" / "quick.json"),
                   help="artifact written (default work/bench/quick.json; benchmarks/quick.json is "
                        "the committed one, shown in BENCHMARKS.md)")
    args = p.parse_args(argv)
    unknown = sorted(set(args.names) - set(QUICK))
    if unknown:
        p.error(f"not in the quick set: {', '.join(unknown)} (choose from {', '.join(QUICK)})")
    from tpurank.atomic import write_json
    from benchmarks.render.artifacts import bench_metadata
    from benchmarks.render.tables import markdown_table

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    rows, total = [], time.perf_counter()
    for name in args.names or QUICK:
        print(f"\n=== bench: {name} ===", flush=True)
        start = time.perf_counter()
        figures = importlib.import_module(f"benchmarks.{name}").quick()
        rows += [{"benchmark": name, **{k: round(v, 3) if isinstance(v, float) else v
                                        for k, v in r.items()}} for r in figures]
        print(f"=== {name}: {time.perf_counter() - start:.1f} s ===", flush=True)
    rows.append({"benchmark": "all", "figure": "make bench, wall time",
                 "value": round(time.perf_counter() - total, 1), "unit": "s"})
    command = "make bench" + (f" ({' '.join(args.names)})" if args.names else "")
    out = Path(args.out)
    write_json(out, {**bench_metadata(command), "columns": ["benchmark", "figure", "value", "unit"],
                     "rows": rows, "notes": "One thread (OMP_NUM_THREADS=1); wall seconds of one run each."})
    print("\n" + markdown_table(["benchmark", "figure", "value", "unit"], rows))
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
