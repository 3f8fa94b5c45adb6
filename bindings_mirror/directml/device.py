"""IDMLDevice (feature support, operator creation, residency) and DMLCreateDevice / DMLCreateDevice1."""

from __future__ import annotations

import copy
from typing import Any

from fbnops.framework.errors import conversion_errors_as

from .binding import IDMLBindingTable
from .d3d12 import D3D12CreateDevice, ID3D12Device
from .descs import (
    DML_BINDING_TABLE_DESC,
    DML_FEATURE_DATA_FEATURE_LEVELS,
    DML_FEATURE_DATA_TENSOR_DATA_TYPE_SUPPORT,
    DML_FEATURE_QUERY_FEATURE_LEVELS,
    DML_FEATURE_QUERY_TENSOR_DATA_TYPE_SUPPORT,
    DML_OPERATOR_DESC,
)
from .enums import (
    DML_CREATE_DEVICE_FLAG_DEBUG,
    DML_CREATE_DEVICE_FLAG_NONE,
    DML_EXECUTION_FLAG_NONE,
    DML_FEATURE_FEATURE_LEVELS,
    DML_FEATURE_LEVEL_1_0,
    DML_FEATURE_TENSOR_DATA_TYPE_SUPPORT,
    FEATURE_LEVELS,
    MIRROR_FEATURE_LEVEL,
    NUMPY_DTYPES,
    S_OK,
    HRESULTError,
    invalid,
)
from .graph import DML_GRAPH_DESC, compile_graph
from .objects import IDMLCompiledOperator, IDMLObject, IDMLOperator, IDMLOperatorInitializer
from .recorder import IDMLCommandRecorder
from .validation import validate_operator_desc

# sizeof() of the feature-support structs on x64 (a BOOL and an enum are 4 bytes, a pointer 8).
_SIZEOF = {
    DML_FEATURE_QUERY_TENSOR_DATA_TYPE_SUPPORT: 4,
    DML_FEATURE_DATA_TENSOR_DATA_TYPE_SUPPORT: 4,
    DML_FEATURE_QUERY_FEATURE_LEVELS: 16,
    DML_FEATURE_DATA_FEATURE_LEVELS: 4,
}
_FEATURES = {
    DML_FEATURE_TENSOR_DATA_TYPE_SUPPORT: (
        DML_FEATURE_QUERY_TENSOR_DATA_TYPE_SUPPORT,
        DML_FEATURE_DATA_TENSOR_DATA_TYPE_SUPPORT,
    ),
    DML_FEATURE_FEATURE_LEVELS: (DML_FEATURE_QUERY_FEATURE_LEVELS, DML_FEATURE_DATA_FEATURE_LEVELS),
}


def sizeof(struct: Any) -> int:
    """``sizeof`` of a feature-support struct (class or instance), as CheckFeatureSupport expects it."""
    cls = struct if isinstance(struct, type) else type(struct)
    if cls not in _SIZEOF:
        raise TypeError(f"sizeof: {cls.__name__} is not a feature-support struct")
    return _SIZEOF[cls]


_PAGEABLE = (IDMLCompiledOperator, IDMLOperatorInitializer)


class IDMLDevice(IDMLObject):
    def __init__(self, d3d12: ID3D12Device, flags: int, feature_level: int = MIRROR_FEATURE_LEVEL):
        super().__init__()
        self._d3d12 = d3d12
        self._flags = flags
        self._feature_level = feature_level

    def CheckFeatureSupport(
        self, feature: int, featureQueryDataSize: int, featureQueryData, featureSupportDataSize: int, featureSupportData
    ) -> int:
        """Fills ``featureSupportData`` (a DML_FEATURE_DATA_* struct) and returns S_OK."""
        if feature not in _FEATURES:
            raise invalid(f"CheckFeatureSupport: unknown DML_FEATURE {feature!r}")
        query_type, data_type = _FEATURES[feature]
        if not isinstance(featureQueryData, query_type) or featureQueryDataSize != _SIZEOF[query_type]:
            raise invalid(f"CheckFeatureSupport: featureQueryData must be a {query_type.__name__} of its sizeof")
        if not isinstance(featureSupportData, data_type) or featureSupportDataSize != _SIZEOF[data_type]:
            raise invalid(f"CheckFeatureSupport: featureSupportData must be a {data_type.__name__} of its sizeof")
        if feature == DML_FEATURE_TENSOR_DATA_TYPE_SUPPORT:
            featureSupportData.IsSupported = featureQueryData.DataType in NUMPY_DTYPES
            return S_OK
        levels = list(featureQueryData.RequestedFeatureLevels)
        if featureQueryData.RequestedFeatureLevelCount != len(levels) or not levels:
            raise invalid("CheckFeatureSupport: RequestedFeatureLevelCount must match the RequestedFeatureLevels")
        supported = [lv for lv in levels if lv in FEATURE_LEVELS and lv <= self._feature_level]
        if len(supported) < len([lv for lv in levels if lv <= self._feature_level]):
            raise invalid("CheckFeatureSupport: RequestedFeatureLevels holds a value that is not a DML_FEATURE_LEVEL")
        featureSupportData.MaxSupportedFeatureLevel = max(supported, default=0)
        return S_OK

    def CreateOperator(self, desc: DML_OPERATOR_DESC) -> IDMLOperator:
        # the one place a desc member of the wrong Python type (a huge int, None, a nested list) becomes
        # E_INVALIDARG, as a C caller's would be refused, instead of a Python traceback
        with conversion_errors_as(lambda m: invalid(f"CreateOperator: a desc member does not fit its type ({m})"),
                                  keep=(HRESULTError,)):  # fmt: skip
            schema = validate_operator_desc(desc, self._feature_level)
            return IDMLOperator(schema, copy.deepcopy(desc.Desc))  # descs need not outlive CreateOperator

    def CompileOperator(self, op: IDMLOperator, flags: int = DML_EXECUTION_FLAG_NONE) -> IDMLCompiledOperator:
        if not isinstance(op, IDMLOperator):
            raise invalid("CompileOperator expects an IDMLOperator")
        if flags & ~0x7:
            raise invalid(f"CompileOperator: unknown DML_EXECUTION_FLAGS {flags:#x}")
        return IDMLCompiledOperator(op, flags)

    def CompileGraph(self, desc: DML_GRAPH_DESC, flags: int = DML_EXECUTION_FLAG_NONE) -> IDMLCompiledOperator:
        """IDMLDevice1::CompileGraph: the graph's inputs and outputs are the compiled operator's bindings."""
        with conversion_errors_as(lambda m: invalid(f"CompileGraph: a desc member does not fit its type ({m})"),
                                  keep=(HRESULTError,)):  # fmt: skip
            schema, members = compile_graph(desc)
        return self.CompileOperator(IDMLOperator(schema, members), flags)

    def CreateOperatorInitializer(self, operators) -> IDMLOperatorInitializer:
        return IDMLOperatorInitializer(operators)

    def CreateBindingTable(self, desc: DML_BINDING_TABLE_DESC) -> IDMLBindingTable:
        return IDMLBindingTable(desc)

    def CreateCommandRecorder(self) -> IDMLCommandRecorder:
        return IDMLCommandRecorder()

    def _page(self, count: int, objects, resident: bool, what: str) -> int:
        objects = list(objects)
        if count != len(objects) or not all(isinstance(o, _PAGEABLE) for o in objects):
            raise invalid(f"{what}: count must match a list of IDMLPageable objects (compiled operators, initializers)")
        for o in objects:
            o._resident = resident
        return S_OK

    def Evict(self, count: int, ppObjects) -> int:
        """Evicted objects refuse to dispatch until MakeResident (D3D12 leaves that undefined)."""
        return self._page(count, ppObjects, False, "Evict")

    def MakeResident(self, count: int, ppObjects) -> int:
        return self._page(count, ppObjects, True, "MakeResident")

    def GetDeviceRemovedReason(self) -> int:
        return S_OK  # a host device is never removed

    def GetParentDevice(self) -> ID3D12Device:
        return self._d3d12


def _check_flags(flags) -> None:
    if not isinstance(flags, int) or flags & ~(DML_CREATE_DEVICE_FLAG_NONE | DML_CREATE_DEVICE_FLAG_DEBUG):
        raise invalid(f"DMLCreateDevice: unknown DML_CREATE_DEVICE_FLAGS {flags!r}")


def DMLCreateDevice(d3d12Device: ID3D12Device | None = None, flags: int = DML_CREATE_DEVICE_FLAG_NONE) -> IDMLDevice:
    _check_flags(flags)
    return IDMLDevice(d3d12Device or D3D12CreateDevice(), flags)


def DMLCreateDevice1(
    d3d12Device: ID3D12Device | None = None,
    flags: int = DML_CREATE_DEVICE_FLAG_NONE,
    minimumFeatureLevel: int = DML_FEATURE_LEVEL_1_0,
    *,
    supportedFeatureLevel: int = MIRROR_FEATURE_LEVEL,
) -> IDMLDevice:
    """DMLCreateDevice1.  ``supportedFeatureLevel`` (a mirror extension) emulates an older DirectML runtime:
    operators introduced above it are refused at CreateOperator, as that runtime would."""
    _check_flags(flags)
    if minimumFeatureLevel not in FEATURE_LEVELS or supportedFeatureLevel not in FEATURE_LEVELS:
        raise invalid("DMLCreateDevice1: feature levels must be DML_FEATURE_LEVEL values")
    if supportedFeatureLevel > MIRROR_FEATURE_LEVEL:
        raise invalid(f"DMLCreateDevice1: this mirror implements up to DML_FEATURE_LEVEL {MIRROR_FEATURE_LEVEL:#x}")
    if minimumFeatureLevel > supportedFeatureLevel:
        raise HRESULTError(
            "DXGI_ERROR_UNSUPPORTED",
            f"DMLCreateDevice1: minimumFeatureLevel {minimumFeatureLevel:#x} is above the supported "
            f"{supportedFeatureLevel:#x}",
        )
    return IDMLDevice(d3d12Device or D3D12CreateDevice(), flags, supportedFeatureLevel)
