"""The module import graph of ``src/ndvm`` has no cycles, and no module imports another's privates.

The graph is built from the AST of every module (no import is executed). Edges, counted:

- ``import ndvm.a.b`` and ``from ndvm.a import b`` anywhere: at module level, **inside
  functions** (a deferred import still makes the importer depend on the imported module at run
  time; a cycle hidden in a function body is still a cycle of the design) and **under ``if
  TYPE_CHECKING:``** (a type-only cycle still means neither module can be read alone);
- ``from ndvm.a import name`` points at ``ndvm.a.name`` when that is a module, else at
  ``ndvm.a`` (the module defining the name);
- relative imports, resolved against the importing module's package.

Not counted: the implicit import of parent packages (``import ndvm.a.b`` also runs
``ndvm/__init__.py`` and ``ndvm/a/__init__.py``; counting it would put every module in a cycle
with any package ``__init__`` that re-exports its API, which is not a dependency of the
importer's code).
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def _modules() -> dict[str, tuple[Path, bool]]:
    """``{dotted name: (path, is_package)}``; ``.pyi`` stubs stand for compiled modules."""
    mods: dict[str, tuple[Path, bool]] = {}
    for path in sorted((SRC / "ndvm").rglob("*.py*")):
        if path.suffix not in (".py", ".pyi"):
            continue
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if package else parts)
        if path.suffix == ".py" or name not in mods:
            mods[name] = (path, package)
    return mods


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, at any depth."""
    return [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]


def _owner(name: str, mods: dict[str, tuple[Path, bool]]) -> str:
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name


def _targets(
    node: ast.Import | ast.ImportFrom,
    module: str,
    package: bool,
    mods: dict[str, tuple[Path, bool]],
) -> list[tuple[str, str | None]]:
    """``(imported module, imported name or None)`` for one import statement."""
    if isinstance(node, ast.Import):
        return [(_owner(a.name, mods), None) for a in node.names if a.name.split(".")[0] == "ndvm"]
    base = module
    if node.level:
        parts = module.split(".")
        keep = len(parts) - node.level + (1 if package else 0)
        base = ".".join(parts[:keep] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    if base.split(".")[0] != "ndvm":
        return []
    out: list[tuple[str, str | None]] = []
    for alias in node.names:
        full = f"{base}.{alias.name}"
        out.append((full, None) if full in mods else (_owner(base, mods), alias.name))
    return out


def import_graph() -> nx.DiGraph:
    """Modules as nodes; an edge per importing module and imported module (``line``, ``names``)."""
    mods = _modules()
    graph = nx.DiGraph()
    for module, (path, package) in mods.items():
        graph.add_node(module)
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            for target, name in _targets(node, module, package, mods):
                if target and target != module:
                    if not graph.has_edge(module, target):
                        graph.add_edge(module, target, line=node.lineno, names=[])
                    if name:
                        graph.edges[module, target]["names"].append(name)
    return graph


def _describe(graph: nx.DiGraph, cycle: list[str]) -> str:
    hops = zip(cycle, cycle[1:] + cycle[:1])
    return " -> ".join(f"{a} (line {graph.edges[a, b]['line']})" for a, b in hops) + " -> ..."


def test_graph_sees_known_edges() -> None:
    """The builder finds module-level, function-level, relative and compiled-module imports."""
    graph = GRAPH
    assert graph.has_edge("ndvm.api", "ndvm.lang.front")
    assert graph.has_edge("ndvm.backends.native", "ndvm._core")
    assert graph.has_edge("ndvm.prims", "ndvm.prims.numeric")
    assert graph.number_of_nodes() > 100


def _area(module: str) -> str:
    """``ndvm.search.llm`` -> ``ndvm.search``; a top-level module is its own area."""
    return ".".join(module.split(".")[:2])


GRAPH = import_graph()
AREAS = sorted({_area(m) for m in GRAPH})


@pytest.mark.parametrize("area", AREAS)
def test_no_import_cycles(area: str) -> None:
    """One test per subpackage (a cycle across two fails both), so a failure names its owner."""
    cycles = [c for c in nx.strongly_connected_components(GRAPH) if len(c) > 1]
    mine = [c for c in cycles if any(_area(m) == area for m in c)]
    shown = [_describe(GRAPH, next(nx.simple_cycles(GRAPH.subgraph(c)))) for c in mine]
    assert shown == [], "import cycles:\n" + "\n".join(shown)


def test_no_module_imports_private_names_of_another() -> None:
    """``from ndvm.x import _name`` couples to an implementation detail: make it public."""
    graph = GRAPH
    private = [
        f"{a} imports {n} from {b} (line {d['line']})"
        for a, b, d in graph.edges(data=True)
        for n in d["names"]
        if n.startswith("_") and not n.startswith("__") and b != "ndvm._core"
    ]
    assert private == []
