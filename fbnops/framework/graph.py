"""Graphs of operations: ``Graph``, ``Operation``, ``Output``, and tensor names.

An :class:`Operation` is one node: a type, a name, input :class:`Output`s, attrs,
control inputs, a device string and a kernel label (the fbnops backend that runs
it).  Its outputs carry a dtype and a static shape inferred when the op is built
(by the op type's :class:`~fbnops.framework.registry.OpDef`), so a graph-mode
error is reported at construction and names the op.

Tensor names (``"op"``, ``"op:1"``, ``"^op"``) are read by one parser,
:func:`~fbnops.framework.tensor.parse_tensor_name`; each surface states what a bare
``"op"`` means (:meth:`Graph.get_output`: output 0).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from . import dtypes, graphdef
from .errors import InvalidArgumentError, NotFoundError, OpError, conversion_errors_as
from .registry import check_backend, get_op_def
from .tensor import TensorName, parse_tensor_name, shape_str

__all__ = ["Graph", "Operation", "Output", "TensorName", "parse_tensor_name", "build_operation"]

Shape = tuple | None  # None: unknown rank; a dim of None: unknown size


class Output:
    """One output of an operation: ``op:index``, with a dtype and a static shape."""

    __slots__ = ("op", "index")

    def __init__(self, op: Operation, index: int):
        self.op = op
        self.index = index

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype of this output."""
        return self.op._output_dtypes[self.index]

    @property
    def shape(self) -> Shape:
        """The static shape of this output (None entries: unknown dimensions)."""
        return self.op._output_shapes[self.index]

    @property
    def name(self) -> str:
        """The TensorFlow tensor name, ``"op:index"``."""
        return f"{self.op.name}:{self.index}"

    @property
    def graph(self) -> Graph | None:
        """The graph the producing op belongs to (None in an eager context)."""
        return self.op.graph

    def value(self) -> np.ndarray:
        """The computed value of an eagerly executed op."""
        if self.op._values is None:
            raise InvalidArgumentError(f"{self.name} belongs to a graph; run it in a session to get a value")
        return self.op._values[self.index]

    def __eq__(self, other) -> bool:
        return isinstance(other, Output) and other.op is self.op and other.index == self.index

    def __hash__(self) -> int:
        return hash((id(self.op), self.index))

    def __repr__(self) -> str:
        return f"<Output {self.name} {dtypes.tf_name(self.dtype)} {shape_str(self.shape)}>"


class Operation:
    """A node of a graph (or an op executed eagerly, whose outputs then hold values)."""

    def __init__(
        self,
        graph,
        name,
        op_type,
        inputs,
        attrs,
        output_dtypes,
        output_shapes,
        control_inputs=(),
        device="",
        kernel_label=None,
    ):
        self.graph = graph
        self.name = name
        self.type = op_type
        self.inputs: tuple[Output, ...] = tuple(inputs)
        self.attrs: dict[str, Any] = dict(attrs)
        self.control_inputs: tuple[Operation, ...] = tuple(control_inputs)
        self.device = device
        self.kernel_label = kernel_label
        self._output_dtypes = tuple(np.dtype(d) for d in output_dtypes)
        self._output_shapes = tuple(output_shapes)
        self.outputs: tuple[Output, ...] = tuple(Output(self, i) for i in range(len(output_dtypes)))
        self._values: tuple[np.ndarray, ...] | None = None

    @property
    def num_outputs(self) -> int:
        """How many outputs the op has."""
        return len(self.outputs)

    def output(self, i: int) -> Output:
        """The ``i``-th output of the op."""
        return self.outputs[i]

    def get_attr(self, name: str) -> Any:
        """The value of attribute ``name`` (``KeyError`` if the op has none of that name)."""
        return self.attrs[name]

    def __repr__(self) -> str:
        return f"<Operation '{self.name}' type={self.type}>"


# TensorFlow's node-name rule, matched in full (``$`` would let a trailing newline through).
_VALID_NAME = re.compile(r"[A-Za-z0-9.][A-Za-z0-9_.\-/>]*")


def valid_node_name(name: Any) -> bool:
    """True when ``name`` is a string TensorFlow accepts as a node name."""
    return isinstance(name, str) and _VALID_NAME.fullmatch(name) is not None


def _check_input_count(op_def: Any, op_type: str, inputs: Sequence[Any], attrs: dict[str, Any]) -> None:
    """TensorFlow's ValidateNodeDef: as many inputs as the op's signature, named by type (resolved if set)."""
    if op_def.variadic:
        return
    spec = getattr(op_def, "spec", None)
    types = [a.type for a in spec.inputs] if spec is not None else list(getattr(op_def, "input_types", ()))
    if len(inputs) == len(types):
        return
    given = {k: v for k, v in attrs.items() if isinstance(v, np.dtype)}
    shown = ", ".join(dtypes.tf_name(given[t]) if t in given else t for t in types)
    raise InvalidArgumentError(
        f"NodeDef expected inputs '{shown}' do not match {len(inputs)} inputs specified; Op<name={op_type}>", op_type
    )


def build_operation(
    graph,
    name: str,
    op_type: str,
    inputs: Sequence[Output],
    attrs: dict[str, Any],
    control_inputs: Iterable[Operation] = (),
    device: str = "",
    kernel_label: str | None = None,
) -> Operation:
    """Validate and create an Operation (not yet added to any graph)."""
    op_def = get_op_def(op_type)
    for i, t in enumerate(inputs):
        if not isinstance(t, Output):
            raise InvalidArgumentError(
                f"input #{i} of '{name}' ({op_type}) must be an Output, got {type(t).__name__}", op_type
            )
    _check_input_count(op_def, op_type, inputs, attrs)
    try:
        # a value that does not fit its attr (10**400, a ragged list...) is an InvalidArgumentError here,
        # once, for every surface that builds ops (Scope, GraphDef import, the C++ and Java mirrors)
        with conversion_errors_as(InvalidArgumentError):
            full_attrs, dtypes, shapes = op_def.build(inputs, attrs)
    except OpError as e:
        given = ", ".join(shape_str(t.shape) for t in inputs)
        raise type(e)(
            f"{e.message} for '{{{{node {name}}}}} = {op_type}' with input shapes: {given}", op_type
        ) from None
    if kernel_label is not None:
        check_backend(kernel_label)
    return Operation(graph, name, op_type, inputs, full_attrs, dtypes, shapes, control_inputs, device, kernel_label)


class Graph:
    """A dataflow graph: operations by name, in creation order."""

    def __init__(self):
        self._ops: dict[str, Operation] = {}

    def add_operation(
        self,
        name: str,
        op_type: str,
        inputs: Sequence[Output],
        attrs: dict[str, Any],
        control_inputs: Iterable[Operation] = (),
        device: str = "",
        kernel_label: str | None = None,
    ) -> Operation:
        """Add an op named ``name`` (unique, TensorFlow's name rules), checked and shape-inferred now."""
        if not valid_node_name(name):
            raise InvalidArgumentError(f"Node name '{name}' is not valid", op_type)
        if name in self._ops:
            raise InvalidArgumentError(f"Duplicate node name in graph: '{name}'", op_type)
        for t in inputs:
            if isinstance(t, Output) and t.graph is not self:
                raise InvalidArgumentError(f"Input {t.name} of '{name}' is from a different graph", op_type)
        for c in control_inputs:
            if c.graph is not self:
                raise InvalidArgumentError(f"Control input '{c.name}' of '{name}' is from a different graph", op_type)
        op = build_operation(self, name, op_type, inputs, attrs, control_inputs, device, kernel_label)
        self._ops[name] = op
        return op

    def operation(self, name: str) -> Operation | None:
        """The op named ``name``, or None."""
        return self._ops.get(name)

    def get_operation(self, name: str) -> Operation:
        """The op named ``name``; ``NotFoundError`` if there is none."""
        try:
            return self._ops[name]
        except KeyError:
            raise NotFoundError(f"No operation named '{name}' in the graph") from None

    def get_output(self, name: str) -> Output:
        """``"op"`` (output 0) or ``"op:1"`` -> the Output."""
        parsed = parse_tensor_name(name, default_index=0)
        if parsed.control:
            raise InvalidArgumentError(f"'{name}' names a control input, not an output")
        op = self.get_operation(parsed.op)
        if parsed.index >= op.num_outputs:
            raise InvalidArgumentError(
                f"'{name}' names output {parsed.index} of '{op.name}', which has {op.num_outputs}"
            )
        return op.output(parsed.index)

    def operations(self) -> list[Operation]:
        """Every op, in the order they were added."""
        return list(self._ops.values())

    def has_name(self, name: str) -> bool:
        """True if an op of that name exists."""
        return name in self._ops

    def __len__(self) -> int:
        return len(self._ops)

    # GraphDef text format (fbnops.framework.graphdef)
    def to_pbtxt(self, include_kernel_labels: bool = False) -> str:
        """The graph as GraphDef text (``.pbtxt``), which TensorFlow and :meth:`from_pbtxt` read back."""
        return graphdef.graph_to_pbtxt(self, include_kernel_labels)

    @classmethod
    def from_pbtxt(cls, text: str) -> Graph:
        """A new graph from GraphDef text (all or nothing: an error names the line, column and field)."""
        return graphdef.graph_from_pbtxt(text, cls())
