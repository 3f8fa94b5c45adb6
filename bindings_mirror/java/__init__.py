"""TensorFlow Java mirror: ``org.tensorflow`` as Python.

from bindings_mirror.java import *
with Graph() as g:
    tf = Ops.create(g)
    x = tf.placeholder(TFloat32, Placeholder.shape(Shape.of(4, 3, 3, 2)))
    bn = tf.nn.fusedBatchNorm(x, ..., FusedBatchNorm.epsilon(1e-3))
    with Session(g) as s, s.runner().feed(x, TFloat32.tensorOf(data)).fetch(bn.y()).run() as result:
        y = np.asarray(result.get(0))
"""

from . import nn_gen as nn
from . import ops_gen as core
from .core_ops import Constant, Placeholder
from .exceptions import *  # noqa: F403
from .exceptions import __all__ as _exceptions_all
from .framework import *  # noqa: F403
from .framework import __all__ as _framework_all
from .graph import EagerSession, ExecutionEnvironment, Graph
from .ops import Ops
from .session import Result, Session
from .types import *  # noqa: F403
from .types import __all__ as _types_all

# org.tensorflow.op.core (one class per op, named as the op), then org.tensorflow.op.nn, whose
# endpoint names win a shared name as in tf-java HEAD (nn.FusedBatchNorm is the V3 op)
_generated = {name: getattr(core, name) for name in core.__all__}
_generated.update({name: getattr(nn, name) for name in nn.__all__})
globals().update(_generated)

__all__ = [*_exceptions_all, *_types_all, *_framework_all, "ExecutionEnvironment", "Graph", "EagerSession"]
__all__ += ["Constant", "Placeholder", "Session", "Result", "Ops", "core", "nn", *_generated]
