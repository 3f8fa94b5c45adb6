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

**An op TensorFlow does not have.**  In a graph the second-order gradient is one
node of type ``FusedBatchNormGradGrad`` (:data:`SPEC`; closed-form NumPy, no backend
kernel), which :func:`second_order_gradient` adds for the registered gradient of
``FusedBatchNormGrad``, ``FusedBatchNormGradV2`` and ``FusedBatchNormGradV3``.  It is
not in ``fbnops.specs.all_specs()``: no ``raw_ops`` function, no mirror classes.  A
graph holding it exports to GraphDef text and imports back into fbnops, but
TensorFlow cannot import it (``Op type not registered 'FusedBatchNormGradGrad'``):
export the first-order graph, and let TensorFlow differentiate it, instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ..framework import memory
from ..framework.graph import Operation, Output
from ..framework.registry import register_op_def
from ..framework.scope import Scope
from ..specs._common import BATCH_NORM_DATA, EPSILON, IS_TRAINING, T_TYPES, data_format_attr
from ..specs.op_spec import ArgSpec, OpSpec, Surfaces
from .array_ops import zeros_like
from .canonical import NdView
from .op_def import NO_KERNEL, SpecOpDef
from .shape_inference import spec_shape

__all__ = ["SPEC", "OP_DEF", "GradGrad", "grad_grad_view", "second_order_gradient"]

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


# ---------------------------------------------------------------------------------------
# The op (fbnops-internal) and the registered gradient of the grad ops
# ---------------------------------------------------------------------------------------

_UPSTREAM = "The gradient flowing into the grad op's output "
SPEC = OpSpec(
    name="FusedBatchNormGradGrad",
    summary="Second-order gradient of batch normalization (fbnops-internal; TensorFlow has no such op).",
    description=(
        "The gradients of FusedBatchNormGrad{,V2,V3} with respect to y_backprop, x and scale, given the "
        "gradients flowing into its outputs x_backprop, scale_backprop and offset_backprop."
    ),
    inputs=(
        ArgSpec("y_backprop", "T", "tensor", "The grad op's y_backprop."),
        ArgSpec("x", "T", "tensor", "The grad op's x."),
        ArgSpec("scale", "float", "channels", "The grad op's scale."),
        ArgSpec("reserve_space_1", "float", "channels", "Inference: the population mean (unused in training)."),
        ArgSpec("reserve_space_2", "float", "channels", "Inference: the population variance (unused in training)."),
        ArgSpec("grad_x_backprop", "T", "tensor", _UPSTREAM + "x_backprop."),
        ArgSpec("grad_scale_backprop", "float", "channels", _UPSTREAM + "scale_backprop."),
        ArgSpec("grad_offset_backprop", "float", "channels", _UPSTREAM + "offset_backprop."),
    ),
    outputs=(
        ArgSpec("grad_y_backprop", "T", "tensor", "The gradient with respect to y_backprop."),
        ArgSpec("grad_x", "T", "tensor", "The gradient with respect to x."),
        ArgSpec("grad_scale", "float", "channels", "The gradient with respect to scale."),
    ),
    attrs=(EPSILON, data_format_attr("The data format of y_backprop, x and grad_x_backprop."), IS_TRAINING),
    type_attrs={"T": T_TYPES},
    kernel_type_attrs={"T": T_TYPES},
    surfaces=Surfaces(java_class="", java_endpoint="", cc_class="", python=""),
    data=BATCH_NORM_DATA,
)


def _body(kernel: None, a: dict[str, np.ndarray], attrs: dict[str, Any]) -> GradGrad:
    view = NdView.for_data_format(a["x"].shape, attrs["data_format"])
    tensors = {k: view.to_view(a[k]) for k in ("y_backprop", "x", "grad_x_backprop")}
    out = grad_grad_view(  # the spec's input order is grad_grad_view's
        *(tensors.get(name, a[name]) for name in SPEC.input_names),
        epsilon=attrs["epsilon"],
        is_training=attrs["is_training"],
        op=SPEC.name,
    )
    return GradGrad(view.from_view(out.grad_y_backprop), view.from_view(out.grad_x), out.grad_scale)


def second_order_gradient(scope: Scope, op: Operation, grads: Sequence[Output | None]) -> list[Output | None]:
    """TensorFlow's ``_FusedBatchNormGradGrad{,V2,V3}``: gradients for ``y_backprop``, ``x``, ``scale``.

    An upstream gradient that is ``None`` counts as zeros (TensorFlow fills it with
    ``ZerosLike``); the reserve spaces get ``None``.
    """
    upstream = list(grads[:3])
    if all(g is None for g in upstream):
        return [None] * len(op.inputs)
    filled = [g if g is not None else zeros_like(scope, out) for g, out in zip(upstream, op.outputs, strict=False)]
    attrs = {k: op.attrs[k] for k in ("epsilon", "data_format", "is_training")}
    gg = scope.add_op(SPEC.name, [*op.inputs[:5], *filled], attrs)
    return [*gg.outputs, *[None] * (len(op.inputs) - 3)]


OP_DEF = register_op_def(SpecOpDef(SPEC, body=_body, shape=spec_shape, kernel=NO_KERNEL))
