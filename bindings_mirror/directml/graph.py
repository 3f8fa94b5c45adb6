"""IDMLDevice1::CompileGraph: a graph of operators compiled into one IDMLCompiledOperator.

The graph's inputs and outputs become the compiled operator's bindings (``GraphInput<i>``,
``GraphOutput<i>``); intermediate tensors are stored in their declared DataType between nodes.
Every edge index, every connection and the absence of cycles are checked at CompileGraph, with
``E_INVALIDARG`` naming the edge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np

from .enums import (
    DML_GRAPH_EDGE_TYPE_INPUT,
    DML_GRAPH_EDGE_TYPE_INTERMEDIATE,
    DML_GRAPH_EDGE_TYPE_OUTPUT,
    DML_GRAPH_NODE_TYPE_OPERATOR,
    NUMPY_DTYPES,
    HRESULTError,
    invalid,
)
from .objects import IDMLOperator
from .schemas import _OpSchema


@dataclass
class DML_OPERATOR_GRAPH_NODE_DESC:
    Operator: IDMLOperator
    Name: str | None = None


@dataclass
class DML_GRAPH_NODE_DESC:
    Type: int
    Desc: Any


@dataclass
class DML_INPUT_GRAPH_EDGE_DESC:
    GraphInputIndex: int
    ToNodeIndex: int
    ToNodeInputIndex: int
    Name: str | None = None


@dataclass
class DML_OUTPUT_GRAPH_EDGE_DESC:
    FromNodeIndex: int
    FromNodeOutputIndex: int
    GraphOutputIndex: int
    Name: str | None = None


@dataclass
class DML_INTERMEDIATE_GRAPH_EDGE_DESC:
    FromNodeIndex: int
    FromNodeOutputIndex: int
    ToNodeIndex: int
    ToNodeInputIndex: int
    Name: str | None = None


@dataclass
class DML_GRAPH_EDGE_DESC:
    Type: int
    Desc: Any


@dataclass
class DML_GRAPH_DESC:
    InputCount: int
    OutputCount: int
    NodeCount: int
    Nodes: list[DML_GRAPH_NODE_DESC]
    InputEdgeCount: int = 0
    InputEdges: list[DML_GRAPH_EDGE_DESC] = field(default_factory=list)
    OutputEdgeCount: int = 0
    OutputEdges: list[DML_GRAPH_EDGE_DESC] = field(default_factory=list)
    IntermediateEdgeCount: int = 0
    IntermediateEdges: list[DML_GRAPH_EDGE_DESC] = field(default_factory=list)


def _edges(edges, count, edge_type, desc_type, what: str) -> list:
    edges = list(edges or [])
    if count != len(edges):
        raise invalid(f"DML_GRAPH_DESC.{what}Count {count} does not match {len(edges)} edges")
    out = []
    for i, e in enumerate(edges):
        if not isinstance(e, DML_GRAPH_EDGE_DESC) or e.Type != edge_type or not isinstance(e.Desc, desc_type):
            raise invalid(f"DML_GRAPH_DESC.{what}[{i}] must be a DML_GRAPH_EDGE_DESC of a {desc_type.__name__}")
        out.append(e.Desc)
    return out


def _member(ops: list[IDMLOperator], node: int, index: int, outputs: bool, where: str) -> str:
    if not (isinstance(node, int) and 0 <= node < len(ops)):
        raise invalid(f"{where}: node index {node} is out of range ({len(ops)} nodes)")
    members = ops[node]._schema.outputs if outputs else ops[node]._schema.inputs
    if not (isinstance(index, int) and 0 <= index < len(members)):
        raise invalid(f"{where}: {'output' if outputs else 'input'} index {index} of node {node} is out of range")
    return members[index]


def compile_graph(desc: DML_GRAPH_DESC) -> tuple[_OpSchema, SimpleNamespace]:
    """The schema and desc of the operator a graph compiles to, after checking every edge."""
    if not isinstance(desc, DML_GRAPH_DESC) or desc.NodeCount != len(desc.Nodes or []):
        raise invalid("CompileGraph expects a DML_GRAPH_DESC whose NodeCount matches its Nodes")
    ops = []
    for i, n in enumerate(desc.Nodes):
        if not isinstance(n, DML_GRAPH_NODE_DESC) or n.Type != DML_GRAPH_NODE_TYPE_OPERATOR:
            raise HRESULTError("E_NOTIMPL", f"DML_GRAPH_DESC.Nodes[{i}]: only operator nodes are mirrored")
        if not isinstance(n.Desc, DML_OPERATOR_GRAPH_NODE_DESC) or not isinstance(n.Desc.Operator, IDMLOperator):
            raise invalid(f"DML_GRAPH_DESC.Nodes[{i}] must hold a DML_OPERATOR_GRAPH_NODE_DESC with an IDMLOperator")
        ops.append(n.Desc.Operator)
    ins = _edges(
        desc.InputEdges, desc.InputEdgeCount, DML_GRAPH_EDGE_TYPE_INPUT, DML_INPUT_GRAPH_EDGE_DESC, "InputEdge"
    )
    outs = _edges(
        desc.OutputEdges, desc.OutputEdgeCount, DML_GRAPH_EDGE_TYPE_OUTPUT, DML_OUTPUT_GRAPH_EDGE_DESC, "OutputEdge"
    )
    mids = _edges(
        desc.IntermediateEdges,
        desc.IntermediateEdgeCount,
        DML_GRAPH_EDGE_TYPE_INTERMEDIATE,
        DML_INTERMEDIATE_GRAPH_EDGE_DESC,
        "IntermediateEdge",
    )
    feeds: dict[tuple[int, str], tuple] = {}  # (node, input member) -> ("graph", i) or ("node", node, member)

    def connect(node, index, source, where):
        member = _member(ops, node, index, False, where)
        if (node, member) in feeds:
            raise invalid(f"{where}: input {member} of node {node} is connected twice")
        td = getattr(ops[node]._desc, member)
        if td is None:
            raise invalid(f"{where}: input {member} of node {node} is absent from its operator desc")
        feeds[(node, member)] = source
        return td

    graph_inputs: dict[int, Any] = {}
    for i, e in enumerate(ins):
        where = f"InputEdges[{i}]"
        if not (isinstance(e.GraphInputIndex, int) and 0 <= e.GraphInputIndex < desc.InputCount):
            raise invalid(f"{where}: GraphInputIndex {e.GraphInputIndex} is out of range")
        td = connect(e.ToNodeIndex, e.ToNodeInputIndex, ("graph", e.GraphInputIndex), where)
        seen = graph_inputs.setdefault(e.GraphInputIndex, td)
        if (seen.Desc.DataType, list(seen.Desc.Sizes)) != (td.Desc.DataType, list(td.Desc.Sizes)):
            raise invalid(f"{where}: graph input {e.GraphInputIndex} feeds tensors of different types or sizes")
    if sorted(graph_inputs) != list(range(desc.InputCount)):
        raise invalid(f"every one of the {desc.InputCount} graph inputs must be connected")
    for i, e in enumerate(mids):
        where = f"IntermediateEdges[{i}]"
        src = _member(ops, e.FromNodeIndex, e.FromNodeOutputIndex, True, where)
        td = connect(e.ToNodeIndex, e.ToNodeInputIndex, ("node", e.FromNodeIndex, src), where)
        sd = getattr(ops[e.FromNodeIndex]._desc, src)
        if (sd.Desc.DataType, list(sd.Desc.Sizes)) != (td.Desc.DataType, list(td.Desc.Sizes)):
            raise invalid(f"{where}: {src} of node {e.FromNodeIndex} does not match the input it feeds")
    graph_outputs: dict[int, tuple[int, str]] = {}
    for i, e in enumerate(outs):
        where = f"OutputEdges[{i}]"
        src = _member(ops, e.FromNodeIndex, e.FromNodeOutputIndex, True, where)
        if not (isinstance(e.GraphOutputIndex, int) and 0 <= e.GraphOutputIndex < desc.OutputCount):
            raise invalid(f"{where}: GraphOutputIndex {e.GraphOutputIndex} is out of range")
        if graph_outputs.setdefault(e.GraphOutputIndex, (e.FromNodeIndex, src)) != (e.FromNodeIndex, src):
            raise invalid(f"{where}: graph output {e.GraphOutputIndex} is connected twice")
    if sorted(graph_outputs) != list(range(desc.OutputCount)):
        raise invalid(f"every one of the {desc.OutputCount} graph outputs must be connected")
    for n, op in enumerate(ops):
        for m in op._schema.inputs:
            if (n, m) not in feeds and getattr(op._desc, m) is not None:
                raise invalid(f"input {m} of node {n} is not connected")
    order = _topological(len(ops), feeds)
    members = SimpleNamespace()
    for i, td in graph_inputs.items():
        setattr(members, f"GraphInput{i}", td)
    for i, (n, m) in graph_outputs.items():
        setattr(members, f"GraphOutput{i}", getattr(ops[n]._desc, m))

    def execute(_, tensors):
        values: dict[tuple[int, str], np.ndarray] = {}
        for n in order:
            op = ops[n]
            args = {}
            for m in op._schema.inputs:
                src = feeds.get((n, m))
                if src is not None:
                    args[m] = tensors[f"GraphInput{src[1]}"] if src[0] == "graph" else values[src[1:]]
            for m, v in op._schema.execute(op._desc, args).items():
                values[(n, m)] = np.asarray(v).astype(NUMPY_DTYPES[getattr(op._desc, m).Desc.DataType])
        return {f"GraphOutput{i}": values[src] for i, src in graph_outputs.items()}

    schema = _OpSchema(
        DML_GRAPH_DESC,
        "DML_GRAPH_DESC",
        inputs=tuple(f"GraphInput{i}" for i in range(desc.InputCount)),
        outputs=tuple(f"GraphOutput{i}" for i in range(desc.OutputCount)),
        execute=execute,
    )
    return schema, members


def _topological(count: int, feeds: dict) -> list[int]:
    deps = {n: {src[1] for (to, _), src in feeds.items() if to == n and src[0] == "node"} for n in range(count)}
    order: list[int] = []
    while len(order) < count:
        ready = [n for n in range(count) if n not in order and deps[n] <= set(order)]
        if not ready:
            raise invalid("the graph has a cycle")
        order.append(ready[0])
    return order
