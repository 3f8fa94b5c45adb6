"""oneDNN Graph mirror (seed 004): ``dnnl::graph`` for the batch-norm ops.

    src = logical_tensor(0, logical_tensor.data_type.f32, [2, 3, 4, 5], logical_tensor.layout_type.strided)
    bn = op(0, op.kind.BatchNormTrainingBackward, "bn_bwd")
    bn.set_attr(op.attr.epsilon, 1e-5)
    bn.add_inputs([src, diff_dst, mean, variance, gamma])
    bn.add_outputs([diff_src, diff_gamma, diff_beta])
    g = graph(engine.kind.cpu); g.add_op(bn); g.finalize()
    cp = g.get_partitions()[0].compile(inputs, outputs, eng)
    cp.execute(strm, [tensor(src, eng, x), ...], [tensor(diff_src, eng, dx), ...]); strm.wait()

Semantics (dml_onednn.md section B): ``data_format`` defaults to ``NXC`` (channel
last); ``epsilon`` is required; ``BatchNormTrainingBackward`` takes src, diff_dst,
mean, variance and an optional gamma, and gives diff_src plus diff_gamma and
diff_beta both or neither.  With **3 outputs** it is the training gradient.  With
**one output** it is what the dnnl backend really does, undocumented: the
global-statistics gradient ``diff_src = diff_dst / sqrt(variance + epsilon)``,
ignoring gamma even when given.  Two outputs are rejected (the schema accepts them
but the backend would bind the scratchpad as diff_beta).  Statistics are biased;
``BatchNormForwardTraining`` blends ``running = momentum*old + (1-momentum)*batch``
with momentum defaulting to 0.5, and applies no Bessel correction.

Errors are ``error`` exceptions with oneDNN's status names (``invalid_arguments``,
``invalid_shape``, ``invalid_data_type``, ``invalid_graph_op``...).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence

import numpy as np

from fbnops.framework import memory
from fbnops.ops import canonical

__all__ = [
    "DNNL_GRAPH_UNKNOWN_DIM",
    "DNNL_GRAPH_UNKNOWN_NDIMS",
    "compiled_partition",
    "engine",
    "error",
    "graph",
    "logical_tensor",
    "op",
    "partition",
    "stream",
    "tensor",
]

DNNL_GRAPH_UNKNOWN_NDIMS = -1
DNNL_GRAPH_UNKNOWN_DIM = -(2**63)


class error(RuntimeError):  # noqa: N801 - dnnl::error
    """dnnl::error: ``.status`` is the dnnl_status_t name."""

    def __init__(self, status: str, message: str):
        super().__init__(f"{message} (status: {status})")
        self.status = status
        self.message = message


class logical_tensor:  # noqa: N801
    class data_type(enum.Enum):  # noqa: N801
        undef = 0
        f16 = 1
        bf16 = 2
        f32 = 3
        s32 = 4
        s8 = 5
        u8 = 6
        boolean = 7

    class layout_type(enum.Enum):  # noqa: N801
        undef = 0
        any = 1
        strided = 2
        opaque = 3

    class property_type(enum.Enum):  # noqa: N801
        undef = 0
        variable = 1
        constant = 2

    def __init__(
        self,
        tid: int,
        dtype: logical_tensor.data_type,
        dims=DNNL_GRAPH_UNKNOWN_NDIMS,
        ltype: logical_tensor.layout_type = None,
        strides=None,
        ptype=None,
    ):
        if not isinstance(tid, (int, np.integer)) or tid < 0:
            raise error("invalid_arguments", f"logical_tensor id must be a non-negative integer, got {tid!r}")
        if not isinstance(dtype, logical_tensor.data_type):
            raise error("invalid_arguments", f"logical_tensor {tid}: data_type must be a logical_tensor.data_type")
        self._id = int(tid)
        self._dtype = dtype
        if isinstance(dims, (int, np.integer)):
            self._dims = None if dims < 0 else [DNNL_GRAPH_UNKNOWN_DIM] * int(dims)
        else:
            self._dims = [int(d) for d in dims]
            if any(d < 0 and d != DNNL_GRAPH_UNKNOWN_DIM for d in self._dims):
                raise error("invalid_shape", f"logical_tensor {tid}: negative dimension in {self._dims}")
        self._ltype = (
            ltype
            if ltype is not None
            else (logical_tensor.layout_type.strided if strides is not None else logical_tensor.layout_type.undef)
        )
        self._strides = None if strides is None else [int(s) for s in strides]
        if self._strides is None and self._ltype == logical_tensor.layout_type.strided and self._dims is not None:
            self._strides = _dense_strides(self._dims)
        self._ptype = ptype or logical_tensor.property_type.undef

    def get_id(self) -> int:
        return self._id

    def get_data_type(self) -> logical_tensor.data_type:
        return self._dtype

    def get_dims(self) -> list[int]:
        if self._dims is None:
            raise error("invalid_arguments", "cannot get dims when ndims is unknown")
        return list(self._dims)

    def get_strides(self) -> list[int]:
        if self._strides is None:
            raise error("invalid_arguments", "the logical tensor has no strided layout")
        return list(self._strides)

    def get_layout_type(self) -> logical_tensor.layout_type:
        return self._ltype

    def ndims(self) -> int:
        return -1 if self._dims is None else len(self._dims)

    def get_mem_size(self) -> int:
        if self._dims is None or self._strides is None:
            return 0
        if any(d == 0 for d in self._dims):
            return 0
        span = sum((d - 1) * s for d, s in zip(self._dims, self._strides, strict=True)) + 1
        return span * _NUMPY[self._dtype].itemsize

    def is_equal(self, other: logical_tensor) -> bool:
        return (self._id, self._dtype, self._dims, self._ltype, self._strides) == (
            other._id,
            other._dtype,
            other._dims,
            other._ltype,
            other._strides,
        )

    def _known(self) -> bool:
        return self._dims is not None and all(d != DNNL_GRAPH_UNKNOWN_DIM for d in self._dims)

    def __repr__(self) -> str:
        return f"logical_tensor(id={self._id}, {self._dtype.name}, dims={self._dims}, {self._ltype.name})"


def _dense_strides(dims) -> list[int]:
    strides, acc = [], 1
    for d in reversed(dims):
        strides.insert(0, acc)
        acc *= max(d, 1)
    return strides


_NUMPY = {
    logical_tensor.data_type.f32: np.dtype(np.float32),
    logical_tensor.data_type.f16: np.dtype(np.float16),
    logical_tensor.data_type.bf16: np.dtype("bfloat16"),
}


class op:  # noqa: N801
    class kind(enum.Enum):  # noqa: N801
        BatchNormForwardTraining = "BatchNormForwardTraining"
        BatchNormInference = "BatchNormInference"
        BatchNormTrainingBackward = "BatchNormTrainingBackward"

    class attr(enum.Enum):  # noqa: N801
        epsilon = "epsilon"
        data_format = "data_format"
        momentum = "momentum"

    def __init__(self, id: int, akind: op.kind, inputs=None, outputs=None, verbose_name: str = ""):
        if isinstance(inputs, str):  # op(id, kind, name)
            inputs, verbose_name = None, inputs
        if not isinstance(akind, op.kind):
            raise error("invalid_arguments", f"op {id}: unsupported kind {akind!r}")
        self._id = int(id)
        self._kind = akind
        self._name = verbose_name
        self._inputs: list[logical_tensor] = list(inputs or [])
        self._outputs: list[logical_tensor] = list(outputs or [])
        self._attrs: dict[op.attr, object] = {}

    def set_attr(self, name: op.attr, value) -> op:
        if not isinstance(name, op.attr):
            raise error("invalid_arguments", f"op '{self._name}': unknown attribute {name!r}")
        if name in (op.attr.epsilon, op.attr.momentum):
            if isinstance(value, bool) or not isinstance(value, (float, int, np.floating, np.integer)):
                raise error("invalid_arguments", f"op '{self._name}': attribute {name.name} must be f32")
            value = float(np.float32(value))
        elif not isinstance(value, str):
            raise error("invalid_arguments", f"op '{self._name}': attribute {name.name} must be a string")
        self._attrs[name] = value
        return self

    def add_input(self, lt: logical_tensor) -> None:
        self._inputs.append(lt)

    def add_inputs(self, lts: Sequence[logical_tensor]) -> None:
        self._inputs.extend(lts)

    def add_output(self, lt: logical_tensor) -> None:
        self._outputs.append(lt)

    def add_outputs(self, lts: Sequence[logical_tensor]) -> None:
        self._outputs.extend(lts)

    def get_id(self) -> int:
        return self._id

    def get_kind(self) -> op.kind:
        return self._kind


# inputs (min, max), outputs allowed, min src ndims - from op_def.hpp and the docs
_SCHEMA = {
    op.kind.BatchNormTrainingBackward: ((4, 5), (1, 3), 4),
    op.kind.BatchNormForwardTraining: ((3, 5), (5,), 2),
    op.kind.BatchNormInference: ((5, 5), (1,), 2),
}


def _channel_axis(ndims: int, data_format: str) -> int:
    return 1 if data_format == "NCX" else ndims - 1


def _validate(o: op) -> None:
    """The checks graph.add_op/finalize do: arity, attributes, dtypes, shapes."""
    (imin, imax), outs, min_nd = _SCHEMA[o._kind]
    where = f"{o._kind.value} op '{o._name}' (id {o._id})"
    if not imin <= len(o._inputs) <= imax:
        raise error("invalid_graph_op", f"{where}: expects {imin} to {imax} inputs, got {len(o._inputs)}")
    if len(o._outputs) not in outs:
        extra = (
            " (diff_gamma and diff_beta are both provided or neither)"
            if o._kind == op.kind.BatchNormTrainingBackward
            else ""
        )
        raise error(
            "invalid_graph_op", f"{where}: expects {' or '.join(map(str, outs))} outputs, got {len(o._outputs)}{extra}"
        )
    if op.attr.epsilon not in o._attrs:
        raise error("invalid_graph_op", f"{where}: the required attribute epsilon is not set")
    fmt = o._attrs.get(op.attr.data_format, "NXC")
    if fmt not in ("NCX", "NXC"):
        raise error("invalid_arguments", f"{where}: data_format must be NCX or NXC, got '{fmt}'")
    if o._kind == op.kind.BatchNormForwardTraining and len(o._inputs) == 4:
        raise error("invalid_graph_op", f"{where}: gamma and beta are both provided or neither")
    src = o._inputs[0]
    data_dt = src._dtype
    if data_dt not in _NUMPY:
        raise error("invalid_data_type", f"{where}: src data type {data_dt.name} is not f32, bf16 or f16")
    data_like = {0} | ({1} if o._kind == op.kind.BatchNormTrainingBackward else set())
    for i, lt in enumerate(o._inputs):
        dt = lt._dtype
        if i in data_like:
            if dt != data_dt:
                raise error("invalid_data_type", f"{where}: input {i} is {dt.name}, src is {data_dt.name}")
        elif dt != logical_tensor.data_type.f32 and not (dt == logical_tensor.data_type.bf16 == data_dt):
            raise error(
                "invalid_data_type",
                f"{where}: input {i} is {dt.name}; statistics and gamma/beta are f32 (or bf16 with bf16 src)",
            )
    if src._dims is not None and len(src._dims) < min_nd:
        raise error("invalid_shape", f"{where}: src needs at least {min_nd} dimensions, got {len(src._dims)}")


class graph:  # noqa: N801
    """dnnl::graph::graph: add ops, finalize, get one partition per op (no fusion here)."""

    def __init__(self, engine_kind: engine.kind):
        self._kind = engine_kind
        self._ops: list[op] = []
        self._finalized = False

    def add_op(self, o: op, allow_exception: bool = True) -> str:
        try:
            if self._finalized:
                raise error("invalid_graph", "cannot add an op to a finalized graph")
            if not isinstance(o, op):
                raise error("invalid_arguments", "add_op expects an op")
            if any(p._id == o._id for p in self._ops):
                raise error("invalid_graph", f"duplicate op id {o._id}")
            _validate(o)
        except error as e:
            if allow_exception:
                raise
            return e.status
        self._ops.append(o)
        return "success"

    def finalize(self) -> None:
        ids = {}
        for o in self._ops:
            for lt in o._outputs:
                if lt._id in ids:
                    raise error("invalid_graph", f"logical tensor {lt._id} is produced by two ops")
                ids[lt._id] = o
        self._finalized = True

    def is_finalized(self) -> bool:
        return self._finalized

    def get_partitions(self) -> list[partition]:
        if not self._finalized:
            raise error("invalid_graph", "finalize the graph before get_partitions")
        return [partition(o, self._kind) for o in self._ops]


class engine:  # noqa: N801
    class kind(enum.Enum):  # noqa: N801
        any = 0
        cpu = 1
        gpu = 2

    def __init__(self, akind: engine.kind = None, index: int = 0):
        akind = akind or engine.kind.cpu
        if akind != engine.kind.cpu:
            raise error("invalid_arguments", "only the cpu engine exists here (no GPU)")
        self._kind = akind
        self._index = index

    def get_kind(self) -> engine.kind:
        return self._kind


class stream:  # noqa: N801
    def __init__(self, aengine: engine):
        self._engine = aengine

    def wait(self) -> stream:
        return self  # execution is synchronous


class tensor:  # noqa: N801
    """dnnl::graph::tensor: a logical tensor bound to memory (an ndarray)."""

    def __init__(self, lt: logical_tensor, aengine: engine, handle: np.ndarray):
        if not isinstance(handle, np.ndarray):
            raise error("invalid_arguments", f"tensor {lt.get_id()}: the handle must be an ndarray")
        want = _NUMPY.get(lt._dtype)
        if handle.dtype != want:
            raise error("invalid_arguments", f"tensor {lt.get_id()}: handle dtype {handle.dtype} is not {want}")
        self._lt = lt
        self._engine = aengine
        self._handle = handle

    def get_logical_tensor(self) -> logical_tensor:
        return self._lt

    def get_data_handle(self) -> np.ndarray:
        return self._handle

    def _array(self) -> np.ndarray:
        lt = self._lt
        dims = lt.get_dims()
        if not memory.fits(math.prod(dims) * self._handle.itemsize):
            raise error("out_of_memory", f"tensor {lt.get_id()}: dims {dims} do not fit in this machine's memory")
        if math.prod(dims) == 0:
            return np.empty(dims, self._handle.dtype)
        strides = [s * self._handle.itemsize for s in lt.get_strides()]
        flat = self._handle.reshape(-1) if self._handle.flags.c_contiguous else None
        if flat is None:
            raise error("invalid_arguments", f"tensor {lt.get_id()}: the handle must be a contiguous buffer")
        if lt.get_mem_size() > flat.nbytes:
            raise error(
                "invalid_arguments",
                f"tensor {lt.get_id()}: the buffer holds {flat.nbytes} bytes, the "
                f"logical tensor needs {lt.get_mem_size()}",
            )
        return np.lib.stride_tricks.as_strided(flat, shape=dims, strides=strides)  # bounds checked above


class partition:  # noqa: N801
    def __init__(self, aop: op, ekind: engine.kind):
        self._op = aop
        self._kind = ekind

    def is_supported(self) -> bool:
        return True

    def get_ops_num(self) -> int:
        return 1

    def get_input_ports(self) -> list[logical_tensor]:
        return list(self._op._inputs)

    def get_output_ports(self) -> list[logical_tensor]:
        return list(self._op._outputs)

    def compile(self, inputs: Sequence[logical_tensor], outputs: Sequence[logical_tensor], e: engine):
        o = self._op
        if [lt._id for lt in inputs] != [lt._id for lt in o._inputs] or [lt._id for lt in outputs] != [
            lt._id for lt in o._outputs
        ]:
            raise error("invalid_arguments", "compile: inputs/outputs must be the partition's ports, in order")
        for lt in inputs:
            if not lt._known() or lt._ltype != logical_tensor.layout_type.strided:
                raise error("invalid_arguments", f"compile: input {lt._id} needs concrete dims and a strided layout")
        fmt = o._attrs.get(op.attr.data_format, "NXC")
        src = inputs[0]
        nd = len(src._dims)
        c = src._dims[_channel_axis(nd, fmt)]
        for i, lt in enumerate(inputs):
            want = src._dims if i == 0 or (i == 1 and o._kind == op.kind.BatchNormTrainingBackward) else [c]
            if lt._dims != want:
                raise error("invalid_shape", f"compile: input {i} (id {lt._id}) has dims {lt._dims}, expected {want}")
        resolved = []
        for i, lt in enumerate(outputs):  # infer shapes; 'any' layouts become dense strided
            want = src._dims if i == 0 else [c]
            if lt._dims is not None and lt._known() and lt._dims != want:
                raise error("invalid_shape", f"compile: output {i} (id {lt._id}) has dims {lt._dims}, expected {want}")
            strides = lt._strides if lt._ltype == logical_tensor.layout_type.strided and lt._known() else None
            resolved.append(logical_tensor(lt._id, lt._dtype, want, logical_tensor.layout_type.strided, strides))
        return compiled_partition(o, list(inputs), resolved)


class compiled_partition:  # noqa: N801
    def __init__(self, aop: op, inputs, outputs):
        self._op = aop
        self._inputs = inputs
        self._outputs = outputs

    def query_logical_tensor(self, tid: int) -> logical_tensor:
        for lt in self._inputs + self._outputs:
            if lt._id == tid:
                return lt
        raise error("invalid_arguments", f"no logical tensor {tid} in this partition")

    def execute(self, astream: stream, inputs: Sequence[tensor], outputs: Sequence[tensor]) -> None:
        if len(inputs) != len(self._inputs) or len(outputs) != len(self._outputs):
            raise error(
                "invalid_arguments",
                f"execute: expects {len(self._inputs)} inputs and {len(self._outputs)} "
                f"outputs, got {len(inputs)} and {len(outputs)}",
            )
        for t, lt in zip([*inputs, *outputs], [*self._inputs, *self._outputs], strict=True):
            if t._lt._id != lt._id:
                raise error("invalid_arguments", f"execute: tensor for id {t._lt._id} where id {lt._id} is expected")
        arrays = [np.array(t._array()) for t in inputs]
        results = _run(self._op, arrays)
        for t, value in zip(outputs, results, strict=True):
            t._array()[...] = np.asarray(value).astype(t._handle.dtype)


def _run(o: op, a: list[np.ndarray]) -> list[np.ndarray]:
    eps = o._attrs[op.attr.epsilon]
    fmt = o._attrs.get(op.attr.data_format, "NXC")
    src = a[0]
    view = canonical.nd_view(src.shape, [_channel_axis(src.ndim, fmt)])
    f32 = [np.asarray(v, np.float32) for v in a[1:]]
    if o._kind == op.kind.BatchNormTrainingBackward:
        dy, mean, var = a[1], f32[1], f32[2]
        if len(o._outputs) == 1:  # the dnnl backend: use_global_stats, no scale
            dx, _, _ = canonical.grad(view, src, dy, np.ones_like(mean), mean, var, epsilon=eps, is_training=False)
            return [dx]
        gamma = f32[3] if len(a) == 5 else np.ones_like(mean)
        return list(canonical.grad(view, src, dy, gamma, mean, var, epsilon=eps, is_training=True))
    if o._kind == op.kind.BatchNormInference:
        gamma, beta, mean, var = f32
        y, _, _ = canonical.forward(view, src, gamma, beta, mean, var, epsilon=eps, is_training=False)
        return [y]
    running_mean, running_var = f32[0], f32[1]
    gamma, beta = (f32[2], f32[3]) if len(a) == 5 else (np.ones_like(running_mean), np.zeros_like(running_mean))
    if math.prod(src.shape) == 0:
        nan = np.full_like(running_mean, np.nan)
        return [np.empty(src.shape, src.dtype), nan, nan, nan, nan]
    y, mean, var = canonical.forward(view, src, gamma, beta, None, None, epsilon=eps, is_training=True)
    momentum = np.float32(o._attrs.get(op.attr.momentum, 0.5))
    new_mean = momentum * running_mean + (np.float32(1) - momentum) * mean
    new_var = momentum * running_var + (np.float32(1) - momentum) * var
    return [y, new_mean, new_var, mean, var]
