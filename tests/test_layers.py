"""The import graph of ``fbnops/`` and ``bindings_mirror/``: no cycles, and layers point one way.

Layers, lowest first: specs (0) -> framework (1) -> ops (2) -> kernels (3) -> surfaces (4).
A module may import its own layer or a lower one.  The surfaces are ordered among themselves
the same way (:data:`SURFACE_RANKS`), lowest first: ``errors`` (and ``_version``) < ``raw_ops`` < the mirrors
(``bindings_mirror``) < ``distributed`` < ``testing`` < ``tools`` < the package's front door
(``fbnops/__init__``, which re-exports and lazily loads ``tools.export``) < ``cli``; a surface
module may import only its own surface or a lower one, so two surfaces importing each other
(``tools`` <-> ``testing`` once) fail here even without a cycle of modules.  ``testing`` is below
``tools``: the tools may use the public testing kit (``tools/check.py`` uses its gradient
check), the kit never imports a tool.  Every import statement counts, at module level or inside
a function; the only ones left out are ``if TYPE_CHECKING:`` blocks (they never run).  Backends
are loaded by name through ``importlib`` (the kernel registry's plugin table), which is not an
import statement.

The graph is read from the source with :mod:`ast`, nothing is imported.  ``python tests/test_layers.py``
prints the import picture: modules, edges, cycles, upward imports, modules per layer and surface.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("fbnops", "bindings_mirror")

LAYERS = {"specs": 0, "framework": 1, "ops": 2, "kernels": 3}
SURFACE = 4
SURFACE_RANKS = {
    "_version": 0,  # the version string, readable without the front door
    "errors": 0,
    "raw_ops": 1,
    "bindings_mirror": 2,
    "distributed": 3,
    "testing": 4,
    "tools": 5,
    "package": 6,  # fbnops/__init__: the front door, above what it re-exports
    "cli": 7,
}
SURFACES = tuple(name for name in SURFACE_RANKS if name not in ("bindings_mirror", "package"))


class Edge(NamedTuple):
    src: str
    dst: str
    where: str  # path:line of the import statement

    def __str__(self) -> str:
        return f"{self.src} -> {self.dst}  ({self.where})"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every Python module of the packages, by dotted name."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


def layer(module: str) -> int | None:
    """The rank of a module, or None if it is not classified (which fails a test)."""
    parts = module.split(".")
    if parts[0] == "bindings_mirror" or module == "fbnops":
        return SURFACE
    if parts[1] in LAYERS:
        return LAYERS[parts[1]]
    return SURFACE if parts[1] in SURFACES else None


def surface(module: str) -> str | None:
    """The surface a module belongs to (a key of :data:`SURFACE_RANKS`), None below the surfaces."""
    parts = module.split(".")
    if parts[0] == "bindings_mirror":
        return "bindings_mirror"
    if module == "fbnops":
        return "package"
    return parts[1] if parts[1] in SURFACES else None


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:``."""
    skipped = set()
    for node in ast.walk(tree):
        test = getattr(node, "test", None)
        if isinstance(node, ast.If) and (
            (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
        ):
            for inner in node.body:
                skipped.update(id(n) for n in ast.walk(inner))
    return skipped


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that ``name`` (a dotted import target) starts with."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known:
            return candidate
    return None


def imports_of(module: str, path: Path, known: dict[str, Path]) -> list[Edge]:
    """The internal modules ``module`` imports, one edge per (statement, target)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    skipped = _type_checking_nodes(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    edges = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                stem = ".".join([*base, node.module] if node.module else base)
            else:
                stem = node.module or ""
            # ``from pkg import name``: the submodule pkg.name if there is one, else pkg itself
            targets = [f"{stem}.{a.name}" if f"{stem}.{a.name}" in known else stem for a in node.names]
        where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
        for target in dict.fromkeys(targets):
            resolved = _resolve(target, known)
            if resolved is not None and resolved != module:
                edges.append(Edge(module, resolved, where))
    return edges


def import_graph() -> tuple[dict[str, Path], list[Edge]]:
    known = modules()
    edges = [e for name, path in known.items() for e in imports_of(name, path, known)]
    return known, edges


def cycles(nodes, edges: list[Edge]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for e in edges:
        succ[e.src].append(e.dst)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(succ[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(succ[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def upward(edges: list[Edge]) -> list[Edge]:
    return [e for e in edges if layer(e.src) is not None and layer(e.dst) is not None and layer(e.src) < layer(e.dst)]


def upward_between_surfaces(edges: list[Edge]) -> list[Edge]:
    """Imports from one surface into a higher-ranked one."""
    bad = []
    for e in edges:
        src, dst = surface(e.src), surface(e.dst)
        if src is not None and dst is not None and SURFACE_RANKS[src] < SURFACE_RANKS[dst]:
            bad.append(e)
    return bad


@pytest.fixture(scope="module")
def graph():
    return import_graph()


def test_the_graph_is_read(graph):
    """The walk sees the known edges (a parser that saw nothing would pass everything)."""
    known, edges = graph
    pairs = {(e.src, e.dst) for e in edges}
    assert ("fbnops.ops.execute", "fbnops.framework.registry") in pairs  # from ..framework import registry
    assert ("fbnops.raw_ops", "fbnops.ops.execute") in pairs
    assert ("fbnops.framework.graph", "fbnops.framework.graphdef") in pairs
    assert ("fbnops.specs", "fbnops.specs.op_spec") in pairs
    assert len(known) > 40 and len(edges) > 100


def test_every_module_has_a_layer(graph):
    known, _ = graph
    assert [m for m in known if layer(m) is None] == []


def test_no_import_cycles(graph):
    known, edges = graph
    found = cycles(known, edges)
    report = []
    for component in found:
        members = set(component)
        report.append(" <-> ".join(component))
        report += [f"    {e}" for e in edges if e.src in members and e.dst in members]
    assert not found, f"{len(found)} import cycle(s):\n" + "\n".join(report)


def test_layers_point_one_way(graph):
    _, edges = graph
    bad = upward(edges)
    lines = [f"{e}   [layer {layer(e.src)} imports layer {layer(e.dst)}]" for e in bad]
    assert not bad, f"{len(bad)} upward import(s) (specs 0 < framework 1 < ops 2 < kernels 3 < surfaces 4):\n" + (
        "\n".join(lines)
    )


def test_surfaces_point_one_way(graph):
    _, edges = graph
    bad = upward_between_surfaces(edges)
    order = " < ".join(SURFACE_RANKS)
    lines = [f"{e}   [{surface(e.src)} imports {surface(e.dst)}]" for e in bad]
    assert not bad, f"{len(bad)} import(s) up the surfaces' order ({order}):\n" + "\n".join(lines)


def test_the_checker_catches_a_loop_between_surfaces():
    """tools -> testing is down, testing -> tools is up: the loop the old layout had is caught by one edge."""
    down = Edge("fbnops.tools.check", "fbnops.testing.gradcheck", "x:1")
    up = Edge("fbnops.testing.attack_helpers", "fbnops.tools.runfile", "y:2")
    facade = Edge("fbnops.tools.demo", "fbnops", "z:3")  # a tool importing the front door that loads it
    assert upward_between_surfaces([down, up, facade]) == [up, facade]


def _calls_and_strings(path: Path) -> tuple[set[str], set[str]]:
    """The names a module calls or decorates with, and its string literals."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    called = {
        node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
    }
    strings = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    return called, strings


def test_the_framework_defines_no_op():
    """Ops and their gradients live in fbnops/ops (the support ops in ops/array_ops.py): no framework
    module registers an op definition or a gradient (registry.py defines the functions, calls neither)."""
    registering = []
    for path in sorted((ROOT / "fbnops" / "framework").glob("*.py")):
        called, _ = _calls_and_strings(path)
        registering += [f"{path.name}: {name}" for name in ("register_op_def", "register_gradient") if name in called]
    assert registering == []


def test_the_canonical_view_names_no_op():
    """ops/canonical.py is the (outer, C, inner) view only: each op module runs its own kernel on it."""
    from fbnops.framework import registry  # importing fbnops registers every op

    _, strings = _calls_and_strings(ROOT / "fbnops" / "ops" / "canonical.py")
    assert strings & set(registry.registered_op_types()) == set()


def test_the_checker_catches_a_cycle_and_an_upward_import():
    edges = [Edge("fbnops.framework.a", "fbnops.ops.b", "x:1"), Edge("fbnops.ops.b", "fbnops.framework.a", "y:2")]
    assert cycles(["fbnops.framework.a", "fbnops.ops.b"], edges) == [["fbnops.framework.a", "fbnops.ops.b"]]
    assert upward(edges) == [edges[0]]


def print_picture() -> None:
    """``python tests/test_layers.py``: the import picture (modules, edges, cycles, upward imports, rooms)."""
    from collections import Counter

    known, edges = import_graph()
    names = {v: k for k, v in LAYERS.items()}
    rooms = Counter(surface(m) if layer(m) == SURFACE else names.get(layer(m), "unclassified") for m in known)
    print(f"modules {len(known)}, import edges {len(edges)} ({len({(e.src, e.dst) for e in edges})} distinct pairs)")
    print(f"cycles {len(cycles(known, edges))}, upward imports {len(upward(edges))}, "
          f"imports up the surfaces' order {len(upward_between_surfaces(edges))}")  # fmt: skip
    order = [*LAYERS, *SURFACE_RANKS]
    print("modules per layer / surface: " + ", ".join(f"{room} {rooms[room]}" for room in order if rooms[room]))


if __name__ == "__main__":
    print_picture()
