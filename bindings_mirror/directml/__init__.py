"""DirectML mirror (seed 003): the batch-normalization operators as a DirectML program writes them.

    device = DMLCreateDevice(D3D12CreateDevice())
    op = device.CreateOperator(DML_OPERATOR_DESC(DML_OPERATOR_BATCH_NORMALIZATION_GRAD, grad_desc))
    compiled = device.CompileOperator(op, DML_EXECUTION_FLAG_NONE)
    initializer = device.CreateOperatorInitializer([compiled])
    ... binding tables, RecordDispatch(initializer), then RecordDispatch(compiled), execute ...

Names are spelled as in DirectML.h.  What is collapsed: D3D12 heaps, descriptor
heaps, upload/readback copies and fences become small Python objects
(``ID3D12Resource`` is a byte buffer with ``Upload``/``Readback`` helpers).  What is
kept: tensor descs with sizes/strides/byte sizes, every tensor constraint checked
at ``CreateOperator`` (an ``HRESULTError`` naming the member and the rule),
compile, initialize, binding in desc-member order with ``DML_BINDING_TYPE_NONE`` for
absent optional tensors, and command recording.

Semantics (dml_onednn.md): ``BATCH_NORMALIZATION_GRAD`` is the frozen-statistics
gradient (``dx = dy*Scale/sqrt(Variance+Epsilon)``, what TensorFlow computes with
``is_training=False``); ``BATCH_NORMALIZATION_TRAINING_GRAD`` the full one (it uses the
Mean/Variance tensors given, as TensorFlow does with its reserve spaces).  The
reduced axes are those where the Mean/Variance/Scale sizes are 1.  Statistics are
population (biased) variances.  Computation is float32 for FLOAT16 tensors too
(``ALLOW_HALF_PRECISION_COMPUTATION`` is accepted and changes nothing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from fbnops.framework import memory
from fbnops.ops import canonical

# ----------------------------------------------------------------------------- enums / constants

DML_TENSOR_DIMENSION_COUNT_MAX1 = 8
DML_MINIMUM_BUFFER_TENSOR_ALIGNMENT = 16

DML_TENSOR_DATA_TYPE_UNKNOWN = 0
DML_TENSOR_DATA_TYPE_FLOAT32 = 1
DML_TENSOR_DATA_TYPE_FLOAT16 = 2
DML_TENSOR_DATA_TYPE_UINT32 = 3
DML_TENSOR_DATA_TYPE_UINT16 = 4
DML_TENSOR_DATA_TYPE_UINT8 = 5
DML_TENSOR_DATA_TYPE_INT32 = 6
DML_TENSOR_DATA_TYPE_INT16 = 7
DML_TENSOR_DATA_TYPE_INT8 = 8
DML_TENSOR_DATA_TYPE_FLOAT64 = 9
DML_TENSOR_DATA_TYPE_UINT64 = 10
DML_TENSOR_DATA_TYPE_INT64 = 11

DML_TENSOR_TYPE_INVALID = 0
DML_TENSOR_TYPE_BUFFER = 1
DML_TENSOR_FLAG_NONE = 0x0
DML_TENSOR_FLAG_OWNED_BY_DML = 0x1

DML_OPERATOR_ACTIVATION_IDENTITY = 44
DML_OPERATOR_ACTIVATION_RELU = 55
DML_OPERATOR_BATCH_NORMALIZATION = 72
DML_OPERATOR_BATCH_NORMALIZATION_GRAD = 146
DML_OPERATOR_BATCH_NORMALIZATION_TRAINING = 151
DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD = 152

DML_CREATE_DEVICE_FLAG_NONE = 0x0
DML_CREATE_DEVICE_FLAG_DEBUG = 0x1
DML_EXECUTION_FLAG_NONE = 0x0
DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION_COMPUTATION = 0x1
DML_EXECUTION_FLAG_DISABLE_META_COMMANDS = 0x2
DML_EXECUTION_FLAG_DESCRIPTORS_VOLATILE = 0x4

DML_BINDING_TYPE_NONE = 0
DML_BINDING_TYPE_BUFFER = 1
DML_BINDING_TYPE_BUFFER_ARRAY = 2

DML_FEATURE_LEVEL_3_1 = 0x3100
DML_FEATURE_LEVEL_4_1 = 0x4100

_ELEMENT_BITS = {1: 32, 2: 16, 3: 32, 4: 16, 5: 8, 6: 32, 7: 16, 8: 8, 9: 64, 10: 64, 11: 64}
_NUMPY = {DML_TENSOR_DATA_TYPE_FLOAT32: np.dtype("<f4"), DML_TENSOR_DATA_TYPE_FLOAT16: np.dtype("<f2")}
_DT_NAME = {
    1: "FLOAT32",
    2: "FLOAT16",
    3: "UINT32",
    4: "UINT16",
    5: "UINT8",
    6: "INT32",
    7: "INT16",
    8: "INT8",
    9: "FLOAT64",
    10: "UINT64",
    11: "INT64",
}

_HRESULTS = {
    "E_INVALIDARG": 0x80070057,
    "E_NOTIMPL": 0x80004001,
    "E_OUTOFMEMORY": 0x8007000E,
    "DXGI_ERROR_INVALID_CALL": 0x887A0001,
}


class HRESULTError(Exception):
    """A failed HRESULT: ``.hresult`` is its name (``E_INVALIDARG``), ``.code`` its value."""

    def __init__(self, hresult: str, message: str):
        super().__init__(f"{hresult}: {message}")
        self.hresult = hresult
        self.code = _HRESULTS[hresult]
        self.message = message


def _invalid(message: str) -> HRESULTError:
    return HRESULTError("E_INVALIDARG", message)


# ----------------------------------------------------------------------------- structs


@dataclass
class DML_BUFFER_TENSOR_DESC:
    DataType: int
    Flags: int
    DimensionCount: int
    Sizes: list[int]
    Strides: list[int] | None = None
    TotalTensorSizeInBytes: int = 0
    GuaranteedBaseOffsetAlignment: int = 0


@dataclass
class DML_TENSOR_DESC:
    Type: int
    Desc: DML_BUFFER_TENSOR_DESC | None


@dataclass
class DML_OPERATOR_DESC:
    Type: int
    Desc: Any


@dataclass
class DML_ACTIVATION_RELU_OPERATOR_DESC:
    InputTensor: DML_TENSOR_DESC | None = None
    OutputTensor: DML_TENSOR_DESC | None = None


@dataclass
class DML_ACTIVATION_IDENTITY_OPERATOR_DESC:
    InputTensor: DML_TENSOR_DESC | None = None
    OutputTensor: DML_TENSOR_DESC | None = None


@dataclass
class DML_BATCH_NORMALIZATION_OPERATOR_DESC:
    InputTensor: DML_TENSOR_DESC
    MeanTensor: DML_TENSOR_DESC
    VarianceTensor: DML_TENSOR_DESC
    ScaleTensor: DML_TENSOR_DESC
    BiasTensor: DML_TENSOR_DESC
    OutputTensor: DML_TENSOR_DESC
    Spatial: bool = True
    Epsilon: float = 0.0
    FusedActivation: DML_OPERATOR_DESC | None = None


@dataclass
class DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC:
    InputTensor: DML_TENSOR_DESC
    ScaleTensor: DML_TENSOR_DESC
    BiasTensor: DML_TENSOR_DESC
    FusedAddTensor: DML_TENSOR_DESC | None
    OutputTensor: DML_TENSOR_DESC
    OutputMeanTensor: DML_TENSOR_DESC
    OutputVarianceTensor: DML_TENSOR_DESC
    Epsilon: float = 0.0
    FusedActivation: DML_OPERATOR_DESC | None = None


@dataclass
class DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC:
    """Seed 003: members in DirectML.h order."""

    InputTensor: DML_TENSOR_DESC
    InputGradientTensor: DML_TENSOR_DESC
    MeanTensor: DML_TENSOR_DESC
    VarianceTensor: DML_TENSOR_DESC
    ScaleTensor: DML_TENSOR_DESC
    OutputGradientTensor: DML_TENSOR_DESC
    OutputScaleGradientTensor: DML_TENSOR_DESC
    OutputBiasGradientTensor: DML_TENSOR_DESC
    Epsilon: float = 0.0


@dataclass
class DML_BATCH_NORMALIZATION_TRAINING_GRAD_OPERATOR_DESC(DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC):
    """The same nine members, in the same order, as DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC."""


@dataclass
class DML_BUFFER_BINDING:
    Buffer: ID3D12Resource | None
    Offset: int = 0
    SizeInBytes: int = 0


@dataclass
class DML_BINDING_DESC:
    Type: int
    Desc: DML_BUFFER_BINDING | None = None


@dataclass
class DML_BINDING_PROPERTIES:
    RequiredDescriptorCount: int
    TemporaryResourceSize: int
    PersistentResourceSize: int


@dataclass
class DML_BINDING_TABLE_DESC:
    Dispatchable: Any
    CPUDescriptorHandle: Any = None
    GPUDescriptorHandle: Any = None
    SizeInDescriptors: int = 0


def DMLCalcBufferTensorSize(dataType: int, dimensionCount: int, sizes: list[int], strides: list[int] | None) -> int:
    """DirectMLX.h: the minimum implied byte size, rounded up to a multiple of 4 (0 for an unknown type)."""
    bits = _ELEMENT_BITS.get(dataType)
    if bits is None:
        return 0
    if strides is None:
        implied_bits = math.prod(sizes[:dimensionCount]) * bits
    else:
        last = sum((s - 1) * t for s, t in zip(sizes[:dimensionCount], strides[:dimensionCount], strict=True))
        implied_bits = (last + 1) * bits
    nbytes = (implied_bits + 7) // 8
    return (nbytes + 3) & ~3


def make_tensor_desc(data_type: int, sizes, strides=None) -> DML_TENSOR_DESC:
    """A DML_TENSOR_DESC with TotalTensorSizeInBytes from DMLCalcBufferTensorSize (DMLX's default policy)."""
    sizes = [int(s) for s in sizes]
    buffer = DML_BUFFER_TENSOR_DESC(
        data_type, DML_TENSOR_FLAG_NONE, len(sizes), sizes, None if strides is None else [int(s) for s in strides]
    )
    buffer.TotalTensorSizeInBytes = DMLCalcBufferTensorSize(data_type, len(sizes), sizes, buffer.Strides)
    return DML_TENSOR_DESC(DML_TENSOR_TYPE_BUFFER, buffer)


# ----------------------------------------------------------------------------- the four operators


@dataclass
class _OpSchema:
    desc_type: type
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    optional: tuple[str, ...] = ()
    same_sizes: tuple[tuple[str, ...], ...] = ()
    stats: tuple[str, ...] = ()  # each dim 1 or equal to InputTensor's
    feature_level: int = DML_FEATURE_LEVEL_3_1
    execute: Any = None


def _bn_grad(d, t, is_training):
    view = canonical.nd_view(t["InputTensor"].shape, _kept_axes(t["MeanTensor"].shape))
    dx, ds, db = canonical.grad(
        view,
        t["InputTensor"],
        t["InputGradientTensor"],
        t["ScaleTensor"],
        t["MeanTensor"],
        t["VarianceTensor"],
        epsilon=d.Epsilon,
        is_training=is_training,
    )
    stat_shape = t["MeanTensor"].shape
    return {
        "OutputGradientTensor": dx,
        "OutputScaleGradientTensor": ds.reshape(stat_shape),
        "OutputBiasGradientTensor": db.reshape(stat_shape),
    }


def _kept_axes(stat_shape) -> list[int]:
    return [a for a, s in enumerate(stat_shape) if s != 1]


def _activation(desc: DML_OPERATOR_DESC | None, y: np.ndarray) -> np.ndarray:
    if desc is None or desc.Type == DML_OPERATOR_ACTIVATION_IDENTITY:
        return y
    return np.maximum(y, 0)  # ACTIVATION_RELU (validated at CreateOperator)


def _bn_forward(d, t):
    x = t["InputTensor"]
    names = ("MeanTensor", "VarianceTensor", "ScaleTensor", "BiasTensor")
    kept = sorted(set().union(*(_kept_axes(t[n].shape) for n in names)))
    stat_shape = tuple(x.shape[a] if a in kept else 1 for a in range(x.ndim))
    s = {n: np.broadcast_to(t[n], stat_shape) for n in names}  # each may broadcast on its own
    view = canonical.nd_view(x.shape, kept)
    compute_dtype = np.float32 if d.FusedActivation is not None else x.dtype  # round once, after the activation
    y, _, _ = canonical.forward(
        view,
        x.astype(compute_dtype),
        s["ScaleTensor"],
        s["BiasTensor"],
        s["MeanTensor"],
        s["VarianceTensor"],
        epsilon=d.Epsilon,
        is_training=False,
    )
    return {"OutputTensor": _activation(d.FusedActivation, y)}


def _bn_training(d, t):
    x = t["InputTensor"]
    stat_shape = t["ScaleTensor"].shape
    view = canonical.nd_view(x.shape, _kept_axes(stat_shape))
    fused = d.FusedActivation is not None or t.get("FusedAddTensor") is not None
    y, mean, var = canonical.forward(
        view,
        x.astype(np.float32) if fused else x,
        t["ScaleTensor"],
        t["BiasTensor"],
        None,
        None,
        epsilon=d.Epsilon,
        is_training=True,
    )
    if t.get("FusedAddTensor") is not None:
        y = y + t["FusedAddTensor"].astype(np.float32)  # added before the activation
    return {
        "OutputTensor": _activation(d.FusedActivation, y),
        "OutputMeanTensor": mean.reshape(stat_shape),
        "OutputVarianceTensor": var.reshape(stat_shape),
    }


_GRAD_IO = dict(
    inputs=("InputTensor", "InputGradientTensor", "MeanTensor", "VarianceTensor", "ScaleTensor"),
    outputs=("OutputGradientTensor", "OutputScaleGradientTensor", "OutputBiasGradientTensor"),
    same_sizes=(
        ("MeanTensor", "OutputBiasGradientTensor", "OutputScaleGradientTensor", "ScaleTensor", "VarianceTensor"),
        ("InputGradientTensor", "InputTensor", "OutputGradientTensor"),
    ),
    stats=("MeanTensor",),
)

SCHEMAS: dict[int, _OpSchema] = {
    DML_OPERATOR_BATCH_NORMALIZATION: _OpSchema(
        DML_BATCH_NORMALIZATION_OPERATOR_DESC,
        "DML_BATCH_NORMALIZATION_OPERATOR_DESC",
        inputs=("InputTensor", "MeanTensor", "VarianceTensor", "ScaleTensor", "BiasTensor"),
        outputs=("OutputTensor",),
        same_sizes=(("InputTensor", "OutputTensor"),),
        stats=("MeanTensor", "VarianceTensor", "ScaleTensor", "BiasTensor"),
        execute=_bn_forward,
    ),
    DML_OPERATOR_BATCH_NORMALIZATION_TRAINING: _OpSchema(
        DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC,
        "DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC",
        inputs=("InputTensor", "ScaleTensor", "BiasTensor", "FusedAddTensor"),
        outputs=("OutputTensor", "OutputMeanTensor", "OutputVarianceTensor"),
        optional=("FusedAddTensor",),
        same_sizes=(
            ("BiasTensor", "OutputMeanTensor", "OutputVarianceTensor", "ScaleTensor"),
            ("FusedAddTensor", "InputTensor", "OutputTensor"),
        ),
        stats=("ScaleTensor",),
        feature_level=DML_FEATURE_LEVEL_4_1,
        execute=_bn_training,
    ),
    DML_OPERATOR_BATCH_NORMALIZATION_GRAD: _OpSchema(
        DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC,
        "DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC",
        **_GRAD_IO,
        execute=lambda d, t: _bn_grad(d, t, is_training=False),
    ),
    DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD: _OpSchema(
        DML_BATCH_NORMALIZATION_TRAINING_GRAD_OPERATOR_DESC,
        "DML_BATCH_NORMALIZATION_TRAINING_GRAD_OPERATOR_DESC",
        **_GRAD_IO,
        feature_level=DML_FEATURE_LEVEL_4_1,
        execute=lambda d, t: _bn_grad(d, t, is_training=True),
    ),
}


def _sizes_str(sizes) -> str:
    return "{" + ",".join(str(s) for s in sizes) + "}"


def _check_tensor(schema: _OpSchema, member: str, td, is_output: bool) -> DML_BUFFER_TENSOR_DESC:
    where = f"{schema.name}.{member}"
    if (
        not isinstance(td, DML_TENSOR_DESC)
        or td.Type != DML_TENSOR_TYPE_BUFFER
        or not isinstance(td.Desc, DML_BUFFER_TENSOR_DESC)
    ):
        raise _invalid(
            f"{where}: must be a DML_TENSOR_DESC of Type DML_TENSOR_TYPE_BUFFER with a DML_BUFFER_TENSOR_DESC"
        )
    b = td.Desc
    if b.DataType not in _NUMPY:
        raise _invalid(f"{where}: DataType {_DT_NAME.get(b.DataType, b.DataType)} is not supported (FLOAT32, FLOAT16)")
    if not 1 <= b.DimensionCount <= DML_TENSOR_DIMENSION_COUNT_MAX1 or len(b.Sizes) != b.DimensionCount:
        raise _invalid(
            f"{where}: DimensionCount must be 1 to 8 and equal len(Sizes) ({b.DimensionCount} vs {len(b.Sizes)})"
        )
    if any(not isinstance(s, (int, np.integer)) or s <= 0 or s > 0xFFFFFFFF for s in b.Sizes):
        raise _invalid(
            f"{where}: Sizes {_sizes_str(b.Sizes)}: every size must be a positive UINT (a size of zero is invalid)"
        )
    if b.Strides is not None and (
        len(b.Strides) != b.DimensionCount
        or any(not isinstance(s, (int, np.integer)) or s < 0 or s > 0xFFFFFFFF for s in b.Strides)
    ):
        raise _invalid(f"{where}: Strides must hold DimensionCount non-negative UINTs")
    if is_output and b.Flags & DML_TENSOR_FLAG_OWNED_BY_DML:
        raise _invalid(f"{where}: DML_TENSOR_FLAG_OWNED_BY_DML applies to input tensors only")
    if b.Flags & DML_TENSOR_FLAG_OWNED_BY_DML:
        raise HRESULTError("E_NOTIMPL", f"{where}: DML_TENSOR_FLAG_OWNED_BY_DML is not supported by this mirror")
    minimum = DMLCalcBufferTensorSize(b.DataType, b.DimensionCount, b.Sizes, b.Strides)
    if b.TotalTensorSizeInBytes < minimum:
        raise _invalid(
            f"{where}: TotalTensorSizeInBytes {b.TotalTensorSizeInBytes} is below the minimum implied "
            f"size {minimum} (DMLCalcBufferTensorSize)"
        )
    if math.prod(b.Sizes) > 0xFFFFFFFF:
        raise _invalid(f"{where}: the tensor may not exceed 2^32 - 1 elements")
    align = b.GuaranteedBaseOffsetAlignment
    if align and (align & (align - 1) or align < _ELEMENT_BITS[b.DataType] // 8):
        raise _invalid(
            f"{where}: GuaranteedBaseOffsetAlignment {align} must be 0 or a power of two >= the element size"
        )
    return b


def validate_operator_desc(op_desc: DML_OPERATOR_DESC) -> _OpSchema:
    """Every tensor constraint of the operator, as CreateOperator checks them."""
    if not isinstance(op_desc, DML_OPERATOR_DESC):
        raise _invalid("CreateOperator expects a DML_OPERATOR_DESC")
    schema = SCHEMAS.get(op_desc.Type)
    if schema is None:
        raise HRESULTError("E_NOTIMPL", f"operator type {op_desc.Type} is not provided by this mirror")
    d = op_desc.Desc
    if type(d) is not schema.desc_type:  # exact: a GRAD desc is not a TRAINING_GRAD desc
        raise _invalid(f"DML_OPERATOR_DESC.Desc must be a {schema.name} for this Type")
    bufs = {}
    for member in (*schema.inputs, *schema.outputs):
        td = getattr(d, member)
        if td is None and member in schema.optional:
            continue
        if td is None:
            raise _invalid(f"{schema.name}.{member}: required tensor is null")
        bufs[member] = _check_tensor(schema, member, td, member in schema.outputs)
    members = sorted(bufs)
    first = bufs[schema.inputs[0]]
    for m in members:
        if bufs[m].DataType != first.DataType:
            raise _invalid(
                f"{schema.name}.{m}: DataType {_DT_NAME[bufs[m].DataType]} differs from InputTensor's "
                f"{_DT_NAME[first.DataType]}; {', '.join(members)} must have the same DataType"
            )
        if bufs[m].DimensionCount != first.DimensionCount:
            raise _invalid(
                f"{schema.name}.{m}: DimensionCount {bufs[m].DimensionCount} differs from InputTensor's "
                f"{first.DimensionCount}; {', '.join(members)} must have the same DimensionCount"
            )
    for group in schema.same_sizes:
        present = [m for m in group if m in bufs]
        for m in present[1:]:
            if list(bufs[m].Sizes) != list(bufs[present[0]].Sizes):
                raise _invalid(
                    f"{schema.name}.{m}: Sizes {_sizes_str(bufs[m].Sizes)} differ from {present[0]}'s "
                    f"{_sizes_str(bufs[present[0]].Sizes)}; {', '.join(group)} must have the same Sizes"
                )
    for m in schema.stats:
        for axis, (s, i) in enumerate(zip(bufs[m].Sizes, first.Sizes, strict=True)):
            if s != 1 and s != i:
                raise _invalid(f"{schema.name}.{m}: Sizes[{axis}] = {s} must be 1 or InputTensor's size {i}")
    eps = d.Epsilon
    if not isinstance(eps, (float, int, np.floating, np.integer)) or isinstance(eps, bool):
        raise _invalid(f"{schema.name}.Epsilon must be a FLOAT")
    act = getattr(d, "FusedActivation", None)
    if act is not None and (
        not isinstance(act, DML_OPERATOR_DESC)
        or act.Type not in (DML_OPERATOR_ACTIVATION_IDENTITY, DML_OPERATOR_ACTIVATION_RELU)
    ):
        raise HRESULTError(
            "E_NOTIMPL",
            f"{schema.name}.FusedActivation: only ACTIVATION_IDENTITY and ACTIVATION_RELU are provided by this mirror",
        )
    return schema


# ----------------------------------------------------------------------------- D3D12, collapsed


class ID3D12Resource:
    """A D3D12 buffer, collapsed to host bytes.  Upload/Readback stand in for the copy queues."""

    def __init__(self, size_in_bytes: int):
        if size_in_bytes <= 0:
            raise _invalid("a buffer needs a positive size")
        self._bytes = np.zeros(int(size_in_bytes), np.uint8)

    def GetDesc(self) -> dict:
        return {"Width": self._bytes.size}

    def Upload(self, array: np.ndarray, offset: int = 0) -> None:
        data = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
        if offset < 0 or offset + data.size > self._bytes.size:
            raise _invalid(
                f"Upload of {data.size} bytes at offset {offset} overruns the {self._bytes.size}-byte buffer"
            )
        self._bytes[offset : offset + data.size] = data

    def Readback(self, dtype, shape, offset: int = 0) -> np.ndarray:
        dtype = np.dtype(dtype)
        n = math.prod(shape) * dtype.itemsize
        if offset < 0 or offset + n > self._bytes.size:
            raise _invalid("Readback overruns the buffer")
        return self._bytes[offset : offset + n].view(dtype).reshape(shape).copy()


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


# ----------------------------------------------------------------------------- DirectML objects


class IDMLOperator:
    def __init__(self, schema: _OpSchema, desc: Any):
        self._schema = schema
        self._desc = desc


class IDMLCompiledOperator:
    def __init__(self, op: IDMLOperator, flags: int):
        self._op = op
        self._flags = flags
        self._initialized = False

    def GetBindingProperties(self) -> DML_BINDING_PROPERTIES:
        s = self._op._schema
        return DML_BINDING_PROPERTIES(len(s.inputs) + len(s.outputs), 0, 0)


class IDMLOperatorInitializer:
    def __init__(self, ops):
        self._ops = list(ops)

    def Reset(self, ops) -> None:
        self._ops = list(ops)

    def GetBindingProperties(self) -> DML_BINDING_PROPERTIES:
        return DML_BINDING_PROPERTIES(0, 0, 0)


def _tensor_view(buf: DML_BUFFER_TENSOR_DESC, binding: DML_BUFFER_BINDING, where: str) -> np.ndarray:
    """The ndarray a buffer binding holds for a tensor desc (strides honoured, bounds checked)."""
    res = binding.Buffer
    if not isinstance(res, ID3D12Resource):
        raise _invalid(f"{where}: DML_BUFFER_BINDING.Buffer must be a resource")
    if binding.Offset % DML_MINIMUM_BUFFER_TENSOR_ALIGNMENT or (
        buf.GuaranteedBaseOffsetAlignment and binding.Offset % buf.GuaranteedBaseOffsetAlignment
    ):
        raise _invalid(
            f"{where}: binding Offset {binding.Offset} is not aligned to "
            f"{max(DML_MINIMUM_BUFFER_TENSOR_ALIGNMENT, buf.GuaranteedBaseOffsetAlignment)} bytes"
        )
    if binding.SizeInBytes < buf.TotalTensorSizeInBytes or binding.Offset + binding.SizeInBytes > res._bytes.size:
        raise _invalid(
            f"{where}: binding of {binding.SizeInBytes} bytes at offset {binding.Offset} does not hold "
            f"TotalTensorSizeInBytes {buf.TotalTensorSizeInBytes} inside the "
            f"{res._bytes.size}-byte buffer"
        )
    dtype = _NUMPY[buf.DataType]
    sizes = [int(s) for s in buf.Sizes]
    if buf.Strides is None:
        strides, elems = [], 1
        for s in reversed(sizes):
            strides.insert(0, elems)
            elems *= s
    else:
        strides = [int(s) for s in buf.Strides]
    region = res._bytes[binding.Offset : binding.Offset + binding.SizeInBytes]
    # np.ndarray checks that the strided extent fits inside the bound region
    return np.ndarray(sizes, dtype, buffer=region.data, strides=[s * dtype.itemsize for s in strides])


class IDMLBindingTable:
    def __init__(self, desc: DML_BINDING_TABLE_DESC):
        self.Reset(desc)

    def Reset(self, desc: DML_BINDING_TABLE_DESC) -> None:
        if not isinstance(desc.Dispatchable, (IDMLCompiledOperator, IDMLOperatorInitializer)):
            raise _invalid("DML_BINDING_TABLE_DESC.Dispatchable must be a compiled operator or an initializer")
        self._dispatchable = desc.Dispatchable
        self._inputs: list[DML_BINDING_DESC] | None = None
        self._outputs: list[DML_BINDING_DESC] | None = None

    def _check(self, bindings, members, optional, what: str):
        if len(bindings) != len(members):
            raise _invalid(
                f"{what}: {len(bindings)} bindings for {len(members)} {what[4:].lower()} of the "
                f"operator (including optional tensors: use DML_BINDING_TYPE_NONE)"
            )
        for b, m in zip(bindings, members, strict=True):
            if not isinstance(b, DML_BINDING_DESC):
                raise _invalid(f"{what}: binding for {m} must be a DML_BINDING_DESC")
            if b.Type == DML_BINDING_TYPE_NONE and m not in optional:
                raise _invalid(f"{what}: {m} is required; DML_BINDING_TYPE_NONE is only for absent optional tensors")
            if b.Type == DML_BINDING_TYPE_BUFFER and not isinstance(b.Desc, DML_BUFFER_BINDING):
                raise _invalid(f"{what}: binding for {m} must carry a DML_BUFFER_BINDING")
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


class IDMLCommandRecorder:
    def RecordDispatch(self, commandList: ID3D12GraphicsCommandList, dispatchable, bindings: IDMLBindingTable) -> None:
        if commandList._closed:
            raise HRESULTError("DXGI_ERROR_INVALID_CALL", "RecordDispatch on a closed command list")
        if bindings._dispatchable is not dispatchable:
            raise _invalid("RecordDispatch: the binding table was created for another dispatchable")
        if isinstance(dispatchable, IDMLOperatorInitializer):
            ops = list(dispatchable._ops)

            def initialize():
                for op in ops:
                    op._initialized = True

            commandList._work.append(initialize)
            return
        if bindings._inputs is None or bindings._outputs is None:
            raise _invalid("RecordDispatch: BindInputs and BindOutputs must be called first")
        inputs, outputs = list(bindings._inputs), list(bindings._outputs)
        commandList._work.append(lambda: _dispatch(dispatchable, inputs, outputs))


def _dispatch(compiled: IDMLCompiledOperator, inputs, outputs) -> None:
    if not compiled._initialized:
        raise HRESULTError(
            "DXGI_ERROR_INVALID_CALL",
            "the compiled operator was executed before its IDMLOperatorInitializer was dispatched",
        )
    schema, desc = compiled._op._schema, compiled._op._desc
    for member in (*schema.inputs, *schema.outputs):
        td = getattr(desc, member)
        if td is not None and not memory.fits(math.prod(td.Desc.Sizes) * 4):
            raise HRESULTError(
                "E_OUTOFMEMORY",
                f"{schema.name}.{member}: Sizes {_sizes_str(td.Desc.Sizes)} "
                f"cannot be computed in this machine's memory",
            )
    tensors = {}
    for member, b in zip(schema.inputs, inputs, strict=True):
        if b.Type == DML_BINDING_TYPE_NONE:
            continue
        tensors[member] = np.array(_tensor_view(getattr(desc, member).Desc, b.Desc, f"{schema.name}.{member}"))
    views = {}
    regions = []
    for member, b in zip(schema.outputs, outputs, strict=True):
        view = _tensor_view(getattr(desc, member).Desc, b.Desc, f"{schema.name}.{member}")
        lo = b.Desc.Offset
        regions.append((id(b.Desc.Buffer), lo, lo + b.Desc.SizeInBytes, member))
        views[member] = view
    regions.sort()
    for (r1, _, e1, m1), (r2, s2, _, m2) in zip(regions, regions[1:], strict=False):
        if r1 == r2 and s2 < e1:
            raise _invalid(f"BindOutputs: the writable areas of {m1} and {m2} overlap")
    results = schema.execute(desc, tensors)
    for member, value in results.items():
        views[member][...] = np.asarray(value).astype(views[member].dtype)


class IDMLDevice:
    def __init__(self, d3d12: ID3D12Device, flags: int):
        self._d3d12 = d3d12
        self._flags = flags

    def CheckFeatureSupport(self) -> int:
        return DML_FEATURE_LEVEL_4_1

    def CreateOperator(self, desc: DML_OPERATOR_DESC) -> IDMLOperator:
        schema = validate_operator_desc(desc)
        import copy

        return IDMLOperator(schema, copy.deepcopy(desc.Desc))  # descs need not outlive CreateOperator

    def CompileOperator(self, op: IDMLOperator, flags: int = DML_EXECUTION_FLAG_NONE) -> IDMLCompiledOperator:
        if not isinstance(op, IDMLOperator):
            raise _invalid("CompileOperator expects an IDMLOperator")
        if flags & ~0x7:
            raise _invalid(f"CompileOperator: unknown DML_EXECUTION_FLAGS {flags:#x}")
        return IDMLCompiledOperator(op, flags)

    def CreateOperatorInitializer(self, operators) -> IDMLOperatorInitializer:
        return IDMLOperatorInitializer(operators)

    def CreateBindingTable(self, desc: DML_BINDING_TABLE_DESC) -> IDMLBindingTable:
        return IDMLBindingTable(desc)

    def CreateCommandRecorder(self) -> IDMLCommandRecorder:
        return IDMLCommandRecorder()


def DMLCreateDevice(d3d12Device: ID3D12Device | None = None, flags: int = DML_CREATE_DEVICE_FLAG_NONE) -> IDMLDevice:
    return IDMLDevice(d3d12Device or D3D12CreateDevice(), flags)


# ----------------------------------------------------------------------------- one-call helper


def run_operator(
    device: IDMLDevice,
    op_desc: DML_OPERATOR_DESC,
    inputs: dict[str, np.ndarray | None],
    flags: int = DML_EXECUTION_FLAG_NONE,
) -> dict[str, np.ndarray]:
    """The whole sequence for one operator, with one buffer per tensor: create, compile, initialize,
    bind (desc-member order, NONE for absent optional tensors), record, execute, read back."""
    op = device.CreateOperator(op_desc)
    compiled = device.CompileOperator(op, flags)
    initializer = device.CreateOperatorInitializer([compiled])
    d3d = device._d3d12
    queue, cmd = d3d.CreateCommandQueue(), d3d.CreateCommandList()
    recorder = device.CreateCommandRecorder()
    recorder.RecordDispatch(cmd, initializer, device.CreateBindingTable(DML_BINDING_TABLE_DESC(initializer)))
    table = device.CreateBindingTable(
        DML_BINDING_TABLE_DESC(compiled, None, None, compiled.GetBindingProperties().RequiredDescriptorCount)
    )
    schema, desc = op._schema, op._desc

    def buffer_for(member: str, value=None) -> DML_BINDING_DESC:
        b = getattr(desc, member).Desc
        res = d3d.CreateCommittedResource(b.TotalTensorSizeInBytes)
        if value is not None:
            view = _tensor_view(b, DML_BUFFER_BINDING(res, 0, b.TotalTensorSizeInBytes), member)
            view[...] = np.asarray(value).astype(view.dtype)
        return DML_BINDING_DESC(DML_BINDING_TYPE_BUFFER, DML_BUFFER_BINDING(res, 0, b.TotalTensorSizeInBytes))

    in_bindings = [
        DML_BINDING_DESC(DML_BINDING_TYPE_NONE)
        if inputs.get(m) is None and m in schema.optional
        else buffer_for(m, inputs[m])
        for m in schema.inputs
    ]
    out_bindings = [buffer_for(m) for m in schema.outputs]
    table.BindInputs(in_bindings)
    table.BindOutputs(out_bindings)
    recorder.RecordDispatch(cmd, compiled, table)
    cmd.Close()
    queue.ExecuteCommandLists([cmd])
    return {
        m: np.array(_tensor_view(getattr(desc, m).Desc, b.Desc, m))
        for m, b in zip(schema.outputs, out_bindings, strict=True)
    }


__all__ = sorted(n for n in dir() if n.startswith(("DML", "D3D12", "ID3D12", "IDML"))) + [
    "HRESULTError",
    "SCHEMAS",
    "make_tensor_desc",
    "run_operator",
    "validate_operator_desc",
]
