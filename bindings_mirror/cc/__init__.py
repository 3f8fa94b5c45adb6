"""TensorFlow C++ mirror: ``tensorflow::Scope``, ``tensorflow::ops``, ``ClientSession``.

from bindings_mirror.cc import Scope, ClientSession, ops
root = Scope.NewRootScope()
x = ops.Placeholder(root, DT_FLOAT, ops.Placeholder.Shape([2, 2, 2, 3]))
grad = ops.FusedBatchNormGradV3(root, dy, x, [1.0, 1.0, 1.0], rs1, rs2, rs3,
                                ops.FusedBatchNormGradV3.Epsilon(1e-3))
outputs = []
status = ClientSession(root).Run({x: x_value}, [grad.x_backprop], outputs)
"""

from . import ops
from .framework import *  # noqa: F403
from .framework import __all__ as _framework_all
from .gradients import AddSymbolicGradients, NoGradient
from .ops_support import AsNodeOut
from .session import ClientSession, RunMetadata, RunOptions, SessionOptions
from .status import Status, StatusCode, error, errors
from .tensor import *  # noqa: F403
from .tensor import __all__ as _tensor_all

__all__ = [*_framework_all, *_tensor_all, "Status", "StatusCode", "error", "errors"]
__all__ += ["AsNodeOut", "AddSymbolicGradients", "NoGradient"]
__all__ += ["ClientSession", "RunOptions", "RunMetadata", "SessionOptions", "ops"]
