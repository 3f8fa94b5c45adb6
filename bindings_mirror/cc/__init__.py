"""TensorFlow C++ mirror (seed 001): ``ops.FusedBatchNormGradV3(scope, ...)``.

from bindings_mirror.cc import Scope, ClientSession, ops
root = Scope.NewRootScope()
grad = ops.FusedBatchNormGradV3(root, dy, x, scale, rs1, rs2, rs3,
                                ops.FusedBatchNormGradV3.Epsilon(1e-3))
outputs = []
status = ClientSession(root).Run([grad.x_backprop], outputs)
"""

from . import ops
from .framework import *  # noqa: F403
from .framework import __all__ as _framework_all

__all__ = [*_framework_all, "ops"]
