"""The TensorFlow C++ runtime pieces the generated op classes use.

``Scope`` (``NewRootScope``, ``NewSubScope``, ``WithOpName``, ...), ``Status``,
``Input``/``Output``/``Operation``, ``NodeBuilder``, ``ClientSession`` and the
helper ops ``Placeholder`` and ``Const``.

C++'s error model: nothing raises.  A bad construction records its error on the
scope's shared status (``scope.ok()`` turns false, ``scope.status()`` tells why)
and every later op built on that scope does nothing; ``ClientSession.Run`` returns
a ``Status``.  ``Scope.ExitOnError()`` gives the LOG(FATAL) behaviour instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fbnops.framework import errors as _errors
from fbnops.framework.graph import Graph as _CoreGraph
from fbnops.framework.graph import Output as _CoreOutput
from fbnops.framework.scope import Scope as _CoreScope
from fbnops.framework.session import Session as _CoreSession

__all__ = [
    "Status",
    "Scope",
    "Input",
    "Output",
    "Operation",
    "NodeBuilder",
    "ClientSession",
    "GraphDef",
    "Placeholder",
    "Const",
    "DT_FLOAT",
    "DT_HALF",
    "DT_BFLOAT16",
    "DT_INT32",
    "PartialTensorShape",
    "FatalError",
]

DT_FLOAT = np.dtype(np.float32)
DT_HALF = np.dtype(np.float16)
DT_BFLOAT16 = np.dtype("bfloat16")
DT_INT32 = np.dtype(np.int32)


class FatalError(SystemExit):
    """What LOG(FATAL) does to the process, for scopes made with ExitOnError()."""


class Status:
    """tensorflow::Status (absl::Status): ``ok()``, ``code()``, ``message()``, ``ToString()``."""

    def __init__(self, code: str = "OK", message: str = ""):
        self._code = code
        self._message = message

    @staticmethod
    def OK() -> Status:
        return Status()

    @staticmethod
    def from_error(e: _errors.OpError) -> Status:
        return Status(e.code, str(e))

    def ok(self) -> bool:
        return self._code == "OK"

    def code(self) -> str:
        return self._code

    def message(self) -> str:
        return self._message

    error_message = message

    def ToString(self) -> str:
        return "OK" if self.ok() else f"{self._code}: {self._message}"

    def __repr__(self) -> str:
        return f"<Status {self.ToString()}>"


class Operation:
    """tensorflow::Operation (a default-constructed one has no node)."""

    def __init__(self, node=None):
        self._node = node

    def node(self):
        return self._node

    def name(self) -> str:
        return self._node.name if self._node else ""

    def num_outputs(self) -> int:
        return self._node.num_outputs if self._node else 0

    def output_type(self, i: int) -> np.dtype:
        return self._node.outputs[i].dtype


class Output:
    """tensorflow::Output: ``Output(node, index)``; default-constructed = no node."""

    def __init__(self, op: Operation | None = None, index: int = 0):
        self._op = op if op is not None else Operation()
        self._index = index

    @property
    def _core(self) -> _CoreOutput | None:
        return self._op._node.outputs[self._index] if self._op._node is not None else None

    def op(self) -> Operation:
        return self._op

    def index(self) -> int:
        return self._index

    def name(self) -> str:
        return self._core.name if self._core is not None else ""

    def type(self) -> np.dtype:
        return self._core.dtype

    def node(self):
        return self._op._node

    def __eq__(self, other) -> bool:
        return isinstance(other, Output) and other._core == self._core and self._core is not None

    def __hash__(self) -> int:
        return hash(self._core)

    def __repr__(self) -> str:
        return f"<Output {self.name() or '(empty)'}>"


class Input:
    """tensorflow::Input: an Output, or an initializer (an ndarray) that becomes a Const."""

    def __init__(self, value):
        self.value = value


def AsNodeOut(scope: Scope, inp, name: str = "input") -> _CoreOutput | None:
    """The node output an Input refers to; records an error on the scope if there is none.

    (``name`` is the argument's name, for the message; TF's AsNodeOut has only the Input.)
    """
    if isinstance(inp, Input):
        inp = inp.value
    if isinstance(getattr(inp, "output", None), Output):  # single-output ops convert to Output
        inp = inp.output
    if isinstance(inp, Output):
        if inp._core is None:
            scope.UpdateStatus(Status("INVALID_ARGUMENT", f"Input '{name}' is an empty Output (its op was not built)"))
            return None
        return inp._core
    if isinstance(inp, (np.ndarray, np.generic)):
        was_ok = scope.ok()
        c = Const(scope.NewSubScope("Const"), inp)  # as TF: initializers become Const/Const, Const_1/Const...
        if was_ok and not scope.ok():  # say which input the failed initializer was for
            st = scope.status()
            scope._shared.status = Status(st.code(), f"{st.message()} (input '{name}')")
        return c._core if scope.ok() else None
    scope.UpdateStatus(
        Status(
            "INVALID_ARGUMENT", f"Input '{name}' must be an Output or an ndarray initializer, got {type(inp).__name__}"
        )
    )
    return None


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
            node = graph.add_operation(
                self._name, self._op, self._inputs, self._attrs, self._control, self._device, self._kernel_label
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
        return self._with(self._core.with_op_name("".join(str(f) for f in fragments)))

    def WithControlDependencies(self, control_deps) -> Scope:
        if isinstance(control_deps, Output):
            control_deps = [control_deps.op()]
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


class ClientSession:
    """tensorflow::ClientSession: ``Run([feeds,] fetch_outputs, [run_outputs,] outputs) -> Status``."""

    def __init__(self, scope: Scope):
        self._scope = scope
        self._session = _CoreSession(scope.graph())

    def Run(self, *args) -> Status:
        if len(args) == 2:
            inputs, fetch_outputs, run_outputs, outputs = {}, args[0], [], args[1]
        elif len(args) == 3:
            inputs, fetch_outputs, run_outputs, outputs = args[0], args[1], [], args[2]
        elif len(args) == 4:
            inputs, fetch_outputs, run_outputs, outputs = args
        else:
            return Status(
                "INVALID_ARGUMENT",
                "Run takes (fetch_outputs, outputs), (inputs, fetch_outputs, "
                "outputs) or (inputs, fetch_outputs, run_outputs, outputs)",
            )
        if not isinstance(outputs, list):
            return Status("INVALID_ARGUMENT", "outputs must be a list to fill (std::vector<Tensor>*)")
        if not self._scope.ok():
            return self._scope.status()
        try:
            feeds = {}
            for k, v in inputs.items():
                if not isinstance(k, Output) or k._core is None:
                    return Status("INVALID_ARGUMENT", f"feed key {k!r} is not an Output")
                feeds[k._core] = v
            fetches = []
            for f in fetch_outputs:
                if not isinstance(f, Output) or f._core is None:
                    return Status("INVALID_ARGUMENT", f"fetch {f!r} is not an Output of a built op")
                fetches.append(f._core)
            values = self._session.run(fetches, feeds, [o._node for o in run_outputs if o._node])
        except _errors.OpError as e:
            return Status.from_error(e)
        outputs.clear()
        outputs.extend(values)
        return Status.OK()


class PartialTensorShape:
    def __init__(self, dims=None):
        self.dims = None if dims is None else tuple(None if d < 0 else d for d in dims)


def _finish_single_output(op, scope: Scope, builder: NodeBuilder) -> None:
    """The tail of a generated single-output constructor: finalize, then set operation/output."""
    ret: list = []
    scope.UpdateBuilder(builder)
    scope.UpdateStatus(builder.Finalize(scope.graph(), ret))
    if scope.ok():
        op.operation = Operation(ret[0])
        op.output = Output(op.operation, 0)


class Placeholder:
    """tensorflow::ops::Placeholder(scope, dtype[, Placeholder::Shape(...)])."""

    class Attrs:
        def __init__(self):
            self.shape_ = PartialTensorShape()

        def Shape(self, x: PartialTensorShape) -> Placeholder.Attrs:
            ret = Placeholder.Attrs()
            ret.shape_ = x
            return ret

    @staticmethod
    def Shape(x: PartialTensorShape) -> Placeholder.Attrs:
        return Placeholder.Attrs().Shape(x)

    def __init__(self, scope: Scope, dtype, attrs: Placeholder.Attrs | None = None):
        attrs = attrs or Placeholder.Attrs()
        self.operation = Operation()
        self.output = Output()
        if not scope.ok():
            return
        builder = (
            NodeBuilder(scope.GetUniqueNameForOp("Placeholder"), "Placeholder")
            .Attr("dtype", np.dtype(dtype))
            .Attr("shape", attrs.shape_.dims)
        )
        _finish_single_output(self, scope, builder)


class Const:
    """tensorflow::ops::Const(scope, value)."""

    def __init__(self, scope: Scope, value):
        self.operation = Operation()
        self.output = Output()
        if not scope.ok():
            return
        value = np.asarray(value)
        builder = (
            NodeBuilder(scope.GetUniqueNameForOp("Const"), "Const").Attr("value", value).Attr("dtype", value.dtype)
        )
        _finish_single_output(self, scope, builder)

    @property
    def _core(self):
        return self.output._core
