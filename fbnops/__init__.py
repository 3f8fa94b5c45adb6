"""fbnops: the batch-normalization gradient operator, seen through five real APIs.

Quick start::

    import numpy as np, fbnops
    x = np.random.rand(8, 4, 4, 3).astype(np.float32)
    fwd = fbnops.raw_ops.FusedBatchNormV3(x=x, scale=np.ones(3, np.float32),
              offset=np.zeros(3, np.float32), mean=np.zeros(0, np.float32),
              variance=np.zeros(0, np.float32))
    grad = fbnops.raw_ops.FusedBatchNormGradV3(y_backprop=np.ones_like(x), x=x,
              scale=np.ones(3, np.float32), reserve_space_1=fwd.reserve_space_1,
              reserve_space_2=fwd.reserve_space_2, reserve_space_3=fwd.reserve_space_3)
"""

import importlib as _importlib

from . import errors, raw_ops
from ._version import __version__
from .framework.gradients import gradients
from .framework.graph import Graph, Operation, Output
from .framework.registry import available_backends, backend, get_backend, register_gradient, set_backend
from .framework.scope import EagerContext, Scope
from .framework.session import Session
from .framework.threads import get_num_threads, set_num_threads
from .specs import MODULE_NAMES as _spec_modules

# Register the ops: the support ops (Placeholder, Const, AddN, ...), then one module under fbnops.ops per
# spec module, of the same name (the API reference documents them there: at the top level a user expects
# functions, and the functions are fbnops.raw_ops.*).
for _op_module in ("array_ops", *_spec_modules):
    _importlib.import_module(f"{__name__}.ops.{_op_module}")
del _op_module


def __getattr__(name: str):
    """``fbnops.export``: imported on first use (it pulls in the export targets' templates)."""
    if name == "export":
        from .tools.export import export

        return export
    raise AttributeError(f"module 'fbnops' has no attribute {name!r}")


__all__ = [
    "raw_ops",
    "errors",
    "Graph",
    "Operation",
    "Output",
    "Scope",
    "EagerContext",
    "Session",
    "gradients",
    "register_gradient",
    "available_backends",
    "backend",
    "get_backend",
    "set_backend",
    "get_num_threads",
    "set_num_threads",
    "export",
    "__version__",
]
