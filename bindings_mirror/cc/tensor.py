"""``tensorflow::DataType``, ``Tensor``, ``TensorShape``/``PartialTensorShape`` and
``Input::Initializer`` (a constant given as a scalar or a nested initializer list).

The element type of an initializer follows the C++ literal it stands for: a Python
``float`` is ``1.f`` (DT_FLOAT), an ``int`` is ``1`` (DT_INT32, DT_INT64 beyond 32
bits), a ``bool`` is DT_BOOL; NumPy scalars and arrays keep their dtype
(``np.float64(1.0)`` is the C++ double ``1.0``, DT_DOUBLE).
"""

from __future__ import annotations

import enum

import ml_dtypes
import numpy as np

from fbnops.framework import dtypes, memory

from .status import Status, StatusCode

__all__ = ["DataType", "DT_FLOAT", "DT_DOUBLE", "DT_INT32", "DT_INT64", "DT_BOOL", "DT_HALF", "DT_BFLOAT16"]
__all__ += ["Tensor", "TensorShape", "PartialTensorShape", "Initializer", "DataTypeString"]


class _DataTypeBase(enum.IntEnum):
    def __str__(self) -> str:
        return self.name


# tensorflow::DataType: types.proto's numbers, from the framework's one dtype table
DataType = _DataTypeBase("DataType", dtypes.data_type_members(("DT_INVALID", 0), ("DT_STRING", 7)), module=__name__)
DataType.__doc__ = "tensorflow::DataType (types.proto numbers)."


DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64 = DataType.DT_FLOAT, DataType.DT_DOUBLE, DataType.DT_INT32, DataType.DT_INT64
DT_BOOL, DT_HALF, DT_BFLOAT16 = DataType.DT_BOOL, DataType.DT_HALF, DataType.DT_BFLOAT16

_NUMPY = {
    DT_FLOAT: np.dtype(np.float32),
    DT_DOUBLE: np.dtype(np.float64),
    DT_INT32: np.dtype(np.int32),
    DT_INT64: np.dtype(np.int64),
    DT_BOOL: np.dtype(np.bool_),
    DT_HALF: np.dtype(np.float16),
    DT_BFLOAT16: np.dtype(ml_dtypes.bfloat16),
    DataType.DT_UINT8: np.dtype(np.uint8),
    DataType.DT_INT16: np.dtype(np.int16),
    DataType.DT_INT8: np.dtype(np.int8),
}
_BY_NUMPY = {v: k for k, v in _NUMPY.items()}


def numpy_dtype(dtype) -> np.dtype:
    """The NumPy dtype of a DataType (or of anything np.dtype accepts)."""
    if isinstance(dtype, DataType):
        return _NUMPY[dtype]
    return np.dtype(dtype)


def data_type(dtype) -> DataType:
    return _BY_NUMPY.get(np.dtype(dtype), DataType.DT_INVALID)


def DataTypeString(dtype) -> str:  # noqa: N802  (tensorflow::DataTypeString)
    from fbnops.framework import dtypes

    return dtypes.tf_name(numpy_dtype(dtype))


class TensorShape:
    """tensorflow::TensorShape: fully known dims."""

    def __init__(self, dims=()):
        self._dims = tuple(int(d) for d in dims)
        if any(d < 0 for d in self._dims):
            raise ValueError(f"TensorShape dims must be >= 0, got {list(self._dims)}")

    def dims(self) -> int:
        return len(self._dims)

    def dim_size(self, i: int) -> int:
        return self._dims[i]

    def num_elements(self) -> int:
        return int(np.prod(self._dims, dtype=np.int64))

    def dim_sizes(self) -> list[int]:
        return list(self._dims)

    def DebugString(self) -> str:
        return "[" + ",".join(map(str, self._dims)) + "]"

    def __eq__(self, other) -> bool:
        return isinstance(other, TensorShape) and other._dims == self._dims

    def __hash__(self) -> int:
        return hash(self._dims)

    def __repr__(self) -> str:
        return self.DebugString()


class PartialTensorShape:
    """tensorflow::PartialTensorShape: ``PartialTensorShape({-1, 3})``; None = unknown rank."""

    def __init__(self, dims=None):
        self.dims = None if dims is None else tuple(None if d is None or d < 0 else int(d) for d in dims)

    def DebugString(self) -> str:
        if self.dims is None:
            return "<unknown>"
        return "[" + ",".join("?" if d is None else str(d) for d in self.dims) + "]"

    def __repr__(self) -> str:
        return self.DebugString()


class Tensor:
    """tensorflow::Tensor: ``Tensor(DT_FLOAT, TensorShape({2, 3}))``; ``np.asarray(t)`` reads it
    (``t.flat<float>()``, ``t.tensor<float, 4>()`` in C++)."""

    def __init__(self, dtype=DT_FLOAT, shape: TensorShape | tuple | list = ()):
        if isinstance(dtype, np.ndarray):  # the mirror's own constructor from a computed value
            self._array = dtype
            return
        dims = TensorShape(shape.dim_sizes() if isinstance(shape, TensorShape) else list(shape)).dim_sizes()
        np_dtype = numpy_dtype(dtype)
        nbytes = int(np.prod(dims, dtype=object)) * np_dtype.itemsize
        # TF's allocator fails softly: the tensor exists but IsInitialized() is false
        self._array = np.zeros(dims, np_dtype) if memory.fits(nbytes) else None

    def IsInitialized(self) -> bool:
        return self._array is not None

    def _data(self) -> np.ndarray:
        if self._array is None:
            raise ValueError("uninitialized Tensor (its allocation failed): check IsInitialized() first")
        return self._array

    def dtype(self) -> DataType:
        return data_type(self._data().dtype)

    def shape(self) -> TensorShape:
        return TensorShape(self._data().shape)

    def dims(self) -> int:
        return self._data().ndim

    def dim_size(self, i: int) -> int:
        return self._data().shape[i]

    def NumElements(self) -> int:
        return self._data().size

    def TotalBytes(self) -> int:
        return self._data().nbytes

    def flat(self) -> np.ndarray:
        return self._data().reshape(-1)

    def tensor(self) -> np.ndarray:
        return self._data()

    vec = matrix = tensor

    def scalar(self) -> np.ndarray:
        return self._data().reshape(())

    def DebugString(self) -> str:
        if self._array is None:
            return "Tensor<uninitialized>"
        return f"Tensor<type: {DataTypeString(self._array.dtype)} shape: {self.shape().DebugString()}>"

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        data = self._data()
        return data if dtype is None else data.astype(dtype)

    def __repr__(self) -> str:
        return self.DebugString()


def _scalar_dtype(value) -> np.dtype | None:
    if isinstance(value, np.generic):  # before float: np.float64 is a Python float too
        return value.dtype
    if isinstance(value, (bool, np.bool_)):
        return np.dtype(np.bool_)
    if isinstance(value, int):
        return np.dtype(np.int32 if -(2**31) <= value < 2**31 else np.int64)
    if isinstance(value, float):
        return np.dtype(np.float32)
    return None


class Initializer:
    """Input::Initializer: a scalar, a (nested) list, an ndarray or a Tensor; ``status`` says if it is valid."""

    def __init__(self, value):
        self.status = Status.OK()
        self.tensor: np.ndarray | None = None
        try:
            self.tensor = self._convert(value)
        except _Bad as e:
            self.status = Status(StatusCode.kInvalidArgument, str(e))

    @classmethod
    def _convert(cls, value, depth: int = 0) -> np.ndarray:
        if depth > _MAX_DIMS:
            raise _Bad(f"Initializer lists nest deeper than {_MAX_DIMS} dimensions (TensorShape's limit)")
        if isinstance(value, Tensor):
            return np.asarray(value)
        if isinstance(value, np.ndarray):
            return value
        if isinstance(value, (list, tuple)):
            if not value:  # an empty initializer list is a float tensor of shape (0,)
                return np.zeros(0, np.float32)
            parts = [cls._convert(v, depth + 1) for v in value]
            first = parts[0]
            for p in parts:
                if p.dtype != first.dtype:
                    raise _Bad("Initializer list components should all have the same type")
                if p.shape != first.shape:
                    raise _Bad("Initializer list components should all have the same shape")
            return np.stack(parts)
        dtype = _scalar_dtype(value)
        if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
            raise _Bad(f"{value} does not fit in int64")
        if dtype is None:
            raise _Bad(f"cannot make a tensor from a {type(value).__name__} (no Input::Initializer constructor)")
        with np.errstate(over="ignore"):
            array = np.asarray(value, dtype)
        if dtype.kind == "f" and np.isfinite(float(value)) and not np.isfinite(array):
            raise _Bad(f"{value!r} does not fit in {DataTypeString(dtype)}")
        return array


_MAX_DIMS = 254  # TensorShape::MaxDimensions()


class _Bad(Exception):
    pass
