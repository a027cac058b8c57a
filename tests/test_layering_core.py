"""The floors inside broker/core: the router is the façade, its parts sit below it.

tests/test_import_cycles.py finds no circle among the imports that run.  This reads
broker/core's imports again from the source (AST), this time with the ones under ``if
TYPE_CHECKING:`` too, since a part that names ``MessageRouter`` in its hints depends on
the router as much as one that imports it: the rules below are what that graph must
show.

- No module imports router.py but the read-only layers above the façade (queries.py,
  monitoring.py): the parts are given a context (context.py), not the router.
- No circle at all, not even in the data model, whose classes would name each other
  in their hints: where one needs only the other's shape it says so in a small
  Protocol of its own (a destination's producers, a pager's delivery queues).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .test_import_cycles import find_cycle

pytestmark = pytest.mark.fast

CORE = Path(__file__).resolve().parent.parent / "broker" / "core"

# Above the façade: they read the router's state for the layers above (admin service,
# metrics topics, JMX) and are imported by nothing in core that the router imports.
ABOVE_ROUTER = frozenset({"queries", "admin_views", "monitoring"})


def core_imports() -> dict[str, set[str]]:
    """core module -> the core modules it imports, at run time or for type checking."""
    names = {p.stem for p in CORE.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in CORE.glob("*.py"):
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                if node.level == 1:
                    if node.module:
                        found.add(node.module.split(".")[0])
                    else:
                        found.update(a.name for a in node.names)
                elif node.level == 0 and node.module and node.module.startswith("broker.core"):
                    parts = node.module.split(".")
                    if len(parts) > 2:
                        found.add(parts[2])
                    else:
                        found.update(a.name for a in node.names)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    parts = a.name.split(".")
                    if parts[:2] == ["broker", "core"] and len(parts) > 2:
                        found.add(parts[2])
        graph[path.stem] = {m for m in found if m in names and m != path.stem}
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected parts of ``graph`` with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

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
            part = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.add(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(part)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_reader_sees_type_checking_imports() -> None:
    graph = core_imports()
    # acks names its session's types under TYPE_CHECKING only.
    assert "session" in graph["acks"]
    assert {"acks", "limits", "subscriptions", "transaction_rules", "context"} <= graph["router"]
    assert circles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [{"a", "b"}]


def test_only_the_layers_above_the_router_import_it() -> None:
    graph = core_imports()
    importers = {m for m, deps in graph.items() if "router" in deps}
    assert importers <= ABOVE_ROUTER, f"parts importing the router: {importers - ABOVE_ROUTER}"
    for above in ABOVE_ROUTER:
        assert all(above not in graph[m] for m in graph if m not in ABOVE_ROUTER), above


def test_no_circle_in_core() -> None:
    graph = core_imports()
    assert circles(graph) == []
    assert find_cycle(graph) is None
