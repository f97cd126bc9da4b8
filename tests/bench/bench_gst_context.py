"""Cross-configuration attention context at inference: chunked vs full vs fixed subsets (+ TTA).

Scores a trained GNN's valid predictions (all configs of every valid graph) under each
``predict_context`` / ``predict_tta`` setting, per collection, and writes
``benchmarks/gst_context.json``::

    OMP_NUM_THREADS=1 .venv/bin/python tests/bench/bench_gst_context.py --work work/gst-dev \\
        --collections layout:xla:default,layout:xla:random
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from models import metrics  # noqa: E402
from models.gnn.data import load_graphs  # noqa: E402
from models.gnn.infer import InferenceOptions, TensorCache, load_trained  # noqa: E402
from models.gnn.infer import predict_costs  # noqa: E402
from tpurank.atomic import write_json  # noqa: E402
from tpurank.results.artifacts import bench_metadata  # noqa: E402
from tpurank.collections import get_collection  # noqa: E402

SETTINGS = {  # name -> (context, tta)
    "chunked (each chunk of predict_batch its own context)": (-1, 0),
    "full (all configs)": (0, 0),
    "fixed seeded subset of 64": (64, 0),
    "TTA: mean over 10 random subsets of 64": (64, 10),
}


def score_settings(work: str, name: str, seed: int) -> dict:
    coll = get_collection(name)
    model, saved = load_trained(work, name, seed=seed, device="cpu")
    graphs = [g for g in load_graphs(saved.features_dir() if saved.features else
                                     Path(work) / "features", coll, "valid")
              if g.target is not None and g.num_configs >= 2]
    cache = TensorCache(torch.device("cpu"))
    out = {"collection": name, "seed": seed, "n_graphs": len(graphs),
           "configs": int(sum(g.num_configs for g in graphs)),
           "predict_batch": saved.predict_batch, "settings": {}}
    base = dataclasses.replace(model.inference_options)
    for label, (context, tta) in SETTINGS.items():
        options = dataclasses.replace(base, context=context, tta=tta)
        start = time.perf_counter()
        preds = {g.stem: predict_costs(model, g, saved.predict_batch, cache=cache, options=options)
                 for g in graphs}
        seconds = time.perf_counter() - start
        truth = {g.stem: np.asarray(g.target, dtype=np.float64) for g in graphs}
        res = metrics.score_collection(coll, preds, truth)
        out["settings"][label] = {"score": float(res["score"]), "seconds": seconds,
                                  "per_graph": res.get("per_graph", {})}
        print(f"{name} seed {seed} | {label}: {res['score']:.4f} ({seconds:.1f} s)", flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", required=True)
    ap.add_argument("--collections", default="layout:xla:default,layout:xla:random")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "gst_context.json"))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows = [score_settings(args.work, c, int(s)) for c in args.collections.split(",")
            for s in args.seeds.split(",")]
    write_json(args.out, {**bench_metadata("OMP_NUM_THREADS=1 .venv/bin/python "
                                           "tests/bench/bench_gst_context.py "
                                           + " ".join(argv if argv is not None else sys.argv[1:])),
                          "rows": rows})
    print(json.dumps({r["collection"]: {k: round(v["score"], 4) for k, v in r["settings"].items()}
                      for r in rows}, indent=2))


if __name__ == "__main__":
    main()
