"""How the V1/V2 batch-norm specs differ from V3, as data (TensorFlow's ``nn_ops.cc``).

``FusedBatchNorm``/``FusedBatchNormGrad`` (V1) and ``FusedBatchNormV2``/
``FusedBatchNormGradV2`` have V3's arguments and attrs with three changes:

* ``data_format`` is ``GetConvnetDataFormatAttrString()``: NHWC or NCHW only;
* V1 has one type attr, ``T: {float}``, for every tensor; V2 has
  ``T: {half, bfloat16, float}`` and ``U: {float}`` (the forward's U has no bfloat16);
* no ``reserve_space_3`` input or output: the forward has five outputs, and the
  grad's two placeholder outputs are called ``reserve_space_3``/``reserve_space_4``
  (V3: ``reserve_space_4``/``reserve_space_5``).
"""

from __future__ import annotations

import dataclasses

from ._common import data_format_attr
from .op_spec import ArgSpec, AttrSpec, OpSpec, Surfaces

__all__ = ["legacy_spec"]

# GetConvnetDataFormatAttrString()
DATA_FORMATS_2D = ("NHWC", "NCHW")


def _data_format(attr: AttrSpec) -> AttrSpec:
    return dataclasses.replace(data_format_attr(attr.doc), allowed=DATA_FORMATS_2D)


def _retype(arg: ArgSpec, single_type: bool) -> ArgSpec:
    # V1: every tensor is T (scale included); V2 keeps V3's T/U/float split.
    return dataclasses.replace(arg, type="T") if single_type else arg


def legacy_spec(v3: OpSpec, name: str, *, single_type: bool, gradient: str | None) -> OpSpec:
    """The V1 (``single_type``) or V2 spec named ``name``, derived from the V3 spec ``v3``."""
    inputs = tuple(_retype(a, single_type) for a in v3.inputs if a.name != "reserve_space_3")
    outputs = [_retype(a, single_type) for a in v3.outputs if a.name != "reserve_space_3"]
    # the grad's placeholders: V3's reserve_space_4/5 are reserve_space_3/4 here
    outputs = [
        dataclasses.replace(a, name=f"reserve_space_{int(a.name[-1]) - 1}") if a.kind == "empty" else a for a in outputs
    ]
    attrs = tuple(_data_format(a) if a.name == "data_format" else a for a in v3.attrs)
    types = {"T": ("float",)} if single_type else {"T": v3.type_attrs["T"], "U": ("float",)}
    return dataclasses.replace(
        v3,
        name=name,
        inputs=inputs,
        outputs=tuple(outputs),
        attrs=attrs,
        type_attrs=types,
        kernel_type_attrs=types,
        # tf-java's nn.FusedBatchNorm/nn.FusedBatchNormGrad endpoints are V3's; these ops have core classes only
        surfaces=Surfaces(
            java_class=name,
            java_endpoint=name[:1].lower() + name[1:],
            cc_class=name,
            python=name,
            directml=v3.surfaces.directml,
            onednn=v3.surfaces.onednn,
        ),
        gradient=gradient,
        seeds=(),
    )
