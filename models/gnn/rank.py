"""``python -m models.gnn rank --hlo MODULE.pb --candidates N``: rank sampled layouts of a new program.

For an HloModuleProto (e.g. from ``jax.jit(f).lower(...).compiler_ir('hlo')
.as_serialized_hlo_module_proto()``) or the module inside a tuning record: sample N candidate
layouts of its configurable nodes (convolution, dot, reshape by default, plus ``--nodes``;
candidate 0 = the compiler's default), featurize them with the trained pipeline's settings and
stats, score them with the trained GNN and print the best ones (lower cost = predicted faster).

Example::

    python -m models.gnn rank --hlo prog.pb --candidates 256 --work work/sample-small-quick \
        --collection layout:xla:random --top 10 --csv ranked.csv
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from tpurank.collections import Collection, get_collection

DEFAULT_COLLECTION = "layout:xla:random"


def load_pipeline(work: str | Path, collection: Collection, seed: int | None = None,
                  device: str = "cpu") -> tuple[Any, Any, Any, Any]:
    """``(model, gnn_cfg, build_cfg, norm)`` of the trained pipeline under ``work``."""
    from features.buildconfig import BuildConfig
    from features.processed import load_norm
    from tpurank.config import load_run_config
    from models.gnn import load_trained

    work = Path(work)
    model, gnn_cfg = load_trained(work, collection, seed=seed, device=device)
    features = Path(gnn_cfg.features) if gnn_cfg.features else None
    features_dir = features if features and features.is_dir() else work / "features"
    build_json = features_dir / collection.slug / "build.json"
    if not build_json.is_file():
        raise FileNotFoundError(f"{build_json}: no feature build settings; run "
                                f"`python -m features build --work {work}` first")
    build_cfg = load_run_config(BuildConfig, build_json)
    norm = load_norm(features_dir, collection)
    return model, gnn_cfg, build_cfg, norm


def read_target(path: str, name: str | None = None) -> tuple[Any, list[int]]:
    """The module in ``path`` and, for a layout tuning record, its ``config_index_to_node``."""
    from features.hlo import read_proto

    records = read_proto(path, with_runs=False).modules()
    if name is not None:
        records = [r for r in records if r.module.name == name]
        if not records:
            raise KeyError(f"{path}: no module named {name!r}")
    if len(records) != 1:
        raise ValueError(f"{path}: holds {len(records)} modules; pass --module-name, one of "
                         f"{[r.module.name for r in records][:10]}")
    return records[0].module, [int(v) for v in records[0].config_index_to_node]


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m models.gnn rank", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hlo", required=True, help="HloModuleProto / ModuleTuningData / TuningData .pb")
    p.add_argument("--module-name", default=None, help="module to take from a multi-module TuningData")
    p.add_argument("--candidates", type=int, default=128, help="number of candidates (incl. default)")
    p.add_argument("--work", default="work/sample-small-quick", help="work dir of the trained pipeline")
    p.add_argument("--collection", default=DEFAULT_COLLECTION, help="whose trained model scores")
    p.add_argument("--nodes", default="", help="extra configurable node indices, comma-separated")
    p.add_argument("--opcodes", default=None,
                   help="opcodes whose nodes are configurable (default convolution,dot,reshape; "
                        "a layout tuning record's own config_index_to_node wins unless given)")
    p.add_argument("--space", default="minor2", choices=("minor2", "full"),
                   help="minor2: set the two most-minor dims (as real configs); full: permutations")
    p.add_argument("--p-change", type=float, default=0.5, help="chance a node leaves its default")
    p.add_argument("--seed", type=int, default=0, help="candidate sampling seed")
    p.add_argument("--model-seed", type=int, default=None, help="trained seed (default: lowest)")
    p.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N")
    p.add_argument("--top", type=int, default=10, help="ranked candidates printed")
    p.add_argument("--csv", default="", help="write every candidate, ranked, to this CSV")
    return p.parse_args(list(argv))


def main(argv: Sequence[str] | None = None) -> int:
    from features.hlo import HloProtoError, module_dot_dims, module_to_graph
    from features.stages import process_graph
    from models.gnn import predict_costs
    from models.gnn.candidates import LayoutSpace, module_spaces
    from tpurank.atomic import atomic_path

    args = _parse(sys.argv[1:] if argv is None else argv)
    try:
        module, record_nodes = read_target(args.hlo, args.module_name)
        coll = get_collection(args.collection)
        if coll.is_tile:
            raise ValueError(f"rank --hlo ranks layouts: choose a layout collection, not {coll.name}")
        extra = [int(v) for v in args.nodes.split(",") if v.strip()]
        opcodes = [o.strip() for o in (args.opcodes or "").split(",") if o.strip()]
        ids, spaces, index = module_spaces(module, extra, opcodes, record_nodes
                                           if record_nodes and args.opcodes is None else None)
        space = LayoutSpace(spaces, args.space)
        cands = space.distinct(args.candidates, args.seed, args.p_change)
        graph = module_to_graph(module, ids, cands)
        model, gnn_cfg, build_cfg, norm = load_pipeline(args.work, coll, args.model_seed, args.device)
        pg = process_graph(graph, coll, "test", module.name or "module", norm, build_cfg,
                           module_dot_dims(module, index))
        costs = predict_costs(model, pg, batch_size=gnn_cfg.predict_batch)
    except (HloProtoError, FileNotFoundError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    order = np.argsort(costs, kind="stable")
    print(f"module {module.name!r}: {len(ids)} configurable nodes, {len(cands)} candidates scored "
          f"with the {coll.name} GNN")
    print(f"{'rank':>4}  {'cand':>5}  {'pred. cost':>11}  {'vs default':>10}  layouts (minor-to-major)")
    for pos, c in enumerate(order[:args.top], start=1):
        print(f"{pos:4d}  {c:5d}  {costs[c]:11.4f}  {costs[c] - costs[0]:+10.4f}  "
              f"{space.describe(cands[c])}")
    print(f"compiler default (candidate 0) ranks {int(np.flatnonzero(order == 0)[0]) + 1} of {len(costs)}")
    if args.csv:  # every candidate, best first: rank, candidate, cost, every node's 18 values
        with atomic_path(args.csv, suffix=".csv") as tmp, open(tmp, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["rank", "candidate", "pred_cost"] + [f"{s.name}[{i}]" for s in spaces
                                                               for i in range(18)])
            for pos, c in enumerate(order, start=1):
                w.writerow([pos, int(c), f"{costs[c]:.6g}"] + [int(v) for v in cands[c].reshape(-1)])
        print(f"all {len(costs)} candidates -> {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
