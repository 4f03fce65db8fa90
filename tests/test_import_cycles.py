"""No import cycle inside ``agent_tune`` and ``verl_ext``: the import graph, read from the source with ``ast``.

Every module of both packages (found with ``pkgutil`` on the source folders, nothing imported) is parsed; its
imports of modules of the two packages are the graph's edges:

* module level: what runs when the module is imported (top level, class bodies, ``try`` / ``if`` blocks;
  not ``if TYPE_CHECKING:``). A cycle among these fails :func:`test_no_module_level_import_cycle`,
  naming the modules and the import lines that close it;
* function level: imports inside a function, which run when it is called. They may only be the deferral
  of an import (a heavy dependency, verl), never the way around a cycle; a cycle through them fails
  :func:`test_no_import_cycle_through_function_level_imports`.

Each failure names one cycle of every group of mutually importing modules, and every import line among
the group's modules (the lines to change). :func:`test_layers` also keeps the layout's direction: code
inside verl's processes (``verl_ext``) never imports the launchers (``agent_tune.launch``), and the library
(the rest of ``agent_tune``) imports neither.

Importing ``a.b.c`` runs the ``__init__`` of ``a.b`` first, unless the importing module lies inside ``a.b``
(its package is then already being initialised): the edge goes to that package too. ``from a.b import x``
goes to the submodule ``a.b.x`` when there is one, else to ``a.b`` itself (a name read from a package
``__init__``, also from inside the package).
"""

from __future__ import annotations

import ast
import pkgutil
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("agent_tune", "verl_ext")


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    function_level: bool


def discover_modules() -> dict[str, Path]:
    """Dotted name -> source file of every module and package of :data:`PACKAGES` (no module is imported)."""
    modules: dict[str, Path] = {}

    def walk(folder: Path, prefix: str) -> None:
        for info in pkgutil.iter_modules([str(folder)]):
            name = f"{prefix}.{info.name}"
            if info.ispkg:
                modules[name] = folder / info.name / "__init__.py"
                walk(folder / info.name, name)
            else:
                modules[name] = folder / f"{info.name}.py"

    for package in PACKAGES:
        modules[package] = REPO / package / "__init__.py"
        walk(REPO / package, package)
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.Module) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement that can run, with whether it sits inside a function."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child, in_function))
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for item in child.orelse:  # the `else:` of `if TYPE_CHECKING:` runs
                    visit(ast.Module(body=[item], type_ignores=[]), in_function)
            else:
                visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return found


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module name a (possibly relative) ``from ... import`` names."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(importer: str, imported: str, modules: dict[str, Path]) -> list[str]:
    """The package modules whose code runs (if not run yet) when ``importer`` imports ``imported``."""
    parts = imported.split(".")
    out = []
    for i in range(1, len(parts) + 1):
        name = ".".join(parts[:i])
        if name not in modules:
            break
        inside = importer == name or importer.startswith(name + ".")
        if i == len(parts) or not inside:  # an enclosing package of the importer is already initialising
            out.append(name)
    return out


def import_graph() -> list[Edge]:
    modules = discover_modules()
    edges: list[Edge] = []
    for module, path in sorted(modules.items()):
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, in_function in _imports(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                base = _resolve(module, is_package, node)
                names = []
                for alias in node.names:
                    submodule = f"{base}.{alias.name}"
                    names.append(submodule if submodule in modules else base)
            for name in names:
                if name.split(".")[0] not in PACKAGES:
                    continue
                for target in _targets(module, name, modules):
                    if target != module:
                        edges.append(Edge(module, target, node.lineno, in_function))
    return edges


def find_cycles(edges: list[Edge]) -> list[list[Edge]]:
    """One cycle (as its edges) for each strongly connected component of the graph (a group of modules that
    import each other, directly or not) that has more than one module."""
    graph: dict[str, dict[str, Edge]] = {}
    for edge in edges:
        graph.setdefault(edge.source, {}).setdefault(edge.target, edge)
        graph.setdefault(edge.target, {})
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(node: str) -> None:  # Tarjan's algorithm; the graph is a few hundred modules deep at most
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph[node]:
            if succ not in index:
                connect(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)

    cycles = []
    for component in components:
        members, start = set(component), component[0]
        parents: dict[str, Edge] = {}
        queue = [start]
        closing = None
        while queue and closing is None:  # shortest path from start back to start inside the component
            node = queue.pop(0)
            for succ, edge in sorted(graph[node].items()):
                if succ == start:
                    closing = edge
                    break
                if succ in members and succ not in parents:
                    parents[succ] = edge
                    queue.append(succ)
        path = [closing]
        while path[0].source != start:
            path.insert(0, parents[path[0].source])
        cycles.append(path)
    return cycles


def describe(cycle: list[Edge], edges: list[Edge], modules: dict[str, Path]) -> str:
    """The cycle, then every import among the modules of its group (one line each, file:line)."""
    members = _component(cycle, edges)
    inside = sorted({(e.source, e.line, e.target, e.function_level) for e in edges
                     if e.source in members and e.target in members})
    lines = ["  " + " -> ".join([cycle[0].source] + [edge.target for edge in cycle])]
    for source, line, target, function_level in inside:
        lines.append(f"    {modules[source].relative_to(REPO)}:{line} imports {target}"
                     + (" (inside a function)" if function_level else ""))
    return "\n".join(lines)


def _component(cycle: list[Edge], edges: list[Edge]) -> set[str]:
    """The modules that both reach and are reached from the cycle's first module."""
    start = cycle[0].source

    def reach(forward: bool) -> set[str]:
        seen, todo = {start}, [start]
        while todo:
            node = todo.pop()
            for e in edges:
                a, b = (e.source, e.target) if forward else (e.target, e.source)
                if a == node and b not in seen:
                    seen.add(b)
                    todo.append(b)
        return seen

    return reach(True) & reach(False)


@pytest.fixture(scope="module")
def graph() -> list[Edge]:
    return import_graph()


def test_the_walk_finds_both_packages(graph: list[Edge]) -> None:
    modules = discover_modules()
    assert {"agent_tune.cli", "verl_ext.agent_loop", "verl_ext.cpu.platform"} <= set(modules)
    assert any(edge.source == "verl_ext.agent_loop" and edge.target == "agent_tune.envs" for edge in graph)


def test_no_module_level_import_cycle(graph: list[Edge]) -> None:
    modules = discover_modules()
    edges = [edge for edge in graph if not edge.function_level]
    cycles = find_cycles(edges)
    assert not cycles, ("import cycles among module-level imports:\n"
                        + "\n".join(describe(c, edges, modules) for c in cycles))


def test_no_import_cycle_through_function_level_imports(graph: list[Edge]) -> None:
    modules = discover_modules()
    cycles = find_cycles(graph)
    assert not cycles, ("import cycles once function-level imports run:\n"
                        + "\n".join(describe(c, graph, modules) for c in cycles))


def test_layers(graph: list[Edge]) -> None:
    """``verl_ext`` (inside verl's processes) never imports ``agent_tune.launch`` (the launchers); the library
    (``agent_tune`` but its launchers and its command line) imports neither."""
    def library(module: str) -> bool:
        return module.startswith("agent_tune") and not module.startswith(("agent_tune.launch", "agent_tune.cli"))

    wrong = [e for e in graph
             if (e.source.startswith("verl_ext") and e.target.startswith("agent_tune.launch"))
             or (library(e.source) and e.target.startswith(("verl_ext", "agent_tune.launch")))]
    modules = discover_modules()
    assert not wrong, "imports against the layout:\n" + "\n".join(
        f"    {modules[e.source].relative_to(REPO)}:{e.line} imports {e.target}" for e in wrong)


def test_the_cycle_finder_names_a_cycle() -> None:
    edges = [Edge("p.a", "p.b", 3, False), Edge("p.b", "p.c", 5, False), Edge("p.c", "p.a", 7, True),
             Edge("p.c", "p.d", 8, False)]
    (cycle,) = find_cycles(edges)
    assert [(e.source, e.target) for e in cycle] == [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a")]
    assert find_cycles([e for e in edges if not e.function_level]) == []
