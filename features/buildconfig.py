"""The feature build's parameters (:class:`BuildConfig`, ``python -m features build --help``)."""

from __future__ import annotations

from dataclasses import dataclass, fields
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
