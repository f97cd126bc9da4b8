"""Import layers: no cycles between modules, and arrows only along tpurank -> features -> models -> ensemble.

Every ``import`` in every module is counted, at module level and inside functions alike: a lazy
import is still a dependency (it only moves the failure to run time). ``notebooks/``, ``kaggle/`` and
``benchmarks/`` (the lab: benchmark scripts and the docs-table generator) are leaves: they may
import any layer, and no layer may import them.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("tpurank", "features", "models", "ensemble")
LEAVES = ("notebooks", "kaggle", "benchmarks")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for top in LAYERS + LEAVES:
        for path in sorted((ROOT / top).rglob("*.py")):
            if "build" in path.relative_to(ROOT).parts:  # kaggle/build: generated bundles
                continue
            found[_module_name(path)] = path
    return found


def _resolve(target: str, modules: dict[str, Path]) -> str | None:
    """The longest known module that ``target`` names (``a.b.c`` -> ``a.b`` when c is a symbol)."""
    while target:
        if target in modules:
            return target
        target = target.rpartition(".")[0]
    return None


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Modules of this repository that ``name`` imports anywhere in its body."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets.add(base)
            targets.update(f"{base}.{alias.name}" for alias in node.names)
    resolved = {_resolve(t, modules) for t in targets}
    return {r for r in resolved if r and r != name}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _rank(module: str) -> int:
    top = module.split(".")[0]
    return len(LAYERS) if top in LEAVES else LAYERS.index(top)


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                components.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return components


def _parents(module: str) -> set[str]:
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def test_no_import_cycles() -> None:
    graph = import_graph()
    # a package's __init__ importing its own submodules (re-exports) is not a cycle between
    # modules of different concerns; count only edges that leave the importer's own package tree
    graph = {m: {t for t in deps if m not in _parents(t)} for m, deps in graph.items()}
    cycles = find_cycles(graph)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_imports_follow_the_layers() -> None:
    wrong = sorted(f"{m} imports {t}" for m, deps in import_graph().items() for t in deps
                   if _rank(t) > _rank(m) or (t.split(".")[0] in LEAVES and t.split(".")[0] != m.split(".")[0]))
    assert not wrong, "imports against tpurank -> features -> models -> ensemble: " + "; ".join(wrong)


def test_the_walker_sees_function_level_and_relative_imports(tmp_path) -> None:
    graph = import_graph()
    assert "tpurank.atomic" in graph["tpurank.config"]
    assert "benchmarks.render.artifacts" in graph["benchmarks.render.render"]
    assert any(graph[m] for m in graph if m.startswith("features.sample"))
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
