"""FusedBatchNormV3 / FusedBatchNormGradV3 over a batch split across ranks.

Each op is the single-process op cut at its two natural seams (see
:mod:`fbnops.kernels.stages`): per-channel float64 sums over the local rows, a
synchronized total, then the per-channel ``finish`` and the elementwise ``apply``
on the local rows.  With one rank the composition is the plain op, bit for bit.

Rounds of communication per call (``p`` ranks):

================================  =======  ===============
call                              default  reproducible
================================  =======  ===============
forward, training                 2        3
forward, inference                0        0
gradient (``param_grads="global"``) 1      2
================================  =======  ===============

The frozen gradient (``is_training=False``) communicates only to make the parameter
gradients global; with ``param_grads="local"`` it communicates nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .. import raw_ops
from ..framework.errors import InvalidArgumentError
from ..framework.layouts import channel_axis
from ..ops.canonical import NdView
from ..ops.execute import contiguous, execute, prepare
from ..ops.fused_batch_norm_v3 import running_statistics
from . import _tree
from ._sync import Header, exchange
from .comm import Communicator

__all__ = ["FusedBatchNormV3", "FusedBatchNormGradV3"]

# The namedtuples of fbnops.raw_ops, so results are interchangeable with the plain ops.
_ForwardOutput = raw_ops._FusedBatchNormV3Output
_GradOutput = raw_ops._FusedBatchNormGradV3Output
_PARAM_GRADS = ("global", "local")


def _stages():
    from ..kernels import stages  # the compiled partials/finish/apply entry points

    return stages


def _check_mode(op: str, reproducible: object, param_grads: object = "global") -> None:
    if not isinstance(reproducible, bool):
        raise InvalidArgumentError(f"reproducible must be a bool, got {reproducible!r}", op)
    if param_grads not in _PARAM_GRADS:
        raise InvalidArgumentError(f"param_grads must be 'global' or 'local', got {param_grads!r}", op)


def _channels_guess(x: object, data_format: object, scale: object) -> int:
    """The payload length a failing rank sends (its peers' C if its input is only partly wrong)."""
    try:
        shape = np.shape(x)
        if len(shape) in (4, 5) and data_format in ("NHWC", "NCHW", "NDHWC", "NCDHW"):
            return int(shape[channel_axis(data_format, len(shape))])
        return int(np.size(scale))
    except Exception:  # noqa: BLE001 - any guess will do: the header says this rank failed
        return 0


class _Shard:
    """One rank's validated input as the kernels see it: ``(outer, C, inner)``, samples, count."""

    def __init__(self, x: np.ndarray, data_format: str):
        nd = NdView.for_data_format(x.shape, data_format)
        self.shape, self.dtype, self.view = x.shape, x.dtype, nd.view
        self.channels, self.count, self.samples = nd.channels, nd.count, x.shape[0]
        # channels-last: a sample's rows are its H*W(*D) positions; channels-first: one row
        self.rows_per_sample = nd.outer // self.samples if self.samples else 1
        self.empty = x.size == 0

    def canonical(self, a: np.ndarray) -> np.ndarray | None:
        return None if self.empty else contiguous(a).reshape(self.view)

    def output(self, rows: np.ndarray | None) -> np.ndarray:
        return np.empty(self.shape, self.dtype) if rows is None else rows.reshape(self.shape)


def _validate(op, inputs, attrs, extra) -> tuple[Header, dict | None, dict, _Shard | None]:
    """Validate locally, never raising: a failed rank must still join the first collective."""
    header = Header(op)
    try:
        _check_mode(op, **extra)
        _, arrays, attrs = prepare(op, inputs, attrs)
        shard = _Shard(arrays["x"], attrs["data_format"])
        header.describe(
            samples=shard.samples,
            count=shard.count,
            channels=shard.channels,
            dtype=shard.dtype,
            data_format=attrs["data_format"],
            attrs={**attrs, **extra},
        )
        return header, arrays, attrs, shard
    except Exception as e:  # noqa: BLE001 - shared with every rank by the header
        header.fail(e, _channels_guess(inputs.get("x"), attrs.get("data_format"), inputs.get("scale")))
        return header, None, attrs, None


def _synchronized(comm, header, shard, leaves_fn, width: int, reproducible: bool):
    """The global per-channel total of ``leaves_fn`` (first collective carries the header).

    Returns ``(headers, total)``; ``leaves_fn(rows_per_sample)`` gives this rank's float64 sums.
    """
    if not reproducible:
        local = leaves_fn(None) if shard is not None and not shard.empty else np.zeros(width)
        return exchange(comm, local, header)
    # Reproducible: the header (and a payload of the same length, so that a rank that
    # disagrees on the mode is caught by the digest) first: the tree needs every count.
    headers, _ = exchange(comm, np.zeros(width), header)
    return headers, _tree_sum(comm, shard, headers, leaves_fn, width)


def _tree_sum(comm, shard, headers, leaves_fn, width):
    samples = headers[:, 1].astype(np.int64)
    if shard.empty:
        leaves = np.zeros((shard.samples, width))
    else:
        leaves = leaves_fn(shard.rows_per_sample).reshape(shard.samples, width)
    return _tree.tree_total(comm, leaves, samples)


def _check_comm(comm: Any, op: str) -> None:
    if not isinstance(comm, Communicator):
        raise InvalidArgumentError(
            f"comm must be a Communicator (from_mpi4py, from_torch, SerialComm, ThreadComm), got {type(comm).__name__}",
            op,
        )


def FusedBatchNormV3(
    comm: Communicator,
    *,
    x: ArrayLike,
    scale: ArrayLike,
    offset: ArrayLike,
    mean: ArrayLike,
    variance: ArrayLike,
    epsilon: float = 0.0001,
    exponential_avg_factor: float = 1.0,
    data_format: str = "NHWC",
    is_training: bool = True,
    reproducible: bool = False,
) -> _ForwardOutput:
    """``raw_ops.FusedBatchNormV3`` with the batch statistics of the batch split across ``comm``'s ranks.

    ``x`` is this rank's shard (along N, in any layout); ``y`` is its normalized rows.
    The statistics outputs are the global batch's, identical on every rank.
    """
    op = "FusedBatchNormV3"
    _check_comm(comm, op)
    inputs = {"x": x, "scale": scale, "offset": offset, "mean": mean, "variance": variance}
    attrs = {
        "epsilon": epsilon,
        "exponential_avg_factor": exponential_avg_factor,
        "data_format": data_format,
        "is_training": is_training,
    }
    if is_training is False:  # inference: per-sample arithmetic, nothing to share
        _check_mode(op, reproducible)
        return _ForwardOutput(*execute(op, inputs, attrs))
    header, a, attrs, shard = _validate(op, inputs, attrs, {"reproducible": reproducible})
    st = _stages()
    C = int(header.values[3])
    xv = shard.canonical(a["x"]) if shard is not None else None
    headers, sum_x = _synchronized(comm, header, shard, lambda rps: st.sum_x(xv, rows_per_sample=rps), C, reproducible)
    n = int(headers[:, 2].sum())
    if n == 0 or C == 0:  # an empty global batch: NaN statistics, as TensorFlow
        nan = np.full(C, np.nan, np.float32)
        return _ForwardOutput(shard.output(None), nan, nan.copy(), nan.copy(), nan.copy(), _rs3())
    center = st.finish_mean(sum_x, n)
    sq = lambda rps: st.sum_sq(xv, center, rows_per_sample=rps)  # noqa: E731
    if reproducible:
        sum_sq = _tree_sum(comm, shard, headers, sq, C)
    else:
        _, sum_sq = exchange(comm, sq(None) if xv is not None else np.zeros(C))
    scale_, offset_ = contiguous(a["scale"]), contiguous(a["offset"])
    batch_mean, batch_var, coeffs = st.finish_forward(sum_x, sum_sq, n, scale_, offset_, attrs["epsilon"])
    y = shard.output(st.apply_forward(xv, coeffs) if xv is not None else None)
    running_mean, running_var = running_statistics(
        batch_mean, batch_var, n, a["mean"], a["variance"], attrs["exponential_avg_factor"]
    )
    return _ForwardOutput(y, running_mean, running_var, batch_mean, batch_var, _rs3())


def _rs3() -> np.ndarray:
    return np.zeros((), np.float32)


def FusedBatchNormGradV3(
    comm: Communicator,
    *,
    y_backprop: ArrayLike,
    x: ArrayLike,
    scale: ArrayLike,
    reserve_space_1: ArrayLike,
    reserve_space_2: ArrayLike,
    reserve_space_3: ArrayLike,
    epsilon: float = 0.0001,
    data_format: str = "NHWC",
    is_training: bool = True,
    param_grads: str = "global",
    reproducible: bool = False,
) -> _GradOutput:
    """``raw_ops.FusedBatchNormGradV3`` for a batch split across ``comm``'s ranks.

    ``x_backprop`` is this rank's rows.  With ``param_grads="global"`` the scale and offset
    gradients are the global batch's (identical on every rank: do not average them again);
    ``"local"`` gives this shard's, as PyTorch's ``SyncBatchNorm`` leaves them for DDP.
    """
    op = "FusedBatchNormGradV3"
    _check_comm(comm, op)
    inputs = {
        "y_backprop": y_backprop,
        "x": x,
        "scale": scale,
        "reserve_space_1": reserve_space_1,
        "reserve_space_2": reserve_space_2,
        "reserve_space_3": reserve_space_3,
    }
    attrs = {"epsilon": epsilon, "data_format": data_format, "is_training": is_training}
    if is_training is False and param_grads == "local":  # frozen: dx and sums are all local
        _check_mode(op, reproducible, param_grads)
        return _GradOutput(*execute(op, inputs, attrs))
    extra = {"reproducible": reproducible, "param_grads": param_grads}
    header, a, attrs, shard = _validate(op, inputs, attrs, extra)
    st = _stages()
    C = int(header.values[3])
    xv = dyv = None
    if shard is not None:
        xv, dyv, center = shard.canonical(a["x"]), shard.canonical(a["y_backprop"]), contiguous(a["reserve_space_1"])
    sums = lambda rps: st.sum_grad(xv, dyv, center, rows_per_sample=rps)  # noqa: E731
    headers, total = _synchronized(comm, header, shard, sums, 2 * C, reproducible)
    placeholder = np.zeros((0,), np.float32)
    n = int(headers[:, 2].sum())
    if n == 0 or C == 0:  # TensorFlow: zero parameter gradients for an empty batch
        zeros = np.zeros(C, np.float32)
        return _GradOutput(shard.output(None), zeros, zeros.copy(), placeholder, placeholder.copy())
    finish_args = (
        contiguous(a["scale"]),
        center,
        contiguous(a["reserve_space_2"]),
        attrs["epsilon"],
        attrs["is_training"],
    )
    scale_bp, offset_bp, coeffs = st.finish_grad(total.reshape(2, C), n, *finish_args)
    if param_grads == "local":  # this shard's own sums (zeros for an empty shard)
        local = sums(None) if xv is not None else np.zeros((2, C))
        scale_bp, offset_bp, _ = st.finish_grad(local, n, *finish_args)
    dx = shard.output(st.apply_grad(xv, dyv, coeffs) if xv is not None else None)
    return _GradOutput(dx, scale_bp, offset_bp, placeholder, placeholder.copy())
