"""BatchNormWithGlobalNormalizationGrad: its eager body and graph binding (TensorFlow registers no gradient).

TensorFlow's ``BatchNormGradOp`` (``batch_norm_op.h``, ``functor::BatchNormGrad``), in ``T``,
on the ``(rows, C)`` view of ``t`` and ``backprop`` (channels last: the ``(outer, C, 1)``
view), with ``r = rsqrt(v + variance_epsilon)``::

    db = sum_rows(backprop)                    s = sum_rows(backprop * (t - m))
    dx = backprop * (r * gamma)                dm = -db * (r * gamma)        dg = s * r
    dv = s * ((r * -0.5 / (v + variance_epsilon)) * gamma)
    (scale_after_normalization=False: gamma is 1 in dx, dm, dv, and dg is 0)

Every elementwise operation rounds in ``T`` as Eigen's does (``dx``: TensorFlow's bits).
The sums accumulate in float64 and round once to ``T``: Eigen adds rows in ``T``, in an
order that depends on the vectorization (one row after another below 8 channels, in
packet blocks above), so TensorFlow's sums carry their own rounding error, up to about
``0.3 * eps(T) * sum(|terms|)`` measured; these are within half an ulp of the exact sum.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..framework.registry import register_op_def
from ..specs import get_spec
from .batch_norm_with_global_normalization import rsqrt
from .op_def import NO_KERNEL, SpecOpDef
from .shape_inference import spec_shape

__all__ = ["SPEC", "OP_DEF"]

SPEC = get_spec("BatchNormWithGlobalNormalizationGrad")


def _sum_rows(rows: np.ndarray) -> np.ndarray:
    """Per-channel sums of a ``(rows, C)`` view: accumulated in float64, rounded once to its dtype."""
    return rows.sum(axis=0, dtype=np.float64).astype(rows.dtype)


def _backward(kernel: None, a: dict[str, np.ndarray], attrs: dict[str, Any]) -> tuple[np.ndarray, ...]:
    """What ``BatchNormGradOp::Compute`` computes (the functor's order of operations)."""
    t, m, v, gamma, backprop = (a[name] for name in SPEC.input_names)
    dtype, channels = t.dtype, t.shape[-1]
    epsilon = dtype.type(attrs["variance_epsilon"])
    rows, dy_rows = t.reshape(-1, channels), backprop.reshape(-1, channels)
    with np.errstate(all="ignore"):  # TF computes NaN/inf for a negative variance; so does this
        db = _sum_rows(dy_rows)
        r = rsqrt(v + epsilon)
        s = _sum_rows(dy_rows * (rows - m))
        scaled = r * gamma if attrs["scale_after_normalization"] else r
        dx = (dy_rows * scaled).reshape(t.shape)
        dm = -db * scaled
        dg = s * r if attrs["scale_after_normalization"] else np.zeros(channels, dtype)
        r = r * dtype.type(-0.5) / (v + epsilon)  # -1/2 (v + epsilon)^(-3/2)
        dv = s * (r * gamma) if attrs["scale_after_normalization"] else s * r
    return dx, dm, dv, db, dg


# The op: spec, eager body, shape rule (no gradient: TensorFlow registers none).
OP_DEF = register_op_def(SpecOpDef(SPEC, body=_backward, shape=spec_shape, kernel=NO_KERNEL))
