"""The package's import graph: no new cycle, counting imports inside functions (the ones under
``TYPE_CHECKING`` never run and do not count). The package has none; the list of known ones
is kept (empty) so that any debt taken on is written down where the test reads it."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mcp_state_versions"

KNOWN_CYCLES: set[frozenset[str]] = set()
"""None is left: a new one fails the test."""


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imported(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules ``module`` imports anywhere but under ``TYPE_CHECKING``."""
    tree = ast.parse(path.read_text())
    unrun = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in unrun:
            continue
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - (node.level - 1)] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            found |= {target} | {f"{target}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found & set(modules)


def _cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: set[frozenset[str]] = set()

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = set()
            while True:
                other = stack.pop()
                component.add(other)
                if other == node:
                    break
            if len(component) > 1:
                found.add(frozenset(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_no_new_import_cycle() -> None:
    modules = _modules()
    graph = {module: _imported(module, path, modules) for module, path in modules.items()}
    cycles = _cycles(graph)
    new = [sorted(cycle) for cycle in cycles - KNOWN_CYCLES]
    assert not new, f"new import cycles (import inside a function counts too): {new}"
    gone = [sorted(cycle) for cycle in KNOWN_CYCLES - cycles]
    assert not gone, f"these cycles are gone: take them out of KNOWN_CYCLES: {gone}"
