"""Op specs as data: the fbnops analogue of TensorFlow's ``REGISTER_OP`` + api_def.

One :class:`OpSpec` per op (one module per op in this package) lists the inputs,
outputs and attrs with their types, defaults, allowed values and documentation.
Validation, the Python API (``fbnops.raw_ops``), the language mirrors and the docs
pages all read these objects; nothing restates them by hand.

Adding an op: write its spec module (``SPEC = OpSpec(...)``, built from
:mod:`fbnops.specs.op_spec`); it is found by name (:data:`MODULE_NAMES`).
"""

from __future__ import annotations

import importlib
import pkgutil

from .op_spec import ATTR_TYPES, REQUIRED, ArgSpec, AttrSpec, AttrType, DataSpec, Deprecation, OpSpec, Surfaces

__all__ = [
    "ArgSpec",
    "AttrSpec",
    "AttrType",
    "ATTR_TYPES",
    "DataSpec",
    "Deprecation",
    "OpSpec",
    "REQUIRED",
    "Surfaces",
    "MODULE_NAMES",
    "get_spec",
    "all_specs",
]

# One module per op, found rather than listed (adding an op is adding its module): every module of
# this package but the vocabulary (op_spec) and the private helpers (_*), in name order - the order
# of raw_ops and the registry.  fbnops.ops has an op module of the same name for each.
MODULE_NAMES: tuple[str, ...] = tuple(
    sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_") and m.name != "op_spec")
)

_REGISTRY: dict[str, OpSpec] = {}
for _name in MODULE_NAMES:
    _spec = importlib.import_module(f"{__name__}.{_name}").SPEC
    _REGISTRY[_spec.name] = _spec
del _name, _spec


def get_spec(name: str) -> OpSpec:
    """The spec registered under the TensorFlow op type ``name``."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"Op type not registered '{name}'") from None


def all_specs() -> tuple[OpSpec, ...]:
    return tuple(_REGISTRY.values())
