"""DirectML.h structs: tensor descs, operator descs, bindings, feature queries; DMLCalcBufferTensorSize."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fbnops.framework.errors import conversion_errors_as

from .enums import DML_TENSOR_FLAG_NONE, DML_TENSOR_TYPE_BUFFER, ELEMENT_BITS, invalid

if TYPE_CHECKING:
    from .d3d12 import ID3D12Resource

# ----------------------------------------------------------------------------- tensors


@dataclass
class DML_BUFFER_TENSOR_DESC:
    DataType: int
    Flags: int
    DimensionCount: int
    Sizes: list[int]
    Strides: list[int] | None = None  # in elements, not bytes
    TotalTensorSizeInBytes: int = 0
    GuaranteedBaseOffsetAlignment: int = 0


@dataclass
class DML_TENSOR_DESC:
    Type: int
    Desc: DML_BUFFER_TENSOR_DESC | None


# ----------------------------------------------------------------------------- operators


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


# ----------------------------------------------------------------------------- bindings


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


# ----------------------------------------------------------------------------- feature support queries


@dataclass
class DML_FEATURE_QUERY_TENSOR_DATA_TYPE_SUPPORT:
    DataType: int


@dataclass
class DML_FEATURE_DATA_TENSOR_DATA_TYPE_SUPPORT:
    IsSupported: bool = False


@dataclass
class DML_FEATURE_QUERY_FEATURE_LEVELS:
    RequestedFeatureLevelCount: int
    RequestedFeatureLevels: list[int]


@dataclass
class DML_FEATURE_DATA_FEATURE_LEVELS:
    MaxSupportedFeatureLevel: int = 0


# ----------------------------------------------------------------------------- sizes


def DMLCalcBufferTensorSize(dataType: int, dimensionCount: int, sizes: list[int], strides: list[int] | None) -> int:
    """DirectMLX.h: the minimum implied byte size, rounded up to a multiple of 4 (0 for an unknown type)."""
    bits = ELEMENT_BITS.get(dataType)
    if bits is None:
        return 0
    if len(sizes) < dimensionCount or (strides is not None and len(strides) < dimensionCount):
        raise invalid(f"DMLCalcBufferTensorSize: DimensionCount {dimensionCount} exceeds the sizes or strides given")
    if strides is None:
        implied_bits = math.prod(sizes[:dimensionCount]) * bits
    else:
        last = sum((s - 1) * t for s, t in zip(sizes[:dimensionCount], strides[:dimensionCount], strict=True))
        implied_bits = (last + 1) * bits
    nbytes = (implied_bits + 7) // 8
    return (nbytes + 3) & ~3


def make_tensor_desc(data_type: int, sizes, strides=None) -> DML_TENSOR_DESC:
    """A DML_TENSOR_DESC with TotalTensorSizeInBytes from DMLCalcBufferTensorSize (DMLX's default policy)."""
    if isinstance(sizes, (str, bytes)) or isinstance(strides, (str, bytes)):
        raise invalid("make_tensor_desc: sizes and strides must be UINT lists, not text")
    with conversion_errors_as(lambda m: invalid(f"make_tensor_desc: sizes and strides must be UINT lists ({m})")):
        sizes = [int(s) for s in sizes]
        strides = None if strides is None else [int(s) for s in strides]
    if strides is not None and len(strides) != len(sizes):
        raise invalid(f"make_tensor_desc: {len(strides)} strides for {len(sizes)} sizes (one stride per dimension)")
    buffer = DML_BUFFER_TENSOR_DESC(data_type, DML_TENSOR_FLAG_NONE, len(sizes), sizes, strides)
    buffer.TotalTensorSizeInBytes = DMLCalcBufferTensorSize(data_type, len(sizes), sizes, buffer.Strides)
    return DML_TENSOR_DESC(DML_TENSOR_TYPE_BUFFER, buffer)
