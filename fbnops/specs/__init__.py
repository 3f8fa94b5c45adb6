"""Op specs as data: the fbnops analogue of TensorFlow's ``REGISTER_OP`` + api_def.

One :class:`OpSpec` per op (one module per op in this package) lists the inputs,
outputs and attrs with their types, defaults, allowed values and documentation.
Validation, the Python API (``fbnops.raw_ops``), the language mirrors and the docs
pages all read these objects; nothing restates them by hand.

Adding an op: write its spec module (``SPEC = OpSpec(...)``, built from
:mod:`fbnops.specs.op_spec`) and list it in :data:`_SPEC_MODULES`.
"""

from __future__ import annotations

from . import (
    fused_batch_norm,
    fused_batch_norm_grad,
    fused_batch_norm_grad_v2,
    fused_batch_norm_grad_v3,
    fused_batch_norm_v2,
    fused_batch_norm_v3,
)
from .op_spec import ATTR_TYPES, ArgSpec, AttrSpec, AttrType, OpSpec, Surfaces

__all__ = ["ArgSpec", "AttrSpec", "AttrType", "ATTR_TYPES", "OpSpec", "Surfaces", "get_spec", "all_specs"]

# In registration order (the order of raw_ops, the mirrors and the docs).
_SPEC_MODULES = (
    fused_batch_norm_v3,
    fused_batch_norm_grad_v3,
    fused_batch_norm,
    fused_batch_norm_grad,
    fused_batch_norm_v2,
    fused_batch_norm_grad_v2,
)

_REGISTRY: dict[str, OpSpec] = {mod.SPEC.name: mod.SPEC for mod in _SPEC_MODULES}


def get_spec(name: str) -> OpSpec:
    """The spec registered under the TensorFlow op type ``name``."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"Op type not registered '{name}'") from None


def all_specs() -> tuple[OpSpec, ...]:
    return tuple(_REGISTRY.values())
