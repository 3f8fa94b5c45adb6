"""The graph binding of a spec'd op: :class:`SpecOpDef`, one per op module.

Building a node checks the spec's attrs and dtypes and applies the op's shape
rule; running it is :func:`fbnops.ops.execute.execute`, which calls the op's
eager body with the selected backend's kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..framework import dtypes
from ..framework.errors import InvalidArgumentError
from ..framework.registry import OpDef
from ..specs import ATTR_TYPES, OpSpec
from .execute import execute
from .validation import check_attrs, check_dtypes

__all__ = ["SpecOpDef", "EagerBody", "ShapeRule", "NO_KERNEL"]

# body(kernel, arrays, attrs) -> output arrays: what TensorFlow's OpKernel::Compute does around the kernel.
EagerBody = Callable[[Callable, dict[str, np.ndarray], dict[str, Any]], tuple[np.ndarray, ...]]
# shape(spec, input shapes, attrs) -> output shapes: TensorFlow's shape function.
ShapeRule = Callable[[OpSpec, dict[str, Any], dict[str, Any]], list]
# SpecOpDef(kernel=NO_KERNEL): the body computes without a backend kernel (it receives None).
NO_KERNEL = ""


class SpecOpDef(OpDef):
    """Build = the spec's attr/dtype checks + the op's shape rule; run = the op's eager body."""

    def __init__(self, spec: OpSpec, *, body: EagerBody, shape: ShapeRule, kernel: str | None = None):
        self.spec = spec
        self.body = body
        self.shape = shape
        # the op type whose registered kernels run this op (V1/V2 run on V3's kernels)
        self.kernel = spec.name if kernel is None else kernel
        self.name = spec.name
        self.input_names = spec.input_names
        self.output_names = spec.output_names
        self.attr_kinds = {a.name: ATTR_TYPES[a.type].pbtxt_field for a in spec.attrs} | {
            t: "type" for t in spec.type_attrs
        }

    def build(self, inputs, attrs: dict[str, Any]):
        spec = self.spec
        if len(inputs) != len(spec.inputs):
            raise InvalidArgumentError(f"{spec.name} takes {len(spec.inputs)} inputs, got {len(inputs)}")
        given = {k: v for k, v in attrs.items() if k not in spec.type_attrs}
        checked = check_attrs(spec, given)
        by_name = dict(zip(spec.input_names, inputs, strict=True))
        bound = check_dtypes(spec, by_name)
        for attr, dt in bound.items():  # T/U given explicitly (e.g. from a GraphDef) must agree
            if attr in attrs and np.dtype(attrs[attr]) != dt:
                raise InvalidArgumentError(
                    f"attr {attr}={dtypes.tf_name(np.dtype(attrs[attr]))} does not match the inputs' "
                    f"{dtypes.tf_name(dt)}"
                )
        shapes = self.shape(spec, {k: v.shape for k, v in by_name.items()}, checked)
        out_dtypes = [bound.get(a.type, np.dtype(np.float32)) for a in spec.outputs]
        full = {**{k: bound.get(k, np.dtype(np.float32)) for k in spec.type_attrs}, **checked}
        return full, out_dtypes, shapes

    def compute(self, arrays, attrs, backend):
        op_attrs = {a.name: attrs[a.name] for a in self.spec.attrs}
        return tuple(execute(self.name, dict(zip(self.input_names, arrays, strict=True)), op_attrs, backend))
