"""What CreateOperator checks: every tensor constraint of the operator, as an E_INVALIDARG naming the member."""

from __future__ import annotations

import math

import numpy as np

from fbnops.framework import strided

from .descs import DML_BUFFER_TENSOR_DESC, DML_OPERATOR_DESC, DML_TENSOR_DESC, DMLCalcBufferTensorSize
from .enums import (
    DATA_TYPE_NAMES,
    DML_OPERATOR_ACTIVATION_IDENTITY,
    DML_OPERATOR_ACTIVATION_RELU,
    DML_TENSOR_DIMENSION_COUNT_MAX1,
    DML_TENSOR_FLAG_OWNED_BY_DML,
    DML_TENSOR_TYPE_BUFFER,
    ELEMENT_BITS,
    MIRROR_FEATURE_LEVEL,
    NUMPY_DTYPES,
    HRESULTError,
    invalid,
)
from .schemas import SCHEMAS, _OpSchema

UINT_MAX = 0xFFFFFFFF


_FLT_MAX = float(np.finfo(np.float32).max)


def _fits_float32(value) -> bool:
    """A finite number within FLOAT's range (10**400 or 1e39 would be inf in C); inf and NaN are the op's to judge."""
    try:
        f = float(value)
    except OverflowError:
        return False
    return not math.isfinite(f) or abs(f) <= _FLT_MAX


def sizes_str(sizes) -> str:
    return "{" + ",".join(str(s) for s in sizes) + "}"


def _is_uint(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) and 0 <= value <= UINT_MAX


def element_strides(b: DML_BUFFER_TENSOR_DESC) -> list[int]:
    """The desc's strides in elements (packed when Strides is null)."""
    if b.Strides is None:
        return strided.dense_strides(b.Sizes)
    return [int(s) for s in b.Strides]


def _check_tensor(schema: _OpSchema, member: str, td, is_output: bool) -> DML_BUFFER_TENSOR_DESC:
    where = f"{schema.name}.{member}"
    if (
        not isinstance(td, DML_TENSOR_DESC)
        or td.Type != DML_TENSOR_TYPE_BUFFER
        or not isinstance(td.Desc, DML_BUFFER_TENSOR_DESC)
    ):
        raise invalid(f"{where}: must be a DML_TENSOR_DESC of Type DML_TENSOR_TYPE_BUFFER (a DML_BUFFER_TENSOR_DESC)")
    b = td.Desc
    if not _is_uint(b.Flags):
        raise invalid(f"{where}: Flags must be a UINT of DML_TENSOR_FLAGS, got {b.Flags!r:.40}")
    if not _is_uint(b.DataType) or b.DataType not in NUMPY_DTYPES:
        raise invalid(
            f"{where}: DataType {DATA_TYPE_NAMES.get(b.DataType, b.DataType)} is not supported (FLOAT32, FLOAT16)"
        )
    if (
        not _is_uint(b.DimensionCount)
        or not 1 <= b.DimensionCount <= DML_TENSOR_DIMENSION_COUNT_MAX1
        or len(b.Sizes) != b.DimensionCount
    ):
        raise invalid(
            f"{where}: DimensionCount must be 1 to 8 and equal len(Sizes) ({b.DimensionCount} vs {len(b.Sizes)})"
        )
    if any(not _is_uint(s) or s == 0 for s in b.Sizes):
        raise invalid(
            f"{where}: Sizes {sizes_str(b.Sizes)}: every size must be a positive UINT (a size of zero is invalid)"
        )
    if b.Strides is not None and (len(b.Strides) != b.DimensionCount or not all(_is_uint(s) for s in b.Strides)):
        raise invalid(f"{where}: Strides must hold DimensionCount non-negative UINTs")
    if is_output and b.Flags & DML_TENSOR_FLAG_OWNED_BY_DML:
        raise invalid(f"{where}: DML_TENSOR_FLAG_OWNED_BY_DML applies to input tensors only")
    if b.Flags & DML_TENSOR_FLAG_OWNED_BY_DML:
        raise HRESULTError("E_NOTIMPL", f"{where}: DML_TENSOR_FLAG_OWNED_BY_DML is not supported by this mirror")
    if math.prod(b.Sizes) > UINT_MAX:
        raise invalid(f"{where}: the tensor may not exceed 2^32 - 1 elements")
    minimum = DMLCalcBufferTensorSize(b.DataType, b.DimensionCount, b.Sizes, b.Strides)
    if not isinstance(b.TotalTensorSizeInBytes, (int, np.integer)) or b.TotalTensorSizeInBytes < minimum:
        raise invalid(
            f"{where}: TotalTensorSizeInBytes {b.TotalTensorSizeInBytes} is below the minimum implied "
            f"size {minimum} (DMLCalcBufferTensorSize)"
        )
    itemsize = ELEMENT_BITS[b.DataType] // 8
    # The layout must fit in TotalTensorSizeInBytes; an output must not write one element twice.
    total = int(b.TotalTensorSizeInBytes)
    strided.check_in_bounds(b.Sizes, element_strides(b), itemsize, 0, total, what=where, error=invalid)
    if is_output:
        strided.check_no_overlap(b.Sizes, element_strides(b), itemsize, what=where, error=invalid)
    align = b.GuaranteedBaseOffsetAlignment
    if not isinstance(align, (int, np.integer)) or align < 0 or (align and (align & (align - 1) or align < itemsize)):
        raise invalid(f"{where}: GuaranteedBaseOffsetAlignment {align} must be 0 or a power of two >= the element size")
    return b


def validate_operator_desc(op_desc: DML_OPERATOR_DESC, feature_level: int = MIRROR_FEATURE_LEVEL) -> _OpSchema:
    """Every tensor constraint of the operator, as CreateOperator checks them on a device of ``feature_level``."""
    if not isinstance(op_desc, DML_OPERATOR_DESC):
        raise invalid("CreateOperator expects a DML_OPERATOR_DESC")
    schema = SCHEMAS.get(op_desc.Type)
    if schema is None:
        raise HRESULTError("E_NOTIMPL", f"operator type {op_desc.Type} is not provided by this mirror")
    if schema.feature_level > feature_level:
        raise invalid(
            f"{schema.name} needs DML_FEATURE_LEVEL {schema.feature_level:#x}; the device supports up to "
            f"{feature_level:#x}"
        )
    d = op_desc.Desc
    if type(d) is not schema.desc_type:  # exact: a GRAD desc is not a TRAINING_GRAD desc
        raise invalid(f"DML_OPERATOR_DESC.Desc must be a {schema.name} for this Type")
    bufs = {}
    for member in (*schema.inputs, *schema.outputs):
        td = getattr(d, member)
        if td is None and member in schema.optional:
            continue
        if td is None:
            raise invalid(f"{schema.name}.{member}: required tensor is null")
        bufs[member] = _check_tensor(schema, member, td, member in schema.outputs)
    _check_alike(schema, bufs)
    eps = d.Epsilon
    if not isinstance(eps, (float, int, np.floating, np.integer)) or isinstance(eps, (bool, np.bool_)):
        raise invalid(f"{schema.name}.Epsilon must be a FLOAT")
    if not _fits_float32(eps):
        raise invalid(f"{schema.name}.Epsilon {eps!r:.40} does not fit a FLOAT (beyond +-3.4e38)")
    act = getattr(d, "FusedActivation", None)
    if act is not None and not isinstance(act, DML_OPERATOR_DESC):
        raise invalid(f"{schema.name}.FusedActivation must be null or a DML_OPERATOR_DESC")
    if act is not None and act.Type not in (DML_OPERATOR_ACTIVATION_IDENTITY, DML_OPERATOR_ACTIVATION_RELU):
        raise HRESULTError(
            "E_NOTIMPL",
            f"{schema.name}.FusedActivation: only ACTIVATION_IDENTITY and ACTIVATION_RELU are provided by this mirror",
        )
    return schema


def _check_alike(schema: _OpSchema, bufs: dict[str, DML_BUFFER_TENSOR_DESC]) -> None:
    """Same DataType and DimensionCount everywhere; the same-Sizes groups; statistics 1 or InputTensor's size."""
    members = sorted(bufs)
    first = bufs[schema.inputs[0]]
    for m in members:
        if bufs[m].DataType != first.DataType:
            raise invalid(
                f"{schema.name}.{m}: DataType {DATA_TYPE_NAMES[bufs[m].DataType]} differs from InputTensor's "
                f"{DATA_TYPE_NAMES[first.DataType]}; {', '.join(members)} must have the same DataType"
            )
        if bufs[m].DimensionCount != first.DimensionCount:
            raise invalid(
                f"{schema.name}.{m}: DimensionCount {bufs[m].DimensionCount} differs from InputTensor's "
                f"{first.DimensionCount}; {', '.join(members)} must have the same DimensionCount"
            )
    for group in schema.same_sizes:
        present = [m for m in group if m in bufs]
        for m in present[1:]:
            if list(bufs[m].Sizes) != list(bufs[present[0]].Sizes):
                raise invalid(
                    f"{schema.name}.{m}: Sizes {sizes_str(bufs[m].Sizes)} differ from {present[0]}'s "
                    f"{sizes_str(bufs[present[0]].Sizes)}; {', '.join(group)} must have the same Sizes"
                )
    for m in schema.stats:
        for axis, (s, i) in enumerate(zip(bufs[m].Sizes, first.Sizes, strict=True)):
            if s != 1 and s != i:
                raise invalid(f"{schema.name}.{m}: Sizes[{axis}] = {s} must be 1 or InputTensor's size {i}")
