"""Graph-mode shape functions, TensorFlow's ``shape_inference`` helpers and the batch-norm rule.

Unlike eager execution (where the kernel accepts 4-D or 5-D input for any
``data_format``), graph construction applies the registered shape function: the
rank must match the format, the channel dimensions of every per-channel input
must merge, and the messages are TensorFlow's (``Shape must be rank 4 but is
rank 5``, ``Dimensions must be equal, but are 2 and 3``).  Dimensions may be
unknown (``None``); a shape of ``None`` is an unknown rank.

:func:`fused_batch_norm_shape` is TensorFlow's ``FusedBatchNormShape`` /
``FusedBatchNormV3Shape`` / ``FusedBatchNormGradShape`` in one, read from the spec:
``tensor`` inputs are checked against the format's rank, ``channels`` inputs (when
:func:`~fbnops.ops.validation.is_required`) against the channel dimension.
"""

from __future__ import annotations

from typing import Any

from ..framework.errors import InvalidArgumentError
from ..framework.layouts import channel_axis, format_rank
from ..specs import OpSpec
from .validation import is_required

Shape = tuple | None  # of int | None; None for an unknown rank

__all__ = ["with_rank", "merge_dim", "fused_batch_norm_shape"]


def with_rank(shape: Shape, rank: int, what: str) -> tuple:
    """``shape`` if it has ``rank`` (an unknown rank becomes ``rank`` unknown dims), else TF's error."""
    if shape is not None and len(shape) != rank:
        raise InvalidArgumentError(f"Shape must be rank {rank} but is rank {len(shape)} ({what})")
    return shape if shape is not None else (None,) * rank


def merge_dim(a: int | None, b: int | None, what: str) -> int | None:
    """The known one of two dimensions, or TF's error if both are known and differ."""
    if a is not None and b is not None and a != b:
        raise InvalidArgumentError(f"Dimensions must be equal, but are {a} and {b} ({what})")
    return a if a is not None else b


def fused_batch_norm_shape(spec: OpSpec, shapes: dict[str, Shape], attrs: dict[str, Any]) -> list[Shape]:
    """Static output shapes of a batch-norm op, or InvalidArgumentError (TF's shape function)."""
    fmt = attrs["data_format"]
    rank = format_rank(fmt)
    axis = channel_axis(fmt, rank)
    tensors = [a.name for a in spec.inputs if a.kind == "tensor"]
    full = {name: with_rank(shapes[name], rank, f"input '{name}'") for name in tensors}
    channels = None
    for name in tensors:
        channels = merge_dim(channels, full[name][axis], f"channels of '{name}'")
    for arg in spec.inputs:
        if arg.kind == "channels" and is_required(arg, attrs):
            vec = with_rank(shapes[arg.name], 1, f"input '{arg.name}'")
            channels = merge_dim(channels, vec[0], f"input '{arg.name}' and the channels of x")
    x = list(full["x"])
    x[axis] = channels
    # A rank-0 output (FusedBatchNormV3's reserve_space_3) is an unknown shape in TF's shape function.
    out = {"tensor": tuple(x), "channels": (channels,), "empty": (0,), "scalar0": None}
    return [out[a.kind] for a in spec.outputs]
