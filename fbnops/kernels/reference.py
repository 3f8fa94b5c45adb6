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

from ..framework.registry import register_kernel

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


def _quiet(kernel):
    """NaN and Inf inputs propagate silently, as in the compiled kernels (no NumPy warnings)."""

    def run(*args, **kwargs):
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            return kernel(*args, **kwargs)

    return run


register_kernel("FusedBatchNormGradV3", "reference")(_quiet(batch_norm_grad))
register_kernel("FusedBatchNormV3", "reference")(_quiet(batch_norm))
