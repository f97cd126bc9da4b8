"""Tabular rows for LightGBM (``tabular/<split>.parquet``: ``graph``, ``config``, ``target``,
float32 ``f_*``): lazy reading, relevance grades and query-group chunking. A graph may hold 100k
configs, so only the key columns are read whole; features are read for the sampled rows
(training) or streamed in slices (prediction).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import polars as pl
from scipy.stats import rankdata

FEATURE_PREFIX = "f_"


class TabularFormatError(ValueError):
    """The tabular parquet file does not have the expected columns."""


def feature_columns(path: str | os.PathLike) -> list[str]:
    """Names of the ``f_*`` feature columns of a tabular parquet file, in file order."""
    schema = pl.scan_parquet(path).collect_schema()
    missing = [c for c in ("graph", "config") if c not in schema]
    if missing:
        raise TabularFormatError(f"{path}: missing column(s) {missing}; rebuild features")
    names = [c for c in schema if c.startswith(FEATURE_PREFIX)]
    if not names:
        raise TabularFormatError(f"{path}: no feature columns ({FEATURE_PREFIX}*)")
    return names


@dataclass
class Keys:
    """The key columns of a whole tabular file, compactly: graph codes instead of strings."""

    code: np.ndarray  # (n,) int64 index into ``graphs``, in file row order
    graphs: list[str]  # sorted graph names
    config: np.ndarray  # (n,) int64
    target: np.ndarray  # (n,) float64, NaN where null (test)

    def __len__(self) -> int:
        return len(self.code)

    @property
    def has_target(self) -> bool:
        return len(self) > 0 and bool(np.all(np.isfinite(self.target)))


def read_keys(path: str | os.PathLike) -> Keys:
    """``graph`` (as codes), ``config`` and ``target`` of every row; no feature column is read."""
    lf = pl.scan_parquet(path)
    schema = lf.collect_schema()
    target = pl.col("target").cast(pl.Float64).fill_null(float("nan")) if "target" in schema \
        else pl.lit(float("nan"), dtype=pl.Float64).alias("target")
    df = lf.select((pl.col("graph").rank("dense") - 1).cast(pl.Int64).alias("code"),
                   pl.col("config").cast(pl.Int64), target).collect()
    graphs = (lf.select(pl.col("graph").unique()).collect()["graph"].sort().to_list()
              if df.height else [])
    return Keys(code=df["code"].to_numpy(), graphs=[str(g) for g in graphs],
                config=df["config"].to_numpy(), target=df["target"].to_numpy())


# ---------------------------------------------------------------------------------------------
# grades and groups


def runtime_grades(target: np.ndarray, n_grades: int) -> np.ndarray:
    """Integer relevance grades of one graph's configs: quantile bins of the runtime rank.

    The fastest configs get the highest grade ``n_grades - 1``, the slowest grade 0; ties
    (equal runtimes) share a grade (average rank). Bins are equal-count over the rank, so every
    grade holds about ``len(target) / n_grades`` configs whatever the runtime distribution.
    """
    target = np.asarray(target, dtype=np.float64)
    n = len(target)
    if n == 1:
        return np.full(1, n_grades - 1, dtype=np.int32)
    pct = (rankdata(target, method="average") - 1.0) / (n - 1)  # 0 = fastest, 1 = slowest
    grade = (n_grades - 1) - np.floor(pct * n_grades).astype(np.int64)
    return np.clip(grade, 0, n_grades - 1).astype(np.int32)


def graph_runs(graph_codes: np.ndarray) -> list[np.ndarray]:
    """Row indices of each graph (codes 0..G-1), in row order."""
    order = np.argsort(graph_codes, kind="stable")
    counts = np.bincount(graph_codes, minlength=int(graph_codes.max()) + 1 if len(graph_codes) else 0)
    return np.split(order, np.cumsum(counts)[:-1]) if len(order) else []


def chunk_groups(graph_codes: np.ndarray, max_group_size: int,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Split each graph's rows into LightGBM query groups of at most ``max_group_size`` rows.

    A graph with ``n`` rows becomes ``ceil(n / max_group_size)`` groups of near-equal size; its
    rows are shuffled first so every chunk is a uniform random subset of the graph (grades are
    computed on the whole graph beforehand, so they keep their global meaning).
    Returns ``(order, group_sizes)``: rows of the Dataset in query order and each query's size.
    """
    if max_group_size < 1:
        raise ValueError("max_group_size must be >= 1")
    order = [chunk for rows in graph_runs(np.asarray(graph_codes)) if len(rows)
             for chunk in np.array_split(rng.permutation(rows), -(-len(rows) // max_group_size))]
    if not order:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(order).astype(np.int64), np.array([len(c) for c in order], np.int64)


# ---------------------------------------------------------------------------------------------
# loading


@dataclass
class Rows:
    """Feature rows of some configs of some graphs (one split of one collection)."""

    X: np.ndarray  # (n, F) float32
    graph_code: np.ndarray  # (n,) int64 index into ``graphs``
    config: np.ndarray  # (n,) int64
    target: np.ndarray | None  # (n,) float64, None for test
    graphs: list[str]
    feature_names: list[str]

    def __len__(self) -> int:
        return len(self.graph_code)

    def grades(self, n_grades: int) -> np.ndarray:
        """Per-graph runtime grades (see :func:`runtime_grades`)."""
        if self.target is None:
            raise ValueError("grades need targets (not available for test rows)")
        out = np.zeros(len(self), dtype=np.int32)
        for rows in graph_runs(self.graph_code):
            out[rows] = runtime_grades(self.target[rows], n_grades)
        return out


def concat_rows(parts: list[Rows]) -> Rows:
    """Rows of several files (same features) as one set; graph names must be distinct."""
    graphs = [g for part in parts for g in part.graphs]
    if len(set(graphs)) != len(graphs):
        raise ValueError("concat_rows: the same graph name appears in two parts; prefix them first")
    offsets = np.cumsum([0] + [len(p.graphs) for p in parts[:-1]])
    targets = [p.target for p in parts]
    return Rows(X=np.concatenate([p.X for p in parts]),
                graph_code=np.concatenate([p.graph_code + o for p, o in zip(parts, offsets)]),
                config=np.concatenate([p.config for p in parts]),
                target=None if any(t is None for t in targets) else np.concatenate(targets),
                graphs=graphs, feature_names=list(parts[0].feature_names))


def load_rows(path: str | os.PathLike, max_per_graph: int = 0, seed: int = 0,
              feature_names: list[str] | None = None, chunk_rows: int = 65536,
              graphs: set[str] | None = None) -> Rows:
    """Read (a uniform random per-graph subsample of) the graded rows of a tabular parquet file.

    Rows without a finite target cannot be graded and are dropped; ``max_per_graph <= 0`` keeps
    every other row; ``graphs`` (stems) keeps only the rows of those graphs (cross-validation). Features are read in row slices of
    ``chunk_rows`` and only the kept rows of each slice are retained, so a file with 100k-config
    graphs never has to fit in memory (peak: the key columns, one slice and the kept rows).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: tabular features not found (run `python -m features build`)")
    names = feature_names or feature_columns(path)
    keys = read_keys(path)
    wanted = np.isfinite(keys.target)
    if graphs is not None:
        wanted &= subset_keys(keys, graphs)[1]
    rows = np.flatnonzero(wanted)
    rng = np.random.default_rng(seed)
    parts = []
    for run in graph_runs(keys.code[rows]):
        if len(run) > max_per_graph > 0:
            run = rng.choice(run, size=max_per_graph, replace=False)
        parts.append(rows[run])
    kept = np.sort(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
    X = read_rows(path, kept, names, chunk_rows)
    used, code = np.unique(keys.code[kept], return_inverse=True)
    target = keys.target[kept]
    return Rows(X=X, graph_code=code.astype(np.int64), config=keys.config[kept],
                target=target if np.all(np.isfinite(target)) else None,
                graphs=[keys.graphs[u] for u in used], feature_names=list(names))


def read_rows(path: str | os.PathLike, rows: np.ndarray, names: list[str],
              chunk_rows: int = 65536) -> np.ndarray:
    """(len(rows), F) float32 features of the given (sorted) row numbers, read slice by slice."""
    parts = [np.zeros((0, len(names)), np.float32)]
    for offset, df in iter_slices(path, names, chunk_rows,
                                  stop=int(rows[-1]) + 1 if len(rows) else 0):
        local = rows[(rows >= offset) & (rows < offset + df.height)] - offset
        if len(local):
            parts.append(df[local.tolist()].to_numpy().astype(np.float32, copy=False))
    return np.ascontiguousarray(np.concatenate(parts))


def iter_slices(path: str | os.PathLike, columns: list[str], chunk_rows: int,
                stop: int | None = None,
                wanted: np.ndarray | None = None) -> Iterator[tuple[int, pl.DataFrame]]:
    """``(offset, frame)`` for consecutive row slices of ``columns``; memory = one slice.

    With ``wanted`` (a boolean mask over the file's rows), slices without a wanted row are not
    read at all. (A plain polars scan with a filter decodes several row groups at once; slicing
    keeps the peak at one slice.)
    """
    lf = pl.scan_parquet(path)
    n = lf.select(pl.len()).collect().item() if stop is None else stop
    for offset in range(0, n, max(1, chunk_rows)):
        end = min(n, offset + chunk_rows)
        if wanted is not None and not wanted[offset:end].any():
            continue
        yield offset, lf.slice(offset, end - offset).select(columns).collect()


def subset_keys(keys: Keys, graphs: set[str] | None) -> tuple[Keys, np.ndarray]:
    """Keys of the rows of ``graphs`` only (all when None) and the boolean row mask."""
    if graphs is None:
        return keys, np.ones(len(keys), bool)
    keep = np.array([g in graphs for g in keys.graphs], bool)
    mask = keep[keys.code] if len(keys) else np.zeros(0, bool)
    used = np.flatnonzero(keep)
    recode = np.full(len(keys.graphs), -1, np.int64)
    recode[used] = np.arange(len(used))
    return Keys(code=recode[keys.code[mask]], graphs=[keys.graphs[u] for u in used],
                config=keys.config[mask], target=keys.target[mask]), mask


def by_config(keys: Keys, values: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per graph ``(config indices ascending, values)`` of the rows present (train rows may be
    deduplicated or subsampled, so the configs need not be 0..c-1)."""
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for code, rows in enumerate(graph_runs(keys.code)):
        if len(rows):
            order = np.argsort(keys.config[rows], kind="stable")
            out[keys.graphs[code]] = (keys.config[rows][order], values[rows][order])
    return out


def assemble_costs(path: str | os.PathLike, keys: Keys, cost: np.ndarray) -> dict[str, np.ndarray]:
    """Per-graph cost arrays in source config order; every config 0..c-1 must appear once."""
    out: dict[str, np.ndarray] = {}
    for graph, (cfg, values) in by_config(keys, np.asarray(cost, np.float64)).items():
        n, distinct = len(cfg), len(np.unique(cfg))
        if cfg[0] != 0 or cfg[-1] != n - 1 or distinct != n:
            raise TabularFormatError(
                f"{path}: graph {graph!r} has configs that are not exactly 0..{n - 1} "
                f"(min {cfg[0]}, max {cfg[-1]}, {distinct} distinct of {n} rows); "
                "valid/test tabular rows must not be deduplicated")
        out[graph] = values
    return out


def truth_by_graph(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """True targets per graph in config order (validation scoring); empty if no file or targets."""
    if not Path(path).is_file():
        return {}
    keys = read_keys(path)
    return assemble_costs(path, keys, keys.target) if keys.has_target else {}
