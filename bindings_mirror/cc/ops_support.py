"""``tensorflow::ops::Placeholder`` and ``Const``: single-output ops, which convert to ``Output``
(and so to ``Input``, a feed key or a fetch) as C++'s ``operator Output()`` does."""

from __future__ import annotations

from .framework import NodeBuilder, Operation, Output, Scope, dtype_attr, shape_attr
from .status import Status
from .tensor import Initializer, PartialTensorShape

__all__ = ["Placeholder", "Const"]


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
