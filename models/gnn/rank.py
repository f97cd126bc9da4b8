"""``python -m models.gnn rank --hlo MODULE.pb --candidates N``: the cost model as an autotuner.

For a new program (an HloModuleProto, e.g. from ``jax.jit(f).lower(...).compiler_ir('hlo')
.as_serialized_hlo_module_proto()``, or the module inside a tuning record): find its
configurable nodes (convolution, dot, reshape by default, plus ``--nodes``), sample N candidate
layouts (candidate 0 = the compiler's default, all -1), featurize them with the trained
pipeline's own feature settings and normalisation stats, score them with the trained GNN and
print the best ones. Lower predicted cost = predicted faster.

Example::

    python -m models.gnn rank --hlo prog.pb --candidates 256 --work work/sample-small-quick \
        --collection layout:xla:random --top 10 --csv ranked.csv
"""

from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from tpurank.collections import Collection, get_collection

DEFAULT_COLLECTION = "layout:xla:random"


@dataclass
class RankResult:
    """Candidates and their predicted costs; ``order`` = candidate indices, best first."""

    module_name: str
    config_node_ids: np.ndarray
    spaces: list[Any]
    candidates: np.ndarray  # (c, nc, 18) float32
    costs: np.ndarray  # (c,) float64, lower = predicted faster
    order: np.ndarray
    collection: str
    model_dir: str

    def default_rank(self) -> int:
        """1-based position of the compiler's default config (candidate 0) in the ranking."""
        return int(np.flatnonzero(self.order == 0)[0]) + 1


def _features_dir(work: Path, gnn_cfg: Any) -> Path:
    features = getattr(gnn_cfg, "features", "")
    return Path(features) if features and Path(features).is_dir() else work / "features"


def load_pipeline(work: str | Path, collection: Collection, seed: int | None = None,
                  device: str = "cpu") -> tuple[Any, Any, Any, Any]:
    """``(model, gnn_cfg, build_cfg, norm)`` of the trained pipeline under ``work``."""
    from features.buildconfig import BuildConfig
    from features.processed import load_norm
    from tpurank.config import load_run_config
    from models.gnn import load_trained

    work = Path(work)
    model, gnn_cfg = load_trained(work, collection, seed=seed, device=device)
    features_dir = _features_dir(work, gnn_cfg)
    build_json = features_dir / collection.slug / "build.json"
    if not build_json.is_file():
        raise FileNotFoundError(f"{build_json}: no feature build settings; run "
                                f"`python -m features build --work {work}` first")
    build_cfg = load_run_config(BuildConfig, build_json)
    norm = load_norm(features_dir, collection)
    return model, gnn_cfg, build_cfg, norm


def score_graph(graph: Any, pipeline: tuple[Any, Any, Any, Any], collection: Collection,
                stem: str, exact_dot: dict | None = None) -> np.ndarray:
    """Predicted cost of every config of ``graph`` (a :class:`features.io.Graph`)."""
    from features.stages import process_graph
    from models.gnn import predict_costs

    model, gnn_cfg, build_cfg, norm = pipeline
    pg = process_graph(graph, collection, "test", stem, norm, build_cfg, exact_dot)
    return predict_costs(model, pg, batch_size=gnn_cfg.predict_batch)


def rank_module(module: Any, work: str | Path, n_candidates: int, collection: str = DEFAULT_COLLECTION,
                extra_nodes: Sequence[int] = (), opcodes: Sequence[str] | None = None,
                space: str = "minor2", seed: int = 0, p_change: float = 0.5,
                model_seed: int | None = None, device: str = "cpu",
                config_nodes: Sequence[int] | None = None) -> RankResult:
    """Sample candidate layouts of ``module`` and rank them with the trained GNN.

    The configurable nodes are ``config_nodes`` when given (e.g. a tuning record's
    ``config_index_to_node``: docs/competition.md §3 says to take the set from the data, not the opcode), else the
    nodes with ``opcodes``; ``extra_nodes`` are added in both cases.
    """
    from features.hlo import module_dot_dims, module_to_graph
    from models.gnn.candidates import sample_candidates

    coll = get_collection(collection)
    if coll.is_tile:
        raise ValueError(f"rank --hlo ranks layouts: choose a layout collection, not {coll.name}")
    ids, spaces, index = module_spaces(module, extra_nodes, opcodes, config_nodes)
    candidates = sample_candidates(spaces, n_candidates, seed=seed, space=space, p_change=p_change)
    graph = module_to_graph(module, ids, candidates)
    pipeline = load_pipeline(work, coll, seed=model_seed, device=device)
    costs = score_graph(graph, pipeline, coll, stem=module.name or "module",
                        exact_dot=module_dot_dims(module, index))
    order = np.argsort(costs, kind="stable")
    model_dir = str(Path(work) / "models" / "gnn" / coll.slug)
    return RankResult(module.name, ids, spaces, candidates, costs, order, coll.name, model_dir)


def module_spaces(module: Any, extra_nodes: Sequence[int] = (), opcodes: Sequence[str] | None = None,
                  config_nodes: Sequence[int] | None = None) -> tuple[np.ndarray, list[Any], Any]:
    """``(ids, spaces, index)``: the configurable nodes of ``module`` (see :func:`rank_module`),
    the tensor ranks each can lay out (:class:`models.gnn.candidates.NodeSpace`) and the module
    index."""
    from features.hlo import DEFAULT_CONFIGURABLE, configurable_nodes
    from features.hlo.convert import index_module, operand_shapes
    from models.gnn.candidates import node_spaces

    if config_nodes is not None:
        ids = configurable_nodes(module, (), list(config_nodes) + list(extra_nodes))
    else:
        ids = configurable_nodes(module, opcodes or DEFAULT_CONFIGURABLE, extra_nodes)
    if len(ids) == 0:
        raise ValueError(f"module {module.name!r} has no configurable node (opcodes "
                         f"{list(opcodes or DEFAULT_CONFIGURABLE)}); pass --nodes")
    index = index_module(module)
    wanted = set(ids.tolist())
    op_ranks = [[len(s) for s in operand_shapes(index, n)] if n in wanted else []
                for n in range(len(index.instructions))]
    return ids, node_spaces(index.instructions, op_ranks, ids.tolist()), index


def format_table(result: RankResult, top: int = 10) -> str:
    """The ``top`` best candidates as a text table (plus the default's position)."""
    from models.gnn.candidates import describe

    default_cost = result.costs[0]
    lines = [f"module {result.module_name!r}: {len(result.config_node_ids)} configurable nodes, "
             f"{len(result.candidates)} candidates scored with the {result.collection} GNN",
             f"{'rank':>4}  {'cand':>5}  {'pred. cost':>11}  {'vs default':>10}  layouts (minor-to-major)"]
    for pos, c in enumerate(result.order[:top], start=1):
        lines.append(f"{pos:4d}  {c:5d}  {result.costs[c]:11.4f}  {result.costs[c] - default_cost:+10.4f}"
                     f"  {describe(result.candidates[c], result.spaces)}")
    lines.append(f"compiler default (candidate 0) ranks {result.default_rank()} of {len(result.costs)}")
    return "\n".join(lines)


def write_csv(result: RankResult, path: str | Path) -> None:
    """All candidates, best first: rank, candidate, cost, and the 18 values of every node."""
    from tpurank.atomic import atomic_path

    with atomic_path(path, suffix=".csv") as tmp, open(tmp, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["rank", "candidate", "pred_cost"]
                   + [f"{s.name}[{i}]" for s in result.spaces for i in range(18)])
        for pos, c in enumerate(result.order, start=1):
            w.writerow([pos, int(c), f"{result.costs[c]:.6g}"]
                       + [int(v) for v in result.candidates[c].reshape(-1)])


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
    p.add_argument("--device", default="cpu")
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--csv", default="", help="write every candidate, ranked, to this CSV")
    args = p.parse_args(list(argv))
    args.opcodes_given = args.opcodes is not None
    if args.opcodes is None:
        args.opcodes = ",".join(("convolution", "dot", "reshape"))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    from features.hlo import HloProtoError

    args = _parse(sys.argv[1:] if argv is None else argv)
    try:
        module, record_nodes = read_target(args.hlo, args.module_name)
        extra = [int(v) for v in args.nodes.split(",") if v.strip()]
        opcodes = [o.strip() for o in args.opcodes.split(",") if o.strip()]
        config_nodes = record_nodes if record_nodes and not args.opcodes_given else None
        result = rank_module(module, args.work, args.candidates, args.collection, extra, opcodes,
                             args.space, args.seed, args.p_change, args.model_seed, args.device,
                             config_nodes=config_nodes)
    except (HloProtoError, FileNotFoundError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(format_table(result, args.top))
    if args.csv:
        write_csv(result, args.csv)
        print(f"all {len(result.costs)} candidates -> {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
