"""``tensorflow::ops::Placeholder`` and ``Const``: single-output ops, which convert to ``Output``
(and so to ``Input``, a feed key or a fetch) as C++'s ``operator Output()`` does."""

from __future__ import annotations

from fbnops.framework.graph import Output as _CoreOutput

from .framework import Input, NodeBuilder, Operation, Output, Scope, as_output, dtype_attr, shape_attr
from .status import Status, StatusCode
from .tensor import Initializer, PartialTensorShape

__all__ = ["Placeholder", "Const", "AsNodeOut"]


def _bad(message: str) -> Status:
    return Status(StatusCode.kInvalidArgument, message)


class _SingleOutputOp:
    SINGLE_OUTPUT = True

    def __init__(self):
        self.operation = Operation()
        self.output = Output()

    def _finish(self, scope: Scope, builder: NodeBuilder) -> None:
        ret: list = []
        scope.UpdateBuilder(builder)
        scope.UpdateStatus(builder.Finalize(scope.graph(), ret))
        if scope.ok():
            self.operation = Operation(ret[0])
            self.output = Output(self.operation, 0)

    def node(self):
        return self.operation.node()

    def __eq__(self, other) -> bool:  # compares as its Output (a feed key)
        return self.output == (other.output if isinstance(other, _SingleOutputOp) else other)

    def __hash__(self) -> int:
        return hash(self.output)


class Placeholder(_SingleOutputOp):
    """tensorflow::ops::Placeholder(scope, dtype[, Placeholder::Shape({2, 2})])."""

    class Attrs:
        def __init__(self):
            self.shape_ = PartialTensorShape()

        def Shape(self, x) -> Placeholder.Attrs:
            ret = Placeholder.Attrs()
            ret.shape_ = x
            return ret

    @staticmethod
    def Shape(x) -> Placeholder.Attrs:
        return Placeholder.Attrs().Shape(x)

    def __init__(self, scope: Scope, dtype, attrs: Placeholder.Attrs | None = None):
        super().__init__()
        if not scope.ok():
            return
        if attrs is not None and not isinstance(attrs, Placeholder.Attrs):
            scope.UpdateStatus(Status(3, f"attrs: a {type(attrs).__qualname__} is not a Placeholder::Attrs"))
            return
        shape = shape_attr((attrs or Placeholder.Attrs()).shape_)
        np_dtype = dtype_attr(dtype)
        for checked in (shape, np_dtype):
            if isinstance(checked, Status):  # checked before a name is taken (C++ would not compile)
                scope.UpdateStatus(checked)
                return
        builder = NodeBuilder(scope.GetUniqueNameForOp("Placeholder"), "Placeholder")
        self._finish(scope, builder.Attr("dtype", np_dtype).Attr("shape", shape))


class Const(_SingleOutputOp):
    """tensorflow::ops::Const(scope, Input::Initializer): a scalar, (nested) list, ndarray or Tensor."""

    def __init__(self, scope: Scope, value):
        super().__init__()
        if not scope.ok():
            return
        init = value if isinstance(value, Initializer) else Initializer(value)
        if not init.status.ok():
            scope.UpdateStatus(init.status)
            return
        tensor = init.tensor
        builder = NodeBuilder(scope.GetUniqueNameForOp("Const"), "Const").Attr("value", tensor)
        self._finish(scope, builder.Attr("dtype", tensor.dtype))


# TensorFlow keeps AsNodeOut beside Const (tensorflow/cc/ops/const_op.h): an initializer input
# becomes a Const node, so the conversion needs the op.
def AsNodeOut(scope: Scope, inp, name: str = "input") -> _CoreOutput | None:  # noqa: N802
    """The node output an Input refers to; a constant initializer becomes ``Const/Const``.

    Anything else records INVALID_ARGUMENT on the scope (C++ would not compile it).
    """
    if isinstance(inp, Input):
        inp = inp.value
    out = as_output(inp)
    if out is not None:
        if out._core is None:
            scope.UpdateStatus(_bad(f"Input '{name}' is an empty Output (its op was not built)"))
            return None
        return out._core
    if hasattr(inp, "operation") and isinstance(inp.operation, Operation):
        scope.UpdateStatus(
            _bad(f"Input '{name}': a {type(inp).__name__} has several outputs and does not convert to Input; pass one")
        )
        return None
    init = inp if isinstance(inp, Initializer) else Initializer(inp)
    if not init.status.ok():
        nested = isinstance(inp, (list, tuple, Initializer))  # TF's own initializer-list messages
        scope.UpdateStatus(init.status if nested else _bad(f"Input '{name}': {init.status.message()}"))
        return None
    c = Const(scope.NewSubScope("Const"), init)
    return c.output._core if scope.ok() else None
