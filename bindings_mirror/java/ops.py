"""``Ops``: the TF Java facade (``tf = Ops.create(graph); tf.nn.fusedBatchNormGrad(...)``)."""

from __future__ import annotations

from .core_ops import Constant, Placeholder
from .exceptions import IllegalArgumentException
from .framework import Scope
from .graph import EagerSession, ExecutionEnvironment
from .nn_gen import NnOps
from .ops_gen import CoreOps
from .types import Tensor

_default_eager: list[EagerSession] = []


class Ops(CoreOps):
    """org.tensorflow.op.Ops: scope-carrying facade; ``tf.nn.*`` endpoints and the core op classes
    (``tf.fusedBatchNormGradV3(...)``, the seed-era ``org.tensorflow.op.core`` classes)."""

    def __init__(self, scope: Scope):
        super().__init__(scope)
        self.nn = NnOps(scope)

    @staticmethod
    def create(env: ExecutionEnvironment | None = None) -> Ops:
        """``Ops.create()`` uses the default eager session; ``Ops.create(graph)`` builds a graph."""
        if env is None:
            if not _default_eager:
                _default_eager.append(EagerSession.create())
            env = _default_eager[0]
        return Ops(env.baseScope())

    def scope(self) -> Scope:
        return self._scope

    def withSubScope(self, childScopeName: str) -> Ops:
        return Ops(self._scope.withSubScope(childScopeName))

    def withName(self, opName: str) -> Ops:
        return Ops(self._scope.withName(opName))

    def withDevice(self, device) -> Ops:
        return Ops(self._scope.withDevice(device))

    def withControlDependencies(self, controls) -> Ops:
        return Ops(self._scope.withControlDependencies(controls))

    def withKernelLabel(self, label: str) -> Ops:
        """fbnops: the backend that runs the ops built through the returned facade."""
        return Ops(self._scope.withKernelLabel(label))

    def constant(self, value) -> Constant:
        return Constant.create(self._scope, value)

    def constantOf(self, tensor: Tensor) -> Constant:
        """``tf.constantOf(T tensor)``: a constant holding a copy of ``tensor``'s value."""
        if not isinstance(tensor, Tensor):
            raise IllegalArgumentException(f"constantOf takes a Tensor, got {type(tensor).__name__}")
        return Constant.create(self._scope, tensor)

    def placeholder(self, dtype: type[Tensor], *options) -> Placeholder:
        return Placeholder.create(self._scope, dtype, *options)
