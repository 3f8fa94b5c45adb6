"""Tensors at the boundary: viewing a caller's value as an array, and printing shapes.

Both are TensorFlow's conventions: inputs keep their dtype (nothing is guessed),
and shapes print as ``TensorShape::DebugString`` does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import InvalidArgumentError

__all__ = ["as_array", "shape_str"]


def shape_str(shape: tuple | None) -> str:
    """TensorFlow's ``TensorShape::DebugString``: ``[2,3,4]``, ``[?,3]`` (unknown dim), ``<unknown>`` (rank)."""
    if shape is None:
        return "<unknown>"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def as_array(value: Any, arg: str, op: str) -> np.ndarray:
    """View ``value`` as a NumPy array without guessing a dtype.

    Accepted: ``numpy.ndarray`` and NumPy scalars, objects with ``__array__`` /
    ``__array_interface__``, and DLPack producers.  Python lists and numbers are
    refused: their dtype would have to be guessed.
    """
    if type(value) is np.ndarray:
        arr = value
    elif isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
    elif hasattr(value, "__array__") or hasattr(value, "__array_interface__"):
        try:
            arr = np.asarray(value)
        except Exception as e:  # a foreign object whose conversion fails
            raise InvalidArgumentError(f"{arg} could not be converted to an array: {e}", op) from None
    elif hasattr(value, "__dlpack__"):
        try:
            arr = np.from_dlpack(value)
        except Exception as e:
            raise InvalidArgumentError(f"{arg} could not be imported through DLPack: {e}", op) from None
    else:
        raise InvalidArgumentError(
            f"{arg} must be an array (numpy.ndarray, an object with __array__, or a "
            f"DLPack producer), got {type(value).__name__}",
            op,
        )
    if not arr.dtype.isnative:  # big-endian data: same values, native byte order
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return arr
