"""The search oracle (issue 42): does ``models.gnn search`` propose configs that are truly fast?

For every held-out (test) graph of generated samples, the trained GNN of the graph's collection
(trained on the sample's train graphs) searches (``models.gnn.search``) and proposes K configs;
the generator's cost model (``benchmarks/oracle.py``, noise-free) then prices, per graph:
the best of the K proposed (one per trust radius, the default among them: ``proposed``; without
the default: ``proposed_without_default``; the single best-predicted: ``top1``); the best of the K
predicted fastest anywhere (``search --plain``: ``plain_topk``); the best of K random configs of
the same space; the best of the K given configs the model ranks fastest (what ``rank`` does); the
best of *all* the graph's given configs; the compiler default. The model chooses; the oracle only
judges.

    python -m benchmarks.search_oracle --sample tpu=data/sample-small:work/small \\
        --sample alt=data/sample-alt:work/alt --time-budget 4 --out benchmarks/search_oracle.json

``--sample PHYSICS=DATA:WORK`` may name a physics twice, e.g. the test graphs of a second seed's
sample (all of its graphs are held out from a model trained on the first) scored by the same WORK.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np


from features.io import load_npz
from benchmarks.oracle import load_oracle
from models.gnn.rank import load_pipeline
from models.gnn.search import HeadScorer, LayoutSpace, TileSpace, npz_spaces, run_search
from tpurank.collections import COLLECTIONS


def legal(space: LayoutSpace | TileSpace, cfg: np.ndarray) -> bool:
    """Whether ``cfg`` is a config of ``space`` (what a proposal must be)."""
    if isinstance(space, TileSpace):
        unused = [d for s in space.BLOCKS for d in range(s, s + 6) if d not in space.values]
        return (all(cfg[d] in space.values[d] for d in space.dims) and not np.any(cfg[unused])
                and np.allclose(TileSpace.encode(cfg.copy()), cfg))
    for j, ch in enumerate(space.choices):
        for t in range(3):
            vals = tuple(int(v) for v in cfg[j, 6 * t:6 * t + 6] if v >= 0)
            if (t >= len(ch) and vals) or (t < len(ch) and vals not in ch[t]) or \
                    any(v >= 0 for v in cfg[j, 6 * t + len(vals):6 * t + 6]):
                return False
    return True


def distance(cfg: np.ndarray) -> int:
    """Configurable nodes of a layout config set away from the compiler default."""
    return int((np.asarray(cfg) >= 0).any(-1).sum())


def graph_case(path: Path, coll, pipeline, k: int, time_budget: float, max_evals: int,
               seed: int) -> dict:
    graph = load_npz(path)
    oracle = load_oracle(path)
    given = np.asarray(graph.config_feat if graph.is_tile else graph.node_config_feat, np.float32)
    space = TileSpace(given) if graph.is_tile else LayoutSpace(npz_spaces(graph))
    scorer = HeadScorer(graph, pipeline, coll, path.stem, given)
    res = run_search(space, scorer, given, k, time_budget, max_evals, seed=seed)
    plain = run_search(space, scorer, given, k, time_budget, max_evals, seed=seed, ladder=False) \
        if res.changed else res  # tile: no ladder, the same search
    searched = res.configs[[distance(c) > 0 for c in res.configs]] if res.changed \
        else res.configs
    rng = np.random.default_rng([seed, 42])
    top_given = given[np.argsort(scorer(given), kind="stable")[:k]]
    true = {name: float(oracle.runtimes(cfgs).min()) for name, cfgs in (
        ("proposed", res.configs), ("proposed_without_default", searched),
        ("top1", res.configs[:1]), ("plain_topk", plain.configs),
        ("random", space.random(rng, k)), ("ranked_given", top_given),
        ("best_given", given), ("default", oracle.default[None]))}
    assert all(legal(space, c) for c in np.concatenate([res.configs, plain.configs])), \
        f"{path}: an illegal proposal"
    return {"graph": path.stem, "nodes": graph.num_nodes, "evals": res.evals,
            "seconds": round(res.seconds, 2), "true_ns": true}


def summarize(cases: list[dict]) -> dict:
    t = {key: np.array([c["true_ns"][key] for c in cases]) for key in cases[0]["true_ns"]}
    p = t["proposed"]
    return {
        "graphs": len(cases),
        "median_speedup_vs_default": {key: round(float(np.median(t["default"] / v)), 4)
                                      for key, v in t.items() if key != "default"},
        "beats_random": f"{int(np.sum(p < t['random']))}/{len(p)}",
        "at_least_best_given": f"{int(np.sum(p <= t['best_given']))}/{len(p)}",
        "win_rate_vs_random": round(float(np.mean(p < t["random"])), 3),
        "no_worse_rate_vs_random": round(float(np.mean(p <= t["random"])), 3),
        "win_rate_vs_ranked_given": round(float(np.mean(p <= t["ranked_given"])), 3),
        "win_rate_vs_best_given": round(float(np.mean(p <= t["best_given"])), 3),
        "median_best_given_over_proposed": round(float(np.median(t["best_given"] / p)), 4),
        "plain_topk_win_rate_vs_random": round(float(np.mean(t["plain_topk"] < t["random"])), 3),
        "plain_topk_win_rate_vs_best_given": round(float(np.mean(t["plain_topk"] <= t["best_given"])), 3),
        "median_evals": int(np.median([c["evals"] for c in cases])),
        "median_seconds": round(float(np.median([c["seconds"] for c in cases])), 2),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sample", action="append", required=True,
                   help="PHYSICS=DATA_ROOT:WORK (a generated sample and the pipeline trained on it)")
    p.add_argument("--collections", default="all", help="'all' or a comma list")
    p.add_argument("--split", default="test")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--time-budget", type=float, default=6.0, help="search seconds per graph")
    p.add_argument("--max-evals", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="benchmarks/search_oracle.json")
    a = p.parse_args(argv)
    import torch

    from benchmarks.render.artifacts import bench_metadata

    torch.set_num_threads(1)
    command = "python -m benchmarks.search_oracle " + " ".join(
        shlex.quote(x) for x in (sys.argv[1:] if argv is None else argv))
    cases: dict[tuple[str, str], list[dict]] = {}
    for spec in a.sample:  # a physics may be named twice (two samples' held-out graphs)
        physics, rest = spec.split("=", 1)
        root, work = rest.split(":", 1)
        for coll in COLLECTIONS:
            if a.collections != "all" and coll.name not in a.collections.split(","):
                continue
            pipeline = load_pipeline(work, coll)
            for f in sorted(coll.split_dir(Path(root), a.split).glob("*.npz")):
                t0 = time.perf_counter()
                case = {"sample": root, **graph_case(f, coll, pipeline, a.k, a.time_budget,
                                                     a.max_evals, a.seed)}
                cases.setdefault((physics, coll.name), []).append(case)
                tt = case["true_ns"]
                print(f"{physics} {coll.name} {f.stem}: proposed {tt['proposed']:.0f} random "
                      f"{tt['random']:.0f} best given {tt['best_given']:.0f} default {tt['default']:.0f}"
                      f" ns ({time.perf_counter() - t0:.1f} s)", flush=True)
    rows = []
    for (physics, coll_name), cs in cases.items():
        rows.append({"physics": physics, "collection": coll_name, **summarize(cs), "cases": cs})
        print({k: v for k, v in rows[-1].items() if k != "cases"}, flush=True)
    speed = "median_speedup_vs_default."
    columns = ["physics", "collection", "graphs", *(speed + k for k in (
        "proposed", "top1", "plain_topk", "random", "ranked_given", "best_given")),
        "beats_random", "at_least_best_given", "median_best_given_over_proposed", "median_evals"]
    out = {**bench_metadata(command), "columns": columns, "k": a.k, "time_budget_s": a.time_budget,
           "max_evals": a.max_evals, "split": a.split, "rows": rows}
    Path(a.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"-> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
