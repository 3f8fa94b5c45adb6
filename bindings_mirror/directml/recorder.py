"""IDMLCommandRecorder: record a dispatch; when the queue runs it, prove the bindings, compute, write outputs."""

from __future__ import annotations

import math

import numpy as np

from .binding import IDMLBindingTable, tensor_view
from .d3d12 import ID3D12GraphicsCommandList, out_of_memory
from .enums import DML_BINDING_TYPE_NONE, HRESULTError, invalid
from .objects import IDMLCompiledOperator, IDMLObject, IDMLOperatorInitializer
from .validation import sizes_str


class IDMLCommandRecorder(IDMLObject):
    def RecordDispatch(self, commandList: ID3D12GraphicsCommandList, dispatchable, bindings: IDMLBindingTable) -> None:
        if not isinstance(commandList, ID3D12GraphicsCommandList) or not isinstance(bindings, IDMLBindingTable):
            raise invalid("RecordDispatch expects a command list, a dispatchable and its binding table")
        if commandList._closed:
            raise HRESULTError("DXGI_ERROR_INVALID_CALL", "RecordDispatch on a closed command list")
        if bindings._dispatchable is not dispatchable:
            raise invalid("RecordDispatch: the binding table was created for another dispatchable")
        if isinstance(dispatchable, IDMLOperatorInitializer):
            ops = list(dispatchable._ops)

            def initialize():
                _check_resident(dispatchable)
                for op in ops:
                    op._initialized = True

            commandList._work.append(initialize)
            return
        if bindings._inputs is None or bindings._outputs is None:
            raise invalid("RecordDispatch: BindInputs and BindOutputs must be called first")
        inputs, outputs = list(bindings._inputs), list(bindings._outputs)
        commandList._work.append(lambda: _dispatch(dispatchable, inputs, outputs))


def _check_resident(dispatchable) -> None:
    if not dispatchable._resident:
        raise HRESULTError(
            "DXGI_ERROR_INVALID_CALL", "the dispatchable was evicted (IDMLDevice::Evict); call MakeResident first"
        )


def _dispatch(compiled: IDMLCompiledOperator, inputs, outputs) -> None:
    """Everything is proven before anything is computed or written: on error no output byte changes."""
    _check_resident(compiled)
    if not compiled._initialized:
        raise HRESULTError(
            "DXGI_ERROR_INVALID_CALL",
            "the compiled operator was executed before its IDMLOperatorInitializer was dispatched",
        )
    schema, desc = compiled._op._schema, compiled._op._desc
    for member in (*schema.inputs, *schema.outputs):
        td = getattr(desc, member)
        if td is None:
            continue
        # computed in float32 whatever the DataType: that is what the kernels allocate
        oom = out_of_memory(math.prod(td.Desc.Sizes) * 4, f"{schema.name}.{member} Sizes {sizes_str(td.Desc.Sizes)}")
        if oom is not None:
            raise oom
    views = {}
    for member, b in zip((*schema.inputs, *schema.outputs), (*inputs, *outputs), strict=True):
        if b.Type != DML_BINDING_TYPE_NONE:
            views[member] = tensor_view(getattr(desc, member).Desc, b.Desc, f"{schema.name}.{member}")
    _check_outputs_disjoint(schema, outputs)
    tensors = {m: np.array(views[m]) for m in schema.inputs if m in views}
    results = schema.execute(desc, tensors)
    for member, value in results.items():
        views[member][...] = np.asarray(value).astype(views[member].dtype)


def _check_outputs_disjoint(schema, outputs) -> None:
    regions = sorted(
        (id(b.Desc.Buffer), b.Desc.Offset, b.Desc.Offset + b.Desc.SizeInBytes, m)
        for m, b in zip(schema.outputs, outputs, strict=True)
    )
    for (r1, _, e1, m1), (r2, s2, _, m2) in zip(regions, regions[1:], strict=False):
        if r1 == r2 and s2 < e1:
            raise invalid(f"BindOutputs: the writable areas of {m1} and {m2} overlap")
