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

Feature levels are enforced (``GRAD`` needs 3_1, ``TRAINING``/``TRAINING_GRAD`` 4_1;
``DMLCreateDevice1`` and ``CheckFeatureSupport`` as in the header), and every strided
buffer is proven in bounds (``fbnops.framework.strided``) before a dispatch reads or
writes it: what DirectML leaves undefined is refused with ``E_INVALIDARG``.

Modules, by concept: ``enums`` (header values, ``HRESULTError``), ``descs`` (structs,
``DMLCalcBufferTensorSize``), ``schemas`` (each operator as data, with its execute),
``validation`` (CreateOperator's checks), ``d3d12`` (the collapsed D3D12 objects),
``objects`` (operators, compiled operators, initializers), ``binding`` (binding tables),
``recorder`` (dispatch), ``device`` (IDMLDevice, DMLCreateDevice/1), ``run`` (run_operator).

Semantics: ``BATCH_NORMALIZATION_GRAD`` is the frozen-statistics
gradient (``dx = dy*Scale/sqrt(Variance+Epsilon)``, what TensorFlow computes with
``is_training=False``); ``BATCH_NORMALIZATION_TRAINING_GRAD`` the full one (it uses the
Mean/Variance tensors given, as TensorFlow does with its reserve spaces).  The
reduced axes are those where the Mean/Variance/Scale sizes are 1.  Statistics are
population (biased) variances.  Computation is float32 for FLOAT16 tensors too
(``ALLOW_HALF_PRECISION_COMPUTATION`` is accepted and changes nothing).
"""

# ruff: noqa: F401  (this module re-exports the package's public names)
from __future__ import annotations

from . import enums as _enums
from .binding import IDMLBindingTable
from .d3d12 import D3D12CreateDevice, ID3D12CommandQueue, ID3D12Device, ID3D12GraphicsCommandList, ID3D12Resource
from .descs import (
    DML_ACTIVATION_IDENTITY_OPERATOR_DESC,
    DML_ACTIVATION_RELU_OPERATOR_DESC,
    DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC,
    DML_BATCH_NORMALIZATION_OPERATOR_DESC,
    DML_BATCH_NORMALIZATION_TRAINING_GRAD_OPERATOR_DESC,
    DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC,
    DML_BINDING_DESC,
    DML_BINDING_PROPERTIES,
    DML_BINDING_TABLE_DESC,
    DML_BUFFER_BINDING,
    DML_BUFFER_TENSOR_DESC,
    DML_FEATURE_DATA_FEATURE_LEVELS,
    DML_FEATURE_DATA_TENSOR_DATA_TYPE_SUPPORT,
    DML_FEATURE_QUERY_FEATURE_LEVELS,
    DML_FEATURE_QUERY_TENSOR_DATA_TYPE_SUPPORT,
    DML_OPERATOR_DESC,
    DML_TENSOR_DESC,
    DMLCalcBufferTensorSize,
    make_tensor_desc,
)
from .device import DMLCreateDevice, DMLCreateDevice1, IDMLDevice, sizeof
from .enums import HRESULTError
from .graph import (
    DML_GRAPH_DESC,
    DML_GRAPH_EDGE_DESC,
    DML_GRAPH_NODE_DESC,
    DML_INPUT_GRAPH_EDGE_DESC,
    DML_INTERMEDIATE_GRAPH_EDGE_DESC,
    DML_OPERATOR_GRAPH_NODE_DESC,
    DML_OUTPUT_GRAPH_EDGE_DESC,
)
from .objects import IDMLCompiledOperator, IDMLObject, IDMLOperator, IDMLOperatorInitializer
from .recorder import IDMLCommandRecorder
from .run import run_operator
from .schemas import SCHEMAS
from .validation import validate_operator_desc

IDMLDevice1 = IDMLDevice  # CompileGraph lives on the one device class

# Every DirectML.h constant (DML_*) and S_OK, at package level as in the header.
globals().update({k: v for k, v in vars(_enums).items() if k.startswith("DML_") or k == "S_OK"})

__all__ = sorted(n for n in dir() if n.startswith(("DML", "D3D12", "ID3D12", "IDML"))) + [
    "HRESULTError",
    "S_OK",
    "SCHEMAS",
    "make_tensor_desc",
    "run_operator",
    "sizeof",
    "validate_operator_desc",
]

# The public objects report the package they are used from, whatever module defines them.
for _name in __all__:
    if isinstance(globals()[_name], type) or callable(globals()[_name]):
        globals()[_name].__module__ = __name__
