"""The TensorFlow C++ runtime pieces the generated op classes use.

``Scope`` (``NewRootScope``, ``NewSubScope``, ``WithOpName``, ...), ``Input``/``Output``/
``Operation``, ``NodeBuilder``, ``ClientSession`` and the single-output ops
``Placeholder`` and ``Const``.

C++'s error model: nothing raises.  A bad construction records its error on the
scope's shared status (``scope.ok()`` turns false, ``scope.status()`` tells why)
and every later op built on that scope does nothing; ``ClientSession.Run`` returns
a ``Status``.  What C++ would refuse to compile (another op's ``Attrs``, a
multi-output op as an ``Input``) is recorded the same way.  ``Scope.ExitOnError()``
gives the LOG(FATAL) behaviour instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fbnops.framework import errors as _errors
from fbnops.framework.graph import Graph as _CoreGraph
from fbnops.framework.graph import Output as _CoreOutput
from fbnops.framework.scope import Scope as _CoreScope

from .nodedef import add_node
from .status import Status, StatusCode
from .tensor import DataType, Initializer, PartialTensorShape, TensorShape, data_type, numpy_dtype

__all__ = ["Scope", "Input", "Output", "Operation", "NodeBuilder", "GraphDef", "FatalError"]
__all__ += ["attr_value", "check_attrs"]


class FatalError(SystemExit):
    """What LOG(FATAL) does to the process, for scopes made with ExitOnError()."""


def _bad(message: str) -> Status:
    return Status(StatusCode.kInvalidArgument, message)


class Operation:
    """tensorflow::Operation (a default-constructed one has no node)."""

    def __init__(self, node=None):
        self._node = node

    def node(self):
        return self._node

    def name(self) -> str:
        return self._node.name if self._node else ""

    def num_inputs(self) -> int:
        return len(self._node.inputs) if self._node else 0

    def num_outputs(self) -> int:
        return self._node.num_outputs if self._node else 0

    def input(self, i: int) -> Output:
        """The Output feeding input ``i`` (C++ DCHECKs the index; the mirror raises IndexError)."""
        t = self._node.inputs[i]
        return Output(Operation(t.op), t.index)

    def output(self, i: int) -> Output:
        if not 0 <= i < self.num_outputs():
            raise IndexError(f"output index {i} out of range for {self.num_outputs()} outputs")
        return Output(self, i)

    def input_type(self, i: int) -> DataType:
        return data_type(self._node.inputs[i].dtype)

    def output_type(self, i: int) -> DataType:
        return data_type(self._node.outputs[i].dtype)

    def __eq__(self, other) -> bool:
        return isinstance(other, Operation) and other._node is self._node

    def __hash__(self) -> int:
        return id(self._node)


class Output:
    """tensorflow::Output: ``Output(op, index)``; default-constructed = no node."""

    def __init__(self, op: Operation | None = None, index: int = 0):
        self._op = op if op is not None else Operation()
        self._index = index

    @property
    def _core(self) -> _CoreOutput | None:
        """The graph's output, or None for an empty Output or an index the op does not have."""
        node = self._op._node
        return node.outputs[self._index] if node is not None and 0 <= self._index < node.num_outputs else None

    def op(self) -> Operation:
        return self._op

    def index(self) -> int:
        return self._index

    def name(self) -> str:
        return f"{self._op.name()}:{self._index}" if self._op._node is not None else ""

    def type(self) -> DataType:
        return data_type(self._core.dtype)

    def node(self):
        return self._op._node

    def __eq__(self, other) -> bool:
        return isinstance(other, Output) and other._core == self._core and self._core is not None

    def __hash__(self) -> int:
        return hash(self._core)

    def __repr__(self) -> str:
        return f"<Output {self.name() or '(empty)'}>"


def as_output(value) -> Output | None:
    """``value`` as an Output if C++ converts it implicitly (an Output or a single-output op), else None."""
    if isinstance(value, Output):
        return value
    out = getattr(value, "output", None)  # single-output op classes have operator Output()
    return out if isinstance(out, Output) and _single_output(value) else None


def _single_output(op) -> bool:
    return getattr(type(op), "SINGLE_OUTPUT", False)


class Input:
    """tensorflow::Input: an Output (or an op that converts to one), or an Initializer."""

    Initializer = Initializer

    def __init__(self, value):
        self.value = value


def _cxx_scalar(v) -> bool:
    """A value a C++ scalar parameter converts implicitly: a number that fits a C++ integer or double."""
    if isinstance(v, int) and not isinstance(v, bool) and not -(1 << 63) <= v < 1 << 64:
        return False  # 10**400 is no C++ literal: kept, so building the op records INVALID_ARGUMENT
    return isinstance(v, (int, float, bool, np.integer, np.floating, np.bool_))


_COERCE = {
    "float": (_cxx_scalar, float),
    "bool": (_cxx_scalar, bool),
    "string": (lambda v: isinstance(v, str), str),
}


def attr_value(value: Any, kind: str) -> Any:
    """An Attrs setter argument after C++'s implicit conversions (``IsTraining(1)`` is true).

    A value C++ would not convert is kept as is; building the op then records TensorFlow's
    ``AttrValue had value with type ...`` status.
    """
    accepts, convert = _COERCE[kind]
    if not accepts(value):
        return value
    try:
        return convert(value)
    except OverflowError:  # 10**400: kept, so building the op records INVALID_ARGUMENT on the scope
        return value


def check_attrs(scope: Scope, attrs, cls):
    """``attrs`` if it is ``cls`` (an op's own Attrs), else a recorded status and None."""
    if attrs is None:
        return cls()
    if type(attrs) is not cls:
        want = cls.__qualname__.replace(".", "::")
        got = type(attrs).__qualname__.replace(".", "::")
        scope.UpdateStatus(_bad(f"attrs: a {got} is not a {want} (no conversion; C++ would not compile this)"))
        return None
    return attrs


class GraphDef:
    """Holds a GraphDef in protobuf text format (``ToGraphDef(&gdef)`` fills ``gdef.text``)."""

    def __init__(self, text: str = ""):
        self.text = text


class NodeBuilder:
    """tensorflow::NodeBuilder: ``NodeBuilder(name, op).Input(..).Attr(..)``, then ``Finalize``."""

    def __init__(self, name: str, op_name: str):
        self._name = name
        self._op = op_name
        self._inputs: list[_CoreOutput] = []
        self._attrs: dict[str, Any] = {}
        self._control = []
        self._device = ""
        self._kernel_label = None

    def Input(self, out: _CoreOutput) -> NodeBuilder:
        self._inputs.append(out)
        return self

    def Attr(self, name: str, value) -> NodeBuilder:
        self._attrs[name] = value
        return self

    def ControlInputs(self, ops) -> NodeBuilder:
        self._control.extend(ops)
        return self

    def Device(self, device: str) -> NodeBuilder:
        self._device = device
        return self

    def Finalize(self, graph: _CoreGraph, created: list) -> Status:
        try:
            node = add_node(
                graph, self._name, self._op, self._inputs, self._attrs, self._control, self._device, self._kernel_label
            )
        except _errors.OpError as e:
            return Status.from_error(e)
        created.append(node)
        return Status.OK()


class _Shared:
    """State shared by a root scope and every scope derived from it: graph and status."""

    def __init__(self):
        self.graph = _CoreGraph()
        self.status = Status.OK()


class Scope:
    """tensorflow::Scope."""

    def __init__(self, shared: _Shared, core: _CoreScope, exit_on_error: bool = False):
        self._shared = shared
        self._core = core
        self._exit_on_error = exit_on_error

    @staticmethod
    def NewRootScope() -> Scope:
        shared = _Shared()
        return Scope(shared, _CoreScope(shared.graph))

    def _with(self, core: _CoreScope) -> Scope:
        return Scope(self._shared, core, self._exit_on_error)

    def NewSubScope(self, child_scope_name: str) -> Scope:
        return self._with(self._core.sub_scope(child_scope_name))

    def WithOpName(self, *fragments) -> Scope:
        bad = [f for f in fragments if not (isinstance(f, (str, float, np.floating)) or _cxx_scalar(f))]
        if bad:  # StrCat takes text and numbers; None (a null char*) or an object would not compile
            self.UpdateStatus(_bad(f"WithOpName: {bad[0]!r:.40} is not a StrCat fragment (text or a number)"))
            return self
        return self._with(self._core.with_op_name("".join(str(f) for f in fragments)))

    def WithControlDependencies(self, control_deps) -> Scope:
        single = as_output(control_deps)
        if single is not None:
            control_deps = [single.op()]
        return self._with(self._core.with_control_dependencies(o._node for o in control_deps if o._node))

    def WithNoControlDependencies(self) -> Scope:
        return self._with(self._core.with_no_control_dependencies())

    def WithDevice(self, device: str) -> Scope:
        return self._with(self._core.with_device(device))

    def WithKernelLabel(self, kernel_label: str) -> Scope:
        """The fbnops backend ("cython", "numba", "reference") for ops built in this scope."""
        return self._with(self._core.with_kernel_label(kernel_label))

    def ExitOnError(self) -> Scope:
        return Scope(self._shared, self._core, True)

    def GetUniqueNameForOp(self, default_name: str) -> str:
        return self._core.unique_name(default_name)

    def UpdateStatus(self, s: Status) -> None:
        if self._shared.status.ok() and not s.ok():
            self._shared.status = s
        if not s.ok() and self._exit_on_error:
            raise FatalError(s.ToString())

    def UpdateBuilder(self, builder: NodeBuilder) -> None:
        builder.ControlInputs(self._core.control_dependencies)
        if self._core.kernel_label:
            builder._kernel_label = self._core.kernel_label
        if self._core.device:
            builder.Device(self._core.device)

    def ok(self) -> bool:
        return self._shared.status.ok()

    def status(self) -> Status:
        return self._shared.status

    def graph(self) -> _CoreGraph:
        return self._shared.graph

    def control_deps(self) -> list[Operation]:
        return [Operation(o) for o in self._core.control_dependencies]

    def ToGraphDef(self, gdef: GraphDef) -> Status:
        if not self.ok():
            return self.status()
        gdef.text = self._shared.graph.to_pbtxt()
        return Status.OK()

    def DoShapeInference(self, node) -> Status:
        return Status.OK()  # shapes are inferred when a node is built


def shape_attr(shape) -> tuple | None | Status:
    """A ``shape`` attr from a PartialTensorShape, TensorShape or initializer list of dims."""
    if isinstance(shape, PartialTensorShape):
        return shape.dims
    if isinstance(shape, TensorShape):
        return tuple(shape.dim_sizes())
    if isinstance(shape, (list, tuple)) and all(
        isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in shape
    ):
        return PartialTensorShape(shape).dims
    return _bad(f"Placeholder::Shape takes a PartialTensorShape or a list of ints, got {shape!r}")


def dtype_attr(dtype) -> np.dtype | Status:
    if dtype is None or isinstance(dtype, (bool, np.generic)):  # np.dtype(None) is float64; True is no DataType
        return _bad(f"not a DataType: {dtype!r}")
    try:
        return numpy_dtype(dtype)
    except (TypeError, KeyError):
        return _bad(f"not a DataType: {dtype!r}")
