"""DirectML.h enumerations and constants (values from the header), and HRESULT errors."""

from __future__ import annotations

import numpy as np

# ----------------------------------------------------------------------------- constants

DML_TENSOR_DIMENSION_COUNT_MAX = 5
DML_TENSOR_DIMENSION_COUNT_MAX1 = 8
DML_TEMPORARY_BUFFER_ALIGNMENT = 256
DML_PERSISTENT_BUFFER_ALIGNMENT = 256
DML_MINIMUM_BUFFER_TENSOR_ALIGNMENT = 16

# ----------------------------------------------------------------------------- DML_TENSOR_DATA_TYPE

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

# ----------------------------------------------------------------------------- DML_OPERATOR_TYPE (the ones mirrored)

DML_OPERATOR_INVALID = 0
DML_OPERATOR_ELEMENT_WISE_IDENTITY = 1
DML_OPERATOR_ACTIVATION_IDENTITY = 38
DML_OPERATOR_ACTIVATION_RELU = 44
DML_OPERATOR_BATCH_NORMALIZATION = 72
DML_OPERATOR_BATCH_NORMALIZATION_GRAD = 146
DML_OPERATOR_BATCH_NORMALIZATION_TRAINING = 151
DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD = 152

# ----------------------------------------------------------------------------- flags

DML_CREATE_DEVICE_FLAG_NONE = 0x0
DML_CREATE_DEVICE_FLAG_DEBUG = 0x1
DML_EXECUTION_FLAG_NONE = 0x0
DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION_COMPUTATION = 0x1
DML_EXECUTION_FLAG_DISABLE_META_COMMANDS = 0x2
DML_EXECUTION_FLAG_DESCRIPTORS_VOLATILE = 0x4

DML_BINDING_TYPE_NONE = 0
DML_BINDING_TYPE_BUFFER = 1
DML_BINDING_TYPE_BUFFER_ARRAY = 2

# ----------------------------------------------------------------------------- feature support

DML_FEATURE_LEVEL_1_0 = 0x1000
DML_FEATURE_LEVEL_2_0 = 0x2000
DML_FEATURE_LEVEL_2_1 = 0x2100
DML_FEATURE_LEVEL_3_0 = 0x3000
DML_FEATURE_LEVEL_3_1 = 0x3100
DML_FEATURE_LEVEL_4_0 = 0x4000
DML_FEATURE_LEVEL_4_1 = 0x4100
DML_FEATURE_LEVEL_5_0 = 0x5000
DML_FEATURE_LEVEL_5_1 = 0x5100
DML_FEATURE_LEVEL_5_2 = 0x5200
DML_FEATURE_LEVEL_6_0 = 0x6000
DML_FEATURE_LEVEL_6_1 = 0x6100
DML_FEATURE_LEVEL_6_2 = 0x6200
DML_FEATURE_LEVEL_6_3 = 0x6300
DML_FEATURE_LEVEL_6_4 = 0x6400
FEATURE_LEVELS = tuple(sorted(v for k, v in globals().items() if k.startswith("DML_FEATURE_LEVEL_")))
# The highest level this mirror implements: every operator it provides exists at 4_1.
MIRROR_FEATURE_LEVEL = DML_FEATURE_LEVEL_4_1

DML_FEATURE_TENSOR_DATA_TYPE_SUPPORT = 0
DML_FEATURE_FEATURE_LEVELS = 1

# ----------------------------------------------------------------------------- tables used by the mirror

ELEMENT_BITS = {1: 32, 2: 16, 3: 32, 4: 16, 5: 8, 6: 32, 7: 16, 8: 8, 9: 64, 10: 64, 11: 64}
NUMPY_DTYPES = {DML_TENSOR_DATA_TYPE_FLOAT32: np.dtype("<f4"), DML_TENSOR_DATA_TYPE_FLOAT16: np.dtype("<f2")}
DATA_TYPE_NAMES = {
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

HRESULTS = {
    "S_OK": 0x0,
    "E_INVALIDARG": 0x80070057,
    "E_NOTIMPL": 0x80004001,
    "E_OUTOFMEMORY": 0x8007000E,
    "DXGI_ERROR_INVALID_CALL": 0x887A0001,
    "DXGI_ERROR_UNSUPPORTED": 0x887A0004,
}
S_OK = HRESULTS["S_OK"]


class HRESULTError(Exception):
    """A failed HRESULT: ``.hresult`` is its name (``E_INVALIDARG``), ``.code`` its value."""

    def __init__(self, hresult: str, message: str):
        super().__init__(f"{hresult}: {message}")
        self.hresult = hresult
        self.code = HRESULTS[hresult]
        self.message = message


def invalid(message: str) -> HRESULTError:
    """``E_INVALIDARG`` with a message naming the member and the rule."""
    return HRESULTError("E_INVALIDARG", message)


DML_GRAPH_EDGE_TYPE_INVALID = 0
DML_GRAPH_EDGE_TYPE_INPUT = 1
DML_GRAPH_EDGE_TYPE_OUTPUT = 2
DML_GRAPH_EDGE_TYPE_INTERMEDIATE = 3
DML_GRAPH_NODE_TYPE_INVALID = 0
DML_GRAPH_NODE_TYPE_OPERATOR = 1
DML_GRAPH_NODE_TYPE_CONSTANT = 2
