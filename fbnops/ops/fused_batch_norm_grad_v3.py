"""FusedBatchNormGradV3: its eager body, graph binding and gradient, side by side.

The registration block at the bottom is the whole op for the framework: the
spec, the body run by :func:`~fbnops.ops.execute.execute`, the shape rule of
graph mode, and its gradient - the second-order gradient of batch norm
(:mod:`fbnops.ops.fused_batch_norm_grad_grad`, TensorFlow's
``_FusedBatchNormGradGradV3``).  :func:`register_backward` does the same for
``FusedBatchNormGrad``/``FusedBatchNormGradV2``: the same body on V3's kernels.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..framework import registry
from ..framework.registry import register_gradient, register_op_def
from ..specs import OpSpec, get_spec
from .canonical import NdView, channel_vector
from .fused_batch_norm_grad_grad import second_order_gradient
from .op_def import SpecOpDef
from .shape_inference import spec_shape

__all__ = ["SPEC", "OP_DEF", "register_backward", "grad_outputs", "grad_on_view"]

SPEC = get_spec("FusedBatchNormGradV3")


def grad_outputs(
    x_backprop: np.ndarray, channels: int, scale_backprop: np.ndarray | None = None, offset_backprop=None
) -> tuple[np.ndarray, ...]:
    """TensorFlow's five outputs around the kernel's three (also the synchronized op's, in
    ``fbnops.distributed``): without parameter gradients (an empty batch) zero scale and offset
    gradients; ``reserve_space_4``/``reserve_space_5`` are empty placeholders."""
    if scale_backprop is None:  # TF: gradients w.r.t. scale/offset are zero for empty input
        scale_backprop, offset_backprop = np.zeros(channels, np.float32), np.zeros(channels, np.float32)
    placeholder = np.zeros((0,), np.float32)
    return x_backprop, scale_backprop, offset_backprop, placeholder, placeholder.copy()


def grad_on_view(view: NdView, x, dy, scale, mean, variance, *, epsilon: float, is_training: bool,
                 backend: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """This op's kernel on any N-D view (the DirectML and oneDNN mirrors' entry): ``(dx, dscale, doffset)``."""
    if math.prod(view.shape) == 0:
        return grad_outputs(np.empty(view.shape, x.dtype), view.channels)[:3]
    kernel = registry.get_kernel(SPEC.name, backend)
    dx, ds, do = kernel(
        view.to_view(x),
        view.to_view(dy),
        channel_vector(scale),
        channel_vector(mean),
        channel_vector(variance),
        epsilon=float(np.float32(epsilon)),
        is_training=is_training,
    )
    return view.from_view(dx), ds, do


def _backward(kernel: Callable, a: dict[str, np.ndarray], attrs: dict[str, Any]):
    """What TensorFlow's ``FusedBatchNormGradOp::Compute`` does around the math kernel."""
    x, dy = a["x"], a["y_backprop"]
    view = NdView.for_data_format(x.shape, attrs["data_format"])
    if x.size == 0:
        return grad_outputs(np.empty(x.shape, x.dtype), view.channels)
    dx, dscale, doffset = kernel(
        x.reshape(view.view),
        dy.reshape(view.view),
        a["scale"],
        a["reserve_space_1"],
        a["reserve_space_2"],
        epsilon=attrs["epsilon"],
        is_training=attrs["is_training"],
    )
    return grad_outputs(dx.reshape(x.shape), view.channels, dscale, doffset)


def register_backward(spec: OpSpec) -> SpecOpDef:
    """Register a batch-norm grad op (V1/V2/V3): V3's body and kernels, the second-order gradient."""
    op_def = register_op_def(SpecOpDef(spec, body=_backward, shape=spec_shape, kernel=SPEC.name))
    register_gradient(spec.name)(second_order_gradient)
    return op_def


# The op: spec, eager body, shape rule, gradient.
OP_DEF = register_backward(SPEC)
