"""Builder exercises: build a given graph with the C++ or the Java mirror, graded by its GraphDef.

The statement is the graph itself (node names, op types, inputs, attrs), printed into the
template. The learner's ``build`` gets a C++ ``Scope`` or a Java ``Ops``; the grade compares the
nodes it created with the statement, node by node, in the statement's order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._grading import AnswerError, Mismatch, call

_SHAPE = (8, 4, 4, 3)
_BN_ATTRS = {"epsilon": 0.001, "is_training": True, "data_format": "NHWC"}


@dataclass(frozen=True)
class Node:
    name: str
    op: str
    inputs: tuple[str, ...]
    attrs: dict

    def describe(self) -> str:
        attrs = ", ".join(f"{k}={_show(v)}" for k, v in self.attrs.items())
        return f"{self.name} = {self.op}({', '.join(self.inputs)}){f'  [{attrs}]' if attrs else ''}"


def _show(v) -> str:
    if isinstance(v, np.ndarray):
        return f"float32 {v.tolist()}"
    return repr(v)


TARGET = (
    Node("x", "Placeholder", (), {"dtype": np.dtype(np.float32), "shape": _SHAPE}),
    Node("dy", "Placeholder", (), {"dtype": np.dtype(np.float32), "shape": _SHAPE}),
    Node("scale", "Const", (), {"value": np.array([1.0, 0.5, 2.0], np.float32)}),
    Node("offset", "Const", (), {"value": np.array([0.0, 0.1, -0.2], np.float32)}),
    Node("empty", "Const", (), {"value": np.zeros(0, np.float32)}),
    Node("bn", "FusedBatchNormV3", ("x", "scale", "offset", "empty", "empty"), _BN_ATTRS),
    Node("bn_grad", "FusedBatchNormGradV3", ("dy", "x", "scale", "bn:3", "bn:4", "bn:5"), _BN_ATTRS),
)


def statement() -> str:
    """The graph to build, one node a line (printed into the templates' docstrings)."""
    return "\n".join("    " + n.describe() for n in TARGET)


def _input_name(t) -> str:
    return t.op.name if t.index == 0 else f"{t.op.name}:{t.index}"


def _attr_differs(want, got) -> bool:
    if isinstance(want, np.ndarray):
        got = np.asarray(got)
        return got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want)
    if isinstance(want, float):  # attrs are float32 in a GraphDef
        return not isinstance(got, float) or abs(got - want) > 1e-7 * abs(want)
    if isinstance(want, tuple):
        return tuple(got) != want if got is not None else True
    return got != want


def grade_graph(graph, where: str) -> Mismatch | None:
    """The first node of the statement the learner's ``graph`` (a core Graph) gets wrong, if any."""
    for node in TARGET:
        op = graph.operation(node.name)
        if op is None:
            have = ", ".join(o.name for o in graph.operations()) or "none"
            return Mismatch(
                f"node '{node.name}'",
                where,
                f"  expected a node named '{node.name}', found none (nodes built: {have})",
                "name each node as the statement does (WithOpName in C++, withName in Java)",
            )
        if op.type != node.op:
            return Mismatch(
                f"node '{node.name}'",
                where,
                f"  expected a {node.op}, got a {op.type}",
                "use the op the statement names",
            )
        inputs = tuple(_input_name(t) for t in op.inputs)
        if inputs != node.inputs:
            return Mismatch(
                f"node '{node.name}'",
                where,
                f"  expected inputs {list(node.inputs)}, got {list(inputs)}",
                "bn:3, bn:4 and bn:5 are the forward op's reserve spaces (outputs 3, 4 and 5)",
            )
        for key, want in node.attrs.items():
            got = op.attrs.get(key)
            if _attr_differs(want, got):
                return Mismatch(
                    f"node '{node.name}'",
                    where,
                    f"  attr {key}: expected {_show(want)}, got {got!r}",
                    "set it through the op's Attrs (C++) or options (Java)",
                )
    extra = [o.name for o in graph.operations() if o.name not in {n.name for n in TARGET}]
    if extra:
        return Mismatch(
            "the graph", where, f"  nodes the statement does not have: {extra}", "build exactly the statement's nodes"
        )
    return None


def grade_cc(module, path: Path) -> Mismatch | None:
    from bindings_mirror import cc

    root = cc.Scope.NewRootScope()
    call(module, "build", root, path=path)
    if not root.ok():
        raise AnswerError(f"the scope's status is an error: {root.status()}")
    return grade_graph(root.graph(), "the C++ mirror's graph")


def grade_java(module, path: Path) -> Mismatch | None:
    from bindings_mirror import java

    with java.Graph() as g:
        call(module, "build", java.Ops.create(g), path=path)
        return grade_graph(g._core_env, "the Java mirror's graph")
