"""The batch-normalization ops as data: one schema per op kind (ports, attributes, dtype rules, execute).

The same shape as the DirectML mirror's operator schemas: what ``graph.add_op`` checks (arity,
attributes, the T1/T2 dtype rules, giving ``invalid_graph_op`` as oneDNN 3.13 does), what
``partition.compile`` infers and checks (``invalid_arguments``), and the ``execute`` that computes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fbnops.ops import canonical, fused_batch_norm_grad_v3, fused_batch_norm_v3

from .enums import attr, data_type, error, kind

T1 = (data_type.f32, data_type.bf16, data_type.f16)  # src, diff_dst, diff_src, dst
T2 = (data_type.f32, data_type.bf16)  # statistics, gamma, beta and their gradients
F32 = "f32"
STR = "str"


@dataclass(frozen=True)
class OpSchema:
    """One op kind: ``data_in``/``data_out`` ports are T1 and shaped like src; the others are T2 ``[C]``."""

    kind: kind
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    num_inputs: tuple[int, ...]
    num_outputs: tuple[int, ...]
    data_in: tuple[int, ...]
    data_out: tuple[int, ...]
    attrs: dict[attr, str]  # the attributes the op takes, with their types
    required: tuple[attr, ...]
    supported: Callable[[int, int], bool]  # does the backend make a kernel for (inputs, outputs)?
    execute: Callable[[dict, list[np.ndarray], int, int], list[np.ndarray]]
    min_rank: int = 2
    max_rank: int = 5  # the backend's limit; rank 6 corrupts memory in 3.13, so it is refused

    def check_add_op(self, o) -> None:
        """graph.add_op: arity, attributes and dtypes; ``invalid_graph_op`` for any violation."""
        where = f"{self.kind.name} op '{o._name}' (id {o._id})"
        n_in, n_out = len(o._inputs), len(o._outputs)
        if n_in not in self.num_inputs or n_out not in self.num_outputs:
            raise error(
                "invalid_graph_op",
                f"{where}: takes {'/'.join(map(str, self.num_inputs))} inputs and "
                f"{'/'.join(map(str, self.num_outputs))} outputs, got {n_in} and {n_out}",
            )
        for name, (typ, _) in o._attrs.items():
            if name not in self.attrs:
                raise error("invalid_graph_op", f"{where}: attribute {name.name} is not an attribute of this op")
            if typ != self.attrs[name]:
                raise error("invalid_graph_op", f"{where}: attribute {name.name} must be {self.attrs[name]}, got {typ}")
        for name in self.required:
            if name not in o._attrs:
                raise error("invalid_graph_op", f"{where}: the required attribute {name.name} is not set")
        fmt = self.data_format(o)
        if fmt not in ("NCX", "NXC"):
            raise error("invalid_graph_op", f"{where}: data_format must be NCX or NXC, got '{fmt}'")
        self._check_dtypes(o, where)

    def _check_dtypes(self, o, where: str) -> None:
        ports = [(f"input {i} ({self.inputs[i]})", lt, i in self.data_in) for i, lt in enumerate(o._inputs)]
        ports += [(f"output {i} ({self.outputs[i]})", lt, i in self.data_out) for i, lt in enumerate(o._outputs)]
        t1 = {lt._dtype for _, lt, data in ports if data}
        t2 = {lt._dtype for _, lt, data in ports if not data}
        for name, lt, data in ports:
            allowed = T1 if data else T2
            if lt._dtype not in allowed:
                raise error(
                    "invalid_graph_op",
                    f"{where}: {name} is {lt._dtype.name}; allowed: {', '.join(d.name for d in allowed)}",
                )
        if len(t1) > 1 or len(t2) > 1:
            raise error(
                "invalid_graph_op",
                f"{where}: src-like tensors (T1) must share one data type, and statistics/gamma/beta (T2) another",
            )
        if t2 == {data_type.bf16} and t1 != {data_type.bf16}:
            raise error("invalid_graph_op", f"{where}: bf16 statistics need bf16 src (T2 = bf16 requires T1 = bf16)")

    @staticmethod
    def data_format(o) -> str:
        return o._attrs.get(attr.data_format, (STR, "NXC"))[1]

    def attr_values(self, o) -> dict:
        return {name: value for name, (_, value) in o._attrs.items()}


def channel_axis(ndims: int, data_format: str) -> int:
    return 1 if data_format == "NCX" else ndims - 1


def _bwd(attrs: dict, a: list[np.ndarray], channel: int, n_out: int) -> list[np.ndarray]:
    src, dy, mean, var = a[0], a[1], a[2].astype(np.float32), a[3].astype(np.float32)
    c = mean.shape[0]
    view = canonical.nd_view(src.shape, [channel])
    eps = attrs[attr.epsilon]
    if n_out == 1:  # what the dnnl backend does: use_global_stats, and gamma ignored
        dx, _, _ = fused_batch_norm_grad_v3.grad_on_view(
            view, src, dy, np.ones(c, np.float32), mean, var, epsilon=eps, is_training=False
        )
        return [dx]
    gamma = a[4][:c].astype(np.float32)  # a longer gamma is read up to C
    if src.size == 0:  # zeros, where the real library leaves diff_gamma/diff_beta unwritten
        return [np.empty(src.shape, src.dtype), np.zeros(c, np.float32), np.zeros(c, np.float32)]
    return list(fused_batch_norm_grad_v3.grad_on_view(view, src, dy, gamma, mean, var, epsilon=eps, is_training=True))


def _infer(attrs: dict, a: list[np.ndarray], channel: int, n_out: int) -> list[np.ndarray]:
    src = a[0]
    c = src.shape[channel]
    gamma, beta, mean, var = (v[:c].astype(np.float32) for v in a[1:5])
    view = canonical.nd_view(src.shape, [channel])
    y, _, _ = fused_batch_norm_v3.forward_on_view(
        view, src, gamma, beta, mean, var, epsilon=attrs[attr.epsilon], is_training=False
    )
    return [y]


def _fwd_train(attrs: dict, a: list[np.ndarray], channel: int, n_out: int) -> list[np.ndarray]:
    src = a[0]
    c = src.shape[channel]
    running_mean, running_var = (v[:c].astype(np.float32) for v in a[1:3])
    gamma, beta = (a[3][:c].astype(np.float32), a[4][:c].astype(np.float32)) if len(a) == 5 else (None, None)
    if gamma is None:  # no gamma and beta: scale 1, shift 0
        gamma, beta = np.ones(c, np.float32), np.zeros(c, np.float32)
    if src.size == 0:
        nan = np.full(c, np.nan, np.float32)
        return [np.empty(src.shape, src.dtype), nan, nan, nan, nan]
    view = canonical.nd_view(src.shape, [channel])
    y, mean, var = fused_batch_norm_v3.forward_on_view(
        view, src, gamma, beta, None, None, epsilon=attrs[attr.epsilon], is_training=True
    )
    momentum = np.float32(attrs.get(attr.momentum, 0.5))  # the dnnl backend's default
    new_mean = momentum * running_mean + (np.float32(1) - momentum) * mean
    new_var = momentum * running_var + (np.float32(1) - momentum) * var
    return [y, new_mean, new_var, mean, var]


SCHEMAS: dict[kind, OpSchema] = {
    kind.BatchNormTrainingBackward: OpSchema(
        kind.BatchNormTrainingBackward,
        inputs=("src", "diff_dst", "mean", "variance", "gamma"),
        outputs=("diff_src", "diff_gamma", "diff_beta"),
        num_inputs=(4, 5),
        num_outputs=(1, 2, 3),
        data_in=(0, 1),
        data_out=(0,),
        attrs={attr.epsilon: F32, attr.data_format: STR},
        required=(attr.epsilon,),
        # 2 outputs: the backend would bind its scratchpad as diff_beta, so no kernel is offered
        supported=lambda n_in, n_out: n_out != 2,
        execute=_bwd,
    ),
    kind.BatchNormForwardTraining: OpSchema(
        kind.BatchNormForwardTraining,
        inputs=("src", "mean", "variance", "gamma", "beta"),
        outputs=("dst", "running_mean", "running_variance", "batch_mean", "batch_variance"),
        num_inputs=(3, 4, 5),
        num_outputs=(5,),
        data_in=(0,),
        data_out=(0,),
        attrs={attr.epsilon: F32, attr.momentum: F32, attr.data_format: STR},
        required=(attr.epsilon,),
        supported=lambda n_in, n_out: n_in != 4,  # gamma and beta: both or neither
        execute=_fwd_train,
    ),
    kind.BatchNormInference: OpSchema(
        kind.BatchNormInference,
        inputs=("src", "gamma", "beta", "mean", "variance"),
        outputs=("dst",),
        num_inputs=(5,),
        num_outputs=(1,),
        data_in=(0,),
        data_out=(0,),
        attrs={attr.epsilon: F32, attr.data_format: STR},
        required=(attr.epsilon,),
        supported=lambda n_in, n_out: True,
        execute=_infer,
    ),
}
