"""TensorFlow Java mirror: ``org.tensorflow`` as Python.

from bindings_mirror.java import *
with Graph() as g:
    tf = Ops.create(g)
    x = tf.placeholder(TFloat32, Placeholder.shape(Shape.of(4, 3, 3, 2)))
    bn = tf.nn.fusedBatchNorm(x, ..., FusedBatchNorm.epsilon(1e-3))
    with Session(g) as s, s.runner().feed(x, TFloat32.tensorOf(data)).fetch(bn.y()).run() as result:
        y = np.asarray(result.get(0))
"""

from .core_ops import Constant, Placeholder
from .exceptions import *  # noqa: F403
from .exceptions import __all__ as _exceptions_all
from .framework import *  # noqa: F403
from .framework import __all__ as _framework_all
from .graph import EagerSession, ExecutionEnvironment, Graph
from .ops import Ops
from .ops_gen import *  # noqa: F403
from .ops_gen import __all__ as _ops_all
from .session import Result, Session
from .types import *  # noqa: F403
from .types import __all__ as _types_all

__all__ = [*_exceptions_all, *_types_all, *_framework_all, "ExecutionEnvironment", "Graph", "EagerSession"]
__all__ += ["Constant", "Placeholder", "Session", "Result", *_ops_all, "Ops"]
