"""``org.tensorflow.op.core``'s single-output ops: ``Constant`` and ``Placeholder`` (both ``Operand``s)."""

from __future__ import annotations

import numpy as np

from .exceptions import IllegalArgumentException
from .framework import OPTIONS_TOKEN, Operand, Operation, Output, RawOp, Scope, check_options, check_private
from .types import Shape, Tensor, as_tensor

__all__ = ["Constant", "Placeholder"]


class Constant(RawOp, Operand):
    """org.tensorflow.op.core.Constant: ``Constant.create(scope, tensor)`` (an ndarray also works)."""

    OP_NAME = "Const"

    def __init__(self, operation: Operation):
        super().__init__(operation, self.OP_NAME)
        self._output = operation.output(0)

    def asOutput(self) -> Output:
        return self._output

    def op(self) -> Operation:
        return self._operation

    @staticmethod
    def create(scope: Scope, value) -> Constant:
        try:
            value = np.asarray(as_tensor(value))
        except IllegalArgumentException as e:
            raise IllegalArgumentException(f"Constant '{scope.makeOpName('Const')}': {e}") from None
        builder = scope.opBuilder("Const", "Const").setAttr("value", value).setAttr("dtype", value.dtype)
        return Constant(builder.build())


class Placeholder(RawOp, Operand):
    """org.tensorflow.op.core.Placeholder: ``Placeholder.create(scope, TFloat32, Placeholder.shape(...))``."""

    OP_NAME = "Placeholder"

    def __init__(self, operation: Operation):
        super().__init__(operation, self.OP_NAME)
        self._output = operation.output(0)

    def asOutput(self) -> Output:
        return self._output

    def op(self) -> Operation:
        return self._operation

    class Options:
        """Optional attributes for Placeholder (built by ``Placeholder.shape(...)``)."""

        def __init__(self, _token=None):
            check_private(_token, "Placeholder.Options")
            self._shape = None

        def shape(self, shape: Shape) -> Placeholder.Options:
            if not isinstance(shape, Shape):
                raise IllegalArgumentException(f"shape must be a Shape, got {type(shape).__name__}")
            self._shape = shape
            return self

    @staticmethod
    def shape(shape: Shape) -> Placeholder.Options:
        return Placeholder.Options(OPTIONS_TOKEN).shape(shape)

    @staticmethod
    def create(scope: Scope, dtype: type[Tensor], *options: Placeholder.Options) -> Placeholder:
        if not (isinstance(dtype, type) and issubclass(dtype, Tensor) and dtype is not Tensor):
            raise IllegalArgumentException(f"dtype must be a tensor class such as TFloat32, got {dtype!r}")
        builder = scope.opBuilder("Placeholder", "Placeholder").setAttr("dtype", dtype.NUMPY)
        for o in options:
            check_options(o, Placeholder.Options)
            if o._shape is not None:
                builder.setAttr("shape", o._shape.dims)
        return Placeholder(builder.build())

    def output(self) -> Output:
        return self._output
