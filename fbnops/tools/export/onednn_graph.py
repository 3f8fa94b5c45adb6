"""Export target ``onednn-graph``: a C++ program on oneDNN's Graph API (``dnnl_graph.hpp``).

The program is what a oneDNN Graph user writes (seed: oneDNN's *BatchNormTrainingBackward* op page,
https://oneapi-src.github.io/oneDNN/dev_guide_op_batchnormtrainingbackward.html, and the
``cpu_getting_started.cpp`` example): logical tensors, one op per TensorFlow op, a graph,
``get_partitions``, ``compile``, ``execute`` on a stream. It builds against the oneDNN 3.2 wheels
(``onednn-cpu-gomp`` + ``onednn-devel-cpu-gomp`` 2023.2.0, the ``export`` extra) found in the
Python environment that runs ``run.sh``.

What maps (anything else is refused here, at export time, with ``UnimplementedError``):

=============================================  ==================================================
TensorFlow op                                   oneDNN Graph
=============================================  ==================================================
``FusedBatchNorm``/``V2``/``V3``, training      ``BatchNormForwardTraining`` (zero running
(``exponential_avg_factor`` 1)                  statistics in; ``batch_variance`` is biased in
                                                oneDNN, the program applies TF's ``n/(n-1)``)
``FusedBatchNorm*``, ``is_training=False``      ``BatchNormInference``
``FusedBatchNormGrad``/``V2``/``V3``, training  ``BatchNormTrainingBackward`` with 3 outputs
``AddN``                                        a chain of ``Add``
``Transpose`` of a feed or constant             a host loop (3.2 offers no partition for a lone
(constant ``perm``)                             ``StaticTranspose``)
``Placeholder``, ``Const``, ``Identity``,       host buffers (``inputs/*.npy``, the same buffer,
``OnesLike``, ``ZerosLike``                     ones, zeros)
=============================================  ==================================================

Refused: ``exponential_avg_factor`` != 1 (oneDNN blends running statistics with its *biased*
variance, TF with the Bessel-corrected one), the frozen gradient (``is_training=False``: oneDNN's
1-output backward ignores gamma and has no scale/offset gradients), ``FusedBatchNormGradGrad``,
and dtypes other than float32/bfloat16/float16 (oneDNN: src/dst f32|bf16|f16, statistics f32).
"""

from __future__ import annotations

import numpy as np

from fbnops.framework import dtypes
from fbnops.framework.errors import UnimplementedError
from fbnops.framework.graph import Operation

from ._cpp_text import c_string, comment
from ._npy_cpp import NPY_H
from ._onednn_template import main_cpp, run_sh
from ._plan import ExportPlan
from ._values import plan_values

__all__ = ["render"]

_DT = {dtypes.float32: "f32", dtypes.bfloat16: "bf16", dtypes.float16: "f16", np.dtype(np.int32): "s32"}
_FORMAT = {"NHWC": "NXC", "NDHWC": "NXC", "NCHW": "NCX", "NCDHW": "NCX"}
_FORWARD = ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
_GRAD = ("FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3")


def _refuse(op: Operation, why: str) -> UnimplementedError:
    return UnimplementedError(f"onednn-graph export: '{op.name}' ({op.type}): {why}", op.type)


def _dims(shape) -> str:
    return "{" + ", ".join(str(int(d)) for d in shape) + "}"


class _Program:
    """The C++ text of one plan, section by section, and the logical-tensor id of every tensor."""

    def __init__(self, plan: ExportPlan, values: dict[str, np.ndarray]):
        self.plan, self.values = plan, values
        self.ids: dict[str, int] = {}  # "op:i" -> logical tensor id (aliases share one)
        self.lt_names: dict[int, str] = {}
        self.next_id = 0
        self.n_ops = 0
        self.host: list[str] = []  # buffers made before the graph runs
        self.decls: list[str] = []  # logical tensors
        self.build: list[str] = []  # ops and their attributes
        self.after: list[str] = []  # TF outputs computed on the host from oneDNN's
        self.host_ready: set[str] = set()  # tensors the host has before the graph runs

    def dt(self, op: Operation, tensor: str) -> str:
        value = self.values[tensor]
        if value.dtype not in _DT:
            raise _refuse(op, f"dtype {dtypes.tf_name(value.dtype)} has no oneDNN Graph data_type here")
        return _DT[value.dtype]

    def new_lt(self, op: Operation, tensor: str, label: str, value: np.ndarray | None = None) -> str:
        """Declare a strided logical tensor for ``tensor`` (or an extra one named ``label``)."""
        lid, self.next_id = self.next_id, self.next_id + 1
        value = self.values[tensor] if value is None else value
        dt = _DT.get(value.dtype) or self.dt(op, tensor)
        name = f"lt_{label}"
        shape = _dims(value.shape)
        self.decls.append(f"logical_tensor {name} {{{lid}, data_type::{dt}, dims{shape}, layout_type::strided}};")
        if tensor:
            self.ids[tensor] = lid
        self.lt_names[lid] = name
        return name

    def lt(self, tensor: str) -> str:
        if tensor not in self.ids:  # e.g. an int64 Const used as data
            raise UnimplementedError(f"onednn-graph export: {tensor} has no oneDNN Graph logical tensor")
        return self.lt_names[self.ids[tensor]]

    def alias(self, tensor: str, same_as: str) -> None:
        self.ids[tensor] = self.ids[same_as]
        if same_as in self.host_ready:
            self.host_ready.add(tensor)

    def host_buffer(self, op: Operation, tensor: str, expr: str, note: str) -> None:
        """A tensor the host makes before the graph runs (a feed, a constant, a host transpose...)."""
        self.new_lt(op, tensor, self.plan.idents[op.name] + "_" + tensor.rsplit(":", 1)[1])
        self.host_ready.add(tensor)
        self.host.append(f"buffers[{self.lt(tensor)}.get_id()] = {expr};  // {comment(note)}")

    def add_op(self, op: Operation, kind: str, inputs: list[str], outputs: list[str], attrs: list, part: str = ""):
        """One oneDNN op for (``part`` of) TF ``op``, added to the graph ``g``."""
        var = "op_" + self.plan.idents[op.name] + part
        oid, self.n_ops = self.n_ops, self.n_ops + 1
        self.build.append(f"op {var} {{{oid}, op::kind::{kind}, {c_string(op.name)}}};  // TF {op.type}")
        self.build += [f"{var}.set_attr<{t}>(op::attr::{name}, {value});" for t, name, value in attrs]
        self.build.append(f"{var}.add_inputs({{{', '.join(inputs)}}});")
        self.build.append(f"{var}.add_outputs({{{', '.join(outputs)}}});")
        self.build.append(f"g.add_op({var});")


def _bn_attrs(op: Operation) -> list[tuple[str, str, str]]:
    fmt = op.attrs.get("data_format", "NHWC")
    eps = np.float32(op.attrs.get("epsilon", 1e-4))
    return [("float", "epsilon", f"{float(eps)!r}f"), ("std::string", "data_format", f'"{_FORMAT[fmt]}"')]


def _channels(op: Operation, prog: _Program) -> tuple[int, int]:
    """(C, elements per channel) of a batch-norm op's ``x``."""
    x = prog.values[op.inputs[0 if op.type in _FORWARD else 1].name]
    axis = 1 if op.attrs.get("data_format", "NHWC").startswith("NC") else x.ndim - 1
    c = x.shape[axis]
    return c, (x.size // c if c else 0)


def _forward(op: Operation, prog: _Program) -> None:
    name = op.name
    x, scale, offset, mean, var = (t.name for t in op.inputs)
    c, n = _channels(op, prog)
    if op.attrs.get("is_training", True):
        factor = float(op.attrs.get("exponential_avg_factor", 1.0))
        if np.float32(factor) != np.float32(1.0):
            raise _refuse(op, f"exponential_avg_factor {factor} != 1: oneDNN blends its biased variance, TF the "
                          "Bessel-corrected one, so no oneDNN attribute gives TF's batch_variance")  # fmt: skip
        ident = prog.plan.idents[name]
        zeros = np.zeros(c, np.float32)
        stats_in = [prog.new_lt(op, "", f"{ident}_{s}_in", zeros) for s in ("mean", "variance")]
        for lt in stats_in:  # oneDNN 3.2 requires the running statistics as inputs: zeros (momentum unused)
            prog.host.append(f"buffers[{lt}.get_id()] = zeros(data_type::f32, {{{c}}});")
        outs = [prog.new_lt(op, f"{name}:0", f"{ident}_y")]
        outs += [prog.new_lt(op, "", f"{ident}_running_{s}", zeros) for s in ("mean", "variance")]
        for i, label in ((3, "batch_mean"), (4, "batch_var")):
            outs.append(prog.new_lt(op, f"{name}:{i}", f"{ident}_{label}"))
        prog.add_op(op, "BatchNormForwardTraining", [prog.lt(x), *stats_in, prog.lt(scale), prog.lt(offset)], outs,
                    _bn_attrs(op))  # fmt: skip
        prog.alias(f"{name}:1", f"{name}:3")  # TF batch_mean = reserve_space_1 = the batch mean
        tf_var = prog.new_lt(op, f"{name}:2", f"{ident}_batch_variance_tf")
        prog.after.append(
            f"// TF's batch_variance is Bessel-corrected (n/(n-1), n = {n} per channel); oneDNN's is biased.\n"
            f"buffers[{tf_var}.get_id()] = bessel(buffers.at({outs[4]}.get_id()), {n});"
        )
    else:
        ident = prog.plan.idents[name]
        y = prog.new_lt(op, f"{name}:0", f"{ident}_y")
        inputs = [prog.lt(t) for t in (x, scale, offset, mean, var)]
        prog.add_op(op, "BatchNormInference", inputs, [y], _bn_attrs(op))
        prog.alias(f"{name}:1", mean)  # frozen: TF passes the given statistics through
        prog.alias(f"{name}:2", var)
        prog.alias(f"{name}:3", mean)
        prog.alias(f"{name}:4", var)
    if op.type == "FusedBatchNormV3":
        prog.host_buffer(op, f"{name}:5", "zeros(data_type::f32, {})", "reserve_space_3: TF CPU's rank-0 zero")


def _grad(op: Operation, prog: _Program) -> None:
    if not op.attrs.get("is_training", True):
        raise _refuse(op, "the frozen gradient (is_training=False) has no oneDNN Graph op: the 1-output "
                      "BatchNormTrainingBackward ignores gamma and computes no scale/offset gradients")  # fmt: skip
    name, ident = op.name, prog.plan.idents[op.name]
    dy, x, scale, mean, var = (t.name for t in op.inputs[:5])
    outs = [prog.new_lt(op, f"{name}:{i}", f"{ident}_{label}") for i, label in
            enumerate(("x_backprop", "scale_backprop", "offset_backprop"))]  # fmt: skip
    # src, diff_dst, mean, variance (TF's reserve_space_2: biased, as oneDNN wants), gamma
    prog.add_op(op, "BatchNormTrainingBackward", [prog.lt(t) for t in (x, dy, mean, var, scale)], outs, _bn_attrs(op))
    for i in (3, 4):
        shape = _dims(prog.values[f"{name}:{i}"].shape)
        expr = f"zeros(data_type::f32, {shape})"
        prog.host_buffer(op, f"{name}:{i}", expr, f"reserve_space_{i + 1}: empty in TF CPU")


def _support(op: Operation, prog: _Program) -> None:
    name, ident = op.name, prog.plan.idents[op.name]
    out = f"{name}:0"
    if op.type == "Placeholder":
        path = prog.plan.feeds[name]
        dt = prog.dt(op, out)
        expr = f"input({c_string(path)}, data_type::{dt}, {_dims(prog.values[out].shape)})"
        prog.host_buffer(op, out, expr, f"feed {name}")
    elif op.type == "Const":
        value = prog.values[out]
        if value.dtype not in _DT:  # e.g. a Transpose perm: an attribute, not a buffer
            return
        shape, dt = _dims(value.shape), _DT[value.dtype]
        if name in prog.plan.consts:  # written to inputs/ by the exporter
            expr = f"input({c_string(prog.plan.consts[name])}, data_type::{dt}, {shape})"
            prog.host_buffer(op, out, expr, f"Const {name}")
        else:
            raw = np.ascontiguousarray(value).tobytes().hex()
            prog.host_buffer(op, out, f'constant(data_type::{dt}, {shape}, "{raw}")', f"Const {name}")
    elif op.type in ("OnesLike", "ZerosLike"):
        value = prog.values[out]
        dt = prog.dt(op, out)
        one = np.ones((), value.dtype) if op.type == "OnesLike" else np.zeros((), value.dtype)
        expr = f'repeat(data_type::{dt}, {_dims(value.shape)}, "{one.tobytes().hex()}")'
        prog.host_buffer(op, out, expr, f"{op.type} {name}: the shape of its input")
    elif op.type == "Identity":
        prog.alias(out, op.inputs[0].name)
    elif op.type == "Transpose":
        # oneDNN 3.2's backend offers no partition for a lone StaticTranspose: a host loop, before the graph runs
        perm, source = op.inputs[1].op, op.inputs[0].name
        if perm.type != "Const" or source not in prog.host_ready:
            raise _refuse(op, "only a Transpose of a feed or constant, by a constant perm, is exported (on the host)")
        order = ", ".join(str(int(p)) for p in np.asarray(perm.attrs["value"]).ravel())
        expr = f"transpose(buffers.at({prog.lt(source)}.get_id()), {{{order}}})"
        prog.host_buffer(op, out, expr, f"Transpose {name}")
    elif op.type == "AddN":
        acc = prog.lt(op.inputs[0].name)
        for i, t in enumerate(op.inputs[1:], 1):
            last = i == len(op.inputs) - 1
            step = prog.new_lt(op, out if last else "", f"{ident}_sum{i}", prog.values[out])
            prog.add_op(op, "Add", [acc, prog.lt(t.name)], [step], [], part=f"_add{i}")
            acc = step
        if len(op.inputs) == 1:
            prog.alias(out, op.inputs[0].name)
    else:
        raise _refuse(op, "no oneDNN Graph op is mapped for this TensorFlow op")


def render(plan: ExportPlan) -> dict[str, str]:
    """``main.cpp``, ``npy.h``, ``run.sh`` for ``plan`` (UnimplementedError for what oneDNN cannot run)."""
    prog = _Program(plan, plan_values(plan))
    for op in plan.ops:
        if op.type in _FORWARD:
            _forward(op, prog)
        elif op.type in _GRAD:
            _grad(op, prog)
        else:
            _support(op, prog)
    writes = []
    for tensor, path in plan.output_files().items():
        if tensor not in prog.ids:
            raise UnimplementedError(f"onednn-graph export: fetch {tensor} has no value in the program")
        writes.append(f"write_output({c_string(path)}, buffers.at({prog.lt(tensor)}.get_id()));  // {comment(tensor)}")
    return {"main.cpp": main_cpp(plan, prog, writes), "npy.h": NPY_H, "run.sh": run_sh(plan)}
