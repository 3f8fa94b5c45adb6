"""Element types: one table of TensorFlow's names, ``DT_*`` enum values and the spellings users write.

The ops take ``half`` (``numpy.float16``), ``bfloat16`` (``ml_dtypes.bfloat16``) and
``float`` (``numpy.float32``); every computation happens in float32 (or wider), the
16-bit types are only a storage format.  The other rows exist for messages ("is a
double tensor") and for GraphDefs and the mirrors, which name any TensorFlow type.
"""

from __future__ import annotations

from typing import NamedTuple

import ml_dtypes
import numpy as np

__all__ = [
    "DType",
    "TABLE",
    "float32",
    "float16",
    "bfloat16",
    "tf_name",
    "from_tf_name",
    "enum_name",
    "enum_number",
    "from_enum",
    "from_user_name",
    "is_16bit",
    "GRAPH_DTYPES",
    "graph_dtype",
]

float32 = np.dtype(np.float32)
float16 = np.dtype(np.float16)
bfloat16 = np.dtype(ml_dtypes.bfloat16)


class DType(NamedTuple):
    """One row: the NumPy dtype, TensorFlow's name (``tf.as_dtype(...).name`` in C++), its ``DataType`` enum."""

    numpy: np.dtype
    tf_name: str  # "float", "half": what TensorFlow's messages and op registrations say
    enum: str  # "DT_FLOAT": GraphDef text, the C++ and Java DataType
    number: int  # the DataType enum value (types.proto)
    user_names: tuple[str, ...] = ()  # further spellings accepted from users (NumPy's names)


TABLE: tuple[DType, ...] = (
    DType(float32, "float", "DT_FLOAT", 1, ("float32",)),
    DType(np.dtype(np.float64), "double", "DT_DOUBLE", 2, ("float64",)),
    DType(np.dtype(np.int32), "int32", "DT_INT32", 3),
    DType(np.dtype(np.uint8), "uint8", "DT_UINT8", 4),
    DType(np.dtype(np.int16), "int16", "DT_INT16", 5),
    DType(np.dtype(np.int8), "int8", "DT_INT8", 6),
    DType(np.dtype(np.complex64), "complex64", "DT_COMPLEX64", 8),
    DType(np.dtype(np.int64), "int64", "DT_INT64", 9),
    DType(np.dtype(np.bool_), "bool", "DT_BOOL", 10),
    DType(bfloat16, "bfloat16", "DT_BFLOAT16", 14),
    DType(np.dtype(np.uint16), "uint16", "DT_UINT16", 17),
    DType(np.dtype(np.complex128), "complex128", "DT_COMPLEX128", 18),
    DType(float16, "half", "DT_HALF", 19, ("float16",)),
    DType(np.dtype(np.uint32), "uint32", "DT_UINT32", 22),
    DType(np.dtype(np.uint64), "uint64", "DT_UINT64", 23),
)


def data_type_members(*extra: tuple[str, int]) -> dict[str, int]:
    """TensorFlow's ``DataType`` (types.proto) as enum members, for the C++ and Java mirrors: every
    row of :data:`TABLE` plus the API's own extras (``DT_INVALID``, ``DT_STRING``, ...), by number."""
    members = dict(extra) | {row.enum: row.number for row in TABLE}
    return dict(sorted(members.items(), key=lambda item: item[1]))


_BY_DTYPE = {row.numpy: row for row in TABLE}
_BY_TF_NAME = {row.tf_name: row for row in TABLE}
_BY_ENUM = {row.enum: row for row in TABLE} | {row.number: row for row in TABLE}
_BY_USER_NAME = _BY_TF_NAME | {name: row for row in TABLE for name in row.user_names}


def _row(dtype: np.dtype) -> DType:
    try:
        return _BY_DTYPE[np.dtype(dtype)]
    except KeyError:
        raise KeyError(f"no TensorFlow type for dtype {np.dtype(dtype)}") from None


def tf_name(dtype: np.dtype) -> str:
    """TensorFlow's name for ``dtype`` ("float", "half", "bfloat16", "int32", ...); NumPy's if TF has none."""
    dtype = np.dtype(dtype)
    row = _BY_DTYPE.get(dtype)
    return row.tf_name if row is not None else dtype.name


def from_tf_name(name: str) -> np.dtype:
    """The dtype TensorFlow calls ``name`` ("float", "half", ...; NumPy's "float32"/"float16" too)."""
    return _BY_USER_NAME[name].numpy


def enum_name(dtype: np.dtype) -> str:
    """``DT_FLOAT``, ``DT_HALF``, ``DT_BFLOAT16``, ... (KeyError for a dtype TensorFlow has no enum for)."""
    return _row(dtype).enum


def enum_number(dtype: np.dtype) -> int:
    """The ``DataType`` enum value: 1 for float, 19 for half, 14 for bfloat16, ..."""
    return _row(dtype).number


def from_enum(enum: str | int) -> np.dtype:
    """The dtype of ``"DT_FLOAT"`` or of enum value ``1`` (KeyError if unknown)."""
    return _BY_ENUM[enum].numpy


def from_user_name(name: str) -> np.dtype:
    """A dtype from what a user writes: TensorFlow's name or NumPy's ("float" or "float32", "half" or
    "float16", "bfloat16", "double" or "float64", "int32", ...).  KeyError names the known spellings."""
    try:
        return _BY_USER_NAME[name].numpy
    except (KeyError, TypeError):
        raise KeyError(f"unknown dtype {name!r}; known: {', '.join(sorted(_BY_USER_NAME))}") from None


def is_16bit(dtype: np.dtype) -> bool:
    return dtype in (float16, bfloat16)


# The types a graph's constants and placeholders may hold: those the GraphDef writer and reader know.
GRAPH_DTYPES: tuple[np.dtype, ...] = (
    float32, np.dtype(np.float64), np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.bool_), bfloat16, float16,
)  # fmt: skip


def graph_dtype(dtype: object, op: str) -> np.dtype:
    """``dtype`` as a native-order NumPy dtype a graph can hold; ``InvalidArgumentError`` (naming the op)
    for anything else, when the op is created rather than when the graph is written."""
    from .errors import InvalidArgumentError

    try:
        if dtype is None or isinstance(dtype, (bool, np.generic)):  # np.dtype(None) is float64; a value no dtype
            raise TypeError
        dt = np.dtype(dtype)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{op}: {dtype!r:.80} is not a dtype", op) from None
    native = dt.newbyteorder("=") if dt.byteorder not in "=|" else dt
    if native not in GRAPH_DTYPES:
        known = ", ".join(tf_name(d) for d in GRAPH_DTYPES)
        raise InvalidArgumentError(f"{op}: a graph cannot hold {tf_name(native)} (it holds {known})", op)
    return native
