"""Graph-mode shape functions: TensorFlow's ``FusedBatchNormV3Shape`` / ``FusedBatchNormGradShape``.

Unlike eager execution (where the kernel accepts 4-D or 5-D input for any
``data_format``), graph construction applies the registered shape function: the
rank must match the format, the channel dimensions of every per-channel input
must merge, and the messages are TensorFlow's (``Shape must be rank 4 but is
rank 5``, ``Dimensions must be equal, but are 2 and 3``).  Dimensions may be
unknown (``None``); a shape of ``None`` is an unknown rank.
"""

from __future__ import annotations

from typing import Any

from ..framework.errors import InvalidArgumentError
from ..specs import OpSpec

Shape = tuple  # of int | None; None for an unknown rank

__all__ = ["infer_shapes"]


def _with_rank(shape, rank: int, what: str):
    if shape is not None and len(shape) != rank:
        raise InvalidArgumentError(f"Shape must be rank {rank} but is rank {len(shape)} ({what})")
    return shape if shape is not None else (None,) * rank


def _merge(a, b, what: str):
    if a is not None and b is not None and a != b:
        raise InvalidArgumentError(f"Dimensions must be equal, but are {a} and {b} ({what})")
    return a if a is not None else b


def infer_shapes(spec: OpSpec, shapes: dict[str, Shape], attrs: dict[str, Any]) -> list[Shape]:
    """Static output shapes of a batch-norm op, or InvalidArgumentError (TF's shape function)."""
    fmt = attrs["data_format"]
    rank = 5 if fmt in ("NDHWC", "NCDHW") else 4
    channel_index = 1 if fmt in ("NCHW", "NCDHW") else rank - 1
    tensors = [a.name for a in spec.inputs if a.kind == "tensor"]
    full = {name: _with_rank(shapes[name], rank, f"input '{name}'") for name in tensors}
    channels = None
    for name in tensors:
        channels = _merge(channels, full[name][channel_index], f"channels of '{name}'")
    if spec.name == "FusedBatchNormV3":
        stats_used = not attrs["is_training"] or attrs["exponential_avg_factor"] != 1.0
        checked = ["scale", "offset"] + (["mean", "variance"] if stats_used else [])
    else:
        checked = ["scale", "reserve_space_1", "reserve_space_2"]
    for name in checked:
        vec = _with_rank(shapes[name], 1, f"input '{name}'")
        channels = _merge(channels, vec[0], f"input '{name}' and the channels of x")
    x = list(full["x"])
    x[channel_index] = channels
    out = {"tensor": tuple(x), "channels": (channels,), "empty": (0,), "scalar0": None}
    # FusedBatchNormV3's reserve_space_3 is an unknown shape in TF's shape function.
    return [out[a.kind] for a in spec.outputs]
