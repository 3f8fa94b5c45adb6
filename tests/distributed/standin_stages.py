"""A NumPy stand-in for ``fbnops.kernels.stages``, used by these tests only while the compiled
stages are not in the tree.  Same API and float32/float64 steps as the kernels' ``channel_done``;
not bit-identical to the compiled reductions (the tests that need that skip with a reason)."""

from __future__ import annotations

import numpy as np

F32, F64 = np.float32, np.float64


def _sums(a: np.ndarray, rows_per_sample):
    if rows_per_sample is None:
        return a.sum((0, 2), dtype=F64)
    outer, c, inner = a.shape
    return a.reshape(outer // rows_per_sample, rows_per_sample, c, inner).sum((1, 3), dtype=F64)


def sum_x(x, *, rows_per_sample=None):
    return _sums(x.astype(F32), rows_per_sample)


def sum_sq(x, mean, *, rows_per_sample=None):
    d = x.astype(F32) - mean.astype(F32)[None, :, None]
    return _sums(d * d, rows_per_sample)


def sum_grad(x, dy, mean, *, rows_per_sample=None):
    g = dy.astype(F32)
    s0 = _sums(g, rows_per_sample)
    s1 = _sums((x.astype(F32) - mean.astype(F32)[None, :, None]) * g, rows_per_sample)
    return np.stack([s0, s1], axis=-2)


def finish_mean(sum_x, count):
    return (sum_x / F64(count)).astype(F32)


def _r(variance, epsilon):
    return 1.0 / np.sqrt((variance.astype(F32) + F32(epsilon)).astype(F64))


def finish_inference(scale, offset, mean, variance, epsilon):
    return ("fwd", (scale * _r(variance, epsilon)).astype(F32), offset.astype(F32), mean.astype(F32))


def finish_forward(sum_x, sum_sq, count, scale, offset, epsilon):
    mean = finish_mean(sum_x, count)
    variance = (sum_sq / F64(count)).astype(F32)
    return mean, variance, finish_inference(scale, offset, mean, variance, epsilon)


def finish_grad(sums, count, scale, mean, variance, epsilon, is_training):
    r = _r(variance, epsilon)
    s0, s1 = sums[0], sums[1]
    a = (scale * r).astype(F32)
    if is_training:
        b, k = (-r * r * s1 / count).astype(F32), (-s0 / count).astype(F32)
    else:
        b, k = np.zeros_like(a), np.zeros_like(a)
    return (s1 * r).astype(F32), s0.astype(F32), ("grad", a, b, k, mean.astype(F32), is_training)


def apply_forward(x, coeffs):
    _, b, k, m = coeffs
    y = b[None, :, None] * (x.astype(F32) - m[None, :, None]) + k[None, :, None]
    return y.astype(x.dtype)


def apply_grad(x, dy, coeffs):
    _, a, b, k, m, training = coeffs
    g = dy.astype(F32)
    if training:
        out = a[None, :, None] * ((g + k[None, :, None]) + b[None, :, None] * (x.astype(F32) - m[None, :, None]))
    else:
        out = a[None, :, None] * g
    return out.astype(x.dtype)
