"""Finite-difference gradient checks of the batch-norm gradient (what ``fbnops check`` and
``fbnops demo`` run).

The gradient of ``L = sum(y * w)`` with respect to x, scale and offset is compared with
central differences of the float64 forward oracle (:func:`fbnops.testing.forward_f64`).
"""

from __future__ import annotations

import numpy as np

from .oracles import forward_f64

__all__ = ["gradient_error"]


def gradient_error(x, w, scale, offset, mean, variance, epsilon: float, data_format: str, is_training: bool,
                   grads, points: int, rng: np.random.Generator, h: float = 1e-4) -> float:  # fmt: skip
    """Max relative error of ``grads = (x_backprop, scale_backprop, offset_backprop)`` against
    central differences at ``points`` random entries of x and at every channel of scale and offset
    (relative to ``max(|numerical|, 1e-2)``)."""
    x64, w64 = np.asarray(x, np.float64), np.asarray(w, np.float64)
    s64, o64 = np.asarray(scale, np.float64), np.asarray(offset, np.float64)

    def loss(xv, sv, ov) -> float:
        y, _, _ = forward_f64(xv, sv, ov, mean, variance, epsilon, data_format, is_training)
        return float(np.sum(y * w64))

    def bumped(a, idx, step):
        a = a.copy()
        a[idx] += step
        return a

    dx, dscale, doffset = grads
    probes = []  # (analytic value, loss at +h, loss at -h)
    for _ in range(points):
        idx = tuple(int(rng.integers(d)) for d in x64.shape)
        probes.append((dx[idx], (bumped(x64, idx, h), s64, o64), (bumped(x64, idx, -h), s64, o64)))
    for k in range(s64.shape[0]):
        probes.append((dscale[k], (x64, bumped(s64, k, h), o64), (x64, bumped(s64, k, -h), o64)))
        probes.append((doffset[k], (x64, s64, bumped(o64, k, h)), (x64, s64, bumped(o64, k, -h))))
    worst = 0.0
    for analytic, plus, minus in probes:
        numerical = (loss(*plus) - loss(*minus)) / (2 * h)
        worst = max(worst, abs(numerical - float(analytic)) / max(1e-2, abs(numerical)))
    return worst
