"""FusedBatchNormGradV3: its eager body, graph binding and gradient, side by side.

The registration block at the bottom is the whole op for the framework: the
spec, the body run by :func:`~fbnops.ops.execute.execute`, the shape rule of
graph mode, and its gradient - the second-order gradient of batch norm
(:mod:`fbnops.ops.fused_batch_norm_grad_grad`, TensorFlow's
``_FusedBatchNormGradGradV3``).  :func:`register_backward` does the same for
``FusedBatchNormGrad``/``FusedBatchNormGradV2``: the same body on V3's kernels.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..framework.registry import register_gradient, register_op_def
from ..specs import OpSpec, get_spec
from .canonical import NdView
from .fused_batch_norm_grad_grad import second_order_gradient
from .op_def import SpecOpDef
from .shape_inference import spec_shape

__all__ = ["SPEC", "OP_DEF", "register_backward"]

SPEC = get_spec("FusedBatchNormGradV3")


def _backward(kernel: Callable, a: dict[str, np.ndarray], attrs: dict[str, Any]):
    """What TensorFlow's ``FusedBatchNormGradOp::Compute`` does around the math kernel."""
    x, dy = a["x"], a["y_backprop"]
    view = NdView.for_data_format(x.shape, attrs["data_format"])
    placeholder = np.zeros((0,), np.float32)
    if x.size == 0:  # TF: gradients w.r.t. scale/offset are zero for empty input
        zeros = np.zeros(view.channels, np.float32)
        return np.empty(x.shape, x.dtype), zeros, zeros.copy(), placeholder, placeholder.copy()
    dx, dscale, doffset = kernel(
        x.reshape(view.view),
        dy.reshape(view.view),
        a["scale"],
        a["reserve_space_1"],
        a["reserve_space_2"],
        epsilon=attrs["epsilon"],
        is_training=attrs["is_training"],
    )
    return dx.reshape(x.shape), dscale, doffset, placeholder, placeholder.copy()


def register_backward(spec: OpSpec) -> SpecOpDef:
    """Register a batch-norm grad op (V1/V2/V3): V3's body and kernels, the second-order gradient."""
    op_def = register_op_def(SpecOpDef(spec, body=_backward, shape=spec_shape, kernel=SPEC.name))
    register_gradient(spec.name)(second_order_gradient)
    return op_def


# The op: spec, eager body, shape rule, gradient.
OP_DEF = register_backward(SPEC)
