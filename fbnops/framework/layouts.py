"""Data formats: where the channel axis of a batch-norm tensor is.

TensorFlow's ``data_format`` strings name the axes of the 4-D or 5-D data tensor:
channels-last (``NHWC``, ``NDHWC``) or channels-first (``NCHW``, ``NCDHW``).  The
eager kernels accept either rank for any format, so the channel axis depends on
the format and the rank of the tensor at hand.
"""

from __future__ import annotations

from ..specs._common import DATA_FORMATS

__all__ = ["DATA_FORMATS", "CHANNELS_FIRST", "channel_axis", "is_channels_first", "format_rank", "to_channels_last"]

CHANNELS_FIRST = ("NCHW", "NCDHW")


def is_channels_first(data_format: str) -> bool:
    return data_format in CHANNELS_FIRST


def channel_axis(data_format: str, ndim: int) -> int:
    """The axis of the channels: 1 for channels-first formats, the last axis otherwise."""
    return 1 if data_format in CHANNELS_FIRST else ndim - 1


def format_rank(data_format: str) -> int:
    """The rank the format names: 5 for ``NDHWC``/``NCDHW``, else 4 (graph shape functions)."""
    return len(data_format)


def to_channels_last(data_format: str) -> tuple[str, tuple[int, ...], tuple[int, ...]]:
    """For a channels-first format: its channels-last twin, the permutation there and the one back."""
    rank = len(data_format)
    to_last = (0, *range(2, rank), 1)
    to_first = (0, rank - 1, *range(1, rank - 1))
    return data_format.replace("C", "") + "C", to_last, to_first
