"""The TensorFlow Java graph pieces the generated op classes use.

``Op``/``Operand``/``Output``, ``Operation``, ``RawOp``, ``OperationBuilder`` and ``Scope``
(environments are in ``graph.py``; ``Constant`` and ``Placeholder`` in ``core_ops.py``).
As in tensorflow/java, a multi-output op is only an ``Op`` (``RawOp implements Op``): it
is not an ``Operand`` and cannot be an input.  Java's error model: every failure is an
exception (``exceptions.py``).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from fbnops.framework import errors as _errors
from fbnops.framework.graph import Output as _CoreOutput
from fbnops.framework.scope import Scope as _CoreScope

from ..cc.nodedef import add_node
from .exceptions import (
    IllegalArgumentException,
    IllegalStateException,
    IndexOutOfBoundsException,
    NullPointerException,
    java_exception,
)
from .types import DataType, Shape, Tensor, tensor_class

__all__ = [
    "Op",
    "Operand",
    "Output",
    "Operation",
    "RawOp",
    "OperationBuilder",
    "Scope",
    "OPTIONS_TOKEN",
    "as_input",
    "check_options",
    "check_private",
    "option_value",
    "required_value",
]


class Op:
    """org.tensorflow.op.Op: anything that wraps an operation."""

    def op(self) -> Operation:
        raise NotImplementedError

    def env(self):
        return self.op().env()


class Operand(Op):
    """org.tensorflow.Operand: an Op usable as an input (``asOutput()``)."""

    def asOutput(self) -> Output:
        raise NotImplementedError

    def op(self) -> Operation:
        return self.asOutput().op()

    def type(self) -> type[Tensor]:
        return self.asOutput().type()

    def shape(self) -> Shape:
        return self.asOutput().shape()

    def asTensor(self) -> Tensor:
        return self.asOutput().asTensor()


class Output(Operand):
    """org.tensorflow.Output: output ``index`` of an operation."""

    def __init__(self, operation: Operation, index: int):
        self._operation = operation
        self._index = index

    @property
    def _core(self) -> _CoreOutput:
        op = self._operation._core
        if not 0 <= self._index < op.num_outputs:  # Graph.output("op:9") is not range-checked...
            raise IndexOutOfBoundsException(  # ...but GraphOperation.dtype(i)/shape(i) are
                f"invalid output index ({self._index}) for an operation that has {op.num_outputs} outputs"
            )
        return op.outputs[self._index]

    def asOutput(self) -> Output:
        return self

    def op(self) -> Operation:
        return self._operation

    def index(self) -> int:
        return self._index

    def name(self) -> str:
        return f"{self._operation.name()}:{self._index}"

    def shape(self) -> Shape:
        return Shape(self._core.shape)

    def dataType(self) -> DataType:
        return tensor_class(self._core.dtype).DATA_TYPE

    def type(self) -> type[Tensor]:
        return tensor_class(self._core.dtype)

    def expect(self, type_: type[Tensor]) -> Output:
        if type_ is not self.type():
            raise IllegalArgumentException(
                f"Cannot cast from output of {self.type().__name__} to output of {type_.__name__}"
            )
        return self

    def asTensor(self) -> Tensor:
        """The value (eager execution only)."""
        env = self._operation.env()
        if not env.isEager():
            raise IllegalStateException("Graph tensors must be fetched by running a session")
        if env._core_env.closed:
            raise IllegalStateException("Eager session has been closed")
        return self.type()(self._core.value())

    def __eq__(self, other) -> bool:
        return isinstance(other, Output) and other._operation == self._operation and other._index == self._index

    def __hash__(self) -> int:
        return hash((self._operation, self._index))

    def __repr__(self) -> str:
        return f"<{self._operation.type()} '{self.name()}' shape={self.shape()} dtype={self.dataType()}>"


class Operation:
    """org.tensorflow.Operation (GraphOperation / EagerOperation)."""

    def __init__(self, env, core):
        self._env = env
        self._core = core

    def env(self):
        return self._env

    def name(self) -> str:
        return self._core.name

    def type(self) -> str:
        return self._core.type

    def numOutputs(self) -> int:
        return self._core.num_outputs

    def output(self, idx: int) -> Output:
        n = self.numOutputs()
        if idx >= n:
            raise IndexOutOfBoundsException(f"Can't get output with index {idx}, this op only has {n} outputs.")
        if idx < 0:
            raise IndexOutOfBoundsException("Can't get output with index < 0.")
        return Output(self, idx)

    def __eq__(self, other) -> bool:
        return isinstance(other, Operation) and other._core is self._core

    def __hash__(self) -> int:
        return id(self._core)

    def __repr__(self) -> str:
        return f"<{self.type()} '{self.name()}'>"


class RawOp(Op):
    """org.tensorflow.op.RawOp (``implements Op``): base of the generated op classes."""

    OP_NAME = ""

    def __init__(self, operation: Operation, op_name: str):
        if operation.type() != op_name:
            raise IllegalArgumentException(
                f'Can\'t create a {type(self).__name__} from an operation with type "{operation.type()}", '
                f'operation must have type "{op_name}".'
            )
        self._operation = operation

    def op(self) -> Operation:
        return self._operation

    def __eq__(self, other) -> bool:
        return isinstance(other, RawOp) and other._operation == self._operation

    def __hash__(self) -> int:
        return hash(self._operation)

    def __repr__(self) -> str:
        return f"<{self._operation.type()} '{self._operation.name()}'>"


def as_input(operand, name: str) -> Output:
    """``operand.asOutput()`` for an ``Operand<T>`` parameter; anything else would not compile."""
    if isinstance(operand, Operand):
        return operand.asOutput()
    if isinstance(operand, Op):
        raise IllegalArgumentException(
            f"{name}: {type(operand).__name__} is an Op with several outputs, not an Operand; pass one of its "
            "outputs (e.g. its first accessor)"
        )
    raise IllegalArgumentException(f"{name} must be an Operand, got {type(operand).__name__}")


OPTIONS_TOKEN = object()  # Options constructors are private in tf-java: only the static setters make them


def check_private(token, what: str) -> None:
    if token is not OPTIONS_TOKEN:
        raise IllegalArgumentException(f"{what}() is private; use the static option setters")


def check_options(opts, cls) -> None:
    """One element of an ``Options...`` parameter: null is a NullPointerException, another class would not compile."""
    if opts is None:
        raise NullPointerException(f"null {cls.__qualname__} in options")
    if not isinstance(opts, cls):
        raise IllegalArgumentException(f"expected {cls.__qualname__}, got {type(opts).__qualname__}")


_BOXED_CHECKS = {
    "Float": lambda v: isinstance(v, (float, int, np.floating, np.integer)) and not isinstance(v, (bool, np.bool_)),
    "Boolean": lambda v: isinstance(v, (bool, np.bool_)),
    "String": lambda v: isinstance(v, str),
}


def option_value(value, java_type: str, name: str):
    """An option setter's argument: null leaves the attr unset; a value of another type would not compile."""
    if value is not None and not _BOXED_CHECKS[java_type](value):
        raise IllegalArgumentException(f"{name}({java_type}) cannot take {type(value).__name__} {value!r}")
    if value is None:
        return None
    try:
        return {"Float": float, "Boolean": bool, "String": str}[java_type](value)
    except OverflowError:  # an int beyond the double range: no Java Float holds it
        raise IllegalArgumentException(f"{name}({java_type}) cannot take {value!r:.40}: out of range") from None


def required_value(value, java_type: str, name: str):
    """A required attr's ``create`` argument: typed as an option's, and null is a NullPointerException
    (tf-java unboxes it for ``OperationBuilder.setAttr(String, float)``)."""
    if value is None:
        raise NullPointerException(f"{name} is null: the attr has no default")
    return option_value(value, java_type, name)


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
        if output.env() is not self._scope.env():
            raise IllegalArgumentException(f"{output.name()} belongs to another execution environment")
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
        env = self._scope.env()
        try:
            op = add_node(
                env._core_env,
                self._name,
                self._type,
                self._inputs,
                self._attrs,
                self._control,
                self._device,
                self._kernel_label,
            )
        except _errors.OpError as e:
            raise java_exception(e) from None
        return Operation(env, op)


_NAME_REGEX = re.compile(r"[A-Za-z0-9.][A-Za-z0-9_.\-]*")  # fullmatch: "x\n" is not a name


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME_REGEX.fullmatch(name):
        raise IllegalArgumentException(f"invalid name: '{name}'")
    return name


class Scope:
    """org.tensorflow.op.Scope: names (``makeOpName``, ``withSubScope``, ``withName``), control
    dependencies, device, and (fbnops) ``withKernelLabel`` for the backend that runs the ops."""

    def __init__(self, env, _core=None, _op_name: str | None = None):
        self._env = env
        self._core = _core if _core is not None else _CoreScope(env._core_env)
        self._op_name = _op_name

    def _with(self, core=None, op_name: str | None = None) -> Scope:
        return Scope(self._env, core if core is not None else self._core, op_name)

    def env(self):
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
            if not isinstance(c, Op):
                raise IllegalArgumentException(f"not an Op: {c!r}")
            ops.append(c.op()._core)
        return self._with(self._core.with_control_dependencies(ops))

    def withKernelLabel(self, label: str) -> Scope:
        """fbnops: the backend ("cython", "numba", "reference") for ops built in this scope."""
        return self._with(self._core.with_kernel_label(label))

    def makeUnique(self, id: str) -> str:
        return self._core.names.unique(id)

    def makeOpName(self, defaultName: str) -> str:
        return self._core.qualify(self.makeUnique(self._op_name or _check_name(defaultName)))

    def opBuilder(self, type: str, name: str) -> OperationBuilder:
        op_name = self.makeOpName(name)  # taken first: Java evaluates env().opBuilder's arguments first
        self._env._check_open()
        return OperationBuilder(self, type, op_name)

    def getDeviceString(self) -> str:
        return self._core.device

    def isInit(self) -> bool:
        return False
