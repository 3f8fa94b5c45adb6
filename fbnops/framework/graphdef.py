"""GraphDef in protobuf text format (``.pbtxt``): export that TensorFlow imports, and import back.

Node, input, attr and dtype names are TensorFlow's: ``tf.compat.v1.import_graph_def``
loads an exported graph (parsed with ``google.protobuf.text_format``) and runs it to
the same numbers.  Kernel labels (``_kernel``) are written only on request: a
TensorFlow kernel lookup would fail on fbnops' backend names.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from . import dtypes
from .errors import InvalidArgumentError
from .graph import Graph, get_op_def

__all__ = ["graph_to_pbtxt", "graph_from_pbtxt", "parse_pbtxt"]

_DT = {
    "DT_FLOAT": np.dtype(np.float32),
    "DT_HALF": np.dtype(np.float16),
    "DT_BFLOAT16": dtypes.bfloat16,
    "DT_DOUBLE": np.dtype(np.float64),
    "DT_INT32": np.dtype(np.int32),
    "DT_INT64": np.dtype(np.int64),
    "DT_BOOL": np.dtype(np.bool_),
}
_DT_NAME = {v: k for k, v in _DT.items()}


def _escape(data: bytes) -> str:
    out = []
    for b in data:
        c = chr(b)
        if c in "\"'\\":
            out.append("\\" + c)
        elif 32 <= b < 127:
            out.append(c)
        else:
            out.append(f"\\{b:03o}")
    return "".join(out)


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
        return [f'{ind}s: "{_escape(str(value).encode())}"']
    if kind == "i":
        return [f"{ind}i: {int(value)}"]
    if kind == "shape":
        return [f"{ind}shape {{", *_shape_lines(value, ind + "  "), f"{ind}}}"]
    if kind == "tensor":
        arr = np.ascontiguousarray(value)
        return [
            f"{ind}tensor {{",
            f"{ind}  dtype: {_DT_NAME[arr.dtype]}",
            f"{ind}  tensor_shape {{",
            *_shape_lines(arr.shape, ind + "    "),
            f"{ind}  }}",
            f'{ind}  tensor_content: "{_escape(arr.astype(arr.dtype.newbyteorder("<")).tobytes())}"',
            f"{ind}}}",
        ]
    raise ValueError(kind)


def graph_to_pbtxt(graph: Graph, include_kernel_labels: bool = False) -> str:
    lines = []
    for op in graph.operations():
        op_def = get_op_def(op.type)
        lines += ["node {", f'  name: "{op.name}"', f'  op: "{op.type}"']
        for t in op.inputs:
            lines.append(f'  input: "{t.op.name if t.index == 0 else t.name}"')
        for c in op.control_inputs:
            lines.append(f'  input: "^{c.name}"')
        if op.device:
            lines.append(f'  device: "{op.device}"')
        attrs = {k: (op_def.attr_kinds[k], v) for k, v in op.attrs.items() if k in op_def.attr_kinds}
        if include_kernel_labels and op.kernel_label:
            attrs["_kernel"] = ("s", op.kernel_label)
        for key in sorted(attrs):
            kind, value = attrs[key]
            lines += [
                "  attr {",
                f'    key: "{key}"',
                "    value {",
                *_attr_value_lines(kind, value, "      "),
                "    }",
                "  }",
            ]
        lines.append("}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------
# A small parser for the protobuf text format (the subset GraphDefs use).
# --------------------------------------------------------------------------------------

_TOKEN = re.compile(r'\s*(?:(#[^\n]*)|([{}:<>\[\],;])|("(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\')|([^\s{}:<>\[\],;"\']+))')


def _unescape(s: str) -> bytes:
    out = bytearray()
    i = 0
    simple = {"n": 10, "t": 9, "r": 13, "\\": 92, "'": 39, '"': 34, "a": 7, "b": 8, "f": 12, "v": 11}
    while i < len(s):
        c = s[i]
        if c != "\\":
            out += c.encode()
            i += 1
            continue
        n = s[i + 1]
        if n in simple:
            out.append(simple[n])
            i += 2
        elif n in "01234567":
            j = i + 1
            while j < len(s) and j < i + 4 and s[j] in "01234567":
                j += 1
            out.append(int(s[i + 1 : j], 8) & 0xFF)
            i = j
        elif n == "x":
            j = i + 2
            while j < len(s) and j < i + 4 and s[j] in "0123456789abcdefABCDEF":
                j += 1
            out.append(int(s[i + 2 : j], 16))
            i = j
        else:
            raise InvalidArgumentError(f"bad escape \\{n} in pbtxt string")
    return bytes(out)


def _tokens(text: str):
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            if text[pos:].strip() == "":
                return
            raise InvalidArgumentError(f"pbtxt: cannot parse near {text[pos : pos + 30]!r}")
        pos = m.end()
        if m.group(1):
            continue
        tok = m.group(2) or m.group(3) or m.group(4)
        if tok:
            yield tok


def parse_pbtxt(text: str) -> list[tuple[str, Any]]:
    """Text format -> nested lists of (field, value); strings as bytes, scalars as str."""
    toks = list(_tokens(text))
    pos = 0

    def message(end: str | None):
        nonlocal pos
        fields = []
        while pos < len(toks) and toks[pos] != end:
            name = toks[pos]
            pos += 1
            if pos < len(toks) and toks[pos] == ":":
                pos += 1
            if pos >= len(toks):
                raise InvalidArgumentError(f"pbtxt: field '{name}' has no value")
            tok = toks[pos]
            if tok in ("{", "<"):
                pos += 1
                value = message("}" if tok == "{" else ">")
                pos += 1
            elif tok[0] in "\"'":
                value = b""
                while pos < len(toks) and toks[pos][0] in "\"'":  # adjacent strings concatenate
                    value += _unescape(toks[pos][1:-1])
                    pos += 1
            else:
                value = tok
                pos += 1
            fields.append((name, value))
            if pos < len(toks) and toks[pos] in (",", ";"):
                pos += 1
        if end is not None and pos >= len(toks):
            raise InvalidArgumentError("pbtxt: unbalanced braces")
        return fields

    return message(None)


def _get(fields, name, default=None):
    for k, v in fields:
        if k == name:
            return v
    return default


def _all(fields, name):
    return [v for k, v in fields if k == name]


def _decode_shape(fields):
    if _get(fields, "unknown_rank") == "true":
        return None
    return tuple(None if int(_get(d, "size", "0")) < 0 else int(_get(d, "size", "0")) for d in _all(fields, "dim"))


def _decode_tensor(fields) -> np.ndarray:
    dt = _DT[_get(fields, "dtype")]
    shape = _decode_shape(_get(fields, "tensor_shape", []))
    content = _get(fields, "tensor_content")
    if content is not None:
        return np.frombuffer(content, dtype=dt.newbyteorder("<")).astype(dt).reshape(shape)
    for key in ("float_val", "double_val", "int_val", "int64_val", "bool_val", "half_val"):
        vals = _all(fields, key)
        if vals:
            if key == "half_val":
                arr = np.array([int(v) for v in vals], np.uint16).view(dt)
            elif key == "bool_val":
                arr = np.array([v == "true" for v in vals])
            else:
                arr = np.array([float(v) if "." in v or "e" in v.lower() else int(v) for v in vals]).astype(dt)
            n = int(np.prod(shape)) if shape else 1
            return (np.full(n, arr[-1], dt) if arr.size == 1 and n != 1 else arr).reshape(shape)
    return np.zeros(shape, dt)


def _decode_attr(value_fields) -> Any:
    kind, v = value_fields[0]
    if kind == "type":
        return _DT[v]
    if kind == "f":
        return float(np.float32(v))
    if kind == "b":
        return v == "true"
    if kind == "s":
        return v.decode()
    if kind == "i":
        return int(v)
    if kind == "shape":
        return _decode_shape(v)
    if kind == "tensor":
        return _decode_tensor(v)
    raise InvalidArgumentError(f"unsupported attr value kind '{kind}'")


def graph_from_pbtxt(text: str, graph: Graph) -> Graph:
    nodes = {}
    order = []
    for kind, node in parse_pbtxt(text):
        if kind != "node":
            continue
        name = _get(node, "name", b"").decode()
        if name in nodes:
            raise InvalidArgumentError(f"Duplicate node name in graph: '{name}'")
        nodes[name] = node
        order.append(name)

    created: set[str] = set()

    def create(name: str, stack: tuple[str, ...] = ()):
        if name in created:
            return
        if name in stack:
            raise InvalidArgumentError(f"GraphDef has a cycle through '{name}'")
        if name not in nodes:
            raise InvalidArgumentError(f"Node '{stack[-1] if stack else name}' has an input from unknown node '{name}'")
        node = nodes[name]
        refs = [r.decode() for r in _all(node, "input")]
        for r in refs:
            create(r.lstrip("^").split(":")[0], stack + (name,))
        inputs = [graph.get_output(r) for r in refs if not r.startswith("^")]
        control = [graph.get_operation(r[1:]) for r in refs if r.startswith("^")]
        attrs = {(_get(a, "key") or b"").decode(): _decode_attr(_get(a, "value")) for a in _all(node, "attr")}
        label = attrs.pop("_kernel", None)
        op_type = _get(node, "op", b"").decode()
        op_def = get_op_def(op_type)
        attrs = {k: v for k, v in attrs.items() if k in op_def.attr_kinds}
        graph.add_operation(name, op_type, inputs, attrs, control, (_get(node, "device") or b"").decode(), label)
        created.add(name)

    for name in order:
        create(name)
    return graph
