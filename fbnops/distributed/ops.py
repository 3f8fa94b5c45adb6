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

Each communicating call ends with a one-number status round (not counted above): a
stage that fails on one rank after the last collective still makes every rank raise
(see :mod:`._sync`).  The frozen gradient (``is_training=False``) communicates only to
make the parameter gradients global; with ``param_grads="local"`` it communicates nothing.

With one rank the default mode has nothing to add up: the ops call ``raw_ops`` (the same
bits as the staged path, which the tests check with all the data on one of two ranks).
Attributes are converted exactly as ``fbnops.raw_ops`` converts them (TensorFlow's
``make_bool``/``make_float``...), by the same function.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .. import raw_ops
from ..framework import registry
from ..framework.errors import InvalidArgumentError
from ..framework.layouts import channel_axis
from ..ops.canonical import NdView
from ..ops.convert import convert_attrs, convert_inputs
from ..ops.execute import call_signature, checked_attrs_for, contiguous, prepare, remember
from ..ops.fused_batch_norm_grad_v3 import grad_outputs
from ..ops.fused_batch_norm_v3 import empty_batch_outputs, reserve_space_3, running_statistics
from . import _rows
from ._sync import Header, Run
from .comm import Communicator

__all__ = ["FusedBatchNormV3", "FusedBatchNormGradV3"]

# The namedtuples of fbnops.raw_ops, so results are interchangeable with the plain ops.
_ForwardOutput = raw_ops._FusedBatchNormV3Output
_GradOutput = raw_ops._FusedBatchNormGradV3Output
_PARAM_GRADS = ("global", "local")


@functools.cache
def _stages():
    from ..kernels import stages  # the compiled partials/finish/apply entry points (imported once, on first use)

    return stages


def _check_mode(op: str, reproducible: object, param_grads: object = "global") -> None:
    if not isinstance(reproducible, bool):
        raise InvalidArgumentError(f"reproducible must be a bool, got {reproducible!r}", op)
    if param_grads not in _PARAM_GRADS:
        raise InvalidArgumentError(f"param_grads must be 'global' or 'local', got {param_grads!r}", op)


def _training(op: str, is_training: object) -> bool:
    """``is_training`` as ``raw_ops`` reads it.  A value it refuses counts as training: the rank
    then joins the first collective, where its error reaches every rank."""
    try:
        return convert_attrs(registry.get_op_def(op).spec, {"is_training": is_training})["is_training"]
    except Exception:  # noqa: BLE001 - raised again, on every rank, by _validate
        return True


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
    """One rank's validated input as the kernels see it: ``(outer, C, inner)`` views, samples, count."""

    def __init__(self, arrays: dict[str, np.ndarray], data_format: str, rows: tuple[str, ...]):
        x = arrays["x"]
        nd = NdView.for_data_format(x.shape, data_format)
        self.shape, self.dtype = x.shape, x.dtype
        self.channels, self.count, self.samples = nd.channels, nd.count, x.shape[0]
        # channels-last: a sample's rows are its H*W(*D) positions; channels-first: one row
        self.rows_per_sample = nd.outer // self.samples if self.samples else 1
        self.single_rows = self.rows_per_sample == 1 and nd.view[2] == 1  # one row of C values per sample
        self.empty = x.size == 0
        # the rows the kernels read (None for an empty shard: it runs no kernel)
        self.views = {k: None if self.empty else contiguous(arrays[k]).reshape(nd.view) for k in rows}

    def output(self, rows: np.ndarray | None) -> np.ndarray:
        return np.empty(self.shape, self.dtype) if rows is None else rows.reshape(self.shape)


def _validate(op: str, inputs: dict, attrs: dict, extra: dict, rows: tuple[str, ...]):
    """Convert and validate as ``raw_ops`` does, never raising: a failed rank must still join the first collective.

    Returns ``(header, arrays, attrs, shard)``; ``shard`` is None if this rank failed.
    """
    header = Header(op)
    try:
        signature = call_signature("distributed", op, inputs, attrs)
        checked = checked_attrs_for(signature)  # raw_ops' fast path: a call like one that passed
        if checked is not None:
            _check_mode(op, **extra)
            arrays, attrs = inputs, checked
        else:
            spec = registry.get_op_def(op).spec
            converted = convert_attrs(spec, attrs)  # TensorFlow's order: attr types, then inputs, then values
            _check_mode(op, **extra)
            _, arrays, attrs = prepare(op, convert_inputs(spec, inputs), converted)
            remember(signature, inputs, arrays, attrs)
        shard = _Shard(arrays, attrs["data_format"], rows)
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


def _synchronized(
    run: Run, shard: _Shard | None, stage: str, sums: _rows.Partials, width: int, reproducible: bool
) -> tuple[np.ndarray, np.ndarray | None]:
    """The global total of the per-channel ``sums`` (the op's first collective, which carries the header).

    Returns ``(total, local)``: ``local`` is this rank's own sums when they were computed whole.
    """
    rows = shard is not None and not shard.empty
    if not reproducible:
        local = run.stage(stage, sums.whole) if rows else None
        return run.total(local, width), local
    # Reproducible: the header round first (see Run.header_round): the tree's blocks need every rank's count.
    run.header_round(width)
    if run.count == 0 or width == 0:
        return np.zeros(width), None
    return run.tree(stage, sums.blocks if rows else None, width), None


def _per_sample(shard: _Shard | None, kernel: Callable, mode: int, *arrays) -> _rows.Partials:
    """``kernel(rows_per_sample)``'s sums, whole or as the reproducible tree's blocks (see :class:`_rows.Partials`)."""
    layout = (0, 1, False) if shard is None else (shard.samples, shard.rows_per_sample, shard.single_rows)
    return _rows.Partials(kernel, mode, arrays, *layout)


_COMM_TYPES: set[type] = set()  # types seen to follow the protocol (the Protocol isinstance takes ~40 us)


def _check_comm(comm: Any, op: str) -> None:
    if type(comm) in _COMM_TYPES:
        return
    if isinstance(comm, Communicator):
        _COMM_TYPES.add(type(comm))
    else:
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
    inputs = {"x": x, "scale": scale, "offset": offset, "mean": mean, "variance": variance}
    attrs = {
        "epsilon": epsilon,
        "exponential_avg_factor": exponential_avg_factor,
        "data_format": data_format,
        "is_training": is_training,
    }
    return forward(comm, inputs, attrs, reproducible)[0]


def forward(comm: Communicator, inputs: dict, attrs: dict, reproducible: bool) -> tuple[_ForwardOutput, int]:
    """:func:`FusedBatchNormV3` and the global number of elements per channel (-1 in inference)."""
    op = "FusedBatchNormV3"
    _check_comm(comm, op)
    is_training = attrs["is_training"]
    if not _training(op, is_training):  # inference: per-sample arithmetic, nothing to share
        _check_mode(op, reproducible)
        return _ForwardOutput(*raw_ops.FusedBatchNormV3(**inputs, **attrs)), -1
    if comm.size == 1 and reproducible is False:  # one rank, default mode: the plain op is the same bits
        out = _ForwardOutput(*raw_ops.FusedBatchNormV3(**inputs, **attrs))
        return out, out.y.size // max(out.batch_mean.size, 1)
    header, a, attrs, shard = _validate(op, inputs, attrs, {"reproducible": reproducible}, ("x",))
    run, st, C = Run(comm, header), _stages(), header.channels
    xv = shard.views["x"] if shard is not None else None
    sums_x = _per_sample(shard, lambda rps: st.sum_x(xv, rows_per_sample=rps), _rows.SUM_X, xv, None, None)
    sum_x, _ = _synchronized(run, shard, "sum_x", sums_x, C, reproducible)
    n = run.count
    if n == 0 or C == 0:  # an empty global batch: the op's own outputs for it
        return _ForwardOutput(*empty_batch_outputs(shard.output(None), C, is_training=True)), n
    center = run.stage("finish_mean", lambda: st.finish_mean(sum_x, n))
    if reproducible:
        sq = _per_sample(shard, lambda rps: st.sum_sq(xv, center, rows_per_sample=rps), _rows.SUM_SQ, xv, None, center)
        sum_sq = run.tree("sum_sq", sq.blocks if xv is not None else None, C)
    else:
        sum_sq = run.total(run.stage("sum_sq", lambda: st.sum_sq(xv, center)) if xv is not None else None, C)
    eps = attrs.get("epsilon")
    finished = run.stage(
        "finish_forward",
        lambda: st.finish_forward(sum_x, sum_sq, n, contiguous(a["scale"]), contiguous(a["offset"]), eps),
    )
    y = run.stage("apply_forward", lambda: shard.output(st.apply_forward(xv, finished[2]) if xv is not None else None))
    running = run.stage(
        "running_statistics",
        lambda: running_statistics(
            finished[0], finished[1], n, a["mean"], a["variance"], attrs["exponential_avg_factor"]
        ),
    )
    run.close()
    return _ForwardOutput(y, *running, finished[0], finished[1], reserve_space_3()), n


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
    local_only = not _training(op, is_training) and param_grads == "local"  # frozen: dx and sums are all local
    if local_only or (comm.size == 1 and reproducible is False):  # or one rank: the plain op, the same bits
        _check_mode(op, reproducible, param_grads)
        return _GradOutput(*raw_ops.FusedBatchNormGradV3(**inputs, **attrs))
    extra = {"reproducible": reproducible, "param_grads": param_grads}
    header, a, attrs, shard = _validate(op, inputs, attrs, extra, ("x", "y_backprop"))
    run, st, C = Run(comm, header), _stages(), header.channels
    xv = dyv = center = None
    if shard is not None:
        xv, dyv, center = shard.views["x"], shard.views["y_backprop"], contiguous(a["reserve_space_1"])
    sums = _per_sample(
        shard, lambda rps: st.sum_grad(xv, dyv, center, rows_per_sample=rps), _rows.SUM_GRAD, xv, dyv, center
    )
    total, local = _synchronized(run, shard, "sum_grad", sums, 2 * C, reproducible)
    n = run.count
    if n == 0 or C == 0:  # an empty global batch: the op's own outputs for it
        return _GradOutput(*grad_outputs(shard.output(None), C))

    def finish(s: np.ndarray):
        scale_, rs2 = contiguous(a["scale"]), contiguous(a["reserve_space_2"])
        return st.finish_grad(s.reshape(2, C), n, scale_, center, rs2, attrs["epsilon"], attrs["is_training"])

    finished = run.stage("finish_grad", finish, total)
    params = finished
    if param_grads == "local":  # this shard's own sums (zeros for an empty shard)
        if local is None:
            local = run.stage("sum_grad", sums.whole) if xv is not None else np.zeros((2, C))
        params = run.stage("finish_grad", finish, local)
    dx = run.stage("apply_grad", lambda: shard.output(st.apply_grad(xv, dyv, finished[2]) if xv is not None else None))
    run.close()
    return _GradOutput(*grad_outputs(dx, C, params[0], params[1]))
