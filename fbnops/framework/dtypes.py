"""The three element types of the ops (TensorFlow names) and their NumPy dtypes.

``half`` is ``numpy.float16``; ``bfloat16`` is ``ml_dtypes.bfloat16``; ``float``
is ``numpy.float32``.  Every computation happens in float32 (or wider); 16-bit
types are only a storage format.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

__all__ = ["float32", "float16", "bfloat16", "tf_name", "from_tf_name", "is_16bit"]

float32 = np.dtype(np.float32)
float16 = np.dtype(np.float16)
bfloat16 = np.dtype(ml_dtypes.bfloat16)

_TF_NAMES = {float32: "float", float16: "half", bfloat16: "bfloat16"}
_BY_NAME = {v: k for k, v in _TF_NAMES.items()}
_BY_NAME.update({"float32": float32, "float16": float16})

# TensorFlow's names for dtypes it knows but these ops do not accept; used in messages.
_OTHER_TF_NAMES = {
    "float64": "double",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "bool": "bool",
    "complex64": "complex64",
    "complex128": "complex128",
}


def tf_name(dtype: np.dtype) -> str:
    """TensorFlow's name for ``dtype`` ("float", "half", "bfloat16", "int32", ...)."""
    dtype = np.dtype(dtype)
    if dtype in _TF_NAMES:
        return _TF_NAMES[dtype]
    return _OTHER_TF_NAMES.get(dtype.name, dtype.name)


def from_tf_name(name: str) -> np.dtype:
    return _BY_NAME[name]


def is_16bit(dtype: np.dtype) -> bool:
    return dtype in (float16, bfloat16)
