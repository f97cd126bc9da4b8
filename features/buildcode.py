"""The digest of the code that computes features, part of every feature cache key.

A cached graph is keyed by its input, the build parameters, the on-disk format and this digest:
the source of every module on the build path of one graph — ``features.tasks`` and every module of
``features`` it imports, directly or not, at module level or inside a function (found by reading
the imports, not by what happens to be loaded) — so a changed featurizer rebuilds the graphs it
touches without anyone bumping a version. An edit to a module off that path (the sample generator,
validation, the CLI) rebuilds nothing.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
from pathlib import Path

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
