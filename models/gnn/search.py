"""``python -m models.gnn search``: the cost model as an autotuner, proposing configs, not only
ranking given ones (docs/gnn.md, "Search").

For a graph of the data (``GRAPH.npz``) or a new program (``--hlo MODULE.pb``, read like ``rank
--hlo``): score a start pool (the graph's own configs, or ``--candidates`` sampled layouts, plus
the compiler default) with the trained GNN, then evolve it (children of the best-predicted
configs, one node's layout or one tile bound changed at a time), scoring legal configs only, until
``--time-budget`` seconds or ``--max-evals`` configs. The K best-predicted configs go to
``--out``, per node its layout next to the default's.

    python -m models.gnn search data/sample-small/npz_all/npz/layout/xla/random/test/G.npz \\
        --work work/sample-small-quick --k 10 --time-budget 20 --out proposals.txt
    python -m models.gnn search --hlo data/jax-hlo/convnet_fwd.post.hlo.pb --work W --out p.txt
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from models.gnn.candidates import (SPACES, TENSORS, LayoutSpace, NodeSpace, TileSpace, layout_text,
                                   npz_spaces)

EXHAUSTIVE = 20000  # a tile space at most this large (or than --max-evals) is scored whole
POPULATION = 32  # parents: the best-predicted configs so far
MAX_ANCHORS = 1024  # trust radii count from the default and the best-predicted start configs


class HeadScorer:
    """Predicted costs of any configs of one graph: node features and the trunk once, then the
    head per batch, every batch attending to the same context (the start pool's embeddings)."""

    def __init__(self, graph: Any, pipeline: tuple, collection: Any, stem: str,
                 pool: np.ndarray, exact_dot: dict | None = None) -> None:
        import torch
        from features.stages import node_stage, process_graph
        from models.gnn.data import graph_tensors
        from models.gnn.infer import InferenceOptions, context_subset, graph_state

        self.model, gnn_cfg, build_cfg, norm = pipeline
        self.graph, self.batch = graph, max(1, int(gnn_cfg.predict_batch))
        self.device = next(self.model.parameters()).device
        stage = node_stage(graph, build_cfg, exact_dot if build_cfg.dot_features else None)
        self.process = functools.partial(process_graph, collection=collection, split="test",
                                         stem=stem, norm=norm, cfg=build_cfg, exact_dot=exact_dot,
                                         stage=stage)
        options = getattr(self.model, "inference_options", None) or InferenceOptions()
        pg = self._processed(pool)
        self.tensors = graph_tensors(pg, self.device)
        with torch.no_grad():
            self.state = graph_state(self.model, pg, self.tensors, options)
            self.context = self._embed(pg, context_subset(len(pool), options.context, options.seed))

    def _processed(self, configs: np.ndarray) -> Any:
        key = "config_feat" if self.graph.is_tile else "node_config_feat"
        n = len(configs)
        return self.process(dataclasses.replace(
            self.graph, **{key: np.asarray(configs, np.float32)}, config_runtime=np.zeros(n, np.int64),
            config_runtime_normalizers=np.ones(n, np.int64) if self.graph.is_tile else None))

    def _embed(self, pg: Any, idx: np.ndarray) -> Any:
        import torch
        from models.gnn.infer import embed_configs

        return torch.cat([embed_configs(self.model, pg, self.tensors, c, self.device, self.state)
                          for c in np.array_split(idx, math.ceil(len(idx) / self.batch))])

    def __call__(self, configs: np.ndarray) -> np.ndarray:
        import torch

        if len(configs) == 0:
            return np.zeros(0)
        with torch.no_grad():
            z = self._embed(self._processed(configs), np.arange(len(configs)))
            return torch.cat([self.model.score(z[i:i + self.batch], self.context).double()
                              for i in range(0, len(z), self.batch)]).cpu().numpy()


@dataclass
class SearchResult:
    configs: np.ndarray  # (k, ...) the proposals, best-predicted first
    costs: np.ndarray  # (k,) their predicted costs
    default_cost: float  # predicted cost of the space's default config
    evals: int  # configs scored (distinct)
    seconds: float
    changed: list | None = None  # ladder: each proposal's nodes away from the nearest anchor


def run_search(space: Any, score: Callable[[np.ndarray], np.ndarray], start: np.ndarray,
               k: int = 10, time_budget: float = 20.0, max_evals: int = 0, batch: int = 256,
               seed: int = 0, ladder: bool = True,
               progress: Callable[[str], None] | None = None) -> SearchResult:
    """Evolve ``start`` (plus the default) to ``k`` proposals, within ``time_budget`` seconds
    (0 = none) and ``max_evals`` scored configs (0 = none).

    With ``ladder`` (layouts), the proposals are the best-predicted configs within growing trust
    radii (:func:`trust_rungs`: 0, 1, 2, 3, 4, 6, ... configurable nodes away from the nearest
    anchor, the anchors being the compiler default and the start pool, then anywhere), and half of
    each batch grows those regions; without it, the ``k`` configs predicted fastest. The model is
    least reliable far from the configs it knows, so a measured best of K gains from proposals at
    several distances rather than K neighbours of one predicted optimum."""
    if time_budget <= 0 and max_evals <= 0:
        raise ValueError("search needs a time budget or an evaluation budget")
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    seen: set[bytes] = set()
    cfgs: list[np.ndarray] = []
    costs: list[float] = []

    def evaluate(cands: np.ndarray) -> None:
        fresh: list[np.ndarray] = []
        room = max_evals - len(cfgs) if max_evals > 0 else len(cands)
        for c in np.asarray(cands, np.float32):
            if len(fresh) < room and c.tobytes() not in seen:
                seen.add(c.tobytes())
                fresh.append(c)
        if fresh:
            cfgs.extend(fresh)
            costs.extend(score(np.stack(fresh)).tolist())

    default = np.asarray(space.default, np.float32)
    evaluate(np.concatenate([default[None], np.asarray(start, np.float32)]))
    whole = hasattr(space, "every") and space.size() <= (max_evals or EXHAUSTIVE)
    if whole:
        evaluate(space.every())  # a small space (tile bounds): score it whole, no search
    default_cost = costs[0]

    anchors = None
    if ladder and hasattr(space, "node_codes"):  # trust: nodes away from the nearest anchor
        keep = np.union1d([0], np.argsort(costs, kind="stable")[:MAX_ANCHORS])
        anchors = space.node_codes(np.stack([cfgs[i] for i in keep]))  # the default, the pool's best
    dists: list[int] = []
    rungs = trust_rungs(k) if anchors is not None else []

    def add_dists() -> None:
        if anchors is not None and len(cfgs) > len(dists):
            codes = space.node_codes(np.stack(cfgs[len(dists):]))
            dists.extend(int((row[None] != anchors).sum(-1).min()) for row in codes)

    add_dists()
    stale = 0
    while (not whole and stale < 20 and (time_budget <= 0 or time.perf_counter() - t0 < time_budget)
           and (max_evals <= 0 or len(cfgs) < max_evals)):
        pop = np.argsort(costs, kind="stable")[:POPULATION]
        bests = _rung_bests(costs, dists, rungs[:-1])  # the best within each trust radius
        children = []
        for _ in range(batch):
            if bests and rng.random() < 0.5:  # grow a trust region: its best, one node changed
                child = cfgs[bests[int(rng.integers(len(bests)))]].copy()
                space.mutate(rng, child)
                children.append(child)
                continue
            child = cfgs[pop[min(int(rng.geometric(0.15)) - 1, len(pop) - 1)]].copy()
            if rng.random() < 0.2 and len(pop) > 1:
                child = space.crossover(rng, child, cfgs[pop[int(rng.integers(len(pop)))]])
            for _ in range(int(rng.geometric(0.6))):
                space.mutate(rng, child)
            children.append(child)
        before = len(cfgs)
        evaluate(np.stack(children))
        add_dists()
        stale = stale + 1 if len(cfgs) == before else 0  # the space is exhausted
        if progress:
            progress(f"search: {len(cfgs):6d} configs scored, {time.perf_counter() - t0:6.1f} s, "
                     f"best predicted {min(costs):+.4f} (default {default_cost:+.4f})")
    if rungs:  # one proposal per trust radius: the best within 0 (the default), 1, 2, ... nodes
        order: list[int] = []
        for r in rungs:
            order += _rung_bests(costs, dists, [r], exclude=set(order))
        order = sorted(order, key=lambda i: (costs[i], i))
    else:
        order = list(np.argsort(costs, kind="stable")[:k])
    return SearchResult(np.stack([cfgs[i] for i in order]), np.asarray(costs)[order], default_cost,
                        len(cfgs), time.perf_counter() - t0,
                        [dists[i] for i in order] if rungs else None)


def trust_rungs(k: int) -> list[float]:
    """Trust radii (configurable nodes changed from the default) of the K proposals: 0, 1, 2, 3,
    4, 6, 8, 12, 16, ... and, last, unlimited (the best predicted anywhere)."""
    ladder = [0, 1, 2, 3] + [m * f for m in (4, 8, 16, 32, 64, 128, 256) for f in (1, 1.5)]
    return [float(r) for r in ladder[:max(0, k - 1)]] + [math.inf]


def _rung_bests(costs: list[float], dists: list[int], rungs: Sequence[float],
                exclude: set[int] = frozenset()) -> list[int]:
    """Index of the best-predicted config within each radius (distinct from ``exclude``)."""
    c, d = np.asarray(costs), np.asarray(dists)
    out = []
    for r in rungs:
        ok = np.flatnonzero(d <= r)
        ok = ok[[i not in exclude for i in ok]] if exclude else ok
        if len(ok):
            out.append(int(ok[np.argmin(c[ok])]))
    return out


def default_layouts(graph: Any, ns: NodeSpace) -> list[str]:
    """The layouts a config's -1 leaves: each tensor's own ``minor_to_major`` (features 134–139)."""
    feat = np.asarray(graph.node_feat)
    operands = [v for u, v in np.asarray(graph.edge_index).tolist() if u == ns.node]
    nodes = [ns.node] + operands[:len(ns.ranks) - 1]
    return [layout_text(feat[n, 134:134 + r]) if r else "default" for n, r in zip(nodes, ns.ranks)]


def format_proposals(result: SearchResult, space: Any, graph: Any, title: str) -> str:
    ref = "first given config" if space.kind == "tile" else "default"  # a tile's default is unknown
    lines = [f"# {title}", f"# {result.evals} configs scored in {result.seconds:.1f} s; predicted "
             f"cost of the {ref} {result.default_cost:+.4f} (lower = faster)"]
    for rank, (cfg, cost) in enumerate(zip(result.configs, result.costs), start=1):
        moved = (f", {result.changed[rank - 1]} nodes from the default or nearest start config"
                 if result.changed else "")
        lines.append(f"\n## proposal {rank}: predicted {cost:+.4f} "
                     f"({cost - result.default_cost:+.4f} vs {ref}{moved})")
        if space.kind == "tile":
            for label, s in (("kernel", 0), ("output", 8), ("input", 16)):
                if any(d in space.values for d in range(s, s + 6)):
                    lines.append(f"{label:8s} bounds {[int(v) for v in cfg[s:s + 6]]}")
            continue
        lines.append(f"{'node':>6}  {'name':24s} {'opcode':12s} {'tensor':6s} {'proposed':>14}  default")
        for j, ns in enumerate(space.spaces):
            dflt = default_layouts(graph, ns)
            for t in range(len(ns.ranks)):
                vals = cfg[j, 6 * t:6 * t + 6]
                prop = layout_text(vals[vals >= 0]) if (vals >= 0).any() else "(default)"
                lines.append(f"{ns.node:6d}  {ns.name[:24]:24s} {ns.opcode[:12]:12s} {TENSORS[t]:6s} "
                             f"{prop:>14}  {dflt[t]}")
    return "\n".join(lines) + "\n"


def prepare(args: argparse.Namespace) -> tuple[Any, Any, Any, str, np.ndarray, dict | None]:
    """``(graph, space, collection, stem, start pool, exact dot dims)`` of the target."""
    from features.io import load_npz
    from tpurank.collections import get_collection

    if args.hlo:
        from features.hlo import module_dot_dims, module_to_graph
        from models.gnn.candidates import module_spaces
        from models.gnn.rank import read_target

        module, record_nodes = read_target(args.hlo, args.module_name)
        ids, spaces, index = module_spaces(module, config_nodes=record_nodes or None)
        space = LayoutSpace(spaces, args.space)
        start = space.random(np.random.default_rng(args.seed), args.candidates, p_change=0.5)
        graph = module_to_graph(module, ids, np.concatenate([space.default[None], start]))
        return (graph, space, get_collection(args.collection or "layout:xla:random"),
                module.name or "module", start, module_dot_dims(module, index))
    graph = load_npz(args.graph)
    parts = Path(args.graph).resolve().parent.parts
    coll = get_collection(args.collection or ":".join(parts[-3:-1] if parts[-3] == "tile"
                                                      else parts[-4:-1]))
    if graph.is_tile:
        return graph, TileSpace(graph.config_feat), coll, Path(args.graph).stem, \
            np.asarray(graph.config_feat, np.float32), None
    rows = np.arange(graph.num_configs)
    if 0 < args.pool < len(rows):  # a train file may hold 100k configs: a seeded subset
        rows = np.sort(np.random.default_rng(args.seed).choice(rows, args.pool, replace=False))
    start = np.asarray(graph.node_config_feat[rows], np.float32)
    return graph, LayoutSpace(npz_spaces(graph), args.space), coll, Path(args.graph).stem, start, None


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m models.gnn search", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("graph", nargs="?", default="", help="a graph of the data (.npz)")
    p.add_argument("--hlo", default="", help="or an HloModuleProto / tuning record .pb (as rank --hlo)")
    p.add_argument("--module-name", default=None, help="module to take from a multi-module record")
    p.add_argument("--work", default="work/sample-small-quick", help="work dir of the trained pipeline")
    p.add_argument("--collection", default="", help="whose model scores (default: the graph's; "
                                                    "--hlo: layout:xla:random)")
    p.add_argument("--model-seed", type=int, default=None, help="trained seed (default: lowest)")
    p.add_argument("--k", type=int, default=10, help="proposals to write")
    p.add_argument("--time-budget", type=float, default=20.0, help="seconds of search (0 = none)")
    p.add_argument("--max-evals", type=int, default=0, help="configs to score at most (0 = none)")
    p.add_argument("--batch", type=int, default=256, help="children scored per batch")
    p.add_argument("--candidates", type=int, default=256, help="--hlo: sampled start pool")
    p.add_argument("--pool", type=int, default=1000,
                   help="a graph's start pool: at most this many of its configs (0 = all)")
    p.add_argument("--space", default="auto", choices=SPACES,
                   help="layouts: auto (conv: two most-minor dims, others: permutations), minor2, full")
    p.add_argument("--plain", action="store_true",
                   help="propose the K configs predicted fastest, not one per trust radius")
    p.add_argument("--seed", type=int, default=0, help="random seed of the search")
    p.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N")
    p.add_argument("--out", default="proposals.txt", help="where the proposals are written")
    args = p.parse_args(list(argv))
    if bool(args.graph) == bool(args.hlo):
        p.error("give either a graph .npz or --hlo MODULE.pb")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    from features.hlo import HloProtoError
    from models.gnn.rank import load_pipeline
    from tpurank.atomic import atomic_path

    args = _parse(sys.argv[1:] if argv is None else argv)
    try:
        graph, space, coll, stem, start, exact = prepare(args)
        if coll.is_tile != (space.kind == "tile"):
            raise ValueError(f"a {space.kind} graph needs a {space.kind} model, not {coll.name}")
        pipeline = load_pipeline(args.work, coll, seed=args.model_seed, device=args.device)
        scorer = HeadScorer(graph, pipeline, coll, stem, start, exact)
    except (HloProtoError, FileNotFoundError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    result = run_search(space, scorer, start, args.k, args.time_budget, args.max_evals, args.batch,
                        seed=args.seed, ladder=not args.plain,
                        progress=lambda s: print(s, file=sys.stderr, flush=True))
    title = f"{stem}: {args.k} configs proposed by the {coll.name} GNN ({args.work})"
    with atomic_path(args.out, suffix=".txt") as tmp:
        Path(tmp).write_text(format_proposals(result, space, graph, title))
    print(f"best predicted {result.costs[0]:+.4f} vs default {result.default_cost:+.4f}; "
          f"{len(result.costs)} proposals -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
