"""Spec-driven checks shared by every op: attrs, dtypes, when an input is required, where the channels are.

Nothing here knows about batch norm; it reads an :class:`~fbnops.specs.OpSpec`.
Messages follow TensorFlow's where TensorFlow has one, and always name the
argument at fault.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..framework import dtypes
from ..framework.errors import InvalidArgumentError, NotFoundError
from ..framework.layouts import channel_axis as format_channel_axis
from ..specs import ATTR_TYPES, ArgSpec, OpSpec

__all__ = ["check_attrs", "check_dtypes", "is_required", "requirement_prefix", "channel_axis"]

# ArgSpec.required_when conditions: when must a per-channel input match the channels of x?
_CONDITIONS = {
    # TensorFlow reads mean/variance in inference, or to blend with exponential_avg_factor != 1.
    "stats_used": lambda attrs: not attrs["is_training"] or attrs.get("exponential_avg_factor", 1.0) != 1.0,
}
# ... and how TensorFlow's message about such an input starts
_PREFIXES = {
    "stats_used": lambda attrs: (
        "When is_training=false, " if not attrs["is_training"] else "When exponential_avg_factor != 1, "
    ),
}


def is_required(arg: ArgSpec, attrs: dict[str, Any]) -> bool:
    """Whether input ``arg`` is read under the (checked) ``attrs``."""
    return arg.required_when is None or _CONDITIONS[arg.required_when](attrs)


def requirement_prefix(arg: ArgSpec, attrs: dict[str, Any]) -> str:
    """The start of TensorFlow's message about a conditionally read input ("When is_training=false, ")."""
    return "" if arg.required_when is None else _PREFIXES[arg.required_when](attrs)


def channel_axis(spec: OpSpec, ndim: int, attrs: dict[str, Any]) -> int:
    """The channel axis of the op's data tensor of rank ``ndim``, by its :class:`~fbnops.specs.DataSpec`."""
    data = spec.data
    if data.layout_attr is not None:
        return format_channel_axis(attrs[data.layout_attr], ndim)
    return data.channel_axis % ndim


_EXACT = {name: t.python for name, t in ATTR_TYPES.items()}
_AS_FLOAT32: dict[float, float] = {}  # memo: Python float -> the float32 TensorFlow stores


def _attr_value(op: str, a, v: Any) -> Any:
    """Coerce one attr value to its spec type or raise."""
    if a.type == "float":
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise InvalidArgumentError(f"Attr '{a.name}' expects a float, got {type(v).__name__} {v!r}", op)
        try:
            with np.errstate(over="ignore"):
                f = float(np.float32(v))  # TensorFlow stores float attrs as float32
        except OverflowError:  # an int beyond the double range
            f = math.inf
        if math.isinf(f) and not (isinstance(v, (float, np.floating)) and math.isinf(v)):
            raise InvalidArgumentError(f"Value for attr '{a.name}' of {v!r:.40} is out of the range of float", op)
        if not math.isfinite(f):
            raise InvalidArgumentError(f"Attr '{a.name}' must be a finite float, got {f!r}", op)
        v = f
    elif a.type == "bool":
        if not isinstance(v, (bool, np.bool_)):
            raise InvalidArgumentError(f"Attr '{a.name}' expects a bool, got {type(v).__name__} {v!r}", op)
        v = bool(v)
    elif a.type == "string":
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        if not isinstance(v, str):
            raise InvalidArgumentError(f"Attr '{a.name}' expects a string, got {type(v).__name__} {v!r}", op)
    if a.allowed is not None and v not in a.allowed:
        allowed = ", ".join(f'"{x}"' for x in a.allowed)
        raise InvalidArgumentError(
            f"Value for attr '{a.name}' of \"{v}\" is not in the list of allowed values: {allowed}", op
        )
    return v


def check_attrs(spec: OpSpec, attrs: dict[str, Any]) -> dict[str, Any]:
    """Type-check attrs against the spec; return them with Python-native values."""
    out = {}
    for a in spec.attrs:
        v = attrs.get(a.name, a.default)
        if a.required and a.name not in attrs:
            raise InvalidArgumentError(f"NodeDef missing attr '{a.name}' from Op<name={spec.name}>", spec.name)
        if type(v) is _EXACT[a.type] and (a.allowed is None or v in a.allowed):
            if a.type == "float":  # fast path for a plain float seen before
                f = _AS_FLOAT32.get(v)
                if f is None:
                    f = _attr_value(spec.name, a, v)
                    if len(_AS_FLOAT32) < 4096:
                        _AS_FLOAT32[v] = f
                v = f
            out[a.name] = v
        else:
            out[a.name] = _attr_value(spec.name, a, v)
    if len(attrs) > len(out) or any(k not in out for k in attrs):
        unknown = sorted(set(attrs) - set(out))
        raise InvalidArgumentError(f"Unknown attr(s) {unknown}; {spec.name} has {sorted(out)}", spec.name)
    return out


class _DtypePlan:
    """Per-spec precomputation: for each input, its index, name, type attr and allowed dtypes."""

    def __init__(self, spec: OpSpec):
        self.args = []
        for i, arg in enumerate(spec.inputs):
            if arg.type in spec.type_attrs:
                allowed = frozenset(dtypes.from_tf_name(t) for t in spec.type_attrs[arg.type])
                self.args.append((i, arg.name, arg.type, allowed, None))
            else:
                self.args.append((i, arg.name, None, None, dtypes.from_tf_name(arg.type)))


_PLANS: dict[str, _DtypePlan] = {}


def check_dtypes(spec: OpSpec, arrays: dict[str, np.ndarray]) -> dict[str, np.dtype]:
    """Infer the type attrs (T, U) from the inputs and check every input's dtype.

    Returns ``{"T": dtype, "U": dtype}``.
    """
    plan = _PLANS.get(spec.name) or _PLANS.setdefault(spec.name, _DtypePlan(spec))
    bound: dict[str, np.dtype] = {}
    for i, name, type_attr, allowed, fixed in plan.args:
        dt = arrays[name].dtype
        if type_attr is None:
            expected = fixed
        elif type_attr in bound:
            expected = bound[type_attr]
        else:
            if dt not in allowed:
                raise InvalidArgumentError(
                    f"Value for attr '{type_attr}' of {dtypes.tf_name(dt)} is not in the list of "
                    f"allowed values: {', '.join(spec.type_attrs[type_attr])} (input '{name}')",
                    spec.name,
                )
            bound[type_attr] = dt
            continue
        if dt != expected:
            raise InvalidArgumentError(
                f"cannot compute {spec.name} as input #{i}(zero-based) was expected to be a "
                f"{dtypes.tf_name(expected)} tensor but is a {dtypes.tf_name(dt)} tensor "
                f"(input '{name}')",
                spec.name,
            )
    for attr, dt in bound.items():
        if dtypes.tf_name(dt) not in spec.kernel_type_attrs[attr]:
            raise NotFoundError(
                f"No registered '{spec.name}' OpKernel for 'CPU' devices compatible with "
                f"{attr}={dtypes.tf_name(dt)}; registered kernels have {attr} in "
                f"[{', '.join(spec.kernel_type_attrs[attr])}]",
                spec.name,
            )
    return bound
