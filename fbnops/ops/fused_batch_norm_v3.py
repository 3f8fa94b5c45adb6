"""FusedBatchNormV3: its eager body, running statistics, graph binding and gradient, side by side.

The registration block at the bottom is the whole op for the framework (JAX's
``def_impl`` / ``def_abstract_eval`` / ``primitive_jvps`` lines): the spec, the
body run by :func:`~fbnops.ops.execute.execute`, the shape rule of graph mode,
and the gradient that ``fbnops.gradients`` uses.  :func:`register_forward` does
the same for the V1/V2 forward ops (``fused_batch_norm.py``, ``fused_batch_norm_v2.py``):
the same body on V3's kernels, without ``reserve_space_3``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from ..framework import registry
from ..framework.graph import Operation, Output
from ..framework.layouts import is_channels_first, to_channels_last
from ..framework.registry import register_gradient, register_op_def
from ..framework.scope import Scope
from ..specs import OpSpec, get_spec
from .canonical import NdView, channel_vector
from .op_def import SpecOpDef
from .shape_inference import spec_shape

__all__ = [
    "SPEC",
    "OP_DEF",
    "running_statistics",
    "register_forward",
    "reserve_space_3",
    "empty_batch_outputs",
    "forward_on_view",
]

SPEC = get_spec("FusedBatchNormV3")


@lru_cache(maxsize=256)
def _bessel(count: int) -> np.ndarray:
    """Bessel's correction ``n / max(n - 1, 1)``, rounded as TensorFlow's float32 does it: a
    read-only 0-d float32 array (an array times a 0-d array costs half what it does times a
    NumPy scalar, and the bits are the same)."""
    adjust = np.array(np.float32(count) / np.float32(max(count - 1, 1)))
    adjust.flags.writeable = False
    return adjust


def running_statistics(
    mean: np.ndarray,
    variance: np.ndarray,
    count: int,
    mean_in: np.ndarray,
    variance_in: np.ndarray,
    exponential_avg_factor: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``batch_mean``/``batch_variance`` outputs of training, from the batch statistics.

    ``mean``/``variance`` are the batch mean and biased variance of ``count`` elements
    per channel; ``mean_in``/``variance_in`` the running statistics given as inputs
    (read only when the factor is not 1).  As TensorFlow, in float32: Bessel's
    correction ``n / max(n - 1, 1)`` for the variance only, then
    ``(1 - f) * running + f * batch``.
    """
    adjust = _bessel(count)
    if exponential_avg_factor == 1.0 or np.float32(exponential_avg_factor) == np.float32(1.0):
        return mean.astype(np.float32), (variance * adjust).astype(np.float32, copy=False)
    else:
        f = np.float32(exponential_avg_factor)
        one_minus_f = np.float32(1.0) - f
        batch_mean = one_minus_f * mean_in + f * mean
        batch_var = one_minus_f * variance_in + (f * adjust) * variance
    return batch_mean.astype(np.float32), batch_var.astype(np.float32)


def reserve_space_3() -> np.ndarray:
    """TensorFlow's ``reserve_space_3`` output on CPU: a float32 scalar placeholder."""
    return np.zeros((), np.float32)


def empty_batch_outputs(y: np.ndarray, channels: int, is_training: bool, mean=None, variance=None) -> tuple:
    """The six outputs for an empty batch (also the synchronized op's, in ``fbnops.distributed``):
    TF's NaN running statistics, even with exponential_avg_factor != 1; in inference
    ``reserve_space_1``/``_2`` are the statistics that would be used (``mean``, ``variance``)."""
    nan = np.full(channels, np.nan, np.float32)
    if is_training:
        used_mean, used_var = nan.copy(), nan.copy()
    else:  # better than TF's uninitialized memory: the statistics that would be used
        used_mean, used_var = mean.copy(), variance.copy()
    return y, nan, nan.copy(), used_mean, used_var, reserve_space_3()


def forward_on_view(view: NdView, x, scale, offset, mean, variance, *, epsilon: float, is_training: bool,
                    backend: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """This op's kernel on any N-D view (the DirectML and oneDNN mirrors' entry):
    ``(y, mean_used, biased_variance_used)``."""
    kernel = registry.get_kernel(SPEC.name, backend)
    y, m, v = kernel(
        view.to_view(x),
        channel_vector(scale),
        channel_vector(offset),
        None if is_training else channel_vector(mean),
        None if is_training else channel_vector(variance),
        epsilon=float(np.float32(epsilon)),
        is_training=is_training,
    )
    return view.from_view(y), m, v


def _forward(kernel: Callable, a: dict[str, np.ndarray], attrs: dict[str, Any]):
    """What TensorFlow's ``FusedBatchNormOp::Compute`` does around the math kernel."""
    x = a["x"]
    view = NdView.for_data_format(x.shape, attrs["data_format"])
    is_training = attrs["is_training"]
    if x.size == 0:
        return empty_batch_outputs(np.empty(x.shape, x.dtype), view.channels, is_training, a["mean"], a["variance"])
    y, mean, var = kernel(
        x.reshape(view.view),
        a["scale"],
        a["offset"],
        a["mean"] if not is_training else None,
        a["variance"] if not is_training else None,
        epsilon=attrs["epsilon"],
        is_training=is_training,
    )
    y = y.reshape(x.shape)
    if not is_training:
        # TF copies mean/variance to the running outputs and ignores the factor; unlike TF
        # (uninitialized memory) reserve_space_1/2 carry the statistics actually used.
        m, v = a["mean"].copy(), a["variance"].copy()
        return y, m, v, m.copy(), v.copy(), reserve_space_3()
    batch_mean, batch_var = running_statistics(
        mean, var, view.count, a["mean"], a["variance"], attrs["exponential_avg_factor"]
    )
    return y, batch_mean, batch_var, mean, var, reserve_space_3()


def _transpose(scope: Scope, x: Output, perm: Sequence[int]) -> Output:
    p = scope.constant(np.array(perm, np.int32), name="perm")
    return scope.add_op("Transpose", [x, p], {}).output(0)


def _gradient(scope: Scope, op: Operation, grads: Sequence[Output | None]) -> list[Output | None]:
    """TensorFlow's ``_BaseFusedBatchNormGrad``: only the gradient of ``y`` is used.

    Training: the forward's reserve spaces.  Inference: its mean and variance inputs,
    with channels-first data transposed to channels-last around the gradient op (what
    TensorFlow does, so the exported graph also runs on TensorFlow's CPU kernels).
    """
    dy = grads[0]
    if dy is None:
        return [None] * len(op.inputs)
    x, scale = op.inputs[0], op.inputs[1]
    attrs = {"epsilon": op.attrs["epsilon"], "is_training": op.attrs["is_training"]}
    fmt = op.attrs["data_format"]
    grad_op = get_spec(op.type).gradient  # V1/V2/V3: FusedBatchNormGrad{,V2,V3}
    # V3 also passes its reserve_space_3 output (V1/V2 have none)
    if op.attrs["is_training"]:
        rs = [op.outputs[3], op.outputs[4], *op.outputs[5:]]
    else:
        rs = [op.inputs[3], op.inputs[4], *op.outputs[5:]]
    if not op.attrs["is_training"] and is_channels_first(fmt):
        last_fmt, to_last, to_first = to_channels_last(fmt)
        g = scope.add_op(
            grad_op,
            [_transpose(scope, dy, to_last), _transpose(scope, x, to_last), scale, *rs],
            {**attrs, "data_format": last_fmt},
        )
        return [_transpose(scope, g.output(0), to_first), g.output(1), g.output(2), None, None]
    g = scope.add_op(grad_op, [dy, x, scale, *rs], {**attrs, "data_format": fmt})
    return [g.output(0), g.output(1), g.output(2), None, None]


def register_forward(spec: OpSpec) -> SpecOpDef:
    """Register a forward batch-norm op (V1/V2/V3): V3's body and kernels, its first ``len(outputs)`` outputs."""
    n_out = len(spec.outputs)
    body = _forward if n_out == len(SPEC.outputs) else lambda kernel, a, attrs: _forward(kernel, a, attrs)[:n_out]
    op_def = register_op_def(SpecOpDef(spec, body=body, shape=spec_shape, kernel=SPEC.name))
    register_gradient(spec.name)(_gradient)
    return op_def


# The op: spec, eager body, shape rule, gradient.
OP_DEF = register_forward(SPEC)
