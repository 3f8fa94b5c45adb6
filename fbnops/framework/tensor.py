"""Tensors at the boundary: viewing a caller's value as an array, printing shapes, reading names.

All are TensorFlow's conventions: inputs keep their dtype (nothing is guessed),
shapes print as ``TensorShape::DebugString`` does, and tensor names are ``"op"``,
``"op:1"`` or ``"^op"`` (:func:`parse_tensor_name`, the one parser every surface uses).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .errors import InvalidArgumentError

__all__ = ["as_array", "shape_str", "TensorName", "parse_tensor_name"]


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


class TensorName(NamedTuple):
    """A parsed tensor name: the op, the output index (``None``: the op itself), control (``^op``)."""

    op: str
    index: int | None
    control: bool = False


def parse_tensor_name(name: str, *, default_index: int | None) -> TensorName:
    """Parse ``"op"``, ``"op:1"`` or ``"^op"`` (TensorFlow's ``ParseTensorName``).

    ``default_index`` is what a bare ``"op"`` names, and each surface documents its own:

    * ``None`` - the operation itself (a target): the core :class:`~fbnops.Session`
      (TF1 ``Session.run`` semantics: ``sess.run("bn")`` runs ``bn`` and returns ``None``);
    * ``0`` - its output 0: GraphDef node inputs, :meth:`Graph.get_output`, the Java
      mirror's ``Runner.fetch("bn")`` (as tf-java), and run files / ``fbnops run --fetch bn``.

    ``"^op"`` is a control input (``index=None, control=True``).  Anything else is an
    ``InvalidArgumentError`` naming the string.
    """
    if not isinstance(name, str):
        raise InvalidArgumentError(f"a tensor name must be a string, got {type(name).__name__}")
    control = name.startswith("^")
    op_name, sep, index_text = (name[1:] if control else name).partition(":")
    canonical_index = index_text.isascii() and index_text.isdigit() and (index_text == "0" or index_text[0] != "0")
    if not op_name or (control and sep) or (sep and not canonical_index):
        raise InvalidArgumentError(
            f"The name '{name}' is not a valid tensor name: expected \"<op_name>\", "
            f'"<op_name>:<output_index>" or "^<op_name>"'
        )
    if control:
        return TensorName(op_name, None, True)
    return TensorName(op_name, int(index_text) if sep else default_index)
