"""tensorflow/java's data types: ``DataType`` (the protobuf enum), ``Shape``, the typed
tensor classes (``TFloat32``, ``TInt32``, ...) and ``java.util.Optional``.

A tensor owns a NumPy array; ``np.asarray(tensor)`` reads it (the ``NdArray`` view of
tf-java).  ``close()`` releases it, and any later read raises
``IllegalStateException`` instead of touching freed memory.
"""

from __future__ import annotations

import enum
import math
from typing import Any

import ml_dtypes
import numpy as np

from fbnops.framework import dtypes, memory

from .exceptions import (
    IllegalArgumentException,
    IllegalStateException,
    NoSuchElementException,
    TFResourceExhaustedException,
)

__all__ = [
    "DataType",
    "Shape",
    "Tensor",
    "TType",
    "TFloat32",
    "TFloat64",
    "TFloat16",
    "TBfloat16",
    "TInt32",
    "TInt64",
    "TBool",
    "TUint8",
    "TInt8",
    "TInt16",
    "Optional",
    "tensor_class",
]


class _DataTypeBase(enum.IntEnum):
    def getNumber(self) -> int:  # noqa: N802  (tf-java's name)
        return int(self)

    def __str__(self) -> str:
        return self.name


# org.tensorflow.proto.DataType: types.proto's numbers, from the framework's one dtype table
DataType = _DataTypeBase(
    "DataType",
    dtypes.data_type_members(("DT_INVALID", 0), ("DT_STRING", 7), ("DT_RESOURCE", 20)),
    module=__name__,
)
DataType.__doc__ = "org.tensorflow.proto.DataType (values of types.proto)."


class Shape:
    """org.tensorflow.ndarray.Shape: ``Shape.of(2, 3)``, ``Shape.unknown()``; -1 is an unknown size."""

    def __init__(self, dims):
        if dims is not None and not all(
            isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in dims if d is not None
        ):
            raise IllegalArgumentException(f"Shape dimensions are longs, got {list(dims)!r}")
        self.dims = None if dims is None else tuple(None if d is None or d < 0 else int(d) for d in dims)

    @staticmethod
    def of(*dims: int) -> Shape:
        return Shape(dims)

    @staticmethod
    def scalar() -> Shape:
        return Shape(())

    @staticmethod
    def unknown() -> Shape:
        return Shape(None)

    def numDimensions(self) -> int:
        return -1 if self.dims is None else len(self.dims)

    def isUnknown(self) -> bool:
        return self.dims is None

    def size(self, i: int | None = None) -> int:
        """``size()``: the number of elements (-1 if unknown); ``size(i)``: dimension ``i``."""
        if i is None:
            if self.dims is None or None in self.dims:
                return -1
            return math.prod(self.dims)
        d = self.dims[i]
        return -1 if d is None else d

    def asArray(self) -> list[int]:
        return [] if self.dims is None else [-1 if d is None else d for d in self.dims]

    def __eq__(self, other) -> bool:
        return isinstance(other, Shape) and other.dims == self.dims

    def __hash__(self) -> int:
        return hash(self.dims)

    def __repr__(self) -> str:
        return (
            "<unknown>"
            if self.dims is None
            else "[" + ", ".join("-1" if d is None else str(d) for d in self.dims) + "]"
        )


class Tensor:
    """org.tensorflow.Tensor: typed, shaped, closeable."""

    DATA_TYPE: DataType = DataType.DT_INVALID
    NUMPY: np.dtype = np.dtype(np.float32)

    def __init__(self, array: np.ndarray):
        self._array: np.ndarray | None = np.asarray(array, dtype=self.NUMPY)  # no copy: sizes are checked later

    @classmethod
    def _of(cls, value) -> Tensor:
        """Copy ``value`` into a new tensor; a value the type cannot hold is an error, never inf or a wrap.

        Always a copy, as tf-java's ``tensorOf(NdArray)`` copies: changing the source array later
        does not change the tensor.
        """
        array = np.asarray(value)
        if array.dtype == cls.NUMPY:
            return cls(array.copy())
        target = cls.NUMPY.kind if cls.NUMPY != TBfloat16.NUMPY else "f"
        source = array.dtype.kind
        if source not in "biuf" or (target in "biu" and source == "f") or (target == "b" and source != "b"):
            raise IllegalArgumentException(f"{cls.__name__} cannot hold {array.dtype} values")
        with np.errstate(over="ignore", invalid="ignore"):
            converted = array.astype(cls.NUMPY)
        if target == "f":
            lost = np.isfinite(array.astype(np.float64)) & ~np.isfinite(converted.astype(np.float64))
        else:
            lost = converted.astype(array.dtype) != array
        if np.any(lost):
            raise IllegalArgumentException(f"value out of range for {cls.__name__}")
        return cls(converted)

    @classmethod
    def tensorOf(cls, shape_or_array, data=None) -> Tensor:
        """``tensorOf(Shape)`` (zeros), ``tensorOf(Shape, data)`` or ``tensorOf(ndarray)``."""
        if isinstance(shape_or_array, Shape):
            if shape_or_array.size() < 0:
                raise IllegalArgumentException("Cannot allocate a tensor of unknown shape")
            nbytes = shape_or_array.size() * cls.NUMPY.itemsize
            if not memory.fits(nbytes):
                raise TFResourceExhaustedException(f"OOM when allocating {cls.__name__} of shape {shape_or_array}")
            if data is None:
                return cls(np.zeros(shape_or_array.dims, cls.NUMPY))
            flat = np.asarray(data).reshape(-1)
            if flat.size != shape_or_array.size():
                raise IllegalArgumentException(f"buffer of {flat.size} values does not fill shape {shape_or_array}")
            return cls._of(flat.reshape(shape_or_array.dims))
        return cls._of(shape_or_array)

    @classmethod
    def scalarOf(cls, value) -> Tensor:
        return cls._of(np.asarray(value).reshape(()))

    @classmethod
    def vectorOf(cls, *values) -> Tensor:
        return cls._of(np.asarray(values).reshape(-1))

    def _data(self) -> np.ndarray:
        if self._array is None:
            raise IllegalStateException("Tensor has been closed")
        return self._array

    def dataType(self) -> DataType:
        return self.DATA_TYPE

    def type(self) -> type[Tensor]:
        return type(self)

    def shape(self) -> Shape:
        return Shape(self._data().shape)

    def rank(self) -> int:
        return self._data().ndim

    def size(self) -> int:
        return self._data().size

    def numBytes(self) -> int:
        return self._data().nbytes

    def getObject(self, *coordinates: int) -> Any:
        data = self._data()
        if len(coordinates) != data.ndim:
            raise IllegalArgumentException(f"need {data.ndim} coordinates to read a scalar, got {len(coordinates)}")
        try:
            return data[coordinates].item()
        except IndexError as e:
            raise IllegalArgumentException(str(e)) from None

    getFloat = getDouble = getInt = getLong = getBoolean = getObject

    def close(self) -> None:
        self._array = None

    def isClosed(self) -> bool:
        return self._array is None

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        data = self._data()
        return data if dtype is None else data.astype(dtype)

    def __enter__(self) -> Tensor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._array is None else f"shape={self.shape()}"
        return f"<{type(self).__name__} {state}>"


TType = Tensor


def _tensor_type(name: str, data_type: DataType, numpy: Any) -> type[Tensor]:
    return type(
        name, (Tensor,), {"DATA_TYPE": data_type, "NUMPY": np.dtype(numpy), "__doc__": f"org.tensorflow.types.{name}"}
    )


TFloat32 = _tensor_type("TFloat32", DataType.DT_FLOAT, np.float32)
TFloat64 = _tensor_type("TFloat64", DataType.DT_DOUBLE, np.float64)
TFloat16 = _tensor_type("TFloat16", DataType.DT_HALF, np.float16)
TBfloat16 = _tensor_type("TBfloat16", DataType.DT_BFLOAT16, ml_dtypes.bfloat16)
TInt32 = _tensor_type("TInt32", DataType.DT_INT32, np.int32)
TInt64 = _tensor_type("TInt64", DataType.DT_INT64, np.int64)
TBool = _tensor_type("TBool", DataType.DT_BOOL, np.bool_)
TUint8 = _tensor_type("TUint8", DataType.DT_UINT8, np.uint8)
TInt8 = _tensor_type("TInt8", DataType.DT_INT8, np.int8)
TInt16 = _tensor_type("TInt16", DataType.DT_INT16, np.int16)

_BY_NUMPY = {
    cls.NUMPY: cls for cls in (TFloat32, TFloat64, TFloat16, TBfloat16, TInt32, TInt64, TBool, TUint8, TInt8, TInt16)
}


def tensor_class(dtype: np.dtype) -> type[Tensor]:
    """The tensor class for a NumPy dtype (``TensorTypeRegistry.find``)."""
    try:
        return _BY_NUMPY[np.dtype(dtype).newbyteorder("=")]
    except KeyError:
        raise IllegalArgumentException(f"no tensor type is registered for {np.dtype(dtype)}") from None


def as_tensor(value) -> Tensor:
    """A feed value: a Tensor (used as is) or, as an fbnops convenience, a NumPy array."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (np.ndarray, np.generic)):
        return tensor_class(value.dtype)(value.astype(value.dtype.newbyteorder("="), copy=False))
    raise IllegalArgumentException(f"expected a Tensor, got {type(value).__name__}")


class Optional:
    """java.util.Optional (what ``Result.get(String)`` returns)."""

    def __init__(self, value=None):
        self._value = value

    @staticmethod
    def ofNullable(value) -> Optional:
        return Optional(value)

    @staticmethod
    def empty() -> Optional:
        return Optional()

    def isPresent(self) -> bool:
        return self._value is not None

    def isEmpty(self) -> bool:
        return self._value is None

    def get(self):
        if self._value is None:
            raise NoSuchElementException("No value present")
        return self._value

    def orElse(self, other):
        return other if self._value is None else self._value

    def __repr__(self) -> str:
        return "Optional.empty" if self._value is None else f"Optional[{self._value!r}]"
