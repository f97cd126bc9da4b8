"""The two halves of every feature cache key: the build's parameters (:class:`BuildConfig`,
``python -m features build --help``) and the digest of the code that computes features.

The digest covers the source of every module on the build path of one graph — ``features.tasks``
and every module of ``features`` it imports, directly or not, at module level or inside a function
(found by reading the imports, not by what happens to be loaded) — so a changed featurizer
rebuilds the graphs it touches without anyone bumping a version. An edit to a module off that
path (the sample generator, validation, the CLI) rebuilds nothing.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

from tpurank.config import StageConfig


@dataclass
class BuildConfig(StageConfig):
    """Feature build: pruning, -1 padding, engineered and dot-general features, tabular rows."""

    splits: str = "train,valid,test"  # comma list of the splits to build
    out: str = ""  # features directory; default WORK/features
    jobs: int = 0  # worker processes; 0 = all cores
    prune_hops: int = 1  # k of the k-hop neighbourhood kept around configurable nodes; -1 = no pruning
    rewire: bool = True  # keep an edge between kept nodes joined only through removed nodes
    rewire_max_sources: int = 8  # rewired producers per removed path, nearest first; 0 = unlimited
    config_graph_hops: int = 8  # layout: link two configurable nodes joined by a path of at most this many edges through non-configurable nodes (features.configgraph; the factorized GNN's head graph)
    config_graph_max_links: int = 64  # layout: links kept per configurable node, nearest first (bounds fan-out); 0 = all
    pad_minus_one: bool = True  # -1 beyond the rank in per-dimension blocks (node and tile config)
    engineered: bool = True  # log transforms, lane (% 128) features, degree and depth
    dot_features: bool = True  # dot-general dims and dot/conv operand shapes
    exact_dot: bool = True  # use ROOT/pb/<rel>.pb exact dot dims when present
    dedup: bool = True  # average the runtimes of identical train configs
    max_train_configs: int = 0  # random subset of (deduplicated) train configs per graph; 0 = all
    tabular: bool = True  # also write the LightGBM parquet
    tabular_max_train_rows: int = 2000  # LightGBM train rows per graph (random subset); 0 = all. Valid/test: all
    heuristic: bool = True  # tabular f_heur_cost / f_heur_rank (features.heuristic padding cost)
    config_chunk: int = 2048  # configs processed at a time (memory bound)
    skip_bad_report: str = ""  # validate report: skip the files it lists as bad
    progress: bool = True  # progress bars on stderr

    PRESETS = {"quick": {"max_train_configs": 4000, "tabular_max_train_rows": 2000},
               "full": {"max_train_configs": 0, "tabular_max_train_rows": 8000}}
    #: the fields that change no output (where things are, how the work is spread and shown)
    RUN_FIELDS: ClassVar[tuple[str, ...]] = ("data", "work", "preset", "seed", "collections", "splits",
                                             "out", "jobs", "config_chunk", "skip_bad_report",
                                             "progress")

    def transform_params(self) -> dict[str, Any]:
        """What changes the outputs (part of every cache key): every field but :attr:`RUN_FIELDS`,
        so a new option is in the key without anyone listing it (the node blocks' flags of
        ``features.stages.NODE_BLOCKS`` among them); the seed when configs are subsampled."""
        params = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in self.RUN_FIELDS}
        if self.max_train_configs or self.tabular_max_train_rows:
            params["seed"] = self.seed
        return params


#: where the build path of one graph starts (features.tasks: load, repair, node stage, configs,
#: tabular rows, norm stats, keys)
ROOTS = ("features.tasks",)
PACKAGE = "features"


def _source(module: str) -> Path | None:
    """The ``.py`` file of ``module``, None when it is no module (``from m import function``)."""
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:  # a name inside a module, not a submodule
        return None
    return Path(spec.origin) if spec is not None and spec.origin and spec.origin.endswith(".py") else None


def _imported(module: str, tree: ast.AST) -> set[str]:
    """Modules of :data:`PACKAGE` that ``tree`` imports (``from features import tabular`` names a module)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return {m for m in found if (m == PACKAGE or m.startswith(PACKAGE + ".")) and _source(m) is not None}


def build_modules(roots: tuple[str, ...] = ROOTS) -> list[str]:
    """Every module of the build path: ``roots`` and what they import within the package, with the
    packages (``__init__``) on the way."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        parents = [module.rsplit(".", i)[0] for i in range(1, module.count(".") + 1)]
        todo += [p for p in parents if _source(p) is not None]
        todo += sorted(_imported(module, ast.parse(_source(module).read_text())) - seen)
    return sorted(seen)


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """sha256 over the names and sources of :func:`build_modules` (16 hex digits)."""
    digest = hashlib.sha256()
    for module in build_modules():
        digest.update(module.encode() + b"\0" + _source(module).read_bytes() + b"\0")
    return digest.hexdigest()[:16]
