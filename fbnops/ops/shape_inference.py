"""Graph-mode shape functions: TensorFlow's ``shape_inference`` helpers and the spec-driven rule.

Unlike eager execution (where the batch-norm kernels accept 4-D or 5-D input for
any ``data_format``), graph construction applies the registered shape function: the
rank must match the format, the channel dimensions of every per-channel input
must merge, and the messages are TensorFlow's (``Shape must be rank 4 but is
rank 5``, ``Dimensions must be equal, but are 2 and 3``).  Dimensions may be
unknown (``None``); a shape of ``None`` is an unknown rank.

:func:`spec_shape` is TensorFlow's ``FusedBatchNormShape`` / ``FusedBatchNormV3Shape`` /
``FusedBatchNormGradShape`` and the ``BatchNormWithGlobalNormalization{,Grad}`` shape
functions in one, read from the spec's :class:`~fbnops.specs.DataSpec`: ``tensor``
inputs are checked against the graph rank (the layout attr's length, or the one
data rank), ``channels`` inputs (when :func:`~fbnops.ops.validation.is_required`)
against the channel dimension.
"""

from __future__ import annotations

from typing import Any

from ..framework.errors import InvalidArgumentError
from ..framework.layouts import format_rank
from ..specs import OpSpec
from .validation import channel_axis, is_required

Shape = tuple | None  # of int | None; None for an unknown rank

__all__ = ["with_rank", "merge_dim", "spec_shape"]


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


def _graph_rank(spec: OpSpec, attrs: dict[str, Any]) -> int:
    data = spec.data
    return format_rank(attrs[data.layout_attr]) if data.layout_attr is not None else data.ranks[0]


def spec_shape(spec: OpSpec, shapes: dict[str, Shape], attrs: dict[str, Any]) -> list[Shape]:
    """Static output shapes of an op with a data tensor, or InvalidArgumentError (TF's shape function)."""
    rank = _graph_rank(spec, attrs)
    axis = channel_axis(spec, rank, attrs)
    tensors = [a.name for a in spec.inputs if a.kind == "tensor"]
    full = {name: with_rank(shapes[name], rank, f"input '{name}'") for name in tensors}
    channels = None
    for name in tensors:
        channels = merge_dim(channels, full[name][axis], f"channels of '{name}'")
    data = spec.data.input
    for arg in spec.inputs:
        if arg.kind == "channels" and is_required(arg, attrs):
            vec = with_rank(shapes[arg.name], 1, f"input '{arg.name}'")
            channels = merge_dim(channels, vec[0], f"input '{arg.name}' and the channels of {data}")
    out_shape = list(full[data])
    if spec.data.merge_shapes:  # TF merges every tensor input's whole shape with the data's
        for name in tensors:
            pairs = zip(out_shape, full[name], strict=True)  # both have the graph's rank (with_rank above)
            out_shape = [merge_dim(a, b, f"input '{name}' and {data}") for a, b in pairs]
    out_shape[axis] = channels
    # A rank-0 output (FusedBatchNormV3's reserve_space_3) is an unknown shape in TF's shape function.
    out = {"tensor": tuple(out_shape), "channels": (channels,), "empty": (0,), "scalar0": None}
    return [out[a.kind] for a in spec.outputs]
