"""No import circles in the project's code: among the modules of every package of broker/
and portal/, and among the packages themselves (broker/core, broker/store, ... ,
portal/api, ...; a top-level module such as broker/models.py counts as a package of its
own).

The graph is read from the source (AST), not by importing: every ``import`` and
``from ... import`` a module runs, at the top or inside a function, is an edge, and so is
the package ``__init__`` such an import runs first (``from broker.store.base import X``
runs broker/store/__init__.py) -- except the importing module's own parent packages,
which Python has already run.  Imports under ``if TYPE_CHECKING:`` are left out -- they
never run, so they cannot form a circle at run time, and type hints naming each other (a
session's consumer and its destination) are normal.

The circles there are today are listed below, one edge each that closes it, with why;
a new circle, or a listed edge that no longer exists, fails.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parent.parent
TOPS = ("broker", "portal", "openmq_client")

# Module-level circles there are today: (importer, imported) -> why.  Each is an import
# inside a function that closes a circle of two or three modules of one package.
ALLOWED_MODULE_EDGES: dict[tuple[str, str], str] = {
    ("broker.security.users", "broker.security.filerepo"): (
        "the passwd-file import/export of users.py uses filerepo, whose records are users'"
    ),
}

# Package-level circles there are today: (importer package, imported package) -> why.
ALLOWED_PACKAGE_EDGES: dict[tuple[str, str], str] = {
    ("broker.models", "broker.security"): (
        "BrokerUser checks passwords with broker/security/digest.py, while the user "
        "repositories and access rules read the models"
    ),
    ("portal.api", "portal.objects"): (
        "portal/api/urls.py mounts portal/objects/api.py, whose views are built on "
        "portal/api/base.py"
    ),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(tops: Iterable[str] = TOPS) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for top in tops:
        for path in (ROOT / top.replace(".", "/")).rglob("*.py"):
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


@functools.cache
def scan(path: Path) -> tuple[frozenset[str], frozenset[str]]:
    """A module's run-time imports, and every absolute import it names (``if
    TYPE_CHECKING:`` included), from one parse a process: the graphs with and without
    parent packages and test_layering's own check read the same few hundred files (the
    trees are not kept: so many objects would slow every collection of the process)."""
    tree = ast.parse(path.read_text(), str(path))
    absolute: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            absolute.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            absolute.add(node.module)
    runtime = _runtime_imports(tree, _module_name(path), path.name == "__init__.py")
    return frozenset(runtime), frozenset(absolute)


@functools.cache
def import_graph(tops: tuple[str, ...] = TOPS, parents: bool = True) -> dict[str, set[str]]:
    """Module -> the project's modules it imports at run time, with (``parents``) the
    packages whose ``__init__`` those imports run (not the module's own parents).  Read
    once per run: callers do not change it."""
    modules = _modules(tops)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set(scan(path)[0])
        for t in list(targets) if parents else ():
            parts = t.split(".")
            targets.update(".".join(parts[:i]) for i in range(1, len(parts)))
        graph[name] = {
            t for t in targets if t in modules and t != name and not name.startswith(t + ".")
        }
    return graph


def package_of(module: str) -> str:
    """broker/<pkg>/... and portal/<pkg>/... are ``broker.<pkg>``; a top-level module
    (broker/models.py) or a top package's ``__init__`` is its own."""
    parts = module.split(".")
    if parts[0] == "openmq_client":
        return parts[0]  # the Python client library is one package of its own
    if len(parts) >= 2 and (ROOT / parts[0] / parts[1]).is_dir():
        return ".".join(parts[:2])
    return module


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for mod, targets in graph.items():
        src = package_of(mod)
        out.setdefault(src, set()).update(package_of(t) for t in targets if package_of(t) != src)
    return out


def without(graph: dict[str, set[str]], edges: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    cut = set(edges)
    return {a: {b for b in bs if (a, b) not in cut} for a, bs in graph.items()}


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


def test_the_graph_sees_every_package() -> None:
    graph = import_graph()
    # The checker reads real edges: the router imports its parts, the server the router.
    assert "broker.core.destination" in graph["broker.core.router"]
    assert "broker.core.router" in graph["broker.server.broker"]
    # ... and the packages the first version left out.
    assert "broker.store.base" in graph["broker.store.filestore"]
    assert "broker.core.destination" in graph["broker.cluster.delivery"]
    assert "openmq_client" in graph["broker.admintools.client"]
    assert "broker.admintools" in graph["portal.ui.views.broker"]
    # A submodule's import runs its package's __init__ (core -> broker.store).
    assert "broker.store" in graph["broker.core.router"]
    packages = {package_of(m) for m in graph}
    for pkg in (
        "broker.admintools",
        "openmq_client",
        "broker.cluster",
        "broker.core",
        "broker.engine",
        "broker.management",
        "broker.protocol",
        "broker.security",
        "broker.server",
        "broker.store",
        "broker.models",
        "portal.api",
        "portal.jobs",
        "portal.objects",
        "portal.pipeline",
        "portal.ui",
        "portal.ums",
        "portal.consumers",
    ):
        assert pkg in packages, pkg


def test_the_checker_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    assert find_cycle(without(graph, [("c", "a")])) is None


def test_the_checker_reads_function_level_imports_and_skips_type_checking() -> None:
    src = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .session import Session\n"
        "def f():\n    from .router import RouterError\n"
    )
    names = _runtime_imports(ast.parse(src), "broker.core.transaction_record", False)
    assert "broker.core.router" in names
    assert "broker.core.session" not in names


def test_no_import_circle_among_modules() -> None:
    graph = import_graph()
    cycle = find_cycle(without(graph, ALLOWED_MODULE_EDGES))
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_no_import_circle_among_packages() -> None:
    packages = package_graph(import_graph())
    cycle = find_cycle(without(packages, ALLOWED_PACKAGE_EDGES))
    assert cycle is None, "import circle between packages: " + " -> ".join(cycle or [])


def test_every_allowed_circle_is_still_there() -> None:
    """An entry whose import is gone, or no longer closes a circle, is removed from the
    list (so the list says what is true)."""
    graph = import_graph()
    packages = package_graph(graph)
    stale = []
    for allowed, g in ((ALLOWED_MODULE_EDGES, graph), (ALLOWED_PACKAGE_EDGES, packages)):
        for a, b in allowed:
            if b not in g.get(a, ()):
                stale.append(f"{a} -> {b}: no such import any more")
            elif find_cycle({**without(g, allowed), a: g[a]}) is None:
                stale.append(f"{a} -> {b}: closes no circle any more")
    assert stale == []
