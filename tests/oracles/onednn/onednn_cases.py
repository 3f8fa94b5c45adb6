"""oneDNN Graph cases as data, each runnable on the real library (harness text) and on the mirror.

A case is one op with its logical tensors, attributes, compile-time tensors, execute ports and
input bytes.  :func:`harness_text` writes it for ``harness.cpp``; :func:`run_mirror` replays it on
``bindings_mirror.onednn_graph`` and reports the same stages with the same status values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from bindings_mirror import onednn_graph as dg

F32, F16, BF16, S32 = 3, 1, 2, 4
UNDEF, ANY, STRIDED = 0, 1, 2
BWD, FWD_TRAIN, INFER = 5, 6, 7
EPS, MOMENTUM, DATA_FORMAT, ALPHA, AXIS, KEEP_DIMS = 0x3, 0x6, 0x83, 0x1, 0x30, 0x61
NUMPY = {
    F32: np.dtype(np.float32),
    F16: np.dtype(np.float16),
    BF16: np.dtype(ml_dtypes.bfloat16),
    S32: np.dtype(np.int32),
}


@dataclass
class LT:
    """A logical tensor and the constructor overload that makes it."""

    tid: int
    dt: int = F32
    dims: list[int] | None = None
    layout: int = STRIDED
    strides: list[int] | None = None  # the (tid, dt, dims, strides) overload
    ndims: int | None = None  # the (tid, dt, ndims, layout) overload

    def harness(self, record: str, direction: str) -> str:
        head = f"{record} {direction} {self.tid} {self.dt}"
        if self.strides is not None:
            return f"{head} strides {len(self.dims)} {' '.join(map(str, self.dims))} {' '.join(map(str, self.strides))}"
        if self.ndims is not None:
            return f"{head} ndims {self.ndims} {self.layout}"
        if self.dims is None:
            return f"{head} bare {self.layout}"
        return f"{head} dims {len(self.dims)} {' '.join(map(str, self.dims))} {self.layout}"

    def mirror(self) -> dg.logical_tensor:
        dt = dg.logical_tensor.data_type(self.dt)
        if self.strides is not None:
            return dg.logical_tensor(self.tid, dt, list(self.dims), list(self.strides))
        layout = dg.logical_tensor.layout_type(self.layout)
        if self.ndims is not None:
            return dg.logical_tensor(self.tid, dt, self.ndims, layout)
        if self.dims is None:
            return dg.logical_tensor(self.tid, dt, layout)
        return dg.logical_tensor(self.tid, dt, list(self.dims), layout)


@dataclass
class Case:
    name: str
    ins: list[LT]
    outs: list[LT]
    attrs: list[tuple[str, int, object]] = field(default_factory=list)
    kind: int = BWD
    cins: list[LT] | None = None
    couts: list[LT] | None = None
    policy: int = 1
    exec_in: list[int] | None = None
    exec_out: list[int] | None = None
    data: dict[int, np.ndarray] = field(default_factory=dict)
    # what a version other than 3.13 does instead, e.g. {"3.2": "add_op 8"}; or a deliberate mirror choice
    versions: dict[str, str] = field(default_factory=dict)
    mirror_choice: str | None = None
    mirror_accepts: bool = False  # with a mirror_choice: the mirror runs it (else it refuses)
    # with a mirror_choice: the stages and statuses the mirror must reach (its refusal, or its run)
    mirror_expect: str | None = None

    def harness_text(self) -> str:
        lines = [f"op {self.kind} {self.name.replace(' ', '_')}"]
        for typ, aid, value in self.attrs:
            text = ("1" if value else "0") if typ == "bool" else (repr(float(value)) if typ == "f32" else str(value))
            lines.append(f"attr {typ} {aid} {text}")
        lines += [lt.harness("lt", "in") for lt in self.ins] + [lt.harness("lt", "out") for lt in self.outs]
        lines += [lt.harness("clt", "in") for lt in self.cins or []]
        lines += [lt.harness("clt", "out") for lt in self.couts or []]
        lines.append(f"policy {self.policy}")
        for direction, idx in (("in", self.exec_in), ("out", self.exec_out)):
            if idx is not None:
                lines.append(f"exec {direction} {len(idx)} {' '.join(map(str, idx))}")
        for tid, arr in self.data.items():
            raw = np.ascontiguousarray(arr).tobytes()
            lines.append(f"data {tid} {len(raw)} {raw.hex() or '00'}")
        return "\n".join(lines) + "\nend\n"


def _attr_value(typ: str, value):
    return {"f32": float, "s64": int, "bool": bool, "str": str}[typ](value)


def run_mirror(case: Case):
    """Replay ``case`` on the mirror; the same stages and status values as the harness prints."""
    from onednn_oracle import Outcome  # noqa: PLC0415 - a sibling module (the tests put this folder on the path)

    stages: dict[str, int] = {}
    dims: dict[int, list[int]] = {}
    outputs: dict[int, bytes] = {}
    stage = "logical_tensor"
    try:
        ins = [lt.mirror() for lt in case.ins]
        outs = [lt.mirror() for lt in case.outs]
        cins = [lt.mirror() for lt in case.cins] if case.cins is not None else ins
        couts = [lt.mirror() for lt in case.couts] if case.couts is not None else outs
        stages[stage] = 0
        stage = "op"
        o = dg.op(0, dg.op.kind(case.kind), case.name.replace(" ", "_"))
        for typ, aid, value in case.attrs:
            o.set_attr(dg.op.attr(aid), _attr_value(typ, value))
        o.add_inputs(ins)
        o.add_outputs(outs)
        stages[stage] = 0
        stage = "add_op"
        g = dg.graph(dg.engine.kind.cpu)
        st = g.add_op(o, False)
        stages[stage] = int(st.value)
        if st != dg.status.success:
            return Outcome(stages, dims, outputs)
        stage = "finalize"
        g.finalize()
        stages[stage] = 0
        stage = "get_partitions"
        parts = g.get_partitions(dg.partition.policy(case.policy))
        stages["partitions"] = len(parts)
        stages["supported"] = int(bool(parts) and parts[0].is_supported())
        if len(parts) != 1 or not parts[0].is_supported():
            return Outcome(stages, dims, outputs)
        stage = "compile"
        eng = dg.engine(dg.engine.kind.cpu, 0)
        strm = dg.stream(eng)
        cp = parts[0].compile(cins, couts, eng)
        stages[stage] = 0
        stage = "query"
        qouts = [cp.query_logical_tensor(lt.get_id()) for lt in couts]
        for q in qouts:
            dims[q.get_id()] = q.get_dims()
        stage = "execute"
        exec_in = case.exec_in if case.exec_in is not None else range(len(cins))
        exec_out = case.exec_out if case.exec_out is not None else range(len(qouts))
        tin, tout = [], []
        for i in exec_in:
            t = dg.tensor(cins[i], eng)  # library-allocated, as the harness's buffers
            buf = t.get_data_handle()
            src = np.frombuffer(np.ascontiguousarray(case.data.get(cins[i].get_id(), np.zeros(0))).tobytes(), np.uint8)
            n = min(buf.size, src.size)
            buf[:n] = src[:n]
            tin.append(t)
        for i in exec_out:
            t = dg.tensor(qouts[i], eng)
            t.get_data_handle()[:] = 0xFF  # as the harness: unwritten bytes show as NaN
            tout.append(t)
        cp.execute(strm, tin, tout)
        strm.wait()
        stages[stage] = 0
        for t in tout:
            outputs[t.get_logical_tensor().get_id()] = bytes(t.get_data_handle())
    except dg.error as e:
        stages[stage] = int(e.status)
    return Outcome(stages, dims, outputs)


def decode(raw: bytes, dt: int) -> np.ndarray:
    return np.frombuffer(raw, NUMPY[dt]).astype(np.float64)


def rng_data(seed: int, shape, dt: int = F32, positive: bool = False) -> np.ndarray:
    r = np.random.default_rng(seed)
    a = r.uniform(0.5, 2.0, shape) if positive else r.standard_normal(shape)
    return a.astype(NUMPY[dt]) if math.prod(shape) else np.zeros(shape, NUMPY[dt])
