"""Graph op definitions generated from the op specs (one :class:`SpecOpDef` per spec)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..specs import OpSpec, all_specs
from . import dtypes
from .graph import OpDef, register_op_def

_KIND = {"float": "f", "bool": "b", "string": "s"}


class SpecOpDef(OpDef):
    """Build = the spec's attr/dtype checks + TensorFlow's shape function; run = ops.execute."""

    def __init__(self, spec: OpSpec):
        self.spec = spec
        self.name = spec.name
        self.input_names = spec.input_names
        self.output_names = spec.output_names
        self.attr_kinds = {a.name: _KIND[a.type] for a in spec.attrs} | {t: "type" for t in spec.type_attrs}

    def build(self, inputs, attrs: dict[str, Any]):
        from ..framework.errors import InvalidArgumentError
        from ..ops.shape_inference import infer_shapes
        from ..ops.validation import check_attrs, check_dtypes

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
        shapes = infer_shapes(spec, {k: v.shape for k, v in by_name.items()}, checked)
        out_dtypes = [bound.get(a.type, np.dtype(np.float32)) for a in spec.outputs]
        full = {**{k: bound.get(k, np.dtype(np.float32)) for k in spec.type_attrs}, **checked}
        return full, out_dtypes, shapes

    def compute(self, arrays, attrs, backend):
        from ..ops.batch_norm import execute

        op_attrs = {a.name: attrs[a.name] for a in self.spec.attrs}
        return tuple(execute(self.name, dict(zip(self.input_names, arrays, strict=True)), op_attrs, backend))


for _spec in all_specs():
    register_op_def(SpecOpDef(_spec))
