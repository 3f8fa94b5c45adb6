"""Export target ``directml``: C++ source on the DirectML API. **It cannot be built or run here.**

``DirectML.h`` ships only in Microsoft's ``Microsoft.AI.DirectML`` NuGet package and the Windows
SDK; no Linux registry this project reaches has it, so the program is generated and checked
structurally (``tests/export/test_directml.py``: balanced source, every ``DML_*`` name and value
against ``bindings_mirror.directml``, every tensor desc's sizes/strides, and the same call sequence
walked through the DirectML mirror, which must give fbnops' results). ``run.sh`` says so and exits 3.

The program is what a DirectML user writes (seed: *DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC
structure (directml.h)*, https://learn.microsoft.com/en-us/windows/win32/api/directml/ns-directml-dml_batch_normalization_grad_operator_desc,
and Microsoft's HelloDirectML sample): ``D3D12CreateDevice``, ``DMLCreateDevice``, one operator desc
per TensorFlow op with ``DML_BUFFER_TENSOR_DESC`` sizes/strides, ``CreateOperator``,
``CompileOperator``, an operator initializer, descriptor heap and binding tables,
``IDMLCommandRecorder::RecordDispatch``, ``ExecuteCommandLists`` on a D3D12 queue, readback.

=============================================  ==============================================
TensorFlow op                                   DirectML operator
=============================================  ==============================================
``FusedBatchNorm*``, training (factor 1)        ``DML_OPERATOR_BATCH_NORMALIZATION_TRAINING``
                                                (biased variance: TF's ``n/(n-1)`` on the host)
``FusedBatchNorm*``, ``is_training=False``      ``DML_OPERATOR_BATCH_NORMALIZATION``
``FusedBatchNormGrad*``, training               ``DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD``
``FusedBatchNormGrad*``, ``is_training=False``  ``DML_OPERATOR_BATCH_NORMALIZATION_GRAD`` (seed 003)
``Placeholder``, ``Const``, ``Identity``,       host tensors (``inputs/*.npy``; the same tensor;
``Transpose`` (constant ``perm``)               a host loop)
=============================================  ==============================================

Layouts: DirectML's sizes are always ``N, C, spatial...``; NHWC/NDHWC data keeps its memory and is
described with strides (channels last); statistics are ``[1, C, 1, 1(, 1)]`` (the same dimension
count, as DirectML requires). float32 only: DirectML has no bfloat16, and an operator's tensors
must share one DataType while TF's float16 batch norm has float32 statistics (a cast would be
needed). Refused at export time (``UnimplementedError``): those dtypes, ``exponential_avg_factor``
!= 1, ``FusedBatchNormGradGrad`` and any other op.
"""

from __future__ import annotations

import numpy as np

from fbnops.framework import dtypes
from fbnops.framework.errors import UnimplementedError
from fbnops.framework.graph import Operation

from ._cpp_text import c_string, comment
from ._directml_template import program, run_sh
from ._npy_cpp import NPY_H
from ._plan import ExportPlan
from ._values import plan_values

__all__ = ["render", "HEADER_VALUES", "dml_sizes_strides"]

# The DirectML.h values the program uses; static_asserts in the program pin them at build time.
HEADER_VALUES = {
    "DML_TENSOR_DATA_TYPE_FLOAT32": 1,
    "DML_TENSOR_TYPE_BUFFER": 1,
    "DML_TENSOR_FLAG_NONE": 0,
    "DML_OPERATOR_BATCH_NORMALIZATION": 72,
    "DML_OPERATOR_BATCH_NORMALIZATION_GRAD": 146,
    "DML_OPERATOR_BATCH_NORMALIZATION_TRAINING": 151,
    "DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD": 152,
    "DML_EXECUTION_FLAG_NONE": 0,
    "DML_CREATE_DEVICE_FLAG_NONE": 0,
    "DML_BINDING_TYPE_NONE": 0,
    "DML_BINDING_TYPE_BUFFER": 1,
    "DML_FEATURE_FEATURE_LEVELS": 1,
    "DML_FEATURE_LEVEL_4_1": 0x4100,
}
_FORWARD = ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
_GRAD = ("FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3")
# operator -> (desc struct, input members, output members), in DirectML.h member order
OPERATORS = {
    "DML_OPERATOR_BATCH_NORMALIZATION": (
        "DML_BATCH_NORMALIZATION_OPERATOR_DESC",
        ("InputTensor", "MeanTensor", "VarianceTensor", "ScaleTensor", "BiasTensor"),
        ("OutputTensor",),
    ),
    "DML_OPERATOR_BATCH_NORMALIZATION_TRAINING": (
        "DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC",
        ("InputTensor", "ScaleTensor", "BiasTensor", "FusedAddTensor"),
        ("OutputTensor", "OutputMeanTensor", "OutputVarianceTensor"),
    ),
    "DML_OPERATOR_BATCH_NORMALIZATION_GRAD": (
        "DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC",
        ("InputTensor", "InputGradientTensor", "MeanTensor", "VarianceTensor", "ScaleTensor"),
        ("OutputGradientTensor", "OutputScaleGradientTensor", "OutputBiasGradientTensor"),
    ),
}
OPERATORS["DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD"] = (
    "DML_BATCH_NORMALIZATION_TRAINING_GRAD_OPERATOR_DESC",
    *OPERATORS["DML_OPERATOR_BATCH_NORMALIZATION_GRAD"][1:],
)


def _refuse(op: Operation, why: str) -> UnimplementedError:
    return UnimplementedError(f"directml export: '{op.name}' ({op.type}): {why}", op.type)


def dml_sizes_strides(shape: tuple[int, ...], data_format: str) -> tuple[list[int], list[int] | None]:
    """DirectML ``Sizes`` (N, C, spatial...) and ``Strides`` (elements; None when packed NCHW) of a TF tensor."""
    if data_format.startswith("NC"):
        return [int(d) for d in shape], None
    n, *spatial, c = (int(d) for d in shape)
    strides_tf = [1] * len(shape)  # the TF tensor is packed in its own (channels-last) order
    for i in range(len(shape) - 2, -1, -1):
        strides_tf[i] = strides_tf[i + 1] * max(int(shape[i + 1]), 1)
    return [n, c, *spatial], [strides_tf[0], strides_tf[-1], *strides_tf[1:-1]]


def _c_float(value: float) -> str:
    return f"{float(np.float32(value))!r}f"


class _Program:
    """Host statements and dispatch blocks, in the order the program runs them."""

    def __init__(self, plan: ExportPlan):
        self.plan = plan
        self.statements: list[str] = []
        self.shapes: dict[str, tuple[int, ...]] = {}

    def tensor(self, name: str) -> str:
        if name not in self.shapes:
            raise UnimplementedError(f"directml export: {name} has no host tensor in the program")
        return f"buffers.at({c_string(name)})"

    def host(self, target: str, expr: str, shape: tuple[int, ...], note: str = "") -> None:
        self.shapes[target] = shape
        self.statements.append(f"buffers[{c_string(target)}] = {expr};" + (f"  // {comment(note)}" if note else ""))

    def dispatch(self, op: Operation, operator: str, members: dict[str, str | None], shapes: dict[str, tuple]):
        """One operator: its tensor descs, desc struct, DML_OPERATOR_DESC, and the Dispatch call."""
        struct, ins, outs = OPERATORS[operator]
        ident = self.plan.idents[op.name]
        fmt = op.attrs.get("data_format", "NHWC")
        rank = len(shapes["InputTensor"])
        lines = [f"// node {comment(c_string(op.name))}: {op.type} -> {operator}"]
        for member in (*ins, *outs):
            if members.get(member) is None:
                continue
            shape = shapes[member]
            if len(shape) == 1:  # a [C] vector: DirectML wants the input's dimension count, C in dim 1
                sizes, strides = [1, shape[0]] + [1] * (rank - 2), None
            else:
                sizes, strides = dml_sizes_strides(shape, fmt)
            total = ((int(np.prod(shape)) * 4) + 3) & ~3  # DMLCalcBufferTensorSize: packed float32
            var = f"{ident}_{member}"
            lines.append(f"const UINT {var}_sizes[{rank}] = {{{', '.join(map(str, sizes))}}};")
            stride_ref = "nullptr"
            if strides is not None:
                lines.append(f"const UINT {var}_strides[{rank}] = {{{', '.join(map(str, strides))}}};  // {fmt} memory")
                stride_ref = f"{var}_strides"
            lines.append(f"DML_BUFFER_TENSOR_DESC {var}_buffer = {{DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_FLAG_NONE, "
                         f"{rank}, {var}_sizes, {stride_ref}, {total}, 0}};")  # fmt: skip
            lines.append(f"DML_TENSOR_DESC {var} = {{DML_TENSOR_TYPE_BUFFER, &{var}_buffer}};")
        lines.append(f"{struct} {ident}_desc = {{}};")
        for member in (*ins, *outs):
            ref = f"&{ident}_{member}" if members.get(member) is not None else "nullptr"
            lines.append(f"{ident}_desc.{member} = {ref};")
        lines.append(f"{ident}_desc.Epsilon = {_c_float(op.attrs.get('epsilon', 1e-4))};")
        if operator == "DML_OPERATOR_BATCH_NORMALIZATION":
            lines.append(f"{ident}_desc.Spatial = TRUE;  // one mean/variance per channel")
        lines.append(f"DML_OPERATOR_DESC {ident}_op = {{{operator}, &{ident}_desc}};")
        for member in outs:  # host memory for the results, in TF's shape and layout
            self.host(members[member], f"Zeros({{{', '.join(map(str, shapes[member]))}}})", shapes[member])
        in_refs = ", ".join(f"&{self.tensor(members[m])}" if members.get(m) else "nullptr" for m in ins)
        out_refs = ", ".join(f"&{self.tensor(members[m])}" for m in outs)
        lines.append(f"Dispatch(context, {ident}_op, {{{in_refs}}}, {{{out_refs}}});")
        self.statements.append("{  // " + lines[0][3:] + "\n" + "\n".join("    " + x for x in lines[1:]) + "\n}")


def _check_dtype(op: Operation) -> None:
    for t in (*op.inputs, *op.outputs):
        if t.dtype != dtypes.float32:
            raise _refuse(op, f"{t.name} is {dtypes.tf_name(t.dtype)}; this target writes float32 only "
                          "(DirectML has no bfloat16; float16 needs the float32 statistics cast)")  # fmt: skip


def _forward(op: Operation, prog: _Program, values: dict) -> None:
    _check_dtype(op)
    name = op.name
    x, scale, offset, mean, var = (t.name for t in op.inputs)
    shape, c = values[x].shape, values[scale].shape
    if op.attrs.get("is_training", True):
        factor = float(op.attrs.get("exponential_avg_factor", 1.0))
        if np.float32(factor) != np.float32(1.0):
            raise _refuse(op, f"exponential_avg_factor {factor} != 1 (DirectML keeps no running statistics)")
        members = {"InputTensor": x, "ScaleTensor": scale, "BiasTensor": offset, "FusedAddTensor": None,
                   "OutputTensor": f"{name}:0", "OutputMeanTensor": f"{name}:3",
                   "OutputVarianceTensor": f"{name}:4"}  # fmt: skip
        shapes = {"InputTensor": shape, "OutputTensor": shape} | dict.fromkeys(
            ("ScaleTensor", "BiasTensor", "OutputMeanTensor", "OutputVarianceTensor"), c
        )
        prog.dispatch(op, "DML_OPERATOR_BATCH_NORMALIZATION_TRAINING", members, shapes)
        n = int(np.prod(shape)) // max(c[0], 1)
        prog.host(f"{name}:1", prog.tensor(f"{name}:3"), c, "batch_mean: the batch mean")
        prog.host(f"{name}:2", f"Bessel({prog.tensor(f'{name}:4')}, {n})", c,
                  "batch_variance: TF corrects DirectML's biased variance by n/(n-1)")  # fmt: skip
    else:
        members = {"InputTensor": x, "MeanTensor": mean, "VarianceTensor": var, "ScaleTensor": scale,
                   "BiasTensor": offset, "OutputTensor": f"{name}:0"}  # fmt: skip
        shapes = {"InputTensor": shape, "OutputTensor": shape} | dict.fromkeys(
            ("MeanTensor", "VarianceTensor", "ScaleTensor", "BiasTensor"), c
        )
        prog.dispatch(op, "DML_OPERATOR_BATCH_NORMALIZATION", members, shapes)
        for i, source in ((1, mean), (2, var), (3, mean), (4, var)):  # frozen: the given statistics pass through
            prog.host(f"{name}:{i}", prog.tensor(source), c)
    if op.type == "FusedBatchNormV3":
        prog.host(f"{name}:5", "Zeros({})", (), "reserve_space_3: TF CPU's rank-0 zero")


def _grad(op: Operation, prog: _Program, values: dict) -> None:
    _check_dtype(op)
    name = op.name
    dy, x, scale, mean, var = (t.name for t in op.inputs[:5])
    shape, c = values[x].shape, values[scale].shape
    operator = "DML_OPERATOR_BATCH_NORMALIZATION_" + ("TRAINING_GRAD" if op.attrs.get("is_training", True) else "GRAD")
    members = {"InputTensor": x, "InputGradientTensor": dy, "MeanTensor": mean, "VarianceTensor": var,
               "ScaleTensor": scale, "OutputGradientTensor": f"{name}:0", "OutputScaleGradientTensor": f"{name}:1",
               "OutputBiasGradientTensor": f"{name}:2"}  # fmt: skip
    shapes = dict.fromkeys(("InputTensor", "InputGradientTensor", "OutputGradientTensor"), shape) | dict.fromkeys(
        ("MeanTensor", "VarianceTensor", "ScaleTensor", "OutputScaleGradientTensor", "OutputBiasGradientTensor"), c
    )
    prog.dispatch(op, operator, members, shapes)
    for i in (3, 4):
        prog.host(f"{name}:{i}", f"Zeros({{{', '.join(map(str, values[f'{name}:{i}'].shape))}}})",
                  values[f"{name}:{i}"].shape, f"reserve_space_{i + 1}: empty in TF CPU")  # fmt: skip


def render(plan: ExportPlan) -> dict[str, str]:
    """``main.cpp``, ``npy.h`` and ``run.sh`` (which says this cannot be built here and exits 3)."""
    values = plan_values(plan)
    prog = _Program(plan)
    for op in plan.ops:
        out = f"{op.name}:0"
        if op.type == "Placeholder":
            prog.host(out, f"LoadNpy({c_string(plan.feeds[op.name])})", values[out].shape, f"feed {op.name}")
        elif op.type == "Const":
            if values[out].dtype != dtypes.float32:  # e.g. a Transpose perm, read at export time
                continue
            prog.host(out, f"LoadNpy({c_string(plan.consts[op.name])})", values[out].shape, f"Const {op.name}")
        elif op.type == "Identity":
            prog.host(out, prog.tensor(op.inputs[0].name), values[out].shape, f"Identity {op.name}")
        elif op.type == "Transpose" and op.inputs[1].op.type == "Const" and values[out].dtype == dtypes.float32:
            perm = ", ".join(str(int(p)) for p in np.asarray(op.inputs[1].op.attrs["value"]).ravel())
            expr = f"Transpose({prog.tensor(op.inputs[0].name)}, {{{perm}}})"
            prog.host(out, expr, values[out].shape, "on the host: DirectML has no transpose operator")
        elif op.type in _FORWARD:
            _forward(op, prog, values)
        elif op.type in _GRAD:
            _grad(op, prog, values)
        else:
            raise _refuse(op, "no DirectML operator is mapped for this TensorFlow op")
    files = plan.output_files()
    writes = [f"SaveNpy({c_string(path)}, {prog.tensor(t)});  // {comment(t)}" for t, path in files.items()]
    return {"main.cpp": program(plan, prog.statements, writes, HEADER_VALUES), "run.sh": run_sh(), "npy.h": NPY_H}
