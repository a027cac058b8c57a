"""No import circles among the modules of broker/core and broker/server (and the
connection engine, broker/engine, that stands between them).

The graph is read from the source (AST), not by importing: every ``import`` and
``from ... import`` a module runs, at the top or inside a function, is an edge.  Imports
under ``if TYPE_CHECKING:`` are left out -- they never run, so they cannot form a
circle at run time, and type hints naming each other (a session's consumer and its
destination) are normal.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("broker.core", "broker.engine", "broker.server")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for pkg in PACKAGES:
        # A package not there (yet) has no modules to check.
        for path in (ROOT / pkg.replace(".", "/")).rglob("*.py"):
            found[_module_name(path)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Every module name an import statement outside ``if TYPE_CHECKING:`` names."""
    names: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            names.add(prefix)
            # ``from . import dmq`` imports the module broker.core.dmq.
            names.update(f"{prefix}.{a.name}" for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of the checked packages it imports at run time."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        targets = _runtime_imports(tree, name, path.name == "__init__.py")
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of imports as a path that ends where it starts, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                found = walk(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = walk(node)
            if found:
                return found
    return None


def test_the_graph_sees_the_core_and_server_modules() -> None:
    graph = import_graph()
    # The checker reads real edges: the router imports its parts, the server the router.
    assert "broker.core.destination" in graph["broker.core.router"]
    assert "broker.core.router" in graph["broker.server.broker"]
    assert len([m for m in graph if m.startswith("broker.core.")]) >= 10


def test_the_checker_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_checker_reads_function_level_imports_and_skips_type_checking() -> None:
    src = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .session import Session\n"
        "def f():\n    from .router import RouterError\n"
    )
    names = _runtime_imports(ast.parse(src), "broker.core.transaction", False)
    assert "broker.core.router" in names
    assert "broker.core.session" not in names


def test_no_import_cycle_in_core_engine_and_server() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])
