"""TensorFlow Java mirror (seed 000): ``FusedBatchNormGradV3.create(scope, ...)`` and friends.

from bindings_mirror.java import *
g = Graph()
scope = g.baseScope()
grad = FusedBatchNormGradV3.create(scope, dy, x, scale, rs1, rs2, rs3,
                                   FusedBatchNormGradV3.epsilon(1e-3),
                                   FusedBatchNormGradV3.isTraining(True))
with Session(g) as s:
    dx, = s.runner().feed(...).fetch(grad.xBackprop()).run()
"""

from .framework import *  # noqa: F403
from .framework import __all__ as _framework_all
from .ops import Ops
from .ops_gen import *  # noqa: F403

# tensorflow/java names the classes by their endpoint (nn.FusedBatchNormGrad, nn.FusedBatchNorm)
from .ops_gen import FusedBatchNormGradV3 as FusedBatchNormGrad  # noqa: E402
from .ops_gen import FusedBatchNormV3 as FusedBatchNorm  # noqa: E402
from .ops_gen import __all__ as _ops_all

__all__ = [*_framework_all, *_ops_all, "Ops", "FusedBatchNormGrad", "FusedBatchNorm"]
