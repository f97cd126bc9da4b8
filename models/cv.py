"""Grouped, stratified K-fold plans over a collection's labelled graphs (train + valid), shared by
every model that cross-validates: ``fold_plan(work, features_dir, collection, folds=K, seed=s)``
gives ``plan.held_out(k)`` (predicted out-of-fold by fold model k), ``plan.training(k)`` and
``plan.inner_valid(k)`` (its early-stopping slice of the training folds). The plan is saved
atomically as ``WORK/folds/<slug>/K<K>-seed<s>.json`` and recreated (identically) only when the
labelled graphs change.

Grouping: the group key is the graph *stem*. The ``default`` and ``random`` twins of a layout
graph share a stem (one program searched two ways), so folds are assigned over the stems of both
searches of a source (and of both splits): both get the same fold (and inner-validation choice) for every stem.

Stratification: stems are dealt round-robin into folds family by family (:func:`family_of`), so
every model family spreads over the folds and fold sizes differ by at most one; within a family
the order is a seeded permutation.

Graphs are discovered from the raw data root the features were built from (``build.json``), minus
files the build skipped as bad; without a data root, from the processed graphs.
"""

from __future__ import annotations

import json
import os
import re
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np

from tpurank.atomic import write_json
from tpurank.collections import COLLECTIONS, Collection

LABELLED_SPLITS: tuple[str, ...] = ("train", "valid")
DEFAULT_INNER_FRACTION = 0.15
PLAN_VERSION = 1
_FAMILY = re.compile(r"[A-Za-z][A-Za-z-]*")

Key = tuple[str, str]  # (split, stem)


def family_of(stem: str) -> str:
    """Model family of a graph stem: its leading letters (``resnet50.4x4`` -> ``resnet``,
    ``unet3d_001`` -> ``unet``, ``talking-heads_large`` -> ``talking-heads``), lower case;
    ``""`` when the stem does not start with a letter (e.g. a bare hash)."""
    m = _FAMILY.match(stem)
    return m.group(0).rstrip("-").lower() if m else ""


def twin_collections(collection: Collection) -> list[Collection]:
    """The collections whose stems form one grouping universe with ``collection``: both searches
    of a layout source, or the tile collection alone."""
    if collection.is_tile:
        return [collection]
    return [c for c in COLLECTIONS if c.kind == collection.kind and c.source == collection.source]


def plan_path(work: str | os.PathLike, collection: Collection, folds: int, seed: int) -> Path:
    return Path(work) / "folds" / collection.slug / f"K{folds}-seed{seed}.json"


def _key(split: str, stem: str) -> str:
    return f"{split}/{stem}"


def _unkey(key: str) -> Key:
    split, _, stem = key.partition("/")
    return split, stem


@dataclass
class FoldPlan:
    """A fold assignment for one collection (see the module docstring)."""

    collection: str
    folds: int
    seed: int
    assignment: dict[str, int]  # "<split>/<stem>" -> fold
    inner: dict[int, list[str]] = field(default_factory=dict)  # fold -> "<split>/<stem>" keys
    inner_fraction: float = DEFAULT_INNER_FRACTION
    universe: list[str] = field(default_factory=list)  # sorted stems of the twin collections
    path: Path | None = None

    def _check(self, k: int) -> None:
        if not 0 <= k < self.folds:
            raise IndexError(f"{self.collection}: fold {k} out of range 0..{self.folds - 1}")

    def fold_of(self, split: str, stem: str) -> int:
        try:
            return self.assignment[_key(split, stem)]
        except KeyError:
            raise KeyError(f"{self.path or self.collection}: graph {split}/{stem} is not in the "
                           "fold plan (not a labelled graph of this collection)") from None

    def graphs(self) -> list[Key]:
        """Every labelled graph of the plan, sorted by (split, stem)."""
        return sorted(_unkey(k) for k in self.assignment)

    def held_out(self, k: int) -> list[Key]:
        self._check(k)
        return sorted(_unkey(key) for key, f in self.assignment.items() if f == k)

    def inner_valid(self, k: int) -> list[Key]:
        self._check(k)
        return sorted(_unkey(key) for key in self.inner.get(k, []))

    def training(self, k: int) -> list[Key]:
        self._check(k)
        inner = set(self.inner.get(k, []))
        return sorted(_unkey(key) for key, f in self.assignment.items()
                      if f != k and key not in inner)

    def to_json(self) -> dict:
        return {"version": PLAN_VERSION, "collection": self.collection, "folds": self.folds,
                "seed": self.seed, "inner_fraction": self.inner_fraction,
                "universe": self.universe, "assignment": self.assignment,
                "inner_valid": {str(k): v for k, v in sorted(self.inner.items())},
                "families": {s: family_of(s) for s in self.universe}}


def load_plan(path: str | os.PathLike) -> FoldPlan:
    """A saved plan (:meth:`FoldPlan.to_json`); ValueError naming the file when it is not one."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: cannot read fold plan ({e})") from None
    try:
        return FoldPlan(collection=data["collection"], folds=int(data["folds"]),
                        seed=int(data["seed"]),
                        assignment={k: int(v) for k, v in data["assignment"].items()},
                        inner={int(k): list(v) for k, v in data["inner_valid"].items()},
                        inner_fraction=float(data["inner_fraction"]),
                        universe=list(data["universe"]), path=path)
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path}: not a fold plan ({e!r}); delete it to recreate") from None


# -------------------------------------------------------------------------------------------
# assignment


def _rng(seed: int, *key: object) -> np.random.Generator:
    h = zlib.crc32("/".join(map(str, key)).encode())
    return np.random.default_rng(np.random.SeedSequence([int(seed), h]))


def assign_stems(stems: Iterable[str], folds: int, seed: int) -> dict[str, int]:
    """Stem -> fold: a family-stratified round-robin over a seeded order (sizes differ by <= 1).

    Families are dealt largest first; the round-robin position carries over from one family to
    the next, so the folds stay balanced overall and every family spreads as evenly as it can.
    """
    if folds < 2:
        raise ValueError(f"folds must be >= 2, got {folds}")
    by_family: dict[str, list[str]] = {}
    for s in sorted(set(stems)):
        by_family.setdefault(family_of(s), []).append(s)
    out: dict[str, int] = {}
    pos = int(_rng(seed, "fold-offset").integers(folds))
    for fam in sorted(by_family, key=lambda f: (-len(by_family[f]), f)):
        members = by_family[fam]
        for i in _rng(seed, "fold-order", fam).permutation(len(members)):
            out[members[i]] = pos % folds
            pos += 1
    return out


def _inner_stems(fold_of: dict[str, int], k: int, fraction: float, seed: int,
                 wanted: set[str]) -> list[str]:
    """A seeded slice (``fraction`` of the stems outside fold ``k``, at least one) for early
    stopping; extended along the same order until it holds a stem of ``wanted`` (the
    collection's own graphs) when it can, and never all of them."""
    pool = sorted(s for s, f in fold_of.items() if f != k)
    own = [s for s in pool if s in wanted]
    if len(own) < 2:
        return []
    order = [pool[i] for i in _rng(seed, "inner", k).permutation(len(pool))]
    n = max(1, int(round(fraction * len(pool))))
    chosen = order[:n]
    j = n
    while not wanted.intersection(chosen) and j < len(order):
        chosen.append(order[j])
        j += 1
    if set(own) <= set(chosen):
        chosen = [s for s in chosen if s != own[-1]]  # keep one graph to train on
    return sorted(chosen)


def make_plan(collection: Collection, graphs: list[Key], universe: Iterable[str], folds: int,
              seed: int) -> FoldPlan:
    """Build the plan for ``graphs`` (the collection's labelled graphs) with folds assigned over
    ``universe`` (the stems of the twin collections; ``graphs``' stems are added)."""
    stems = sorted(set(universe) | {s for _, s in graphs})
    if not graphs:
        raise ValueError(f"{collection.name}: no labelled (train/valid) graphs to cross-validate")
    own_stems = {s for _, s in graphs}
    if len(own_stems) < folds:
        raise ValueError(f"{collection.name}: {len(own_stems)} labelled graph stem(s) cannot fill "
                         f"{folds} folds; use fewer folds")
    fold_of = assign_stems(stems, folds, seed)
    assignment = {_key(sp, st): fold_of[st] for sp, st in sorted(graphs)}
    empty = [k for k in range(folds) if k not in set(assignment.values())]
    if empty:
        raise ValueError(f"{collection.name}: fold(s) {empty} get no graph of this collection "
                         f"({len(own_stems)} stems over {folds} folds); use fewer folds")
    by_stem: dict[str, list[str]] = {}
    for sp, st in graphs:
        by_stem.setdefault(st, []).append(_key(sp, st))
    inner: dict[int, list[str]] = {}
    for k in range(folds):
        chosen = _inner_stems(fold_of, k, DEFAULT_INNER_FRACTION, seed, own_stems)
        inner[k] = sorted(key for s in chosen for key in by_stem.get(s, []))
    return FoldPlan(collection.name, folds, seed, assignment, inner, DEFAULT_INNER_FRACTION, stems)


# -------------------------------------------------------------------------------------------
# discovery


def _data_root(features_dir: str | os.PathLike, collection: Collection) -> tuple[str, str]:
    """(data root, skip-bad report) the features of ``collection`` were built from, or ("", "")."""
    build = Path(features_dir) / collection.slug / "build.json"
    if not build.is_file():
        return "", ""
    try:
        cfg = json.loads(build.read_text())["config"]
    except (OSError, json.JSONDecodeError, KeyError) as e:
        raise ValueError(f"{build}: unreadable build config ({e})") from None
    return str(cfg.get("data", "")), str(cfg.get("skip_bad_report", ""))


def _raw_graphs(data: str, collection: Collection, skip_bad_report: str = "") -> list[Key]:
    from features.io import discover

    files = discover(data, [collection], LABELLED_SPLITS)
    if skip_bad_report:
        from features.validate import load_bad_files

        bad = load_bad_files(skip_bad_report)
        files = [f for f in files if str(f.path.resolve()) not in bad]
    return [(f.split, f.stem) for f in files]


def _processed_graphs(features_dir: str | os.PathLike, collection: Collection) -> list[Key]:
    from features.processed import iter_processed

    return [(split, g.stem) for split in LABELLED_SPLITS
            for g in iter_processed(features_dir, collection, split)]


def labelled_graphs(features_dir: str | os.PathLike, collection: Collection,
                    data: str | os.PathLike | None = None) -> tuple[list[Key], list[str]]:
    """(the collection's labelled graphs, the sorted stem universe of its twin collections)."""
    root, bad = (str(data), "") if data else _data_root(features_dir, collection)
    twins = twin_collections(collection)  # the collection among them
    found = {c.name: _raw_graphs(root, c, bad) for c in twins} if root else {}
    if not found.get(collection.name):
        found = {c.name: _processed_graphs(features_dir, c) for c in twins}
    return sorted(found[collection.name]), sorted({s for g in found.values() for _, s in g})


def fold_plan(work: str | os.PathLike, features_dir: str | os.PathLike, collection: Collection,
              folds: int = 3, seed: int = 0, data: str | os.PathLike | None = None) -> FoldPlan:
    """The saved plan ``WORK/folds/<slug>/K<folds>-seed<seed>.json``, created on first use.

    A saved plan is reused while it matches the current labelled graphs (and inner fraction);
    otherwise it is recreated (deterministically) and a note goes to stderr. When no graph can be
    discovered (no data root, no processed graphs) a saved plan is loaded as it is.
    """
    path = plan_path(work, collection, folds, seed)
    graphs, universe = labelled_graphs(features_dir, collection, data)
    saved = load_plan(path) if path.is_file() else None
    if not graphs:
        if saved is None:
            raise FileNotFoundError(
                f"{collection.name}: no labelled graphs under {features_dir} (nor a data root in its "
                f"build.json) and no saved fold plan {path}; build the features first")
        return saved
    if saved is not None:
        same = (saved.universe == universe and saved.inner_fraction == DEFAULT_INNER_FRACTION
                and sorted(saved.graphs()) == graphs and saved.folds == folds
                and saved.seed == seed)
        if same:
            return saved
        print(f"{path}: labelled graphs or options changed; recreating the fold plan",
              file=sys.stderr)
    plan = make_plan(collection, graphs, universe, folds, seed)
    write_json(path, plan.to_json())
    plan.path = path
    return plan


# -------------------------------------------------------------------------------------------
# fold manifests (what each fold model saw), written beside the models


def write_fold_manifest(path: str | os.PathLike, plan: FoldPlan,
                        seen: dict[int, Iterable[Key]] | None = None, **extra: object) -> dict:
    """Write the ``folds.json`` a model keeps beside its fold models: per fold the graphs the fold
    model saw (trained or early-stopped on; default: the plan's training + inner-valid graphs),
    plus ``extra`` fields, after :func:`check_manifest` (a leaking manifest is never written). Returns it."""
    if seen is None:
        seen = {k: plan.training(k) + plan.inner_valid(k) for k in range(plan.folds)}
    manifest = {"collection": plan.collection, "folds": plan.folds, "seed": plan.seed,
                "plan": str(plan.path) if plan.path else "",
                "seen": {str(k): sorted(_key(sp, st) for sp, st in v)
                         for k, v in sorted(seen.items())}, **extra}
    check_manifest(manifest, plan)
    write_json(path, manifest)
    return manifest


def check_manifest(manifest: dict | str | os.PathLike, plan: FoldPlan) -> None:
    """Raise ValueError when a fold model saw a graph of its own held-out fold (its OOF
    prediction would then be in-sample), or when the manifest does not cover every fold."""
    where = ""
    if not isinstance(manifest, dict):
        where = f"{manifest}: "
        manifest = json.loads(Path(manifest).read_text())
    seen = manifest.get("seen", {})
    missing = [k for k in range(plan.folds) if str(k) not in seen]
    if missing:
        raise ValueError(f"{where}no entry for fold(s) {missing} of {plan.collection}")
    for k in range(plan.folds):
        held_stems = {st for _, st in plan.held_out(k)}  # a twin or the other split's graph too
        leak = sorted(s for s in seen[str(k)] if _unkey(s)[1] in held_stems)
        if leak:
            raise ValueError(f"{where}fold {k} model of {plan.collection} saw {len(leak)} of its "
                             f"held-out graph(s), e.g. {leak[:3]}: its OOF predictions are in-sample")
