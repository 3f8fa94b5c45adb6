"""The second-order gradient of batch norm: the gradient of ``FusedBatchNormGrad{,V2,V3}``.

TensorFlow 2.21 registers it in ``tensorflow/python/ops/nn_fused_batch_norm_grad.py``
(``_FusedBatchNormGradGrad``): it rebuilds the first-order gradient from plain ops
(``_BatchNormGrad``, 16-bit inputs cast to float32), differentiates that under a
``GradientTape`` and returns the gradients with respect to ``y_backprop``, ``x``
and ``scale`` (``None`` for the reserve spaces).  Its semantics:

* **training** recomputes the *biased* batch statistics from ``x`` (``stop_gradient``
  on the mean inside the variance, which changes nothing in exact arithmetic) and
  ignores ``reserve_space_1/2``;
* **inference** uses ``reserve_space_1/2`` as the population mean and variance.

fbnops computes the same derivatives in closed form, per channel, on the canonical
view ``(outer, C, inner)`` (``n = outer * inner`` elements per channel), in float32
(or float64, the oracle the tests use).  With ``g = y_backprop``, upstream gradients
``A`` (of ``x_backprop``), ``B`` (of ``scale_backprop``), ``D`` (of ``offset_backprop``),
``mean()`` over a channel's ``n`` elements, and for training ``xc = x - mean(x)``,
``r = rsqrt(mean(xc**2) + eps)``, ``gc = g - mean(g)``, ``Ac = A - mean(A)``,
``m = mean(g*xc)``, ``mAx = mean(A*xc)``, ``mAg = mean(A*gc)``::

    grad_y_backprop = scale*r*(Ac - r**2*xc*mAx) + B*r*xc + D
    grad_x          = scale*r**3*(3*r**2*m*mAx*xc - mAg*xc - mAx*gc - m*Ac) + B*(r*gc - r**3*m*xc)
    grad_scale      = n*r*(mAg - r**2*m*mAx)

(the first-order gradient is ``x_backprop = scale*r*(gc - r**2*m*xc)``,
``scale_backprop = n*r*m``, ``offset_backprop = n*mean(g)``; these are its partial
derivatives, contracted with ``A``, ``B``, ``D``).  For inference, with the population
statistics ``pm``, ``pv`` and ``r = rsqrt(pv + eps)``::

    grad_y_backprop = A*scale*r + B*(x - pm)*r + D
    grad_x          = B*g*r
    grad_scale      = sum(A*g)*r

``grad_y_backprop`` and ``grad_x`` have the dtype of ``x`` (TensorFlow casts back
through the float32 casts), ``grad_scale`` is float32.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..framework import memory

__all__ = ["GradGrad", "grad_grad_view"]

AXES = (0, 2)  # the reduced axes of the canonical view
_TEMPORARIES = 8  # full-size float arrays alive at once (the memory check's estimate)


class GradGrad(NamedTuple):
    grad_y_backprop: np.ndarray
    grad_x: np.ndarray
    grad_scale: np.ndarray


def _channel(v: np.ndarray) -> np.ndarray:
    return v[None, :, None]


def _mean(a: np.ndarray, n: int, compute) -> np.ndarray:
    return (a.sum(AXES, dtype=np.float64) / n).astype(compute)


def grad_grad_view(
    dy: np.ndarray,
    x: np.ndarray,
    scale: np.ndarray,
    pop_mean: np.ndarray,
    pop_var: np.ndarray,
    grad_dx: np.ndarray,
    grad_dscale: np.ndarray,
    grad_doffset: np.ndarray,
    *,
    epsilon: float,
    is_training: bool,
    compute=np.float32,
    op: str = "FusedBatchNormGradGrad",
) -> GradGrad:
    """The second-order gradient on ``(outer, C, inner)`` views; vectors have C elements.

    ``pop_mean``/``pop_var`` (``reserve_space_1/2``) are read in inference only.
    """
    out_dtype = x.dtype
    channels = x.shape[1]
    n = x.shape[0] * x.shape[2]
    if n == 0:
        empty = np.empty(x.shape, out_dtype)
        return GradGrad(empty, empty.copy(), np.zeros(channels, np.float32))
    memory.check_fits(_TEMPORARIES * x.size * np.dtype(compute).itemsize, "second-order gradient temporaries", op)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        g, xv, a = (t.astype(compute) for t in (dy, x, grad_dx))
        gamma, b, d = (np.asarray(v, compute) for v in (scale, grad_dscale, grad_doffset))
        eps = compute(epsilon)
        if is_training:
            xc = xv - _channel(_mean(xv, n, compute))
            r = 1 / np.sqrt(_mean(xc * xc, n, compute) + eps)
            gc = g - _channel(_mean(g, n, compute))
            ac = a - _channel(_mean(a, n, compute))
            m, m_ax, m_ag = (_mean(p, n, compute) for p in (g * xc, a * xc, a * gc))
            r2, r3 = r * r, r * r * r
            ggy = _channel(gamma * r) * (ac - xc * _channel(r2 * m_ax)) + _channel(b * r) * xc + _channel(d)
            gx = _channel(gamma * r3) * (
                xc * _channel(3 * r2 * m * m_ax - m_ag) - gc * _channel(m_ax) - ac * _channel(m)
            ) + _channel(b) * (gc * _channel(r) - xc * _channel(r3 * m))
            gscale = n * r * (m_ag - r2 * m * m_ax)
        else:
            r = 1 / np.sqrt(np.asarray(pop_var, compute) + eps)
            xc = xv - _channel(np.asarray(pop_mean, compute))
            ggy = a * _channel(gamma * r) + xc * _channel(b * r) + _channel(d)
            gx = g * _channel(b * r)
            gscale = (a * g).sum(AXES, dtype=np.float64).astype(compute) * r
    return GradGrad(ggy.astype(out_dtype), gx.astype(out_dtype), gscale.astype(np.result_type(np.float32, compute)))
