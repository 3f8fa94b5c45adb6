"""TensorFlow's C++ graph-construction messages, shared by the C++ and Java mirrors.

Both real APIs build nodes through ``NodeBuilder`` (C++) or ``TF_FinishOperation``
(the C API under tensorflow/java), so their errors name the node in NodeDef form:

* input types: ``Inconsistent values for attr 'T' DT_HALF vs. DT_FLOAT while building
  NodeDef 'X' using Op<name=...; signature=...; attr=...>`` (NodeDefBuilder);
* attr values: ``Value for attr 'data_format' of "XYZW" is not in the list of allowed
  values: ...\\n\\t; NodeDef: {{node X}}; Op<...>`` (ValidateNodeDef);
* shapes: ``<shape fn message> for '{{node X}} = Op[T=DT_FLOAT, ...](Const, ...)' with
  input shapes: [4,3,3,2], [1], ...`` (shape inference).

Only ops with an fbnops spec are checked here; the framework still validates everything.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from fbnops.framework import dtypes
from fbnops.framework.errors import InvalidArgumentError, OpError
from fbnops.specs import OpSpec, all_specs

__all__ = ["add_node", "dt_name", "op_summary", "node_summary"]


def dt_name(dtype) -> str:
    """``DT_FLOAT``, ``DT_HALF``, ``DT_BFLOAT16``, ``DT_INT32``, ... for a NumPy dtype or TF name."""
    name = dtype if isinstance(dtype, str) else dtypes.tf_name(dtype)
    return "DT_" + name.upper()


def _spec(op_type: str) -> OpSpec | None:
    return next((sp for sp in all_specs() if sp.name == op_type), None)


def _float_text(value: float) -> str:
    """A float attr as TensorFlow prints it: the shortest %g that reads back as the same float32."""
    with np.errstate(over="ignore"):  # 1e39 prints as inf (the message then says it is out of range)
        f32 = np.float32(value)
    for digits in range(1, 10):
        text = f"{float(f32):.{digits}g}"
        if np.float32(text) == f32:
            return text
    return f"{float(f32):.9g}"


def _value_text(kind: str, value: Any) -> str:
    if kind == "type":
        return dt_name(value)
    if kind == "bool":
        return "true" if value else "false"
    if kind == "float":
        return _float_text(value)
    return f'"{value}"'


def op_summary(spec: OpSpec) -> str:
    """``SummarizeOpDef``: ``Op<name=...; signature=ins -> outs; attr=...>``."""
    ins = ", ".join(f"{a.name}:{a.type}" for a in spec.inputs)
    outs = ", ".join(f"{a.name}:{a.type}" for a in spec.outputs)
    parts = [f"name={spec.name}", f"signature={ins} -> {outs}"]
    for attr, allowed in spec.type_attrs.items():
        parts.append(f"attr={attr}:type,allowed=[{', '.join(dt_name(t) for t in allowed)}]")
    for a in spec.attrs:
        text = f"attr={a.name}:{a.type}" + ("" if a.required else f",default={_value_text(a.type, a.default)}")
        if a.allowed:
            text += ",allowed=[" + ", ".join(_value_text(a.type, v) for v in a.allowed) + "]"
        parts.append(text)
    return "Op<" + "; ".join(parts) + ">"


def node_summary(name: str, op_type: str, attrs: dict[str, tuple[str, Any]], inputs) -> str:
    """``{{node X}} = Op[a=v, ...](in, in:1, ...)`` with the attrs sorted by name."""
    attr_text = ", ".join(f"{k}={_value_text(*attrs[k])}" for k in sorted(attrs))
    in_text = ", ".join(t.op.name if t.index == 0 else f"{t.op.name}:{t.index}" for t in inputs)
    return f"{{{{node {name}}}}} = {op_type}[{attr_text}]({in_text})"


_KIND_OF = {bool: "bool", int: "int", float: "float", str: "string"}
_KIND_CHECKS = {
    "float": lambda v: isinstance(v, (float, np.floating)),
    "bool": lambda v: isinstance(v, (bool, np.bool_)),
    "string": lambda v: isinstance(v, str),
}


def _kind_name(value: Any) -> str:
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        value = value.item()
    return _KIND_OF.get(type(value), type(value).__name__)


def _check(spec: OpSpec, name: str, inputs, attrs: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """NodeDefBuilder + ValidateNodeDef: the node's attrs (kind, value), or an InvalidArgumentError."""
    summary = op_summary(spec)
    inferred: dict[str, str] = {}
    problems = []
    for arg, t in zip(spec.inputs, inputs, strict=False):
        got = dtypes.tf_name(t.dtype)
        if arg.type in spec.type_attrs:
            first = inferred.setdefault(arg.type, got)
            if first != got:
                problems.append(f"Inconsistent values for attr '{arg.type}' {dt_name(first)} vs. {dt_name(got)}")
        elif got != arg.type:
            problems.append(f"Input '{arg.name}' passed {got} expected {arg.type}")
    if len(inputs) != len(spec.inputs):
        problems.append(f"{len(inputs)} inputs specified of {len(spec.inputs)} inputs in Op")
    if len(problems) == 1:
        raise InvalidArgumentError(f"{problems[0]} while building NodeDef '{name}' using {summary}")
    if problems:
        raise InvalidArgumentError(
            f"{len(problems)} errors while building NodeDef '{name}' using {summary}:\n" + "\n".join(problems)
        )
    where = f"\n\t; NodeDef: {{{{node {name}}}}}; {summary}"
    node: dict[str, tuple[str, Any]] = {}
    for attr, allowed in spec.type_attrs.items():
        got = inferred.get(attr)
        if got is not None and got not in allowed:
            listed = ", ".join(allowed)
            raise InvalidArgumentError(
                f"Value for attr '{attr}' of {got} is not in the list of allowed values: {listed}{where}"
            )
        if got is not None:
            node[attr] = ("type", got)
    for a in spec.attrs:
        if a.required and a.name not in attrs:
            raise InvalidArgumentError(f"NodeDef missing attr '{a.name}' from {summary}; NodeDef: {{{{node {name}}}}}")
        value = attrs.get(a.name, a.default)
        if not _KIND_CHECKS[a.type](value):
            raise InvalidArgumentError(
                f"AttrValue had value with type '{_kind_name(value)}' when '{a.type}' expected"
                f"\n\t for attr '{a.name}'{where}"
            )
        if a.allowed and value not in a.allowed:
            listed = ", ".join(_value_text(a.type, v) for v in a.allowed)
            raise InvalidArgumentError(
                f"Value for attr '{a.name}' of {_value_text(a.type, value)} "
                f"is not in the list of allowed values: {listed}{where}"
            )
        node[a.name] = (a.type, value)
    return node


_FBNOPS_NOTE = re.compile(r" \((?:input|inputs) '[^)]*\)")


def _shape_text(shape) -> str:
    if shape is None:
        return "?"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def add_node(env, name: str, op_type: str, inputs, attrs: dict[str, Any], control=(), device="", label=None):
    """``env.add_operation`` with TensorFlow's NodeDef-form construction errors (raised as OpErrors)."""
    spec = _spec(op_type)
    node = _check(spec, name, inputs, attrs) if spec is not None else None
    try:
        return env.add_operation(name, op_type, inputs, attrs, control, device, label)
    except OpError as e:
        marker = e.message.find(f" for '{{{{node {name}}}}}")
        if node is None or marker < 0:
            raise
        inner = _FBNOPS_NOTE.sub("", e.message[:marker])
        shapes = ", ".join(_shape_text(t.shape) for t in inputs)
        raise type(e)(
            f"{inner} for '{node_summary(name, op_type, node, inputs)}' with input shapes: {shapes}.", e.op
        ) from None
