"""The five TpuGraphs collections, their on-disk layout and submission IDs (docs/competition.md §2, §6).

Collections are data, not code: every stage takes a :class:`Collection` and uses the same code
path for all five.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

#: the environment variable naming the folder that stands in for ``/kaggle`` (its ``input/`` and
#: ``working/``): unset on Kaggle; the offline rehearsal (``make kaggle-rehearsal``) sets it
KAGGLE_ROOT_ENV = "TPURANK_KAGGLE_ROOT"
COMPETITION = "predict-ai-model-runtime"
SPLITS: tuple[str, ...] = ("train", "valid", "test")


@dataclass(frozen=True)
class Collection:
    """One scored collection, e.g. ``layout:nlp:random``."""

    kind: str  # "tile" or "layout"
    source: str  # "xla" or "nlp"
    search: str | None  # "default" / "random" for layout, None for tile

    @property
    def name(self) -> str:
        """The name used in submission IDs: ``tile:xla`` or ``layout:nlp:random``."""
        parts = [self.kind, self.source] + ([self.search] if self.search else [])
        return ":".join(parts)

    @property
    def slug(self) -> str:
        """A file-system-safe name: ``tile-xla``, ``layout-nlp-random``."""
        return self.name.replace(":", "-")

    @property
    def is_tile(self) -> bool:
        return self.kind == "tile"

    @property
    def rel_dir(self) -> Path:
        """Directory of this collection relative to ``npz_all/npz`` (or ``pb/``)."""
        return Path(*self.name.split(":"))

    def split_dir(self, root: str | os.PathLike, split: str) -> Path:
        return npz_dir(root) / self.rel_dir / split

    def submission_id(self, stem: str) -> str:
        return f"{self.name}:{stem}"


COLLECTIONS: tuple[Collection, ...] = (
    Collection("tile", "xla", None),
    Collection("layout", "xla", "default"),
    Collection("layout", "xla", "random"),
    Collection("layout", "nlp", "default"),
    Collection("layout", "nlp", "random"),
)
BY_NAME: dict[str, Collection] = {c.name: c for c in COLLECTIONS}
BY_NAME.update({c.slug: c for c in COLLECTIONS})


def get_collection(name: str) -> Collection:
    """Look a collection up by ``tile:xla`` / ``tile-xla`` style name."""
    try:
        return BY_NAME[name]
    except KeyError:
        known = ", ".join(c.name for c in COLLECTIONS)
        raise ValueError(f"unknown collection {name!r}; expected one of: {known}") from None


def parse_collections(spec: str | list[str] | tuple[str, ...] | None) -> list[Collection]:
    """``"all"``/None -> all five; otherwise a comma-separated list (or list) of names."""
    if spec is None or spec == "all" or spec == ["all"]:
        return list(COLLECTIONS)
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    return [get_collection(n.strip()) for n in names if n.strip()]


def held_collections(root: str | os.PathLike, spec: str | list[str] | tuple[str, ...] | None = "all"
                     ) -> list[Collection]:
    """What a stage given ``spec`` works on: ``all`` means the collections the data root holds
    (an npz file in any split), so a root with only some collections trains only those; a root
    that is not there at all restricts nothing (all five). Named collections are taken as named."""
    if not (spec is None or spec == "all" or spec == ["all"]) or not npz_dir(root).is_dir():
        return parse_collections(spec)
    return [c for c in COLLECTIONS
            if any(next(c.split_dir(root, s).glob("*.npz"), None) is not None for s in SPLITS)]


def npz_dir(root: str | os.PathLike) -> Path:
    """``ROOT/npz_all/npz`` (Kaggle layout)."""
    return Path(root) / "npz_all" / "npz"


def pb_dir(root: str | os.PathLike) -> Path:
    """``ROOT/pb`` — raw protos mirroring ``npz_all/npz`` when present (optional)."""
    return Path(root) / "pb"


def hidden_runtimes_path(root: str | os.PathLike) -> Path:
    """Where generated sample data keeps the true test runtimes (never present on Kaggle)."""
    return Path(root) / "hidden" / "test_runtimes.npz"


def kaggle_root() -> Path:
    """``/kaggle``, or the folder :data:`KAGGLE_ROOT_ENV` names."""
    return Path(os.environ.get(KAGGLE_ROOT_ENV) or "/kaggle")


def on_kaggle() -> bool:
    """Whether this runs in a Kaggle notebook (or its rehearsal): ``<kaggle root>/working`` exists."""
    return (kaggle_root() / "working").is_dir()


def default_data_root() -> Path | None:
    """The Kaggle input folder when it exists, else None (callers then use the sample)."""
    root = kaggle_root() / "input" / COMPETITION
    return root if npz_dir(root).is_dir() else None
