"""The package's import graph: no cycle, counting imports inside functions (the ones under
``TYPE_CHECKING`` never run and do not count), and no layer importing one above it. The list
of known cycles is kept (empty) so that any debt taken on is written down where the test
reads it."""

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


LAYERS = [
    "state",
    "storage",
    "walk.history",
    "backends",
    "walk",
    "retention",
    "savers",
    "wording",
    "agent",
    "api",
    "demo",
    "cli",
]
"""The package's layers, lowest first: a module may import its own layer and those below it.
``walk.history`` is the walk's contract (the ``ThreadHistory`` protocol and every answer,
errors included), which the backends report in; the rest of the walk reads through them."""


def _layer(module: str) -> int:
    """Where ``module`` (``mcp_state_versions.x.y``) stands in :data:`LAYERS`."""
    parts = module.split(".")[1:]
    for depth in (2, 1):
        name = ".".join(parts[:depth])
        if len(parts) >= depth and name in LAYERS:
            return LAYERS.index(name)
    raise AssertionError(f"{module} is in no layer: add its subpackage to LAYERS")


def test_each_layer_imports_only_the_layers_below_it() -> None:
    modules = _modules()
    wrong = []
    for module, path in modules.items():
        if module == "mcp_state_versions":  # the public names, imported when first used
            continue
        for target in _imported(module, path, modules):
            if target != "mcp_state_versions" and _layer(target) > _layer(module):
                wrong.append(f"{module} imports {target}")
    assert not wrong, "a layer imports one above it:\n" + "\n".join(sorted(wrong))


def test_every_layer_is_a_subpackage_that_says_what_it_owns() -> None:
    """The top level holds the public names, the CLI and the layers' subpackages only."""
    top = {path.stem for path in PACKAGE.glob("*.py")} - {"__init__"}
    assert top == {"cli"}
    for name in {layer.split(".")[0] for layer in LAYERS} - {"cli"}:
        init = PACKAGE / name / "__init__.py"
        assert ast.get_docstring(ast.parse(init.read_text())), f"{name} has no docstring"


def _module_map() -> list[tuple[str, list[str]]]:
    """The design doc's module map: each row's layer (carried down blank cells) and modules."""
    design = (PACKAGE.parent / "docs" / "design.md").read_text()
    section = design.split("\n## Module map\n", 1)[1].split("\n## ", 1)[0]
    rows, layer = [], ""
    for line in section.splitlines():
        if not line.startswith("| `") and not line.startswith("| |"):
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        layer = cells[0].strip("`") or layer
        rows.append((layer, [name.strip("`") for name in cells[1].split(", ") if name]))
    return rows


def test_the_design_doc_s_module_map_is_the_package() -> None:
    """Every module is in the map under its layer, in the order of :data:`LAYERS`, and the map
    names none that is gone. A layer row without modules stands for its whole subpackage."""
    rows = _module_map()
    layers = list(dict.fromkeys(layer for layer, _ in rows))
    assert layers == LAYERS
    mapped = set()
    for layer, names in rows:
        mapped |= {f"mcp_state_versions.{layer}.{name}" for name in names}
        if not names:
            mapped.add(f"mcp_state_versions.{layer}")
    assert mapped - set(_modules()) == set(), "the module map names modules that do not exist"
    packages = {f"mcp_state_versions.{layer}" for layer in layers}  # their __init__ modules
    modules = set(_modules()) - {"mcp_state_versions"} - packages
    covered = {m for m in modules if any(m == x or m.startswith(x + ".") for x in mapped)}
    assert modules - covered == set(), "modules missing from docs/design.md's module map"
