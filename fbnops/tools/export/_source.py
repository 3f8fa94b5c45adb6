"""What ``export()`` accepts as a graph, a fetch and a feed, reduced to the core framework's objects.

Every graph surface holds a core :class:`~fbnops.framework.graph.Graph`: a ``Scope`` (its
``graph``), the Java mirror's ``Graph``/``Ops``/``Scope`` (their execution environment), the C++
mirror's ``Scope`` (its shared graph; a scope holding an error status is that error), or GraphDef
text (a string, or the path of a ``.pbtxt`` file). Tensors may be core ``Output``s, the mirrors'
outputs and single-output op classes, or names as ``fbnops run`` reads them (``"bn"`` = ``bn:0``,
``"bn:1"``, ``"bn.reserve_space_1"``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fbnops.framework.errors import InvalidArgumentError
from fbnops.framework.graph import Graph, Operation, Output
from fbnops.framework.graphdef import graph_from_pbtxt
from fbnops.framework.scope import Scope

from ._write import ExportError

__all__ = ["core_graph", "core_output", "describe"]


def core_graph(graph: Any) -> tuple[Graph, str]:
    """``(core graph, one-line description of where it came from)``."""
    if isinstance(graph, Graph):
        return graph, "an fbnops.Graph"
    if isinstance(graph, Scope):
        if graph.graph is None:
            raise ExportError("graph", "an eager Scope has no graph to export; build the ops in Scope(Graph())")
        return graph.graph, "an fbnops.Scope"
    if isinstance(graph, (str, Path)):
        return _from_graphdef(graph)
    java_env = _java_env(graph)
    if java_env is not None:
        core = getattr(java_env, "_core_env", None)
        if not isinstance(core, Graph):
            raise ExportError("graph", "an EagerSession runs ops as they are built; build them in a Graph to export")
        return core, "a TF Java mirror Graph"
    shared = getattr(graph, "_shared", None)
    if shared is not None and isinstance(getattr(shared, "graph", None), Graph):  # the C++ mirror's Scope
        status = graph.status()
        if not status.ok():  # ClientSession::Run would return this status
            raise InvalidArgumentError(f"the scope holds an error status: {status.ToString()}")
        return shared.graph, "a TF C++ mirror Scope"
    raise ExportError(
        "graph",
        f"cannot export a {type(graph).__name__}; expected an fbnops Graph or Scope, a Java mirror "
        "Graph/Ops/Scope, a C++ mirror Scope, GraphDef text or a .pbtxt path",
    )


def _java_env(graph: Any) -> Any:
    """The execution environment of a Java mirror ``Graph``, ``Ops`` or ``Scope``; else None."""
    if hasattr(graph, "_core_env") and hasattr(graph, "baseScope"):
        return graph
    scope = graph.scope() if hasattr(graph, "scope") and callable(graph.scope) else graph
    env = getattr(scope, "env", None)
    return env() if callable(env) and hasattr(scope, "makeOpName") else None


def _from_graphdef(source: str | Path) -> tuple[Graph, str]:
    text, where = str(source), "<pbtxt>"
    if isinstance(source, Path) or ("\n" not in text and text.endswith(".pbtxt")):
        path = Path(source)
        try:
            text, where = path.read_text(encoding="utf-8"), str(path)
        except (OSError, UnicodeDecodeError) as e:
            raise ExportError("graph", f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
    return graph_from_pbtxt(text, Graph(), source=where), f"GraphDef {where}"


def core_output(graph: Graph, value: Any, argument: str) -> Output:
    """A fetch or feed key as a core ``Output`` of ``graph`` (names as ``fbnops run`` reads them)."""
    from fbnops.tools.runfile import resolve_output  # the one reader of "op", "op:i", "op.name"

    if isinstance(value, str):
        try:
            return resolve_output(graph, value)
        except LookupError as e:
            raise ExportError(argument, str(e.args[0])) from None
    out = _unwrap(value)
    if isinstance(out, Operation):
        out = out.outputs[0] if out.outputs else None
    if not isinstance(out, Output):
        raise ExportError(argument, f"expected an output or a tensor name, got {type(value).__name__}")
    if out.graph is not graph:
        raise ExportError(argument, f"{out.name} is not in the exported graph")
    return out


def _unwrap(value: Any) -> Any:
    """Mirror objects -> the core Output (or Operation) they stand for."""
    for _ in range(4):  # op class -> mirror Output -> core Output
        if isinstance(value, (Output, Operation)):
            return value
        core = getattr(value, "_core", None) or getattr(value, "_node", None)  # Java objects; a C++ Operation
        if isinstance(core, (Output, Operation)):
            return core
        if callable(getattr(value, "asOutput", None)):  # a Java Operand
            value = value.asOutput()
        elif getattr(type(value), "SINGLE_OUTPUT", False):  # a C++ single-output op class
            value = value.output
        else:
            return value
    return value


def describe(source: str, graph_kind: str) -> str:
    """The one line a generated file's header says the graph came from."""
    return source or graph_kind
