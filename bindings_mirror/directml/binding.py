"""IDMLBindingTable, and the proof that a binding holds its tensor before any byte of it is touched."""

from __future__ import annotations

import numpy as np

from fbnops.framework import strided

from .d3d12 import ID3D12Resource
from .descs import DML_BINDING_DESC, DML_BINDING_TABLE_DESC, DML_BUFFER_BINDING, DML_BUFFER_TENSOR_DESC
from .enums import (
    DML_BINDING_TYPE_BUFFER,
    DML_BINDING_TYPE_NONE,
    DML_MINIMUM_BUFFER_TENSOR_ALIGNMENT,
    NUMPY_DTYPES,
    HRESULTError,
    invalid,
)
from .objects import IDMLCompiledOperator, IDMLObject, IDMLOperatorInitializer
from .validation import element_strides


def _uint64(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and 0 <= value < 2**64


def tensor_view(buf: DML_BUFFER_TENSOR_DESC, binding: DML_BUFFER_BINDING, where: str) -> np.ndarray:
    """The ndarray a buffer binding holds for a tensor desc, after proving every byte lies in the binding."""
    res = binding.Buffer
    if not isinstance(res, ID3D12Resource):
        raise invalid(f"{where}: DML_BUFFER_BINDING.Buffer must be a resource")
    if not _uint64(binding.Offset) or not _uint64(binding.SizeInBytes):
        raise invalid(
            f"{where}: binding Offset {binding.Offset!r} and SizeInBytes {binding.SizeInBytes!r} must be UINT64s"
        )
    offset, size = int(binding.Offset), int(binding.SizeInBytes)
    align = max(DML_MINIMUM_BUFFER_TENSOR_ALIGNMENT, buf.GuaranteedBaseOffsetAlignment)
    if offset % align:
        raise invalid(f"{where}: binding Offset {offset} is not aligned to {align} bytes")
    if size < buf.TotalTensorSizeInBytes:
        raise invalid(
            f"{where}: binding of {size} bytes does not hold TotalTensorSizeInBytes {buf.TotalTensorSizeInBytes}"
        )
    # The binding's window lies in the resource, and the tensor's strided extent in the window.
    strided.check_in_bounds([size], [1], 1, offset, res._bytes.size, what=f"{where} binding", error=invalid)
    dtype = NUMPY_DTYPES[buf.DataType]
    sizes, strides = [int(s) for s in buf.Sizes], element_strides(buf)
    strided.check_in_bounds(sizes, strides, dtype.itemsize, 0, size, what=where, error=invalid)
    region = res._bytes[offset : offset + size]
    return np.ndarray(sizes, dtype, buffer=region.data, strides=[s * dtype.itemsize for s in strides])


class IDMLBindingTable(IDMLObject):
    def __init__(self, desc: DML_BINDING_TABLE_DESC):
        super().__init__()
        self.Reset(desc)

    def Reset(self, desc: DML_BINDING_TABLE_DESC) -> None:
        if not isinstance(desc, DML_BINDING_TABLE_DESC) or not isinstance(
            desc.Dispatchable, (IDMLCompiledOperator, IDMLOperatorInitializer)
        ):
            raise invalid("DML_BINDING_TABLE_DESC.Dispatchable must be a compiled operator or an initializer")
        self._dispatchable = desc.Dispatchable
        self._inputs: list[DML_BINDING_DESC] | None = None
        self._outputs: list[DML_BINDING_DESC] | None = None

    def _check(self, bindings, members, optional, what: str):
        if len(bindings) != len(members):
            raise invalid(
                f"{what}: {len(bindings)} bindings for {len(members)} {what[4:].lower()} of the "
                f"operator (including optional tensors: use DML_BINDING_TYPE_NONE)"
            )
        for b, m in zip(bindings, members, strict=True):
            if not isinstance(b, DML_BINDING_DESC):
                raise invalid(f"{what}: binding for {m} must be a DML_BINDING_DESC")
            if b.Type == DML_BINDING_TYPE_NONE and m not in optional:
                raise invalid(f"{what}: {m} is required; DML_BINDING_TYPE_NONE is only for absent optional tensors")
            if b.Type == DML_BINDING_TYPE_BUFFER and not isinstance(b.Desc, DML_BUFFER_BINDING):
                raise invalid(f"{what}: binding for {m} must carry a DML_BUFFER_BINDING")
            if b.Type not in (DML_BINDING_TYPE_NONE, DML_BINDING_TYPE_BUFFER):
                raise HRESULTError("E_NOTIMPL", f"{what}: binding type {b.Type} for {m}")

    def BindInputs(self, bindings) -> None:
        if isinstance(self._dispatchable, IDMLCompiledOperator):
            s = self._dispatchable._op._schema
            self._check(list(bindings), s.inputs, s.optional, "BindInputs")
        self._inputs = list(bindings)

    def BindOutputs(self, bindings) -> None:
        if isinstance(self._dispatchable, IDMLCompiledOperator):
            s = self._dispatchable._op._schema
            self._check(list(bindings), s.outputs, (), "BindOutputs")
        self._outputs = list(bindings)

    def BindTemporaryResource(self, binding: DML_BINDING_DESC | None) -> None:
        pass  # TemporaryResourceSize is 0

    def BindPersistentResource(self, binding: DML_BINDING_DESC | None) -> None:
        pass  # PersistentResourceSize is 0
