"""dnnl::graph::logical_tensor with the five constructor overloads of ``dnnl_graph.hpp``."""

from __future__ import annotations

import numpy as np

from fbnops.framework import strided

from . import enums
from .enums import DNNL_GRAPH_UNKNOWN_DIM, DNNL_GRAPH_UNKNOWN_NDIMS, error

DNNL_MAX_NDIMS = 12  # DNNL_MAX_NDIMS: logical tensors hold at most this many dims


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def fits_size_t(v) -> bool:
    """An integer (not a bool) that C++'s ``size_t`` holds: ids and layout ids."""
    return _is_int(v) and 0 <= int(v) < (1 << 64)


def _int_list(values, what: str, tid) -> list[int]:
    if isinstance(values, (str, bytes, bytearray)):  # iterable in Python, never a dims vector in C++
        raise error("invalid_arguments", f"logical_tensor {tid}: {what} must be a list of integers")
    try:
        out = list(values)
    except TypeError:
        raise error("invalid_arguments", f"logical_tensor {tid}: {what} must be a list of integers") from None
    if not all(_is_int(v) for v in out):
        raise error("invalid_arguments", f"logical_tensor {tid}: {what} must be a list of integers, got {out}")
    if len(out) > DNNL_MAX_NDIMS:
        raise error("invalid_arguments", f"logical_tensor {tid}: at most {DNNL_MAX_NDIMS} dims, got {len(out)}")
    out = [int(v) for v in out]
    if any(not -(1 << 63) <= v < (1 << 63) for v in out):  # dnnl_dim_t is int64_t
        raise error("invalid_arguments", f"logical_tensor {tid}: {what} must fit in int64, got {out}")
    return out


class logical_tensor:  # noqa: N801
    """The overloads, dispatched on the positional arguments as C++ dispatches on their types::

    logical_tensor(tid, dtype, ltype=layout_type.undef)                 # ndims unknown
    logical_tensor(tid, dtype, ndims: int, ltype, ptype=undef)
    logical_tensor(tid, dtype, dims: list, ltype: layout_type, ptype=undef)
    logical_tensor(tid, dtype, dims: list, strides: list, ptype=undef)  # strided, strides in elements
    logical_tensor(tid, dtype, dims: list, lid: int, ptype=undef)       # opaque layout id
    """

    data_type = enums.data_type
    layout_type = enums.layout_type
    property_type = enums.property_type

    def __init__(
        self, tid: int, dtype: logical_tensor.data_type, *args, ptype: logical_tensor.property_type | None = None
    ):
        if not fits_size_t(tid):
            raise error("invalid_arguments", f"logical_tensor id must be an integer in [0, 2**64), got {tid!r}")
        if not isinstance(dtype, enums.data_type):
            raise error("invalid_arguments", f"logical_tensor {tid}: data_type must be a logical_tensor.data_type")
        if len(args) > 3 or (len(args) == 3 and ptype is not None):
            raise error("invalid_arguments", f"logical_tensor {tid}: too many arguments")
        if len(args) == 3:
            args, ptype = args[:2], args[2]
        self._id, self._dtype = int(tid), dtype
        self._dims: list[int] | None = None
        self._strides: list[int] | None = None
        self._layout_id = 0
        self._ltype = enums.layout_type.undef
        first = args[0] if args else enums.layout_type.undef
        second = args[1] if len(args) > 1 else None
        if isinstance(first, enums.layout_type) and len(args) <= 1:
            self._ltype = first
        elif _is_int(first):
            self._from_ndims(int(first), second)
        else:
            self._from_dims(_int_list(first, "dims", tid), second)
        ptype = enums.property_type.undef if ptype is None else ptype
        if not isinstance(ptype, enums.property_type):
            raise error("invalid_arguments", f"logical_tensor {tid}: property_type must be a property_type")
        self._ptype = ptype

    def _from_ndims(self, ndims: int, ltype) -> None:
        if not isinstance(ltype, enums.layout_type):
            raise error("invalid_arguments", f"logical_tensor {self._id}: the ndims overload needs a layout_type")
        if ndims > DNNL_MAX_NDIMS or ndims < DNNL_GRAPH_UNKNOWN_NDIMS:
            raise error("invalid_arguments", f"logical_tensor {self._id}: ndims {ndims} is out of range")
        self._ltype = ltype
        if ndims >= 0:
            self._dims = [DNNL_GRAPH_UNKNOWN_DIM] * ndims

    def _from_dims(self, dims: list[int], layout) -> None:
        if any(d < 0 and d != DNNL_GRAPH_UNKNOWN_DIM for d in dims):
            raise error("invalid_arguments", f"logical_tensor {self._id}: negative dimension in {dims}")
        self._dims = dims
        if isinstance(layout, enums.layout_type):
            self._ltype = layout
            if layout == enums.layout_type.strided and self._known():
                self._strides = strided.dense_strides(dims)  # dense, row-major
        elif _is_int(layout):  # an opaque layout id (size_t)
            if not fits_size_t(layout):
                raise error("invalid_arguments", f"logical_tensor {self._id}: layout id {layout} is not a size_t")
            self._ltype, self._layout_id = enums.layout_type.opaque, int(layout)
        else:  # explicit strides (elements)
            strides = _int_list(layout, "strides", self._id)
            if len(strides) != len(dims):
                raise error("invalid_arguments", f"logical_tensor {self._id}: {len(dims)} dims, {len(strides)} strides")
            self._ltype, self._strides = enums.layout_type.strided, strides

    def get_id(self) -> int:
        return self._id

    def get_data_type(self) -> logical_tensor.data_type:
        return self._dtype

    def get_dims(self) -> list[int]:
        if self._dims is None:
            raise error("invalid_arguments", "cannot return dims when ndims < 0")
        return list(self._dims)

    def get_strides(self) -> list[int]:
        if self._ltype != enums.layout_type.strided or self._strides is None:
            raise error("invalid_arguments", "layout type should be strided")
        return list(self._strides)

    def get_layout_type(self) -> logical_tensor.layout_type:
        return self._ltype

    def get_layout_id(self) -> int:
        if self._ltype != enums.layout_type.opaque:
            raise error("invalid_arguments", "layout type should be opaque")
        return self._layout_id

    def get_property_type(self) -> logical_tensor.property_type:
        return self._ptype

    def ndims(self) -> int:
        return DNNL_GRAPH_UNKNOWN_NDIMS if self._dims is None else len(self._dims)

    def get_mem_size(self) -> int:
        """Bytes from the lowest to one past the highest element (0 unless strided with known dims)."""
        if not self._known() or self._strides is None or self._dtype not in enums.ITEMSIZE:
            return 0
        try:
            low, end = strided.byte_span(self._dims, self._strides, enums.ITEMSIZE[self._dtype])
        except strided.StridedBoundsError as e:
            raise error("invalid_arguments", f"logical_tensor {self._id}: {e}") from None
        return end - low

    def is_equal(self, other: logical_tensor) -> bool:
        return self._key() == other._key()

    def _key(self):
        return (self._id, self._dtype, self._dims, self._ltype, self._strides, self._layout_id, self._ptype)

    def _known(self) -> bool:
        return self._dims is not None and all(d != DNNL_GRAPH_UNKNOWN_DIM for d in self._dims)

    def __repr__(self) -> str:
        return f"logical_tensor(id={self._id}, {self._dtype.name}, dims={self._dims}, {self._ltype.name})"
