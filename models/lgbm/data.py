"""Tabular rows for LightGBM: lazy parquet reading, relevance grades and query-group chunking.

Input is the feature pipeline's ``tabular/<split>.parquet`` (:func:`features.processed.tabular_path`):
columns ``graph`` (str), ``config`` (int64, index into the source file's configs), ``target``
(float64 runtime, lower = faster; null for test) and float32 features ``f_*``.

Memory: a graph may hold 100k configs. Only the three key columns are read for the whole file;
feature columns are read for a sampled subset of rows (training) or streamed batch by batch
(prediction).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import polars as pl
from scipy.stats import rankdata

KEY_COLUMNS = ("graph", "config", "target")
FEATURE_PREFIX = "f_"
ROW = "_row"


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


def read_keys(path: str | os.PathLike) -> pl.DataFrame:
    """The ``graph``, ``config`` and ``target`` columns (target may be absent or null: test)."""
    lf = pl.scan_parquet(path)
    schema = lf.collect_schema()
    cols = [c for c in KEY_COLUMNS if c in schema]
    df = lf.select(cols).collect()
    if "target" not in df.columns:
        df = df.with_columns(pl.lit(None, dtype=pl.Float64).alias("target"))
    return df.with_row_index(ROW)


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
    if n == 0:
        return np.zeros(0, dtype=np.int32)
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
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split each graph's rows into LightGBM query groups of at most ``max_group_size`` rows.

    A graph with ``n`` rows becomes ``ceil(n / max_group_size)`` groups of near-equal size; its
    rows are shuffled first so every chunk is a uniform random subset of the graph (grades are
    computed on the whole graph beforehand, so they keep their global meaning).

    Returns ``(order, group_sizes, group_graph)``: rows of the Dataset in query order, the size
    of each query, and the graph code of each query.
    """
    if max_group_size < 1:
        raise ValueError("max_group_size must be >= 1")
    order, sizes, owners = [], [], []
    for code, rows in enumerate(graph_runs(np.asarray(graph_codes))):
        if len(rows) == 0:
            continue
        rows = rng.permutation(rows)
        n_chunks = -(-len(rows) // max_group_size)
        for chunk in np.array_split(rows, n_chunks):
            order.append(chunk)
            sizes.append(len(chunk))
            owners.append(code)
    if not order:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    return (np.concatenate(order).astype(np.int64), np.asarray(sizes, np.int64),
            np.asarray(owners, np.int64))


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


def sample_per_graph(keys: pl.DataFrame, max_per_graph: int, rng: np.random.Generator) -> np.ndarray:
    """Row numbers of a uniform random subsample of at most ``max_per_graph`` rows per graph.

    Rows without a target are dropped (they cannot be graded). Returned sorted (file order).
    """
    keys = keys.filter(pl.col("target").is_not_null() & pl.col("target").is_finite())
    _, codes = np.unique(keys["graph"].to_numpy().astype(str), return_inverse=True)
    rows = keys[ROW].to_numpy().astype(np.int64)
    kept = []
    for run in graph_runs(codes) if len(codes) else []:
        if len(run) > max_per_graph > 0:
            run = rng.choice(run, size=max_per_graph, replace=False)
        kept.append(rows[run])
    return np.sort(np.concatenate(kept)) if kept else np.zeros(0, np.int64)


def load_rows(path: str | os.PathLike, max_per_graph: int = 0, seed: int = 0,
              feature_names: list[str] | None = None) -> Rows:
    """Read (a per-graph subsample of) the graded rows of a tabular parquet file.

    ``max_per_graph <= 0`` keeps every row with a target. Feature columns are read only for the
    kept rows (streaming scan), so a file with 100k-config graphs never has to fit in memory.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: tabular features not found (run `python -m features build`)")
    names = feature_names or feature_columns(path)
    keys = read_keys(path)
    rng = np.random.default_rng(seed)
    kept = sample_per_graph(keys, max_per_graph, rng)
    df = (pl.scan_parquet(path).with_row_index(ROW)
          .filter(pl.col(ROW).is_in(pl.Series(kept, dtype=pl.UInt32).implode()))
          .select(["graph", "config", "target", *names])
          .collect(engine="streaming"))
    return _rows_from_frame(df, names, path)


def _rows_from_frame(df: pl.DataFrame, names: list[str], path: Path) -> Rows:
    graph = df["graph"].to_numpy().astype(str)
    graphs, codes = np.unique(graph, return_inverse=True)
    X = df.select(names).to_numpy().astype(np.float32, copy=False)
    target = df["target"].to_numpy().astype(np.float64) if df["target"].null_count() == 0 else None
    return Rows(X=np.ascontiguousarray(X), graph_code=codes.astype(np.int64),
                config=df["config"].to_numpy().astype(np.int64), target=target,
                graphs=[str(g) for g in graphs], feature_names=list(names))


def iter_batches(path: str | os.PathLike, feature_names: list[str],
                 batch_rows: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Stream ``(graph, config, X)`` batches of a tabular file in file order (prediction)."""
    lf = pl.scan_parquet(path).select(["graph", "config", *feature_names])
    for df in lf.collect_batches(chunk_size=batch_rows):
        if df.height == 0:
            continue
        yield (df["graph"].to_numpy().astype(str), df["config"].to_numpy().astype(np.int64),
               np.ascontiguousarray(df.select(feature_names).to_numpy().astype(np.float32, copy=False)))


def assemble_costs(path: str | os.PathLike, graph: np.ndarray, config: np.ndarray,
                   cost: np.ndarray) -> dict[str, np.ndarray]:
    """Per-graph cost arrays in source config order; every config 0..c-1 must appear once."""
    out: dict[str, np.ndarray] = {}
    graphs, codes = np.unique(graph, return_inverse=True)
    for code, rows in enumerate(graph_runs(codes.astype(np.int64))):
        cfg = config[rows]
        n = len(rows)
        if n == 0:
            continue
        if cfg.min() != 0 or cfg.max() != n - 1 or len(np.unique(cfg)) != n:
            raise TabularFormatError(
                f"{path}: graph {str(graphs[code])!r} has configs that are not exactly 0..{n - 1} "
                f"(min {cfg.min()}, max {cfg.max()}, {len(np.unique(cfg))} distinct of {n} rows); "
                "valid/test tabular rows must not be deduplicated")
        arr = np.empty(n, dtype=np.float64)
        arr[cfg] = cost[rows]
        out[str(graphs[code])] = arr
    return out


def truth_by_graph(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """True targets per graph in config order (validation scoring); empty if no file or targets."""
    if not Path(path).is_file():
        return {}
    keys = read_keys(path)
    if keys["target"].null_count() > 0 or keys.height == 0:
        return {}
    return assemble_costs(path, keys["graph"].to_numpy().astype(str),
                          keys["config"].to_numpy().astype(np.int64),
                          keys["target"].to_numpy().astype(np.float64))
