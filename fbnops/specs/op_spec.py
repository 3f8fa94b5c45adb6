"""The vocabulary of op specs: arguments, attributes, surfaces, the op itself.

Plain frozen dataclasses, no behaviour beyond lookups: every layer above reads
them.  :data:`ATTR_TYPES` is the one table of attr types (their Python type and
their GraphDef ``AttrValue`` field).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = ["ArgSpec", "AttrSpec", "AttrType", "ATTR_TYPES", "OpSpec", "Surfaces"]


class AttrType(NamedTuple):
    """One TensorFlow attr type: the Python type of its values and its GraphDef ``AttrValue`` field."""

    python: type
    pbtxt_field: str


ATTR_TYPES: dict[str, AttrType] = {
    "float": AttrType(float, "f"),
    "bool": AttrType(bool, "b"),
    "string": AttrType(str, "s"),
}


@dataclass(frozen=True)
class ArgSpec:
    """One input or output of an op.

    ``type`` is either a type-attr name (``"T"``, ``"U"``) or a fixed dtype name
    (``"float"``).  ``kind`` says what shape the argument has:

    * ``"tensor"``   - the 4-D/5-D data tensor laid out by ``data_format``;
    * ``"channels"`` - a 1-D vector of length C;
    * ``"any"``      - any shape (TensorFlow never reads it on CPU);
    * ``"scalar0"``  - a rank-0 tensor (output only);
    * ``"empty"``    - a shape ``(0,)`` tensor (output only).

    ``tf_message_label`` is the name TensorFlow's kernel uses for the argument in
    its messages ("saved mean must be 1-dimensional"), when it differs from ``name``.
    ``required_when`` names a condition under which a ``channels`` input must
    match C (TensorFlow ignores mean/variance in training with factor 1).
    """

    name: str
    type: str
    kind: str
    doc: str
    tf_message_label: str | None = None
    required_when: str | None = None


@dataclass(frozen=True)
class AttrSpec:
    """One attribute: TensorFlow attr type, default, allowed values and doc."""

    name: str
    type: str  # "float" | "bool" | "string" | "type"
    default: Any
    doc: str
    allowed: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class Surfaces:
    """How each public API spells the op."""

    java_class: str  # org.tensorflow.op.nn.<java_class>
    java_endpoint: str  # tf.nn.<java_endpoint>(...)
    cc_class: str  # tensorflow::ops::<cc_class>
    python: str  # tf.raw_ops.<python>
    # the same computation in the other APIs: (mode, operator) pairs
    directml: tuple[tuple[str, str], ...] = ()
    onednn: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class OpSpec:
    name: str
    summary: str
    description: str
    inputs: tuple[ArgSpec, ...]
    outputs: tuple[ArgSpec, ...]
    attrs: tuple[AttrSpec, ...]
    type_attrs: dict[str, tuple[str, ...]]
    # dtypes for which a CPU kernel exists (TensorFlow registers U=float only).
    kernel_type_attrs: dict[str, tuple[str, ...]]
    surfaces: Surfaces
    gradient: str | None = None
    seeds: tuple[str, ...] = field(default_factory=tuple)

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.outputs)

    @property
    def attr_defaults(self) -> dict[str, Any]:
        return {a.name: a.default for a in self.attrs}

    def attr(self, name: str) -> AttrSpec:
        for a in self.attrs:
            if a.name == name:
                return a
        raise KeyError(name)

    def input(self, name: str) -> ArgSpec:
        for a in self.inputs:
            if a.name == name:
                return a
        raise KeyError(name)
