"""BatchNormWithGlobalNormalization: its eager body, graph binding and gradient, side by side.

TensorFlow's ``BatchNormOp`` (``batch_norm_op.cc/.h``) normalizes 4-D ``t`` with given
statistics, channels on the last axis, all in ``T`` (half, float or double on CPU)::

    result = (t - m) * (rsqrt(v + variance_epsilon) [* gamma]) + beta

No backend kernel: the body is that Eigen expression in NumPy, one rounding per
operation in ``T`` as Eigen's (``kernel=NO_KERNEL``).  The gradient is TensorFlow's
``_BatchNormWithGlobalNormalizationGrad``: the grad op fed ``t, m, v, gamma`` and
the gradient of ``result``, its five outputs the gradients of the five inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..framework.graph import Operation, Output
from ..framework.registry import register_gradient, register_op_def
from ..framework.scope import Scope
from ..specs import get_spec
from .op_def import NO_KERNEL, SpecOpDef
from .shape_inference import spec_shape

__all__ = ["SPEC", "OP_DEF", "rsqrt"]

SPEC = get_spec("BatchNormWithGlobalNormalization")


# Eigen's half packet on x86 (Packet8h, AVX + F16C): 8 halves, converted to float32 per operation.
HALF_PACKET = 8


def rsqrt(v: np.ndarray) -> np.ndarray:
    """Eigen's ``rsqrt`` on CPU, in ``v``'s dtype: ``1 / sqrt(v)``, each operation rounded to it.

    Half: the elements that fill whole 8-half packets are one float32 ``rsqrt`` rounded to
    half (Eigen's ``prsqrt<Packet8h>``), the tail (``C % 8`` elements) the scalar path's half
    ``1 / sqrt``: TensorFlow's half bits on x86 with AVX.  Float: Eigen's packet ``rsqrt``
    (8 or more channels) is the CPU's approximation refined by a Newton step, a few ulp
    from this correctly rounded ``1 / sqrt`` (its scalar path, below 8 channels, is this).
    """
    if v.dtype != np.float16:
        return v.dtype.type(1) / np.sqrt(v)
    packed = v.size - v.size % HALF_PACKET
    head = (1 / np.sqrt(v[:packed].astype(np.float32))).astype(np.float16)
    return np.concatenate([head, np.float16(1) / np.sqrt(v[packed:])])


def _forward(kernel: None, a: dict[str, np.ndarray], attrs: dict[str, Any]) -> tuple[np.ndarray]:
    """What ``BatchNormOp::Compute`` computes: vectors broadcast along the last axis of ``t``."""
    t = a["t"]
    epsilon = t.dtype.type(attrs["variance_epsilon"])  # TF: variance_epsilon_ = T(variance_epsilon)
    with np.errstate(all="ignore"):  # TF computes NaN/inf for a negative variance; so does this
        scale = rsqrt(a["v"] + epsilon)
        if attrs["scale_after_normalization"]:
            scale = scale * a["gamma"]
        return ((t - a["m"]) * scale + a["beta"],)


def _gradient(scope: Scope, op: Operation, grads: Sequence[Output | None]) -> list[Output | None]:
    """TensorFlow's ``_BatchNormWithGlobalNormalizationGrad``: dx, dm, dv, db, dg for t, m, v, beta, gamma."""
    dy = grads[0]
    if dy is None:
        return [None] * len(op.inputs)
    t, m, v, _beta, gamma = op.inputs
    attrs = {k: op.attrs[k] for k in ("variance_epsilon", "scale_after_normalization")}
    return list(scope.add_op(SPEC.gradient, [t, m, v, gamma, dy], attrs).outputs)


# The op: spec, eager body, shape rule, gradient.
OP_DEF = register_op_def(SpecOpDef(SPEC, body=_forward, shape=spec_shape, kernel=NO_KERNEL))
register_gradient(SPEC.name)(_gradient)
