"""Valid arguments for any op spec, read from the spec alone (tests that iterate every spec use them).

The data tensor's shape comes from the spec's :class:`~fbnops.specs.DataSpec` (its first rank,
the channels where its layout attr's default or its fixed axis puts them), vectors have C
elements, and every required attr gets a plain value of its type.  Nothing here names an op.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fbnops.framework import dtypes
from fbnops.framework.layouts import channel_axis
from fbnops.specs import OpSpec

C = 3
_EXAMPLE_VALUES = {"float": 1e-3, "bool": True}


def data_shape(spec: OpSpec, channels: int = C) -> tuple[int, ...]:
    """A small shape of the spec's data tensor with ``channels`` channels."""
    data = spec.data
    rank = data.ranks[0]
    if data.layout_attr is not None:
        axis = channel_axis(spec.attr(data.layout_attr).default, rank)
    else:
        axis = data.channel_axis % rank
    shape = [2] * rank
    shape[axis] = channels
    return tuple(shape)


def input_shapes(spec: OpSpec) -> dict[str, tuple[int, ...]]:
    by_kind = {"tensor": data_shape(spec), "channels": (C,), "any": (C,)}
    return {a.name: by_kind[a.kind] for a in spec.inputs}


def output_shapes(spec: OpSpec) -> list[tuple | None]:
    by_kind = {"tensor": data_shape(spec), "channels": (C,), "empty": (0,), "scalar0": None}
    return [by_kind[a.kind] for a in spec.outputs]


def dtype_of(spec: OpSpec, type_name: str) -> np.dtype:
    """float32 for a type attr that allows it (else its first type), or the fixed dtype."""
    if type_name in spec.type_attrs:
        allowed = spec.type_attrs[type_name]
        return dtypes.from_tf_name("float" if "float" in allowed else allowed[0])
    return dtypes.from_tf_name(type_name)


def required_attrs(spec: OpSpec) -> dict[str, Any]:
    """A value for every attr that has no default (the first allowed one if the attr lists them)."""
    return {a.name: a.allowed[0] if a.allowed else _EXAMPLE_VALUES[a.type] for a in spec.required_attrs}


def inputs(spec: OpSpec, seed: int = 3) -> dict[str, np.ndarray]:
    """Random valid inputs: vectors positive (variances stay valid), everything of the spec's dtypes."""
    rng = np.random.default_rng(seed)
    out = {}
    for a in spec.inputs:
        shape = input_shapes(spec)[a.name]
        value = np.abs(rng.standard_normal(shape)) + 0.5 if a.kind == "channels" else rng.standard_normal(shape)
        out[a.name] = value.astype(dtype_of(spec, a.type))
    return out
