"""The NumPy reference backend: batch norm written the way the math reads.

Every array arrives in the canonical view ``(outer, C, inner)``: the statistics
of channel ``c`` are taken over axes 0 and 2, ``n = outer * inner`` elements.
A per-channel vector ``v`` is broadcast against the view as ``v[None, :, None]``.

Forward (training)::

    mean = sum(x) / n
    var  = sum((x - mean)**2) / n               # biased: what the gradient needs
    y    = (x - mean) * (scale / sqrt(var + eps)) + offset

Backward (training), with ``r = 1 / sqrt(var + eps)`` and ``xc = x - mean``::

    offset_backprop = sum(dy)
    scale_backprop  = sum(dy * xc) * r
    x_backprop      = scale * r * (dy - sum(dy)/n - xc * r**2 * sum(dy * xc)/n)

The last line is the chain rule through ``mean`` and ``var``: both depend on
every ``x`` of the channel, which is where the two correction terms come from.
With frozen statistics (``is_training=False``) they are constants and only
``dy * scale * r`` remains.

``compute`` picks the arithmetic type: float32 matches TensorFlow's CPU kernels
(the backend), float64 is the oracle the tests compare everything with.
"""

from __future__ import annotations

import numpy as np

from ..framework.registry import register_kernel, register_stage
from ._plan import Apply, Op, Reduce

AXES = (0, 2)  # the reduced axes of the canonical view


def per_channel(v: np.ndarray) -> np.ndarray:
    return v[None, :, None]


def batch_norm_grad(x, dy, scale, mean, variance, *, epsilon, is_training, compute=np.float32):
    out_dtype = x.dtype
    x, dy = x.astype(compute), dy.astype(compute)
    scale, mean, variance = (v.astype(compute) for v in (scale, mean, variance))
    n = max(x.shape[0] * x.shape[2], 1)  # (an empty batch never reaches a kernel)

    r = 1 / np.sqrt(variance + compute(epsilon))
    xc = x - per_channel(mean)
    sum_dy = dy.sum(AXES, dtype=np.float64)
    sum_dy_xc = (dy * xc).sum(AXES, dtype=np.float64)

    offset_backprop = sum_dy
    scale_backprop = sum_dy_xc * r
    if is_training:
        dx = per_channel(scale * r) * (
            dy - per_channel((sum_dy / n).astype(compute)) - xc * per_channel((r * r * sum_dy_xc / n).astype(compute))
        )
    else:
        dx = dy * per_channel(scale * r)
    return (
        dx.astype(out_dtype),
        scale_backprop.astype(compute),
        offset_backprop.astype(compute),
    )


def batch_norm(x, scale, offset, mean, variance, *, epsilon, is_training, compute=np.float32):
    """Returns ``(y, mean_used, variance_used)``; in training the batch statistics."""
    out_dtype = x.dtype
    x = x.astype(compute)
    scale, offset = scale.astype(compute), offset.astype(compute)
    if is_training:
        n = max(x.shape[0] * x.shape[2], 1)
        mean = (x.sum(AXES, dtype=np.float64) / n).astype(compute)
        variance = (((x - per_channel(mean)) ** 2).sum(AXES, dtype=np.float64) / n).astype(compute)
    else:
        mean, variance = mean.astype(compute), variance.astype(compute)
    r = 1 / np.sqrt(variance + compute(epsilon))
    y = (x - per_channel(mean)) * per_channel(scale * r) + per_channel(offset)
    return y.astype(out_dtype), mean, variance


# ---------------------------------------------------------------------------------------
# The stages (fbnops.kernels.stages): the same arithmetic as the two functions above,
# cut where a distributed batch has to add its partial sums.  The coefficients are the
# compiled kernels' (one sign convention): x_backprop = A * ((dy + K) + B * xc), with
# K = -sum(dy)/n and B = -r*r*sum(dy*xc)/n (negation is exact: the bits of the lines above).
# ---------------------------------------------------------------------------------------


def reduce_totals(mode, x, dy, center, rows_per_sample, compute=np.float32):
    """[sum(dy), sum(dy * xc)], [sum(x), 0] or [0, sum(xc**2)]: (2, C), or per sample (S, 2, C)."""
    x = x.astype(compute)
    axes, v = AXES, per_channel
    if rows_per_sample:
        outer, C, inner = x.shape
        x = x.reshape(outer // rows_per_sample, rows_per_sample, C, inner)
        axes, v = (1, 3), (lambda u: u[None, None, :, None])
    zero = np.zeros(x.sum(axes, dtype=np.float64).shape)
    if mode == Reduce.RED_SUM:
        return np.stack([x.sum(axes, dtype=np.float64), zero], axis=-2)
    xc = x - v(center.astype(compute))
    if mode == Reduce.RED_SQ:
        return np.stack([zero, (xc**2).sum(axes, dtype=np.float64)], axis=-2)
    dy = dy.astype(compute).reshape(x.shape)
    return np.stack([dy.sum(axes, dtype=np.float64), (dy * xc).sum(axes, dtype=np.float64)], axis=-2)


def finish(op, s0, s1, count, epsilon, scale, offset, variance, center, compute=np.float32):
    """(vec0, vec1, A, B, K) from the totals (vec0, vec1: scale_backprop, offset_backprop of a gradient,
    the batch mean and variance of FWD_TRAIN); apply() then computes what the functions above do."""
    n = count
    zero = np.zeros_like(scale, compute)
    if op == Op.FWD_TRAIN:
        center = (s0 / n).astype(compute)
        variance = (s1 / n).astype(compute)
    r = 1 / np.sqrt(variance.astype(compute) + compute(epsilon))
    if op in (Op.FWD_TRAIN, Op.FWD_INFER):
        return center, variance, zero, scale * r, offset.astype(compute)
    A = scale * r
    B, K = zero, zero
    if op == Op.GRAD_TRAIN:
        B, K = (-r * r * s1 / n).astype(compute), (-s0 / n).astype(compute)
    return (s1 * r).astype(compute), s0.astype(compute), A, B, K


def apply(amode, x, dy, A, B, K, center, compute=np.float32):
    """The element pass, written as batch_norm_grad / batch_norm write it."""
    out_dtype = x.dtype
    x = x.astype(compute)
    if amode == Apply.APPLY_A:
        out = (x - per_channel(center)) * per_channel(B) + per_channel(K)
    elif amode == Apply.APPLY_B:
        out = dy.astype(compute) * per_channel(A)
    else:
        out = per_channel(A) * ((dy.astype(compute) + per_channel(K)) + (x - per_channel(center)) * per_channel(B))
    return out.astype(out_dtype)


def _quiet(kernel):
    """NaN and Inf inputs propagate silently, as in the compiled kernels (no NumPy warnings)."""

    def run(*args, **kwargs):
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            return kernel(*args, **kwargs)

    return run


reduce_totals, finish, apply = (
    register_stage(stage.__name__, "reference")(_quiet(stage)) for stage in (reduce_totals, finish, apply)
)
register_kernel("FusedBatchNormGradV3", "reference")(_quiet(batch_norm_grad))
register_kernel("FusedBatchNormV3", "reference")(_quiet(batch_norm))
