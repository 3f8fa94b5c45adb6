"""run_operator: the whole DirectML sequence for one operator, in one call."""

from __future__ import annotations

import numpy as np

from .binding import tensor_view
from .descs import DML_BINDING_DESC, DML_BINDING_TABLE_DESC, DML_BUFFER_BINDING, DML_OPERATOR_DESC
from .device import IDMLDevice
from .enums import DML_BINDING_TYPE_BUFFER, DML_BINDING_TYPE_NONE, DML_EXECUTION_FLAG_NONE


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
    d3d = device.GetParentDevice()
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
        binding = DML_BUFFER_BINDING(res, 0, b.TotalTensorSizeInBytes)
        if value is not None:
            view = tensor_view(b, binding, member)
            view[...] = np.asarray(value).astype(view.dtype)
        return DML_BINDING_DESC(DML_BINDING_TYPE_BUFFER, binding)

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
        m: np.array(tensor_view(getattr(desc, m).Desc, b.Desc, m))
        for m, b in zip(schema.outputs, out_bindings, strict=True)
    }
