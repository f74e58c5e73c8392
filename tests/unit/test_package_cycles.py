"""No package imports a package that imports it back (STYLE.md: layers by what a module is; a test
fails on any package cycle). import-linter's layers contract holds the main floors; this holds every
package, the adapters, the local entry points and the top-level modules of `shared` included.

A node of the graph is a package (a folder with __init__.py) or a module directly under `shared/` or
`functions/` (config, ports, runtime, ...). A package and its own sub-packages are one family: a
package's __init__ re-exporting its children, and a child using its parent's modules, is not a cycle.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Set

import grimp

ROOTS = ("shared", "functions")


def package_graph() -> dict[str, set[str]]:
    """Which package imports which (TYPE_CHECKING imports included: they are part of the picture)."""
    graph = grimp.build_graph(*ROOTS, cache_dir=None)

    def package_of(module: str) -> str:
        if graph.find_children(module) or module in ROOTS:
            return module
        parent = module.rpartition(".")[0]
        return module if parent in ROOTS else parent

    edges: dict[str, set[str]] = defaultdict(set)
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            a, b = package_of(module), package_of(imported)
            if a != b and not a.startswith(f"{b}.") and not b.startswith(f"{a}."):
                edges[a].add(b)
    return dict(edges)


def cycles(edges: Mapping[str, Set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one package (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(edges.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_package_cycle() -> None:
    assert cycles(package_graph()) == []


def test_a_cycle_is_listed_with_every_package_in_it() -> None:
    # Given formats importing the planner, which imports the domain, which imports formats
    edges = {
        "shared.formats": {"shared.planner"},
        "shared.planner": {"shared.domain"},
        "shared.domain": {"shared.formats"},
        "shared.controller": {"shared.planner"},
    }
    # When the cycles are listed / Then the three are one cycle; the controller is in none
    assert cycles(edges) == [["shared.domain", "shared.formats", "shared.planner"]]
