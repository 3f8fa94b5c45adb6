"""The batch-norm kernels cut into stages: partial sums, finish, apply.

A synchronized (multi-process) batch norm runs the op in three steps: each process
reduces its shard to per-channel float64 sums, the processes exchange and add the
sums, and every process turns the totals into statistics and coefficients and applies
them to its own rows.  These functions are those steps, on the current backend (each
backend registers its stage functions with ``fbnops.framework.registry.register_stage``)::

    s = sum_x(x)                                   # forward, training
    mean = finish_mean(s, count)                   #   (add the ranks' s first)
    q = sum_sq(x, mean)                            #   centred on the float32 mean
    mean, variance, coeffs = finish_forward(s, q, count, scale, offset, epsilon)
    y = apply_forward(x, coeffs)

    sums = sum_grad(x, dy, mean)                   # gradient
    scale_bp, offset_bp, coeffs = finish_grad(sums, count, scale, mean, variance, epsilon, is_training)
    dx = apply_grad(x, dy, coeffs)

Arrays are the canonical view ``(outer, C, inner)``, C-contiguous, of float32, float16
or bfloat16; per-channel vectors are float32 ``(C,)``; totals float64.  ``count`` is the
number of elements per channel over the whole (global) batch.  With ``rows_per_sample``
the partial sums come per sample (``outer // rows_per_sample`` of them, each reduced on
its own, so its bits do not depend on which other samples share the call).

The contract: on one process the composition gives the bits of the fused op
(``raw_ops``), and ``apply_*`` of a slice along ``outer`` gives the rows of the full call.
The variance is the biased one (Bessel's correction is the caller's, as in the op).
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import numpy as np

from ..framework import dtypes
from ..framework.errors import InvalidArgumentError
from ..framework.registry import get_stage
from ._plan import Apply, Op, Reduce

__all__ = [
    "Coeffs",
    "sum_x",
    "sum_sq",
    "sum_grad",
    "finish_mean",
    "finish_forward",
    "finish_inference",
    "finish_grad",
    "apply_forward",
    "apply_grad",
]

_FLOAT32_MAX = float(np.finfo(np.float32).max)
_STORAGE = (np.dtype(np.float32), np.dtype(dtypes.float16), np.dtype(dtypes.bfloat16))


class Coeffs(NamedTuple):
    """Per-channel coefficients of the element pass (opaque to callers: pass them to ``apply_*``).

    Every backend uses one formula (``_plan.Apply``), so coefficients from one backend apply
    on another; ``mode`` says which element pass they are for.
    """

    a: np.ndarray
    b: np.ndarray
    k: np.ndarray
    center: np.ndarray
    mode: int


# ---------------------------------------------------------------------------------------
# Validation: typed errors naming the argument, before any kernel runs
# ---------------------------------------------------------------------------------------


def _data(x, name: str, like=None) -> np.ndarray:
    if not isinstance(x, np.ndarray) or x.ndim != 3 or x.dtype not in _STORAGE:
        raise InvalidArgumentError(
            f"{name} must be a 3-D (outer, C, inner) float32/float16/bfloat16 array, got "
            f"{type(x).__name__} {getattr(x, 'dtype', '')} {getattr(x, 'shape', '')}"
        )
    if like is not None and (x.shape != like.shape or x.dtype != like.dtype):
        raise InvalidArgumentError(f"{name} must have the shape and dtype of x: {x.shape} {x.dtype}")
    return _aligned(x)


def _aligned(a: np.ndarray) -> np.ndarray:
    """``a`` if C-contiguous and aligned, else a copy that is (``np.require(a, requirements="CA")``
    at a tenth of its cost: every stage call checks several arrays)."""
    flags = a.flags
    return a if flags.c_contiguous and flags.aligned else np.require(a, requirements="CA")


def _vector(v, C: int, name: str, dtype=np.float32) -> np.ndarray:
    if not isinstance(v, np.ndarray) or v.shape != (C,) or v.dtype != dtype:
        raise InvalidArgumentError(
            f"{name} must be a {np.dtype(dtype).name} vector of shape ({C},), got "
            f"{getattr(v, 'dtype', type(v).__name__)} {getattr(v, 'shape', '')}"
        )
    return _aligned(v)


def _scale(scale) -> np.ndarray:
    if not isinstance(scale, np.ndarray) or scale.ndim != 1:
        raise InvalidArgumentError(f"scale must be a float32 vector, got {type(scale).__name__}")
    return _vector(scale, scale.shape[0], "scale")


def _totals(v, shape, name: str) -> np.ndarray:
    v = np.asarray(v)
    if v.shape != shape or v.dtype.kind != "f":
        raise InvalidArgumentError(f"{name} must be float64 of shape {shape}, got {v.dtype} {v.shape}")
    return np.ascontiguousarray(v, np.float64)


def _rows(x: np.ndarray, rows_per_sample) -> int:
    if rows_per_sample is None:
        return 0
    if isinstance(rows_per_sample, bool) or not isinstance(rows_per_sample, numbers.Integral) or rows_per_sample < 1:
        raise InvalidArgumentError(f"rows_per_sample must be a positive integer, got {rows_per_sample!r}")
    if x.shape[0] % rows_per_sample:
        raise InvalidArgumentError(f"rows_per_sample ({rows_per_sample}) does not divide outer ({x.shape[0]})")
    return int(rows_per_sample)


def _count(count) -> float:
    if isinstance(count, bool) or not isinstance(count, numbers.Real) or not count >= 0:
        raise InvalidArgumentError(f"count must be a non-negative number, got {count!r}")
    return float(count)


def _epsilon(epsilon) -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
        raise InvalidArgumentError(f"epsilon must be a finite number, got {epsilon!r}")
    try:
        value = float(epsilon)
    except OverflowError:  # an int past float64's range
        value = math.inf
    if not math.isfinite(value):
        raise InvalidArgumentError(f"epsilon must be a finite number, got {epsilon!r}")
    if abs(value) > _FLOAT32_MAX:
        raise InvalidArgumentError(f"epsilon {epsilon!r} does not fit in float32")
    return value


# ---------------------------------------------------------------------------------------
# Partial sums
# ---------------------------------------------------------------------------------------


def _reduce(mode: int, x, dy, mean, rows_per_sample) -> np.ndarray:
    x = _data(x, "x")
    C = x.shape[1]
    dy = _data(dy, "y_backprop", like=x) if dy is not None else None
    mean = _vector(mean, C, "mean") if mean is not None else None
    rows = _rows(x, rows_per_sample)
    if x.size == 0:  # an empty shard (or empty planes): zero sums, no kernel
        return np.zeros(((x.shape[0] // rows,) if rows else ()) + (2, C))
    return get_stage("reduce_totals")(mode, x, dy, mean, rows)


def sum_x(x, *, rows_per_sample=None) -> np.ndarray:
    """Σx per channel, float64 ``(C,)`` (per sample: ``(S, C)``)."""
    return np.ascontiguousarray(_reduce(Reduce.RED_SUM, x, None, None, rows_per_sample)[..., 0, :])


def sum_sq(x, mean, *, rows_per_sample=None) -> np.ndarray:
    """Σ(x - mean)² per channel, centred on the float32 ``mean``: float64 ``(C,)`` (per sample ``(S, C)``)."""
    if mean is None:
        raise InvalidArgumentError("mean must be a float32 vector, got None")
    return np.ascontiguousarray(_reduce(Reduce.RED_SQ, x, None, mean, rows_per_sample)[..., 1, :])


def sum_grad(x, dy, mean, *, rows_per_sample=None) -> np.ndarray:
    """[Σdy, Σdy·(x - mean)] per channel: float64 ``(2, C)`` (per sample ``(S, 2, C)``)."""
    if dy is None or mean is None:
        raise InvalidArgumentError("sum_grad needs y_backprop and mean")
    return _reduce(Reduce.RED_GRAD, x, dy, mean, rows_per_sample)


# ---------------------------------------------------------------------------------------
# Finish: totals -> statistics, parameter gradients, coefficients
# ---------------------------------------------------------------------------------------


def finish_mean(sum_x, count) -> np.ndarray:
    """The batch mean, float32 ``(C,)``: the one float64 -> float32 rounding every backend does."""
    s = _totals(sum_x, np.shape(sum_x)[:1], "sum_x")
    count = _count(count)
    if count > 0:  # the usual case: no 0/0 to silence (np.errstate costs as much as the division)
        return (s / count).astype(np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (s / count).astype(np.float32)


def finish_forward(sum_x, sum_sq, count, scale, offset, epsilon):
    """``(mean, variance, coeffs)`` of training: the batch mean and biased variance (float32)."""
    scale = _scale(scale)
    C = scale.shape[0]
    s0, s1 = _totals(sum_x, (C,), "sum_x"), _totals(sum_sq, (C,), "sum_sq")
    offset = _vector(offset, C, "offset")
    mean, variance, A, B, K = get_stage("finish")(
        Op.FWD_TRAIN, s0, s1, _count(count), _epsilon(epsilon), scale, offset, None, None
    )
    return mean, variance, Coeffs(A, B, K, mean, Apply.APPLY_A)


def finish_inference(scale, offset, mean, variance, epsilon) -> Coeffs:
    """The coefficients of inference (given statistics): no sums needed."""
    scale = _scale(scale)
    C = scale.shape[0]
    offset, mean, variance = (_vector(v, C, n) for v, n in ((offset, "offset"), (mean, "mean"), (variance, "variance")))
    zero = np.zeros(C)
    finish = get_stage("finish")
    _, _, A, B, K = finish(Op.FWD_INFER, zero, zero, 1.0, _epsilon(epsilon), scale, offset, variance, mean)
    return Coeffs(A, B, K, mean.copy(), Apply.APPLY_A)


def finish_grad(sums, count, scale, mean, variance, epsilon, is_training: bool):
    """``(scale_backprop, offset_backprop, coeffs)`` from the totals ``[Σdy, Σdy·(x - mean)]``."""
    scale = _scale(scale)
    C = scale.shape[0]
    sums = _totals(sums, (2, C), "sums")
    mean, variance = _vector(mean, C, "mean"), _vector(variance, C, "variance")
    op = Op.GRAD_TRAIN if is_training else Op.GRAD_FROZEN
    scale_backprop, offset_backprop, A, B, K = get_stage("finish")(
        op, sums[0], sums[1], _count(count), _epsilon(epsilon), scale, None, variance, mean
    )
    amode = Apply.APPLY_FULL if is_training else Apply.APPLY_B
    return scale_backprop, offset_backprop, Coeffs(A, B, K, mean.copy(), amode)


# ---------------------------------------------------------------------------------------
# Apply: the element pass, on any slice of rows
# ---------------------------------------------------------------------------------------


def _apply(x, dy, coeffs, modes, what: str) -> np.ndarray:
    if not isinstance(coeffs, Coeffs) or coeffs.mode not in modes:
        raise InvalidArgumentError(f"coeffs must come from {what}, got {type(coeffs).__name__}")
    x = _data(x, "x")
    dy = _data(dy, "y_backprop", like=x) if dy is not None else None
    C = x.shape[1]
    A, B, K, center = (_vector(getattr(coeffs, n), C, f"coeffs.{n}") for n in ("a", "b", "k", "center"))
    if x.size == 0:
        return np.empty_like(x)
    return get_stage("apply")(coeffs.mode, x, dy, A, B, K, center)


def apply_forward(x, coeffs: Coeffs) -> np.ndarray:
    """y = (x - mean) * scale / sqrt(variance + epsilon) + offset, as the op rounds it."""
    return _apply(x, None, coeffs, (Apply.APPLY_A,), "finish_forward or finish_inference")


def apply_grad(x, dy, coeffs: Coeffs) -> np.ndarray:
    """x_backprop of the op, from the coefficients of finish_grad."""
    if dy is None:
        raise InvalidArgumentError("apply_grad needs y_backprop")
    return _apply(x, dy, coeffs, (Apply.APPLY_FULL, Apply.APPLY_B), "finish_grad")
