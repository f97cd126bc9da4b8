"""One dataclass config per stage, overridable from the command line, saved beside every output.

Usage in a stage's ``__main__``::

    cfg = parse_config(GnnConfig, argv)          # --lr 3e-4 --preset quick --collections tile:xla
    save_run_config(cfg, out_dir)                # out_dir/config.json with git SHA, seed, versions

Presets: a config class may define ``PRESETS = {"quick": {...}, "full": {...}}``; ``--preset``
applies one before the other overrides.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import subprocess
import sys
import time
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

from tpurank import __version__
from tpurank.atomic import write_json

T = TypeVar("T")


@dataclasses.dataclass
class StageConfig:
    """The options every stage shares: the CLI contract of ``make run`` (``--data --work --preset
    --seed --collections``). Stage configs subclass it and add their own fields."""

    data: str = "data/sample-small"
    work: str = "work/sample-small-quick"
    preset: str = "quick"
    seed: int = 0
    collections: str = "all"


def git_sha(cwd: str | os.PathLike | None = None) -> str:
    """The current commit (with ``-dirty`` when the tree has changes), or ``unknown``."""
    cwd = cwd or Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                             text=True, timeout=10).stdout.strip()
        if not sha:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _field_type(cls: type, field: dataclasses.Field) -> Any:
    hints = typing.get_type_hints(cls)
    return hints.get(field.name, str)


def _convert(value: str, tp: Any) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        non_none = [a for a in args if a is not type(None)]
        if value.lower() in ("none", "null", ""):
            return None
        return _convert(value, non_none[0])
    if tp is bool:
        if value.lower() in ("1", "true", "yes", "on"):
            return True
        if value.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"expected a boolean, got {value!r}")
    if origin in (list, tuple):
        items = [v for v in value.split(",") if v != ""]
        inner = args[0] if args else str
        converted = [_convert(v, inner) for v in items]
        return tuple(converted) if origin is tuple else converted
    if tp in (int, float, str):
        return tp(value)
    return value


def apply_overrides(cfg: T, overrides: dict[str, Any]) -> T:
    """Return a copy of ``cfg`` with fields replaced; string values are converted to field types."""
    fields = {f.name: f for f in dataclasses.fields(cfg)}
    changes = {}
    for key, value in overrides.items():
        key = key.replace("-", "_")
        if key not in fields:
            raise ValueError(f"{type(cfg).__name__} has no option {key!r}; "
                             f"known: {', '.join(sorted(fields))}")
        tp = _field_type(type(cfg), fields[key])
        changes[key] = _convert(value, tp) if isinstance(value, str) else value
    return dataclasses.replace(cfg, **changes)


def with_preset(cls: type[T], preset: str | None, **overrides: Any) -> T:
    """Build ``cls()`` with a named preset (``cls.PRESETS[preset]``) and then ``overrides``."""
    cfg = cls()
    presets: dict[str, dict[str, Any]] = getattr(cls, "PRESETS", {})
    if preset:
        if preset not in presets:
            raise ValueError(f"{cls.__name__}: unknown preset {preset!r}; known: {sorted(presets)}")
        cfg = apply_overrides(cfg, dict(presets[preset]))
        if "preset" in {f.name for f in dataclasses.fields(cfg)}:
            cfg = dataclasses.replace(cfg, preset=preset)
    return apply_overrides(cfg, overrides)


def add_config_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """Add one ``--option`` per dataclass field (values parsed later by :func:`config_from_args`)."""
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        flag = "--" + f.name.replace("_", "-")
        parser.add_argument(flag, dest=f.name, default=argparse.SUPPRESS, metavar="VALUE",
                            help=f"(default: {default})")


def config_from_args(cls: type[T], args: argparse.Namespace) -> T:
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if hasattr(args, f.name)}
    # no --preset: the class's default preset still applies, so the saved config tells the truth
    preset = values.pop("preset", getattr(cls, "preset", None))
    return with_preset(cls, preset, **values)


def parse_config(cls: type[T], argv: list[str] | None = None, prog: str | None = None) -> T:
    """Parse ``--field value`` options for dataclass ``cls`` (presets applied first)."""
    parser = argparse.ArgumentParser(prog=prog, description=(cls.__doc__ or "").strip())
    add_config_arguments(parser, cls)
    return config_from_args(cls, parser.parse_args(argv))


def run_metadata(cfg: Any = None) -> dict[str, Any]:
    """What is saved with every output: config, git SHA, seed, versions, machine, time."""
    meta: dict[str, Any] = {
        "git_sha": git_sha(),
        "tpurank_version": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if cfg is not None:
        meta["config_class"] = type(cfg).__name__
        meta["config"] = dataclasses.asdict(cfg)
        if hasattr(cfg, "seed"):
            meta["seed"] = getattr(cfg, "seed")
    return meta


def save_run_config(cfg: Any, out_dir: str | os.PathLike, name: str = "config.json") -> Path:
    """Write ``out_dir/name`` with the config and :func:`run_metadata`; returns the path."""
    path = Path(out_dir) / name
    write_json(path, run_metadata(cfg))
    return path


def load_run_config(cls: type[T], path: str | os.PathLike) -> T:
    """Rebuild a config saved by :func:`save_run_config` (unknown keys are ignored)."""
    saved = json.loads(Path(path).read_text())["config"]
    names = {f.name for f in dataclasses.fields(cls)}
    kept = {k: (tuple(v) if isinstance(v, list) and isinstance(getattr(cls(), k, None), tuple) else v)
            for k, v in saved.items() if k in names}
    return dataclasses.replace(cls(), **kept)
