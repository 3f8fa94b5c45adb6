"""The vocabulary of op specs: arguments, attributes, surfaces, the op itself.

Plain frozen dataclasses, no behaviour beyond lookups: every layer above reads
them.  :data:`ATTR_TYPES` is the one table of attr types (their Python type and
their GraphDef ``AttrValue`` field).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = ["ArgSpec", "AttrSpec", "AttrType", "ATTR_TYPES", "DataSpec", "Deprecation", "OpSpec", "REQUIRED", "Surfaces"]


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

    * ``"tensor"``   - a data tensor: the op's :class:`DataSpec` input, or one that must have its shape;
    * ``"channels"`` - a 1-D vector of length C (the data tensor's channel count);
    * ``"any"``      - any shape (TensorFlow never reads it on CPU);
    * ``"scalar0"``  - a rank-0 tensor (output only);
    * ``"empty"``    - a shape ``(0,)`` tensor (output only).

    ``tf_message_label`` is the name TensorFlow's kernel uses for the argument in
    its messages ("saved mean must be 1-dimensional", "out_backprop must be
    4-dimensional"), when it differs from ``name`` (``tensor`` inputs: ``"input"``).
    ``required_when`` names a condition under which a ``channels`` input must
    match C (TensorFlow ignores mean/variance in training with factor 1).
    """

    name: str
    type: str
    kind: str
    doc: str
    tf_message_label: str | None = None
    required_when: str | None = None


class _Required:
    """The default of an attr that has none: every call and every NodeDef must set it."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


@dataclass(frozen=True)
class AttrSpec:
    """One attribute: TensorFlow attr type, default (or :data:`REQUIRED`), allowed values and doc."""

    name: str
    type: str  # "float" | "bool" | "string" | "type"
    default: Any
    doc: str
    allowed: tuple[Any, ...] | None = None

    @property
    def required(self) -> bool:
        """TensorFlow's attr without a default (``.Attr("variance_epsilon: float")``)."""
        return self.default is REQUIRED


@dataclass(frozen=True)
class DataSpec:
    """The data tensor of an op: the input that defines the channel count C.

    ``ranks``: the ranks its CPU kernel accepts (eager execution; TensorFlow's
    "input must be 4-dimensional").  The channel axis is either read from a layout
    attr (``layout_attr="data_format"``: the format string says where C is, and a
    graph's rank is the format's length) or fixed (``channel_axis=-1``: the last axis,
    and a graph's rank is ``ranks[0]``).  Every other ``tensor`` input must have the
    data tensor's shape; every ``channels`` input must have C elements.  In a graph, TF's
    shape functions differ: FusedBatchNorm's merge only the channel dimension of the
    ``tensor`` inputs, BatchNormWithGlobalNormalization's merge whole shapes
    (``merge_shapes=True``).
    """

    input: str
    ranks: tuple[int, ...]
    layout_attr: str | None = None
    channel_axis: int | None = None
    merge_shapes: bool = False

    def __post_init__(self) -> None:
        if (self.layout_attr is None) == (self.channel_axis is None):
            raise ValueError("a DataSpec names exactly one of layout_attr and channel_axis")


@dataclass(frozen=True)
class Deprecation:
    """TensorFlow's ``.Deprecated(version, explanation)``: GraphDefs produced at ``version`` or later
    cannot hold the op ("Op X is not available in GraphDef version 9. It has been removed in version 9.")."""

    version: int
    explanation: str


@dataclass(frozen=True)
class Surfaces:
    """How each public API spells the op."""

    java_class: str  # org.tensorflow.op.nn.<java_class>
    java_endpoint: str  # tf.nn.<java_endpoint>(...)
    cc_class: str  # tensorflow::ops::<cc_class>
    python: str  # tf.raw_ops.<python>
    # tf-java's package for java_class (its api_def): "nn" puts it in org.tensorflow.op.nn and tf.nn
    java_package: str = "core"
    # the same computation in the other APIs: (mode, operator) pairs
    directml: tuple[tuple[str, str], ...] = ()
    onednn: tuple[tuple[str, str], ...] = ()

    @classmethod
    def named(cls, op: str, java_package: str = "core") -> Surfaces:
        """Every API spells the op by its TensorFlow name (the Java endpoint in lowerCamelCase)."""
        return cls(op, op[0].lower() + op[1:], op, op, java_package)


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
    # the data tensor (which input, its ranks, where its channels are); None: no data tensor
    data: DataSpec | None = None
    gradient: str | None = None
    gradient_doc: str = ""  # what the registered gradient computes and is fed (the docs page says it)
    deprecation: Deprecation | None = None
    seeds: tuple[str, ...] = field(default_factory=tuple)

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.outputs)

    @property
    def attr_defaults(self) -> dict[str, Any]:
        """The attrs that have a default, with it (required attrs have none)."""
        return {a.name: a.default for a in self.attrs if not a.required}

    @property
    def required_attrs(self) -> tuple[AttrSpec, ...]:
        return tuple(a for a in self.attrs if a.required)

    @property
    def optional_attrs(self) -> tuple[AttrSpec, ...]:
        return tuple(a for a in self.attrs if not a.required)

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
