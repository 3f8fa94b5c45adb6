"""D3D12, collapsed: a buffer resource is host bytes; command lists run their work when the queue executes them.

Heaps, barriers, fences and the upload/readback copy queues are not mirrored:
``ID3D12Resource.Upload``/``Readback`` stand in for them (see the fidelity page).
"""

from __future__ import annotations

import math

import numpy as np

from fbnops.framework import memory, strided
from fbnops.framework.errors import ResourceExhaustedError

from .enums import HRESULTError, invalid


def out_of_memory(nbytes: int, what: str) -> HRESULTError | None:
    """E_OUTOFMEMORY if ``nbytes`` cannot be allocated now (the project's one memory guard), else None."""
    try:
        memory.check_fits(nbytes, what)
    except ResourceExhaustedError as e:
        return HRESULTError("E_OUTOFMEMORY", str(e))
    return None


class ID3D12Resource:
    """A D3D12 buffer, collapsed to host bytes.  Upload/Readback stand in for the copy queues."""

    def __init__(self, size_in_bytes: int):
        if isinstance(size_in_bytes, bool) or not isinstance(size_in_bytes, (int, np.integer)) or size_in_bytes <= 0:
            raise invalid(f"a buffer needs a positive integer size, got {size_in_bytes!r}")
        if size_in_bytes >= strided.ADDRESS_LIMIT:
            raise invalid(f"a buffer of {size_in_bytes} bytes is beyond 2**63")
        oom = out_of_memory(int(size_in_bytes), f"an ID3D12Resource of {size_in_bytes} bytes")
        if oom is not None:
            raise oom
        self._bytes = np.zeros(int(size_in_bytes), np.uint8)

    def GetDesc(self) -> dict:
        return {"Width": self._bytes.size}

    def Upload(self, array: np.ndarray, offset: int = 0) -> None:
        """Copy an array's bytes in at ``offset`` (nothing is written unless all of them fit)."""
        if not isinstance(array, np.ndarray) or not _is_plain_data(array.dtype):
            raise invalid(f"Upload: expected a NumPy array of numbers, got {_describe(array)}")
        data = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
        strided.check_in_bounds([data.size], [1], 1, offset, self._bytes.size, what="Upload", error=invalid)
        self._bytes[offset : offset + data.size] = data

    def Readback(self, dtype, shape, offset: int = 0) -> np.ndarray:
        """A copy of ``prod(shape)`` elements of ``dtype`` read at ``offset``."""
        try:
            dtype = np.dtype(dtype)
        except TypeError:
            raise invalid(f"Readback: {dtype!r} is not a dtype") from None
        if not _is_plain_data(dtype):
            raise invalid(f"Readback: {dtype} is not a numeric dtype")
        if not isinstance(shape, (tuple, list)) or not all(
            isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in shape
        ):
            raise invalid(f"Readback: shape must be a tuple of non-negative integers, got {shape!r}")
        n = math.prod(int(d) for d in shape) * dtype.itemsize
        strided.check_in_bounds([n], [1], 1, offset, self._bytes.size, what="Readback", error=invalid)
        return self._bytes[offset : offset + n].view(dtype).reshape(tuple(int(d) for d in shape)).copy()


def _is_plain_data(dtype: np.dtype) -> bool:
    """Bytes that mean numbers: no Python objects, no structured or string types."""
    return dtype.kind in "biufc" or dtype.name == "bfloat16"


def _describe(value) -> str:
    return f"{type(value).__name__} of dtype {value.dtype}" if isinstance(value, np.ndarray) else type(value).__name__


class ID3D12GraphicsCommandList:
    def __init__(self):
        self._work: list = []
        self._closed = False

    def Close(self) -> None:
        self._closed = True

    def Reset(self) -> None:
        self._work.clear()
        self._closed = False


class ID3D12CommandQueue:
    def ExecuteCommandLists(self, lists) -> None:
        for cl in lists:
            if not cl._closed:
                raise HRESULTError("DXGI_ERROR_INVALID_CALL", "ExecuteCommandLists: the command list is not closed")
            for work in cl._work:
                work()


class ID3D12Device:
    def CreateCommittedResource(self, size_in_bytes: int) -> ID3D12Resource:
        return ID3D12Resource(size_in_bytes)

    def CreateCommandQueue(self) -> ID3D12CommandQueue:
        return ID3D12CommandQueue()

    def CreateCommandList(self) -> ID3D12GraphicsCommandList:
        return ID3D12GraphicsCommandList()


def D3D12CreateDevice() -> ID3D12Device:
    return ID3D12Device()
