"""GraphDef in protobuf text format (``.pbtxt``): export that TensorFlow imports, and import back.

Node, input, attr and dtype names are TensorFlow's: ``tf.compat.v1.import_graph_def``
loads an exported graph (parsed with ``google.protobuf.text_format``) and runs it to
the same numbers.  Kernel labels (``_kernel``) are written only on request: a
TensorFlow kernel lookup would fail on fbnops' backend names.

Import is three steps: :mod:`._pbtxt` turns text into untyped messages, :data:`SCHEMA`
types every field (unknown fields, wrong kinds and out-of-range literals are errors),
and the nodes are added to the graph in a topological order computed without
recursion.  Every error names ``<file>:<line>:<column>`` and the field or node.
This module receives the graph object and knows nothing of ``graph.py``.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from . import _pbtxt, dtypes, memory
from ._pbtxt_schema import OPAQUE, Schema, Typed, type_message
from .errors import InvalidArgumentError, NotFoundError, OpError, UnimplementedError
from .registry import get_op_def
from .tensor import parse_tensor_name

__all__ = ["SCHEMA", "graph_to_pbtxt", "graph_from_pbtxt"]

# The types a GraphDef here may hold, named and numbered by the one dtype table.
_DT = {dtypes.enum_name(dt): (dtypes.enum_number(dt), dt) for dt in dtypes.GRAPH_DTYPES}
_DT_NAME = {dt: name for name, (_, dt) in _DT.items()}
_VALUE_FIELD = {  # TensorProto: the one repeated field that holds each dtype's values
    "DT_FLOAT": "float_val",
    "DT_DOUBLE": "double_val",
    "DT_INT32": "int_val",
    "DT_INT64": "int64_val",
    "DT_BOOL": "bool_val",
    "DT_HALF": "half_val",
    "DT_BFLOAT16": "half_val",
}

# The messages of a GraphDef that fbnops reads: message type -> field -> (value type, repeated).
SCHEMA: Schema = {
    "GraphDef": {"node": ("NodeDef", True), "versions": ("VersionDef", False), "library": (OPAQUE, False)},
    "VersionDef": {"producer": ("int32", False), "min_consumer": ("int32", False), "bad_consumers": ("int32", True)},
    "NodeDef": {
        "name": ("string", False),
        "op": ("string", False),
        "input": ("string", True),
        "device": ("string", False),
        "attr": ("AttrEntry", True),
        "experimental_debug_info": (OPAQUE, False),
    },
    "AttrEntry": {"key": ("string", False), "value": ("AttrValue", False)},
    "AttrValue": {
        "s": ("bytes", False),
        "i": ("int64", False),
        "f": ("float", False),
        "b": ("bool", False),
        "type": ("DataType", False),
        "shape": ("TensorShapeProto", False),
        "tensor": ("TensorProto", False),
    },
    "TensorShapeProto": {"dim": ("Dim", True), "unknown_rank": ("bool", False)},
    "Dim": {"size": ("int64", False), "name": ("string", False)},
    "TensorProto": {
        "dtype": ("DataType", False),
        "tensor_shape": ("TensorShapeProto", False),
        "version_number": ("int32", False),
        "tensor_content": ("bytes", False),
        **{f: ("int32", True) for f in ("half_val", "int_val")},
        "float_val": ("float", True),
        "double_val": ("double", True),
        "int64_val": ("int64", True),
        "bool_val": ("bool", True),
    },
}
_ENUMS = {"DataType": {name: num for name, (num, _) in _DT.items()}}


# ------------------------------------------------------------------------------------ export


def _quoted(text: str | bytes) -> str:
    """A string field's value, quoted and escaped: every string written goes through here, so a quote,
    backslash or newline in a name, device or attr cannot end the field and inject text."""
    raw = text if isinstance(text, bytes) else str(text).encode("utf-8", "surrogatepass")
    return f'"{_pbtxt.escape(raw)}"'


def _shape_lines(shape, ind: str) -> list[str]:
    if shape is None:
        return [f"{ind}unknown_rank: true"]
    lines = []
    for d in shape:
        lines += [f"{ind}dim {{", f"{ind}  size: {-1 if d is None else d}", f"{ind}}}"]
    return lines


def _attr_value_lines(kind: str, value: Any, ind: str) -> list[str]:
    if kind == "type":
        return [f"{ind}type: {_DT_NAME[np.dtype(value)]}"]
    if kind == "f":
        return [f"{ind}f: {np.float32(value)!s}"]
    if kind == "b":
        return [f"{ind}b: {'true' if value else 'false'}"]
    if kind == "s":
        return [f"{ind}s: {_quoted(value)}"]
    if kind == "i":
        return [f"{ind}i: {int(value)}"]
    if kind == "shape":
        return [f"{ind}shape {{", *_shape_lines(value, ind + "  "), f"{ind}}}"]
    if kind == "tensor":
        arr = np.ascontiguousarray(value)
        content = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        return [
            f"{ind}tensor {{",
            f"{ind}  dtype: {_DT_NAME[arr.dtype]}",
            f"{ind}  tensor_shape {{",
            *_shape_lines(arr.shape, ind + "    "),
            f"{ind}  }}",
            f'{ind}  tensor_content: "{_pbtxt.escape(content)}"',
            f"{ind}}}",
        ]
    raise InvalidArgumentError(f"cannot write an attr of kind '{kind}' to a GraphDef")


def graph_to_pbtxt(graph: Any, include_kernel_labels: bool = False) -> str:
    """The GraphDef text of ``graph``'s operations, in creation order."""
    lines = []
    for op in graph.operations():
        op_def = get_op_def(op.type)
        lines += ["node {", f"  name: {_quoted(op.name)}", f"  op: {_quoted(op.type)}"]
        lines += [f"  input: {_quoted(t.op.name if t.index == 0 else t.name)}" for t in op.inputs]
        lines += [f"  input: {_quoted('^' + c.name)}" for c in op.control_inputs]
        if op.device:
            lines.append(f"  device: {_quoted(op.device)}")
        attrs = {k: (op_def.attr_kinds[k], v) for k, v in op.attrs.items() if k in op_def.attr_kinds}
        if include_kernel_labels and op.kernel_label:
            attrs["_kernel"] = ("s", op.kernel_label)
        for key in sorted(attrs):
            kind, value = attrs[key]
            lines += ["  attr {", f"    key: {_quoted(key)}", "    value {"]
            lines += [*_attr_value_lines(kind, value, "      "), "    }", "  }"]
        lines.append("}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------ import


def _shape(msg: Typed | None) -> tuple | None:
    if msg is None:
        return ()
    if msg.get("unknown_rank", False):
        return None
    return tuple(None if d.get("size", 0) < 0 else d.get("size", 0) for d in msg.all("dim"))


def _tensor(msg: Typed, budget: list[int]) -> np.ndarray:
    """A TensorProto's value, refusing what cannot fit before allocating (TF's FromProto rules)."""
    dt_name = msg.require("dtype")
    dt = _DT[dt_name][1]
    shape_msg = msg.get("tensor_shape")
    shape = _shape(shape_msg)
    if shape is None or None in shape:
        raise msg.error("a tensor needs a fully known shape (no unknown_rank, no size -1)", msg.where("tensor_shape"))
    n = 1
    for d in shape:
        n *= d
    nbytes = n * dt.itemsize
    memory.check_fits(budget[0] + nbytes, f"tensor with shape [{','.join(map(str, shape))}] and type {dt_name}")
    budget[0] += nbytes
    content = msg.get("tensor_content")
    if content is not None:
        if len(content) != nbytes:
            raise msg.error(
                f"tensor_content has {len(content)} bytes; shape [{','.join(map(str, shape))}] of {dt_name} "
                f"needs {nbytes}",
                msg.where("tensor_content"),
            )
        return np.frombuffer(content, dt.newbyteorder("<")).astype(dt).reshape(shape)
    field = _VALUE_FIELD[dt_name]
    for other in set(_VALUE_FIELD.values()) - {field}:
        if other in msg.values:
            raise msg.error(f"field '{other}' cannot hold the values of a {dt_name} tensor", msg.where(other))
    vals = msg.all(field)
    if len(vals) > n:
        raise msg.error(f"{len(vals)} values in '{field}' for a tensor of {n} elements", msg.where(field))
    if field == "half_val":
        if any(not 0 <= v <= 0xFFFF for v in vals):
            raise msg.error("half_val holds 16-bit patterns (0..65535)", msg.where(field))
        given = np.array(vals, np.uint16).view(dt)
    else:
        given = np.array(vals, dt)
    out = np.zeros(n, dt)
    if len(vals):
        out[: len(vals)] = given
        out[len(vals) :] = given[-1]  # TensorFlow repeats the last value
    return out.reshape(shape)


_KIND_NAMES = {
    "type": "type",
    "f": "float",
    "b": "bool",
    "s": "string",
    "i": "int",
    "shape": "shape",
    "tensor": "tensor",
}


def _attr(entry: Typed, kinds: dict[str, str], node: str, op_type: str, budget: list[int]) -> tuple[str, Any]:
    key = entry.require("key")
    value = entry.require("value")
    given = list(value.values)
    if len(given) != 1:
        raise value.error(f"attr '{key}' of node '{node}' must set exactly one value field, found {given or 'none'}")
    kind = given[0]
    want = "s" if key == "_kernel" else kinds.get(key)
    if want is None and not key.startswith("_"):
        raise entry.error(f"NodeDef '{node}' mentions attr '{key}' not in Op<name={op_type}>", entry.where("key"))
    if want is not None and kind != want:
        raise value.error(
            f"attr '{key}' of node '{node}' must be a {_KIND_NAMES[want]}, got a {_KIND_NAMES[kind]}",
            value.where(kind),
        )
    raw = value.get(kind)
    decoded = {
        "type": lambda: _DT[raw][1],
        "s": lambda: raw.decode("utf-8", "replace"),
        "shape": lambda: _shape(raw),
        "tensor": lambda: _tensor(raw, budget),
    }.get(kind, lambda: raw)()
    return key, decoded


def _topological(nodes: list[Typed], index: dict[str, int], refs: list[list]) -> list[int]:
    """Kahn's algorithm, smallest text position first (a graph written in order imports in order)."""
    users: list[list[int]] = [[] for _ in nodes]
    waiting = [0] * len(nodes)
    for i, node_refs in enumerate(refs):
        for _, src, _, _ in node_refs:
            users[index[src]].append(i)
            waiting[i] += 1
    ready = [i for i, w in enumerate(waiting) if w == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, u)
    if len(order) < len(nodes):
        start = next(i for i, w in enumerate(waiting) if w)
        path, seen, i = [], {}, start
        while i not in seen:  # follow unresolved inputs until one repeats: that is the cycle
            seen[i] = len(path)
            path.append(i)
            i = next(index[src] for _, src, _, _ in refs[i] if waiting[index[src]])
        cycle = [nodes[j].get("name") for j in path[seen[i] :]] + [nodes[i].get("name")]
        raise nodes[i].error(f"GraphDef has a cycle: {' -> '.join(cycle)}")
    return order


def _parse_inputs(node: Typed, name: str, index: dict[str, int]) -> list:
    refs = []
    for ref, line, col in node.values.get("input", []):
        try:
            src, out, control = parse_tensor_name(ref, default_index=0)  # a bare input name is output 0
        except InvalidArgumentError:
            raise node.error(
                f"node '{name}': bad tensor name {ref!r} in 'input' (expected 'op', 'op:N' or '^op')", (line, col)
            ) from None
        if src not in index:
            raise node.error(f"Node '{name}' has an input from unknown node '{src}'", (line, col))
        refs.append((control, src, out, (line, col)))
    return refs


def _check_version(node: Typed, op_type: str, op_def: Any, producer: int) -> None:
    """TensorFlow's ``CheckOpDeprecation``: an op removed at GraphDef version V is refused in a GraphDef
    whose ``versions.producer`` is V or later (a GraphDef without ``versions`` is version 0)."""
    deprecation = getattr(getattr(op_def, "spec", None), "deprecation", None)
    if deprecation is not None and producer >= deprecation.version:
        raise node.error(
            f"Op {op_type} is not available in GraphDef version {producer}. It has been removed in version "
            f"{deprecation.version}. {deprecation.explanation}.",
            node.where("op"),
            UnimplementedError,
        )


def _prepare(gdef: Typed) -> list[tuple]:
    """Every node checked and decoded, in topological order: ``(node, name, op_type, refs, attrs, label)``."""
    versions = gdef.get("versions")
    producer = versions.get("producer", 0) if versions is not None else 0
    nodes = gdef.all("node")
    index: dict[str, int] = {}
    for i, node in enumerate(nodes):
        name = node.require("name")
        node.require("op")
        if name in index:
            first = nodes[index[name]]
            raise node.error(f"Duplicate node name in graph: '{name}' (first defined at {first.line}:{first.col})")
        index[name] = i
    refs = [_parse_inputs(node, node.get("name"), index) for node in nodes]
    budget = [0]  # bytes of constants decoded so far: the guard covers their sum
    plan = []
    for i in _topological(nodes, index, refs):
        node, name = nodes[i], nodes[i].get("name")
        op_type = node.get("op")
        try:
            op_def = get_op_def(op_type)
        except NotFoundError as e:
            raise node.error(f"node '{name}': {e.message}", node.where("op"), NotFoundError) from None
        _check_version(node, op_type, op_def, producer)
        attrs = dict(_attr(a, op_def.attr_kinds, name, op_type, budget) for a in node.all("attr"))
        label = attrs.pop("_kernel", None)
        attrs = {k: v for k, v in attrs.items() if k in op_def.attr_kinds}
        plan.append((node, name, op_type, refs[i], attrs, label))
    return plan


def _build(plan: list[tuple], graph: Any) -> None:
    for node, name, op_type, refs, attrs, label in plan:
        inputs, control = [], []
        for is_control, src, out, where in refs:
            op = graph.get_operation(src)
            if is_control:
                control.append(op)
            elif out >= op.num_outputs:
                raise node.error(
                    f"Node '{name}': Connecting to invalid output {out} of source node {src} "
                    f"which has {op.num_outputs} outputs",
                    where,
                )
            else:
                inputs.append(op.output(out))
        try:
            graph.add_operation(name, op_type, inputs, attrs, control, node.get("device", ""), label)
        except OpError as e:
            raise node.error(f"node '{name}': {e.message}", cls=type(e)) from None
        except (KeyError, TypeError, ValueError) as e:  # an op definition's own check, typed here
            raise node.error(f"node '{name}' ({op_type}): {type(e).__name__}: {e}") from None


def graph_from_pbtxt(text: str, graph: Any, source: str = "<pbtxt>") -> Any:
    """Add the nodes of GraphDef ``text`` to ``graph``, all or none (TensorFlow's ImportGraphDef is
    atomic too); every error names ``source:line:col``."""
    plan = _prepare(type_message(_pbtxt.parse(text, source), "GraphDef", SCHEMA, source, _ENUMS))
    for node, name, *_ in plan:
        if graph.operation(name) is not None:
            raise node.error(f"Duplicate node name in graph: '{name}' (already in the graph imported into)")
    _build(plan, type(graph)())  # a scratch copy first: a failure leaves the caller's graph untouched
    _build(plan, graph)
    return graph
