"""The table of oneDNN Graph cases compared between the real library and the mirror.

Random cases (shapes, formats, dtypes, 1 or 3 outputs, known or ``any`` outputs) and edge cases
(each point of the fidelity sheet: constructor overloads, dtype rules, attributes, arity, ranks,
strides, execute ports).  ``versions`` marks what oneDNN 3.2 does where it differs from 3.13
(the mirror follows 3.13); ``mirror_choice`` marks a deliberate, documented difference.
"""

from __future__ import annotations

import numpy as np
from onednn_cases import (
    ALPHA,
    ANY,
    AXIS,
    BF16,
    BWD,
    DATA_FORMAT,
    EPS,
    F16,
    F32,
    FWD_TRAIN,
    INFER,
    KEEP_DIMS,
    LT,
    MOMENTUM,
    NUMPY,
    S32,
    STRIDED,
    UNDEF,
    Case,
    rng_data,
)


def _dense(dims):
    strides, acc = [], 1
    for d in reversed(dims):
        strides.insert(0, acc)
        acc *= max(d, 1)
    return strides


def bwd(
    name,
    shape,
    fmt="NCX",
    n_out=3,
    gamma=True,
    dt=F32,
    sdt=F32,
    out_dt=None,
    out_layout=STRIDED,
    seed=0,
    eps=1e-3,
    out_dims=None,
    **kw,
):
    """A BatchNormTrainingBackward case with random data; keyword overrides for the odd ones."""
    c = shape[1 if fmt == "NCX" else -1] if len(shape) > 1 else 1
    out_dt = dt if out_dt is None else out_dt
    ins = [LT(0, dt, list(shape)), LT(1, dt, list(shape)), LT(2, sdt, [c]), LT(3, sdt, [c])]
    if gamma:
        ins.append(LT(4, sdt, [c]))
    od = out_dims or [list(shape), [c], [c]]
    outs = [LT(5, out_dt, od[0], out_layout), LT(6, sdt, od[1], out_layout), LT(7, sdt, od[2], out_layout)][:n_out]
    if out_layout == ANY:
        for lt in outs:
            lt.dims, lt.ndims = None, -1
    data = {
        0: rng_data(seed, shape, dt),
        1: rng_data(seed + 1, shape, dt),
        2: (rng_data(seed + 2, [c]) * 0.1).astype(NUMPY[sdt]),  # scaled in float32, then stored as sdt
        3: rng_data(seed + 3, [c], sdt, positive=True),
        4: rng_data(seed + 4, [c], sdt, positive=True),
    }
    attrs = [("f32", EPS, eps)] + ([("str", DATA_FORMAT, fmt)] if fmt else [])
    case = Case(name, ins, outs, attrs=attrs, kind=BWD, data={k: v for k, v in data.items() if k < len(ins)})
    for k, v in kw.items():
        setattr(case, k, v)
    return case


def _random_cases() -> list[Case]:
    r = np.random.default_rng(2026)
    out = []
    for i in range(50):
        rank = int(r.choice([4, 4, 4, 5]))
        shape = [int(r.integers(1, 4))] + [int(r.integers(1, 6)) for _ in range(rank - 1)]
        fmt = str(r.choice(["NCX", "NXC", ""]))
        n_out = int(r.choice([1, 3]))
        gamma = bool(r.integers(0, 2)) or n_out == 3 and bool(r.integers(0, 2))
        layout = int(r.choice([STRIDED, STRIDED, ANY]))
        eps = float(r.choice([1e-5, 1e-3, 0.0, 0.5]))
        out.append(
            bwd(f"random {i}", shape, fmt=fmt or None, n_out=n_out, gamma=gamma, out_layout=layout, seed=i, eps=eps)
        )
    return out


def _fwd(name, shape, fmt="NCX", momentum=None, kind=FWD_TRAIN, seed=0, dt=F32):
    c = shape[1 if fmt == "NCX" else -1]
    attrs = [("f32", EPS, 1e-3), ("str", DATA_FORMAT, fmt)] + ([("f32", MOMENTUM, momentum)] if momentum else [])
    stats = {1: rng_data(seed + 2, [c]) * 0.1, 2: rng_data(seed + 3, [c], positive=True)}
    if kind == INFER:  # src, gamma, beta, mean, variance -> dst
        ins = [LT(0, dt, shape)] + [LT(i, F32, [c]) for i in range(1, 5)]
        outs = [LT(5, dt, shape)]
        data = {0: rng_data(seed, shape, dt), 1: stats[2], 2: stats[1], 3: stats[1], 4: stats[2]}
    else:  # src, mean, variance, gamma, beta -> dst, running mean/var, batch mean/var
        ins = [LT(0, dt, shape)] + [LT(i, F32, [c]) for i in range(1, 5)]
        outs = [LT(5, dt, shape)] + [LT(i, F32, [c]) for i in range(6, 10)]
        data = {0: rng_data(seed, shape, dt), 1: stats[1], 2: stats[2], 3: stats[2], 4: stats[1]}
    return Case(name, ins, outs, attrs=attrs, kind=kind, data=data)


OOB = "the real library reads or writes past the declared [C] buffer: the mirror refuses at compile"
RUNS = "add_op 0, supported 1, compile 0, execute 0"
REFUSED_AT_COMPILE = "add_op 0, supported 1, compile 2"  # invalid_arguments


def _edge_cases() -> list[Case]:
    e = []
    # O1: the constructor overloads; positional strides
    shape = [2, 3, 4, 5]
    c = bwd("positional strides", shape)
    c.ins[0] = LT(0, F32, shape, strides=_dense(shape))
    c.ins[1] = LT(1, F32, shape, strides=_dense(shape))
    e.append(c)
    c = bwd("channels-last strides on NCX dims", shape)
    cl = [60, 1, 15, 3]
    c.ins[0] = LT(0, F32, shape, strides=cl)
    c.ins[1] = LT(1, F32, shape, strides=cl)
    e.append(c)
    c = bwd("ndims constructor with strided outputs", shape)
    c.outs[0] = LT(5, F32, layout=STRIDED, ndims=4)
    e.append(c)
    c = bwd("bare constructor with any outputs", shape)
    c.outs = [LT(5, F32, layout=ANY), LT(6, F32, layout=ANY), LT(7, F32, layout=ANY)]
    e.append(c)
    c = bwd("unknown src ndims at add_op", shape)
    c.ins[0] = LT(0, F32, layout=UNDEF)
    e.append(c)
    # O5: T1/T2 dtype rules
    e.append(bwd("f32 src with bf16 statistics", shape, sdt=BF16))
    e.append(bwd("bf16 src with bf16 statistics", shape, dt=BF16, sdt=BF16))
    e.append(bwd("bf16 src with f32 statistics", shape, dt=BF16, sdt=F32))
    e.append(bwd("f16 src with f32 statistics", shape, dt=F16, sdt=F32))
    e.append(bwd("f16 src with bf16 statistics", shape, dt=F16, sdt=BF16))
    e.append(bwd("diff_src dtype differs from src", shape, out_dt=F16))
    e.append(bwd("s32 src", shape, dt=S32))
    c = bwd("mean f32 variance bf16", shape, dt=BF16)
    c.ins[3] = LT(3, BF16, [3])
    e.append(c)
    c = bwd("diff_dst dtype differs from src", shape)
    c.ins[1] = LT(1, F16, shape)
    e.append(c)
    # O6/O7: attributes
    e.append(bwd("momentum on backward", shape, attrs=[("f32", EPS, 1e-3), ("f32", MOMENTUM, 0.9)]))
    e.append(bwd("data_format NCHW", shape, attrs=[("f32", EPS, 1e-3), ("str", DATA_FORMAT, "NCHW")]))
    e.append(bwd("foreign attribute alpha", shape, attrs=[("f32", EPS, 1e-3), ("f32", ALPHA, 1.0)]))
    e.append(bwd("foreign attribute axis", shape, attrs=[("f32", EPS, 1e-3), ("s64", AXIS, 1)]))
    e.append(bwd("foreign attribute keep_dims", shape, attrs=[("f32", EPS, 1e-3), ("bool", KEEP_DIMS, True)]))
    e.append(bwd("epsilon given as s64", shape, attrs=[("s64", EPS, 1)]))
    e.append(bwd("data_format given as f32", shape, attrs=[("f32", EPS, 1e-3), ("f32", DATA_FORMAT, 1.0)]))
    e.append(bwd("no epsilon", shape, attrs=[("str", DATA_FORMAT, "NCX")]))
    e.append(bwd("negative epsilon", shape, eps=-1e-3))
    e.append(bwd("NaN epsilon", shape, eps=float("nan")))  # accepted and run (NaN results) by the real library
    # O8: two outputs
    e.append(bwd("two outputs", shape, n_out=2))
    # O9/O10: ranks
    e.append(bwd("rank 2 NCX known outputs", [4, 3]))
    e.append(bwd("rank 3 NCX known outputs", [2, 3, 5]))
    e.append(bwd("rank 3 NCX one output", [2, 3, 5], n_out=1, gamma=False))
    e.append(bwd("rank 2 NCX any outputs", [4, 3], out_layout=ANY))
    e.append(bwd("rank 2 NXC known outputs", [4, 3], fmt="NXC"))
    e.append(bwd("rank 3 NCX any outputs", [2, 3, 5], out_layout=ANY))
    e.append(bwd("rank 3 NXC known outputs", [2, 5, 3], fmt="NXC"))
    e.append(bwd("rank 1 src", [3]))
    e.append(bwd("rank 6 src", [1, 2, 2, 2, 2, 2]))
    e[-1].mirror_choice = "3.13 corrupts the heap or crashes on rank 6 (sometimes runs): the mirror refuses at compile"
    e[-1].mirror_expect = REFUSED_AT_COMPILE
    # O11: 4 inputs with 3 outputs
    e.append(bwd("4 inputs 3 outputs", shape, gamma=False))
    e.append(_three_inputs(shape))
    # O12: shapes resolved with known outputs
    # with every output's dims given, 3.13.2 and 3.2 run a longer gamma on its first C values and keep a
    # declared [4] (writing 3 values): their shape inference returns before it checks anything
    c = bwd("gamma longer than C", shape)
    c.ins[4] = LT(4, F32, [5])
    c.data[4] = rng_data(9, [5], positive=True)
    e.append(c)
    e.append(bwd("diff_gamma declared [4] for C=3", shape, out_dims=[shape, [4], [3]]))
    e.append(bwd("diff_src declared with wrong dims", shape, out_dims=[[2, 3, 4, 6], [3], [3]]))
    c = bwd("gamma shorter than C", shape)
    c.ins[4] = LT(4, F32, [2])
    c.data[4] = rng_data(9, [2], positive=True)
    c.mirror_choice, c.mirror_expect = OOB, REFUSED_AT_COMPILE
    e.append(c)
    e.append(bwd("diff_gamma declared [2] for C=3", shape, out_dims=[shape, [2], [3]], mirror_choice=OOB,
                 mirror_expect=REFUSED_AT_COMPILE))  # fmt: skip
    e.append(bwd("diff_beta declared [1, C]", shape, out_dims=[shape, [3], [1, 3]], mirror_choice=OOB,
                 mirror_expect=REFUSED_AT_COMPILE))  # fmt: skip
    c = bwd("diff_dst rank differs from src", shape)
    c.ins[1] = LT(1, F32, [2, 3, 20])
    e.append(c)
    c = bwd("mean longer than C", shape)
    c.ins[2] = LT(2, F32, [4])
    c.data[2] = rng_data(8, [4])
    e.append(c)
    # O13-adjacent: compile/execute port errors the mirror rejects
    c = bwd("compile inputs reordered", shape)
    c.cins = [c.ins[1], c.ins[0], *c.ins[2:]]
    e.append(c)
    c = bwd("execute with a missing input", shape, exec_in=[0, 1, 2, 3])
    c.mirror_choice = "real 3.13 crashes or reads garbage; the mirror rejects with invalid_arguments"
    c.mirror_expect = "add_op 0, supported 1, compile 0, execute 2"
    e.append(c)
    # strides: negative, overlapping, oversized
    for label, strides in (
        ("negative strides", [-60, 20, 5, 1]),
        ("zero strides on src", [0, 0, 0, 0]),
        ("overlapping output strides", None),
        ("oversized strides", [2**40, 20, 5, 1]),
    ):
        c = bwd(label, shape)
        if strides is None:
            c.outs[0] = LT(5, F32, shape, strides=[1, 1, 1, 1])
        else:
            c.ins[0] = LT(0, F32, shape, strides=strides)
        c.mirror_choice = "undefined in the real library (reads or writes outside the buffer): the mirror rejects"
        # oversized strides: the library-allocated buffer would be 8 TiB, out_of_memory (1) when it is made
        c.mirror_expect = "add_op 0, supported 1, compile 0, execute 1" if "oversized" in label else REFUSED_AT_COMPILE
        e.append(c)
    # N = 0
    c = bwd("N = 0", [0, 3, 2, 2])
    c.mirror_choice, c.mirror_accepts = "real leaves diff_gamma/diff_beta unwritten; the mirror writes zeros", True
    c.mirror_expect = RUNS
    e.append(c)
    # partition policy debug, other kinds
    e.append(bwd("debug policy", shape, policy=2))
    e.append(_fwd("forward training NCX", [2, 3, 4, 4]))
    e.append(_fwd("forward training NXC momentum", [2, 4, 4, 3], fmt="NXC", momentum=0.9))
    e.append(_fwd("inference NCX", [2, 3, 4, 4], kind=INFER))
    e.append(_fwd("inference NXC", [2, 4, 4, 3], fmt="NXC", kind=INFER))
    e.append(_fwd("forward training rank 2", [4, 3]))
    e[-1].versions["3.2"], e[-1].mirror_expect = "add_op 0, supported 1, compile 9", RUNS
    c = _fwd("forward training 4 inputs", [2, 3, 4, 4])
    c.ins = c.ins[:4]
    c.data.pop(4)
    e.append(c)
    return e


def _three_inputs(shape):
    c = bwd("3 inputs", shape, gamma=False)
    c.ins = c.ins[:3]
    c.data.pop(3)
    return c


def table() -> list[Case]:
    cases = _random_cases() + _edge_cases()
    # the same op on every dtype pairing the rules allow, and the 1-output mode with gamma
    for i, (dt, sdt) in enumerate(((F32, F32), (BF16, F32), (BF16, BF16), (F16, F32))):
        for n_out in (1, 3):
            cases.append(bwd(f"dtypes {dt}/{sdt} {n_out} out", [2, 3, 3, 2], dt=dt, sdt=sdt, n_out=n_out, seed=50 + i))
    for fmt in ("NCX", "NXC"):
        cases.append(bwd(f"NDHWC-like rank 5 {fmt}", [2, 3, 2, 2, 4], fmt=fmt, seed=70))
    return cases
