"""One dataclass config per stage, overridable from the command line, saved beside every output.

    cfg = parse_config(GnnConfig, argv)          # --lr 3e-4 --preset quick --collections tile:xla
    save_run_config(cfg, out_dir)                # out_dir/config.json with git SHA, seed, versions

A config class may define ``PRESETS = {"quick": {...}, "full": {...}}``; ``--preset`` applies one
before the other overrides. ``--work`` left out means ``work/<data-name>-<preset>``, as the
Makefile spells it. An option's help is its field's trailing ``# comment`` (or the comment lines
right above it). Why argparse and not a dataclass-CLI library: docs/cli.md.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import difflib
import functools
import inspect
import json
import os
import platform
import subprocess
import sys
import textwrap
import time
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

from tpurank import __version__
from tpurank.atomic import write_json

T = TypeVar("T")
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


@dataclasses.dataclass
class StageConfig:
    """The options every stage shares: the CLI contract of ``make run`` (``--data --work --preset
    --seed --collections``). Stage configs subclass it and add their own fields."""

    data: str = "data/sample-small"  # data root: holds npz_all/npz/{tile,layout}/... (Kaggle layout) [run]
    work: str = "work/sample-small-quick"  # run directory; left out on the command line: work/<data-name>-<preset> [run]
    preset: str = "quick"  # named set of defaults applied before the other options (see each option) [run]
    seed: int = 0  # random seed of everything the stage samples or initialises [run]
    collections: str = "all"  # 'all' or a comma list, e.g. tile:xla,layout:nlp:random [run]


def default_work(data: str, preset: str | None) -> str:
    """``work/<data-name>-<preset>`` (``work/<data-name>`` without a preset), as the Makefile does."""
    name = os.path.basename(os.path.abspath(data)) or "data"
    return f"work/{name}-{preset}" if preset else f"work/{name}"


def git_sha(cwd: str | os.PathLike | None = None) -> str:
    """The current commit (with ``-dirty`` when tracked files changed), or ``unknown``."""
    cmd = ["git", "describe", "--always", "--dirty", "--abbrev=40", "--exclude=*"]
    try:
        sha = subprocess.run(cmd, cwd=cwd or Path(__file__).resolve().parent.parent,
                             capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return sha or "unknown"


# --- field comments ----------------------------------------------------------------------------

def _class_comments(klass: type) -> dict[str, str]:
    """``{field: comment}`` of one class body (empty without source): a field's trailing
    ``# comment``, else the ``#`` lines right above it (rules such as ``# --- boosting ---`` skipped)."""
    try:
        source = textwrap.dedent(inspect.getsource(klass))
    except (OSError, TypeError):
        return {}
    lines = source.splitlines()
    own_line = {i: line.strip().lstrip("#:").strip() for i, line in enumerate(lines)
                if line.strip().startswith("#")}
    found: dict[str, str] = {}
    for node in ast.parse(source).body[0].body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        # what follows the field on its last line (ast's column offsets count UTF-8 bytes)
        rest = lines[node.end_lineno - 1].encode()[node.end_col_offset:].decode().strip()
        text = rest.lstrip("#:").strip() if rest.startswith("#") else ""
        if not text:
            above, row = [], node.lineno - 2
            while row in own_line and not own_line[row].startswith("---"):
                above.insert(0, own_line[row])
                row -= 1
            text = " ".join(above)
        if text:
            found[node.target.id] = text
    return found


@functools.lru_cache(maxsize=None)
def field_help(cls: type) -> dict[str, str]:
    """One-line help of every field of dataclass ``cls``; a subclass's comment wins over its base's."""
    helps: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            helps.update(_class_comments(klass))
    return {f.name: helps.get(f.name, "") for f in dataclasses.fields(cls)}


# --- types and values --------------------------------------------------------------------------

def type_label(tp: Any) -> str:
    """What ``--help`` shows as an option's type: ``int``, ``bool``, ``float,...``, ``{a,b}``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return type_label(next(a for a in args if a is not type(None))) + " or none"
    if origin is typing.Literal:
        return "{" + ",".join(map(str, args)) + "}"
    if origin in (list, tuple):
        return (type_label(args[0]) if args else "str") + ",..."
    return getattr(tp, "__name__", str(tp))


def _convert(value: str, tp: Any) -> Any:
    """``value`` as type ``tp``; a ``ValueError`` names the expected values."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value.lower() in ("none", "null", ""):
            return None
        return _convert(value, next(a for a in args if a is not type(None)))
    if origin is typing.Literal:
        for choice in args:
            if str(choice) == value:
                return choice
        raise ValueError(f"expected one of {', '.join(map(str, args))}; got {value!r}")
    if tp is bool:
        if value.lower() in TRUE_WORDS + FALSE_WORDS:
            return value.lower() in TRUE_WORDS
        raise ValueError(f"expected a boolean ({'/'.join(TRUE_WORDS)} or {'/'.join(FALSE_WORDS)}); "
                         f"got {value!r}")
    if origin in (list, tuple):
        inner = args[0] if args else str
        converted = [_convert(v, inner) for v in value.split(",") if v != ""]
        return tuple(converted) if origin is tuple else converted
    if tp in (int, float):
        try:
            return tp(value)
        except ValueError:
            raise ValueError(f"expected {'an integer' if tp is int else 'a number'}; got {value!r}") from None
    return value


def apply_overrides(cfg: T, overrides: dict[str, Any]) -> T:
    """Return a copy of ``cfg`` with fields replaced; string values are converted to field types."""
    fields = {f.name for f in dataclasses.fields(cfg)}
    hints = typing.get_type_hints(type(cfg))
    changes = {}
    for key, value in overrides.items():
        key = key.replace("-", "_")
        if key not in fields:
            raise ValueError(f"{type(cfg).__name__} has no option {key!r}; "
                             f"known: {', '.join(sorted(fields))}")
        tp = hints.get(key, str)
        if isinstance(value, str) and tp is not str:
            try:
                value = _convert(value, tp)
            except ValueError as exc:
                raise ValueError(f"--{key.replace('_', '-')}: {exc}") from None
        changes[key] = value
    return dataclasses.replace(cfg, **changes)


def with_preset(cls: type[T], preset: str | None, **overrides: Any) -> T:
    """Build stage config ``cls()`` with a named preset (``cls.PRESETS[preset]``) and then
    ``overrides``. ``work`` set by neither becomes :func:`default_work` of the final ``data`` and
    ``preset``."""
    presets: dict[str, dict[str, Any]] = getattr(cls, "PRESETS", {})
    if preset and preset not in presets:
        raise ValueError(f"{cls.__name__}: unknown preset {preset!r}; known: {sorted(presets)}")
    values = {**presets[preset], "preset": preset} if preset else {}
    cfg = apply_overrides(cls(), {**values, **overrides})
    if "work" not in {k.replace("-", "_") for k in [*values, *overrides]}:
        cfg = dataclasses.replace(cfg, work=default_work(cfg.data, preset))
    return cfg


# --- the command line --------------------------------------------------------------------------

def _shown(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    if isinstance(value, bool):
        return str(value).lower()
    return "''" if value == "" else str(value)


def option_help(cls: type, name: str) -> str:
    """``help text [default: X; quick: Y, full: Z]`` of one field (the type is its metavar)."""
    parts = [f"default: {_shown(getattr(cls(), name))}"]
    presets: dict[str, dict[str, Any]] = getattr(cls, "PRESETS", {})
    set_by = [f"{p}: {_shown(values[name])}" for p, values in presets.items() if name in values]
    if set_by:
        parts.append(", ".join(set_by))
    return f"{field_help(cls)[name]} [{'; '.join(parts)}]"


def add_config_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """Add one ``--option`` per dataclass field, typed, with its help text and preset values."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        flag = "--" + f.name.replace("_", "-")
        kwargs: dict[str, Any] = {"metavar": type_label(hints.get(f.name, str)).upper()}
        if f.name == "preset" and getattr(cls, "PRESETS", None):
            kwargs.update(choices=list(cls.PRESETS), metavar="{" + ",".join(cls.PRESETS) + "}")
        parser.add_argument(flag, dest=f.name, default=argparse.SUPPRESS,
                            help=option_help(cls, f.name).replace("%", "%%"), **kwargs)


def config_from_args(cls: type[T], args: argparse.Namespace) -> T:
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if hasattr(args, f.name)}
    # no --preset: the class's default preset still applies, so the saved config tells the truth
    preset = values.pop("preset", getattr(cls, "preset", None))
    return with_preset(cls, preset, **values)


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Option help wrapped at spaces only (``cross-validation`` stays one word)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


class _ConfigParser(argparse.ArgumentParser):
    """An unknown option is named with the closest known ones, not only 'unrecognized arguments'."""

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            known = [o for a in self._actions for o in a.option_strings
                     if o.startswith("--") and o != "--help"]
            unknown = [a.split("=")[0] for a in extra if a.startswith("-")] or extra
            close = difflib.get_close_matches(unknown[0], known, n=3)
            hint = f"; did you mean {' or '.join(close)}?" if close else "; see --help for the options"
            self.error(f"unknown option {' '.join(unknown)}{hint}")
        return parsed


def build_parser(cls: type, prog: str | None = None) -> argparse.ArgumentParser:
    """The argparse parser of a stage config (what :func:`parse_config` uses; tests build it too)."""
    doc = inspect.cleandoc(cls.__doc__ or "")
    parser = _ConfigParser(prog=prog, description=doc, usage="%(prog)s [--option VALUE ...]",
                           formatter_class=_HelpFormatter,
                           epilog="Presets apply first, then the options given. Booleans take "
                                  "true/false; lists are comma-separated.")
    add_config_arguments(parser, cls)
    return parser


def parse_config(cls: type[T], argv: list[str] | None = None, prog: str | None = None) -> T:
    """Parse ``--field value`` options for dataclass ``cls`` (presets applied first)."""
    parser = build_parser(cls, prog)
    args = parser.parse_args(argv)
    try:
        return config_from_args(cls, args)
    except ValueError as exc:
        parser.error(str(exc))
        raise  # unreachable: error() exits


# --- what is saved beside outputs --------------------------------------------------------------

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
        meta.update(config_class=type(cfg).__name__, config=dataclasses.asdict(cfg), seed=cfg.seed)
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
