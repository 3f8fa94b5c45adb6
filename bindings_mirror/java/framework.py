"""The TensorFlow Java runtime pieces the generated op classes use.

``Scope``, ``Graph``, ``EagerSession``, ``Session``/``Runner``, ``Operand``/``Output``,
``OperationBuilder``, ``Constant``/``Placeholder`` and Java's error model: every
failure is an exception (``TFInvalidArgumentException`` for op errors,
``IllegalArgumentException`` for bad names and arguments).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from fbnops.framework import errors as _errors
from fbnops.framework.graph import Graph as _CoreGraph
from fbnops.framework.graph import Output as _CoreOutput
from fbnops.framework.scope import EagerContext
from fbnops.framework.session import Session as _CoreSession

__all__ = [
    "TensorFlowException",
    "TFInvalidArgumentException",
    "TFNotFoundException",
    "IllegalArgumentException",
    "IllegalStateException",
    "Scope",
    "Graph",
    "EagerSession",
    "Session",
    "Operand",
    "Output",
    "Operation",
    "OperationBuilder",
    "RawOp",
    "Constant",
    "Placeholder",
    "DataType",
    "Shape",
]


class TensorFlowException(RuntimeError):
    """org.tensorflow.exceptions.TensorFlowException"""


class TFInvalidArgumentException(TensorFlowException, _errors.InvalidArgumentError):
    """org.tensorflow.exceptions.TFInvalidArgumentException"""

    def __init__(self, message: str, op: str | None = None):
        _errors.InvalidArgumentError.__init__(self, message, op)


class TFNotFoundException(TensorFlowException, _errors.NotFoundError):
    def __init__(self, message: str, op: str | None = None):
        _errors.NotFoundError.__init__(self, message, op)


class IllegalArgumentException(ValueError):
    """java.lang.IllegalArgumentException"""


class IllegalStateException(RuntimeError):
    """java.lang.IllegalStateException"""


def _java_error(e: _errors.OpError) -> TensorFlowException:
    if isinstance(e, _errors.NotFoundError):
        return TFNotFoundException(e.message, e.op)
    return TFInvalidArgumentException(e.message, e.op)


class DataType:
    """The dtypes the ops use, named as TF Java's tensor types."""

    TFloat32 = np.dtype(np.float32)
    TFloat16 = np.dtype(np.float16)
    TBfloat16 = np.dtype("bfloat16")
    TInt32 = np.dtype(np.int32)


class Shape:
    """org.tensorflow.ndarray.Shape: ``Shape.of(2, 3)``, ``Shape.unknown()``; -1 is an unknown size."""

    def __init__(self, dims):
        self.dims = None if dims is None else tuple(None if d is None or d < 0 else int(d) for d in dims)

    @staticmethod
    def of(*dims: int) -> Shape:
        return Shape(dims)

    @staticmethod
    def scalar() -> Shape:
        return Shape(())

    @staticmethod
    def unknown() -> Shape:
        return Shape(None)

    def numDimensions(self) -> int:
        return -1 if self.dims is None else len(self.dims)

    def size(self, i: int) -> int:
        d = self.dims[i]
        return -1 if d is None else d

    def __eq__(self, other) -> bool:
        return isinstance(other, Shape) and other.dims == self.dims

    def __repr__(self) -> str:
        return (
            "<unknown>"
            if self.dims is None
            else "[" + ", ".join("-1" if d is None else str(d) for d in self.dims) + "]"
        )


class Operand:
    """Anything usable as an op input: ``asOutput()``."""

    def asOutput(self) -> Output:
        raise NotImplementedError


class Output(Operand):
    """org.tensorflow.Output: one output of an operation."""

    def __init__(self, core: _CoreOutput):
        self._core = core

    def asOutput(self) -> Output:
        return self

    def op(self) -> Operation:
        return Operation(self._core.op)

    def index(self) -> int:
        return self._core.index

    def shape(self) -> Shape:
        return Shape(self._core.shape)

    def dataType(self) -> np.dtype:
        return self._core.dtype

    def name(self) -> str:
        return self._core.name

    def asTensor(self) -> np.ndarray:
        """The value (eager execution only)."""
        try:
            return self._core.value()
        except _errors.OpError as e:
            raise IllegalStateException(str(e)) from None

    def __eq__(self, other) -> bool:
        return isinstance(other, Output) and other._core == self._core

    def __hash__(self) -> int:
        return hash(self._core)

    def __repr__(self) -> str:
        return (
            f"<{self._core.op.type} '{self._core.op.name}:{self._core.index}' shape={self.shape()} "
            f"dtype={self._core.dtype}>"
        )


class Operation:
    """org.tensorflow.Operation (GraphOperation / EagerOperation)."""

    def __init__(self, core):
        self._core = core

    def name(self) -> str:
        return self._core.name

    def type(self) -> str:
        return self._core.type

    def numOutputs(self) -> int:
        return self._core.num_outputs

    def output(self, idx: int) -> Output:
        return Output(self._core.outputs[idx])

    def __eq__(self, other) -> bool:
        return isinstance(other, Operation) and other._core is self._core

    def __hash__(self) -> int:
        return id(self._core)


class RawOp(Operand):
    """Base of the generated op classes: wraps the built Operation."""

    OP_NAME = ""

    def __init__(self, operation: Operation, op_name: str):
        if operation.type() != op_name:
            raise IllegalArgumentException(f"{operation.type()} is not a {op_name} operation")
        self._operation = operation

    def op(self) -> Operation:
        return self._operation

    def asOutput(self) -> Output:
        return self._operation.output(0)


class OperationBuilder:
    """org.tensorflow.OperationBuilder: inputs and attrs, then ``build()``."""

    def __init__(self, scope: Scope, op_type: str, name: str):
        self._scope = scope
        self._type = op_type
        self._name = name
        self._inputs: list[_CoreOutput] = []
        self._attrs: dict[str, Any] = {}
        self._control: list = list(scope._core.control_dependencies)
        self._device = scope._core.device
        self._kernel_label = scope._core.kernel_label

    def addInput(self, output: Output) -> OperationBuilder:
        if not isinstance(output, Output):
            raise IllegalArgumentException(f"addInput expects an Output, got {type(output).__name__}")
        self._inputs.append(output._core)
        return self

    def setAttr(self, name: str, value: Any) -> OperationBuilder:
        self._attrs[name] = value
        return self

    def setDevice(self, device: str) -> OperationBuilder:
        self._device = device
        return self

    def addControlInput(self, control: Operation) -> OperationBuilder:
        self._control.append(control._core)
        return self

    def build(self) -> Operation:
        try:
            op = self._scope._core.env.add_operation(
                self._name, self._type, self._inputs, self._attrs, self._control, self._device, self._kernel_label
            )
        except _errors.OpError as e:
            raise _java_error(e) from None
        return Operation(op)


_NAME_REGEX = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\-]*$")


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME_REGEX.match(name):
        raise IllegalArgumentException(f"invalid name: '{name}'")
    return name


class Scope:
    """org.tensorflow.op.Scope: names (``makeOpName``, ``withSubScope``, ``withName``), control
    dependencies, device, and (fbnops) ``withKernelLabel`` for the backend that runs the ops."""

    def __init__(self, env: ExecutionEnvironment, _core=None, _op_name: str | None = None):
        from fbnops.framework.scope import Scope as CoreScope

        self._env = env
        self._core = _core if _core is not None else CoreScope(env._core_env)
        self._op_name = _op_name

    def _with(self, core=None, op_name: str | None = None) -> Scope:
        return Scope(self._env, core if core is not None else self._core, op_name)

    def env(self) -> ExecutionEnvironment:
        return self._env

    def withSubScope(self, childScopeName: str) -> Scope:
        return self._with(self._core.sub_scope(_check_name(childScopeName)))

    def withName(self, opName: str) -> Scope:
        return self._with(op_name=_check_name(opName))

    def withNameAsSubScope(self, defaultName: str) -> Scope:
        return self.withSubScope(self._op_name or defaultName)

    def withDevice(self, device) -> Scope:
        return self._with(self._core.with_device(str(device)))

    def withControlDependencies(self, controls) -> Scope:
        ops = []
        for c in controls:
            if isinstance(c, RawOp):
                ops.append(c.op()._core)
            elif isinstance(c, Operation):
                ops.append(c._core)
            else:
                raise IllegalArgumentException(f"not an Op: {c!r}")
        return self._with(self._core.with_control_dependencies(ops))

    def withKernelLabel(self, label: str) -> Scope:
        """fbnops: the backend ("cython", "numba", "reference") for ops built in this scope."""
        return self._with(self._core.with_kernel_label(label))

    def makeUnique(self, id: str) -> str:
        return self._core.names.unique(id)

    def makeOpName(self, defaultName: str) -> str:
        return self._core.qualify(self.makeUnique(self._op_name or _check_name(defaultName)))

    def opBuilder(self, type: str, name: str) -> OperationBuilder:
        return OperationBuilder(self, type, self.makeOpName(name))

    def getDeviceString(self) -> str:
        return self._core.device

    def isInit(self) -> bool:
        return False


class ExecutionEnvironment:
    _core_env: Any

    def baseScope(self) -> Scope:
        return Scope(self)


class Graph(ExecutionEnvironment):
    """org.tensorflow.Graph."""

    def __init__(self):
        self._core_env = _CoreGraph()
        self._base = Scope(self)

    def baseScope(self) -> Scope:
        return self._base

    def operation(self, name: str) -> Operation | None:
        op = self._core_env.operation(name)
        return None if op is None else Operation(op)

    def toGraphDef(self) -> str:
        """The GraphDef, in protobuf text format."""
        return self._core_env.to_pbtxt()

    def importGraphDef(self, graphDef: str) -> None:
        from fbnops.framework.graphdef import graph_from_pbtxt

        try:
            graph_from_pbtxt(graphDef, self._core_env)
        except _errors.OpError as e:
            raise _java_error(e) from None

    def close(self) -> None:
        pass

    def __enter__(self) -> Graph:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class EagerSession(ExecutionEnvironment):
    """org.tensorflow.EagerSession: ops run as they are built; ``output.asTensor()`` reads them."""

    def __init__(self):
        self._core_env = EagerContext()
        self._base = Scope(self)

    @staticmethod
    def create() -> EagerSession:
        return EagerSession()

    def baseScope(self) -> Scope:
        return self._base

    def close(self) -> None:
        self._core_env.closed = True

    def __enter__(self) -> EagerSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Session:
    """org.tensorflow.Session: ``session.runner().feed(...).fetch(...).run()``."""

    def __init__(self, graph: Graph):
        if not isinstance(graph, Graph):
            raise IllegalArgumentException("Session needs a Graph")
        self._graph = graph
        self._core = _CoreSession(graph._core_env)

    def runner(self) -> Session.Runner:
        return Session.Runner(self)

    class Runner:
        def __init__(self, session: Session):
            self._session = session
            self._feeds: dict = {}
            self._fetches: list = []
            self._targets: list = []

        @staticmethod
        def _key(operand):
            if isinstance(operand, str):
                return operand
            if isinstance(operand, Operand):
                return operand.asOutput()._core
            raise IllegalArgumentException(f"cannot feed or fetch {type(operand).__name__}")

        def feed(self, operand, t) -> Session.Runner:
            self._feeds[self._key(operand)] = t
            return self

        def fetch(self, operand, index: int | None = None) -> Session.Runner:
            key = self._key(operand)
            if isinstance(key, str) and index is not None:
                key = f"{key}:{index}"
            self._fetches.append(key)
            return self

        def addTarget(self, operand) -> Session.Runner:
            self._targets.append(operand.op()._core if isinstance(operand, RawOp) else operand._core)
            return self

        def run(self) -> list[np.ndarray]:
            try:
                return self._session._core.run(self._fetches, self._feeds, self._targets)
            except _errors.OpError as e:
                raise _java_error(e) from None

    def close(self) -> None:
        self._core.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Constant(RawOp):
    """org.tensorflow.op.core.Constant: ``Constant.create(scope, ndarray)``."""

    OP_NAME = "Const"

    def __init__(self, operation: Operation):
        super().__init__(operation, self.OP_NAME)

    @staticmethod
    def create(scope: Scope, value) -> Constant:
        if not isinstance(value, (np.ndarray, np.generic)):
            raise IllegalArgumentException(f"Constant.create expects an ndarray, got {type(value).__name__}")
        value = np.asarray(value)
        return Constant(scope.opBuilder("Const", "Const").setAttr("value", value).setAttr("dtype", value.dtype).build())


class Placeholder(RawOp):
    """org.tensorflow.op.core.Placeholder: ``Placeholder.create(scope, dtype, Placeholder.shape(...))``."""

    OP_NAME = "Placeholder"

    def __init__(self, operation: Operation):
        super().__init__(operation, self.OP_NAME)

    class Options:
        def __init__(self):
            self._shape = None

        def shape(self, shape: Shape) -> Placeholder.Options:
            self._shape = shape
            return self

    @staticmethod
    def shape(shape: Shape) -> Placeholder.Options:
        return Placeholder.Options().shape(shape)

    @staticmethod
    def create(scope: Scope, dtype, *options: Placeholder.Options) -> Placeholder:
        b = scope.opBuilder("Placeholder", "Placeholder").setAttr("dtype", np.dtype(dtype))
        for o in options:
            if o._shape is not None:
                b.setAttr("shape", o._shape.dims)
        return Placeholder(b.build())

    def output(self) -> Output:
        return self.asOutput()
