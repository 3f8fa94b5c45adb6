"""dnnl::graph op, graph, partition, compiled_partition, engine, stream and tensor."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from fbnops.framework import memory, strided

from . import enums
from .compile import infer
from .enums import error, status
from .logical_tensor import fits_size_t, logical_tensor
from .schema import SCHEMAS, OpSchema, channel_axis


def _s64(value) -> int:
    """``value`` as C++'s int64_t; invalid_arguments when it does not fit (10**400 cannot be passed in C++)."""
    if not -(1 << 63) <= int(value) < (1 << 63):
        raise error("invalid_arguments", f"set_attr: {value} does not fit an int64_t attribute")
    return int(value)


def _attr_kind(value) -> tuple[str, object]:
    """The set_attr<T> overload a Python value selects, and the value as T."""
    if isinstance(value, (bool, np.bool_)):
        return "bool", bool(value)
    if isinstance(value, (int, np.integer)):
        return "s64", _s64(value)
    if isinstance(value, (float, np.floating)):
        return "f32", float(np.float32(value))
    if isinstance(value, str):
        return "str", value
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, np.integer)) for v in value):
        return "s64s", [_s64(v) for v in value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, (float, np.floating, int)) for v in value):
        return "f32s", [float(np.float32(v)) if isinstance(v, float) else float(np.float32(_s64(v))) for v in value]
    raise error("invalid_arguments", f"set_attr: no attribute overload takes {type(value).__name__}")


class op:  # noqa: N801
    kind = enums.kind
    attr = enums.attr

    def __init__(self, id: int, akind: op.kind, inputs=None, outputs=None, verbose_name: str = ""):
        if isinstance(inputs, str):  # op(id, kind, verbose_name)
            inputs, verbose_name = None, inputs
        if not fits_size_t(id):
            raise error("invalid_arguments", f"op id must be an integer in [0, 2**64), got {id!r}")
        if not isinstance(akind, enums.kind):
            raise error("unimplemented", f"op {id}: kind {akind!r} is not provided by this mirror")
        self._id = int(id)
        self._kind = akind
        self._name = verbose_name
        self._inputs: list[logical_tensor] = []
        self._outputs: list[logical_tensor] = []
        self._attrs: dict[enums.attr, tuple[str, object]] = {}
        self.add_inputs(inputs or [])
        self.add_outputs(outputs or [])

    def set_attr(self, name: op.attr, value) -> op:
        """Any attribute of any type is taken here, as in C++; add_op checks them against the op."""
        if not isinstance(name, enums.attr):
            raise error("invalid_arguments", f"op '{self._name}': {name!r} is not an op.attr")
        self._attrs[name] = _attr_kind(value)
        return self

    def add_input(self, lt: logical_tensor) -> None:
        self.add_inputs([lt])

    def add_inputs(self, lts: Sequence[logical_tensor]) -> None:
        self._inputs.extend(self._checked(lts, "inputs"))

    def add_output(self, lt: logical_tensor) -> None:
        self.add_outputs([lt])

    def add_outputs(self, lts: Sequence[logical_tensor]) -> None:
        self._outputs.extend(self._checked(lts, "outputs"))

    def _checked(self, lts: Sequence[logical_tensor], what: str) -> list[logical_tensor]:
        lts = list(lts)
        if not all(isinstance(lt, logical_tensor) for lt in lts):
            raise error("invalid_arguments", f"op '{self._name}': {what} must be logical tensors")
        return lts

    def get_id(self) -> int:
        return self._id

    def get_kind(self) -> op.kind:
        return self._kind


class engine:  # noqa: N801
    kind = enums.engine_kind

    def __init__(self, akind: engine.kind = enums.engine_kind.cpu, index: int = 0):
        if akind != enums.engine_kind.cpu or index != 0:
            raise error("invalid_arguments", "only the cpu engine 0 exists here (no GPU)")
        self._kind = akind
        self._index = index

    def get_kind(self) -> engine.kind:
        return self._kind


class stream:  # noqa: N801
    def __init__(self, aengine: engine):
        if not isinstance(aengine, engine):
            raise error("invalid_arguments", "stream: expects an engine")
        self._engine = aengine

    def get_engine(self) -> engine:
        return self._engine

    def wait(self) -> stream:
        return self  # execution is synchronous


class tensor:  # noqa: N801
    """A logical tensor bound to memory: any C-contiguous buffer (an ndarray, a bytearray...).

    ``tensor(lt, engine)`` lets the library allocate ``lt.get_mem_size()`` bytes, as in oneDNN 3.13.
    """

    def __init__(self, lt: logical_tensor, aengine: engine, handle=None):
        if not isinstance(lt, logical_tensor) or not isinstance(aengine, engine):
            raise error("invalid_arguments", "tensor: expects a logical tensor and an engine")
        self._lt, self._engine = lt, aengine
        if handle is None:
            nbytes = lt.get_mem_size()
            if not memory.fits(nbytes):
                raise error("out_of_memory", f"tensor {lt.get_id()}: cannot allocate {nbytes} bytes")
            handle = np.zeros(nbytes, np.uint8)
        self.set_data_handle(handle)

    def set_data_handle(self, handle) -> None:
        _bytes_of(handle, self._lt.get_id())
        self._handle = handle

    def get_data_handle(self):
        return self._handle

    def get_logical_tensor(self) -> logical_tensor:
        return self._lt

    def get_engine(self) -> engine:
        return self._engine

    def _view(self, lt: logical_tensor, writable: bool) -> np.ndarray:
        """``lt``'s elements in this buffer, after proving that every byte lies inside it."""
        raw = _bytes_of(self._handle, lt.get_id())
        if writable and not raw.flags.writeable:
            raise error("invalid_arguments", f"tensor {lt.get_id()}: an output buffer must be writable")
        dtype = enums.NUMPY[lt._dtype]
        dims, strides = lt.get_dims(), lt.get_strides()
        where = f"tensor {lt.get_id()}"
        strided.check_in_bounds(dims, strides, dtype.itemsize, 0, raw.size, what=where, error=_invalid)
        if math.prod(dims) == 0:
            return np.empty(dims, dtype)
        flat = raw if writable else raw.copy()
        return np.ndarray(dims, dtype, buffer=flat.data, strides=[s * dtype.itemsize for s in strides])


def _bytes_of(handle, tid: int) -> np.ndarray:
    """The bytes of a handle: an ndarray (any dtype) or any object with the buffer protocol, C-contiguous."""
    if isinstance(handle, np.ndarray):
        if not handle.flags.c_contiguous:
            raise error("invalid_arguments", f"tensor {tid}: the handle must be a contiguous buffer")
        return handle.reshape(-1).view(np.uint8)
    try:
        view = memoryview(handle)
    except TypeError:
        raise error(
            "invalid_arguments", f"tensor {tid}: a handle must be a buffer, not {type(handle).__name__}"
        ) from None
    if not view.c_contiguous:
        raise error("invalid_arguments", f"tensor {tid}: the handle must be a contiguous buffer")
    return np.frombuffer(view.cast("B"), np.uint8) if view.nbytes else np.zeros(0, np.uint8)


def _invalid(message: str) -> error:
    return error("invalid_arguments", message)


_partition_ids = itertools.count()


class partition:  # noqa: N801
    policy = enums.policy

    def __init__(self, aop: op, ekind: engine.kind):
        if not isinstance(aop, op) or aop._kind not in SCHEMAS:
            raise error("invalid_arguments", "partition: expects a batch-normalization op")
        SCHEMAS[aop._kind].check_add_op(aop)
        self._op, self._kind, self._id = aop, ekind, next(_partition_ids)

    def is_supported(self) -> bool:
        return SCHEMAS[self._op._kind].supported(len(self._op._inputs), len(self._op._outputs))

    def get_id(self) -> int:
        return self._id

    def get_engine_kind(self) -> engine.kind:
        return self._kind

    def get_ops_num(self) -> int:
        return 1

    def get_ops(self) -> list[int]:
        return [self._op._id]

    def get_input_ports(self) -> list[logical_tensor]:
        return list(self._op._inputs)

    def get_output_ports(self) -> list[logical_tensor]:
        return list(self._op._outputs)

    def compile(self, inputs: Sequence[logical_tensor], outputs: Sequence[logical_tensor], e: engine):
        if not self.is_supported():
            raise error("invalid_arguments", "compile: the partition is not supported (is_supported() is false)")
        if not isinstance(e, engine):
            raise error("invalid_arguments", "compile: expects an engine")
        ins, outs = _by_port(self._op._inputs, inputs, "input"), _by_port(self._op._outputs, outputs, "output")
        return compiled_partition(self._op, ins, infer(SCHEMAS[self._op._kind], self._op, ins, outs))


def _by_port(ports: list[logical_tensor], given: Sequence[logical_tensor], what: str) -> list[logical_tensor]:
    """The given logical tensors in port order, matched by id (each port exactly once)."""
    given = list(given)
    by_id = {lt.get_id(): lt for lt in given if isinstance(lt, logical_tensor)}
    want = [p.get_id() for p in ports]
    if len(given) != len(ports) or sorted(by_id) != sorted(want):
        raise error("invalid_arguments", f"compile: {what} logical tensors {sorted(by_id)} are not the ports {want}")
    return [by_id[i] for i in want]


class compiled_partition:  # noqa: N801
    def __init__(self, aop: op, inputs: list[logical_tensor], outputs: list[logical_tensor]):
        self._op, self._inputs, self._outputs = aop, inputs, outputs

    def query_logical_tensor(self, tid: int) -> logical_tensor:
        for lt in self._inputs + self._outputs:
            if lt._id == tid:
                return lt
        raise error("invalid_arguments", f"no logical tensor {tid} in this compiled partition")

    def get_inplace_ports(self) -> list[tuple[int, int]]:
        return []

    def execute(self, astream: stream, inputs: Sequence[tensor], outputs: Sequence[tensor]) -> None:
        """Every buffer is proven before anything is computed; on error no output byte changes."""
        if not isinstance(astream, stream):
            raise error("invalid_arguments", "execute: expects a stream")
        ins = self._match(inputs, self._inputs, "input")
        outs = self._match(outputs, self._outputs, "output")
        # the working memory: a copy of every input handle (the real library reads them in place), the
        # float32 arithmetic over every tensor, and the results; checked before any byte is copied
        copies = sum(_bytes_of(t._handle, lt.get_id()).size for t, lt in zip(ins, self._inputs, strict=True))
        need = copies + sum(math.prod(lt.get_dims()) * 8 for lt in self._inputs + self._outputs)
        if not memory.fits(need):
            raise error("out_of_memory", f"execute: {need} bytes of working memory do not fit")
        in_views = [t._view(lt, False) for t, lt in zip(ins, self._inputs, strict=True)]
        out_views = [t._view(lt, True) for t, lt in zip(outs, self._outputs, strict=True)]
        for a, b in itertools.combinations(out_views, 2):
            if a.size and b.size and np.may_share_memory(a, b):
                raise error("invalid_arguments", "execute: two output tensors share memory")
        schema: OpSchema = SCHEMAS[self._op._kind]
        src = self._inputs[0]
        channel = channel_axis(src.ndims(), schema.data_format(self._op))
        results = schema.execute(schema.attr_values(self._op), in_views, channel, len(self._outputs))
        for view, value in zip(out_views, results, strict=True):
            value = np.asarray(value)
            target = view[: value.shape[0]] if view.ndim == 1 else view  # a longer [C] output: its first C
            target[...] = value.astype(view.dtype)

    @staticmethod
    def _match(tensors: Sequence[tensor], lts: list[logical_tensor], what: str) -> list[tensor]:
        tensors = list(tensors)
        if not all(isinstance(t, tensor) for t in tensors):
            raise error("invalid_arguments", f"execute: {what}s must be tensors")
        by_id = {t._lt.get_id(): t for t in tensors}
        want = [lt.get_id() for lt in lts]
        if len(tensors) != len(lts) or sorted(by_id) != sorted(want):
            raise error(
                "invalid_arguments",
                f"execute: {what} tensors for ids {[t._lt.get_id() for t in tensors]}; the compiled partition "
                f"has {what}s {want} (each exactly once)",
            )
        return [by_id[i] for i in want]


class graph:  # noqa: N801
    """dnnl::graph::graph: add ops, finalize, get one partition per op (batch-norm ops do not fuse)."""

    def __init__(self, engine_kind: engine.kind):
        self._kind = engine_kind
        self._ops: list[op] = []
        self._finalized = False

    def add_op(self, o: op, allow_exception: bool = True) -> status:
        try:
            if self._finalized:
                raise error("invalid_graph", "cannot add an op to a finalized graph")
            if not isinstance(o, op):
                raise error("invalid_arguments", "add_op expects an op")
            if any(p._id == o._id for p in self._ops):
                raise error("invalid_graph", f"duplicate op id {o._id}")
            SCHEMAS[o._kind].check_add_op(o)
        except error as e:
            if allow_exception:
                raise
            return e.status
        self._ops.append(o)
        return status.success

    def finalize(self) -> None:
        producers: dict[int, op] = {}
        for o in self._ops:
            for lt in o._outputs:
                if lt._id in producers:
                    raise error("invalid_graph", f"logical tensor {lt._id} is produced by two ops")
                producers[lt._id] = o
        self._finalized = True

    def is_finalized(self) -> bool:
        return self._finalized

    def get_partitions(self, policy: partition.policy = enums.policy.fusion) -> list[partition]:
        if not self._finalized:
            raise error("invalid_graph", "the graph is not finalized yet")
        if not isinstance(policy, enums.policy):
            raise error("invalid_arguments", f"get_partitions: {policy!r} is not a partition.policy")
        return [partition(o, self._kind) for o in self._ops]
