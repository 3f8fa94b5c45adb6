"""Fuzzing every public entry with malformed and unusual calls, crash-safe.

A *case* is plain data (surface, shape, layout, dtype, mode, seed, mutation); the
worker process builds the call from it, runs it, and classifies the outcome:

* ``accepted``  - the call succeeded and matched the float64 reference (``ok``) or not;
* ``rejected``  - it raised the surface's documented error type, naming the argument;
* ``bad-error`` - it raised something else, or a message that does not name the argument.

The parent sends cases one at a time to a persistent worker (multiprocessing, spawn);
a worker that dies (segfault, abort) or exceeds the per-case timeout is a *crash* or
*hang*, is replaced, and fuzzing goes on.  Used by tests/test_fuzz.py (CI: >= 1,000
cases; ``FBNOPS_FUZZ_LONG=1`` or ``--long`` for >= 20,000) and benchmarks/reliability.py.
"""

from __future__ import annotations

import multiprocessing as mp
import traceback
from dataclasses import dataclass, field

import numpy as np

SURFACES = ("raw_grad", "raw_fwd", "graph", "java", "cc", "dml", "onednn", "runfile")
DTYPES = ("float32", "float16", "bfloat16")
BAD_DTYPES = ("int32", "uint8", "bool", "float64", "complex64", "object", "str")
MUTATIONS = (
    "none",
    "rank",
    "dtype",
    "channels",
    "shape_mismatch",
    "layout",
    "values",
    "zero_dim",
    "absurd",
    "attr",
    "argnames",
    "not_array",
)
LAYOUTS = ("strided", "negative", "broadcast", "unaligned", "readonly", "fortran", "big_endian")


# ------------------------------------------------------------------------------------ case building


def _dt(name):
    import ml_dtypes

    return {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[name]


def _channels(shape, fmt):
    from fbnops.framework.layouts import channel_axis

    return shape[channel_axis(fmt, len(shape))]


def _relayout(a: np.ndarray, how: str) -> np.ndarray:
    if a.ndim == 0:
        return a
    if how == "strided":
        big = np.zeros((a.shape[0] * 2,) + a.shape[1:], a.dtype)
        big[::2] = a
        return big[::2]
    if how == "negative":
        return np.ascontiguousarray(a[::-1])[::-1]
    if how == "broadcast":  # zero strides along axis 0 (values repeat)
        return np.broadcast_to(a[:1], a.shape)
    if how == "unaligned":  # data starting one byte past an aligned address
        raw = np.zeros(a.nbytes + 1, np.uint8)
        out = np.ndarray(a.shape, a.dtype, buffer=raw, offset=1)
        out[...] = a
        return out
    if how == "readonly":
        b = a.copy()
        b.flags.writeable = False
        return b
    if how == "fortran":
        return np.asfortranarray(a)
    if how == "big_endian" and a.dtype.kind == "f":
        return a.astype(a.dtype.newbyteorder(">"))
    return a


def _bad_dtype(a: np.ndarray, name: str):
    if name == "object":
        return a.astype(object)
    if name == "str":
        return a.astype(np.float32).astype(str)
    return a.astype(np.float32).astype(name)


@dataclass
class Built:
    inputs: dict
    attrs: dict
    expect: str  # "accept" | "reject" | "either"
    arg: str | None = None  # the argument a rejection must name
    extra: dict = field(default_factory=dict)


def build_inputs(case: dict) -> Built:
    """Inputs and attrs of a batch-norm call (TF names), with the case's mutation applied."""
    op = "fwd" if case["surface"] == "raw_fwd" else "grad"
    rng = np.random.default_rng(case["seed"])
    shape, fmt = list(case["shape"]), case["data_format"]
    c = _channels(shape, fmt)
    dt = _dt(case["dtype"])
    if op == "grad":
        inputs = {
            "y_backprop": rng.standard_normal(shape).astype(dt),
            "x": rng.standard_normal(shape).astype(dt),
            "scale": (rng.random(c) + 0.5).astype(np.float32),
            "reserve_space_1": (rng.standard_normal(c) * 0.1).astype(np.float32),
            "reserve_space_2": (rng.random(c) + 0.5).astype(np.float32),
            "reserve_space_3": np.zeros((), np.float32),
        }
        tensors, vectors = ["y_backprop", "x"], ["scale", "reserve_space_1", "reserve_space_2"]
    else:
        inputs = {
            "x": rng.standard_normal(shape).astype(dt),
            "scale": (rng.random(c) + 0.5).astype(np.float32),
            "offset": rng.standard_normal(c).astype(np.float32),
            "mean": (rng.standard_normal(c) * 0.1).astype(np.float32),
            "variance": (rng.random(c) + 0.5).astype(np.float32),
        }
        tensors, vectors = ["x"], ["scale", "offset"] + ([] if case["is_training"] else ["mean", "variance"])
    attrs = {"epsilon": 1e-3, "data_format": fmt, "is_training": case["is_training"]}
    m = case["mutation"]
    kind, pick = m["kind"], m["pick"]
    names = list(inputs)
    if kind == "none":
        return Built(inputs, attrs, "accept")
    if kind == "rank":
        name = (tensors + vectors)[pick % len(tensors + vectors)]
        a = inputs[name]
        inputs[name] = a.reshape(a.shape + (1, 1)) if a.ndim >= 4 or pick % 2 else a.reshape(a.shape + (1,))
        if a.ndim == 4 and pick % 2 == 0:
            inputs[name] = a.reshape(a.shape + (1,))  # 4-D -> 5-D is legal only with a 5-D twin
        return Built(inputs, attrs, "either" if inputs[name].ndim in (4, 5) else "reject", name)
    if kind == "dtype":
        name = names[pick % len(names)]
        inputs[name] = _bad_dtype(inputs[name], BAD_DTYPES[pick % len(BAD_DTYPES)])
        return Built(inputs, attrs, "reject", name)
    if kind == "channels":
        name = vectors[pick % len(vectors)]
        inputs[name] = np.ones(c + 1 + pick % 3, np.float32)
        return Built(inputs, attrs, "reject", name)
    if kind == "shape_mismatch" and op == "grad":
        s2 = list(shape)
        s2[0] += 1
        inputs["x"] = rng.standard_normal(s2).astype(dt)
        return Built(inputs, attrs, "reject", "x")
    if kind == "layout":
        name = names[pick % len(names)]
        inputs[name] = _relayout(inputs[name], LAYOUTS[pick % len(LAYOUTS)])
        return Built(inputs, attrs, "accept")
    if kind == "values":
        name = tensors[pick % len(tensors)]
        a = inputs[name].copy()
        flat = a.reshape(-1)
        if flat.size:
            flat[pick % flat.size] = [np.nan, np.inf, -np.inf][pick % 3]
        inputs[name] = a
        return Built(inputs, attrs, "accept")
    if kind == "zero_dim":
        s2 = list(shape)
        s2[pick % len(s2)] = 0
        c2 = _channels(s2, fmt)
        for t in tensors:
            inputs[t] = np.zeros(s2, dt)
        for v in vectors:
            inputs[v] = np.ones(c2, np.float32)
        return Built(inputs, attrs, "accept")
    if kind == "absurd":
        # broadcast views: small enough to verify against float64, or far beyond this machine's memory
        big = [1 << 12, 1 << 16, 1 << 36, 1 << 40][pick % 4]
        s2 = list(shape)
        s2[0] = big
        for t in tensors:
            inputs[t] = np.broadcast_to(inputs[t][:1], s2)
        if pick % 5 == 0:  # a shape whose element count overflows 64 bits (only an interface can claim it)

            class Absurd:
                __array_interface__ = {
                    "shape": (1 << 40, 1 << 40, 1 << 40, c),
                    "typestr": "<f4",
                    "data": (inputs[tensors[0]].ctypes.data, False),
                    "strides": (0, 0, 0, 0),
                    "version": 3,
                }

            inputs[tensors[-1]] = Absurd()
            return Built(inputs, attrs, "reject", tensors[-1])
        nbytes = int(np.prod(s2, dtype=np.float64)) * np.dtype(dt).itemsize
        return Built(inputs, attrs, "reject" if nbytes > (1 << 34) else "accept", tensors[0])
    if kind == "attr":
        choices = [
            ("data_format", "NHCW"),
            ("data_format", 4),
            ("epsilon", float("nan")),
            ("epsilon", "0.1"),
            ("is_training", "yes"),
            ("epsilon", None),
            ("exponential_avg_factor", float("inf")),
        ]
        name, value = choices[pick % len(choices)]
        if name == "exponential_avg_factor" and op == "grad":
            name, value = "data_format", b"XY"
        attrs[name] = value
        return Built(inputs, attrs, "reject", name)
    if kind == "argnames":
        name = names[pick % len(names)]
        if pick % 2:
            inputs.pop(name)
        else:
            inputs[name + "_typo"] = inputs.pop(name)
        return Built(inputs, attrs, "reject", name)
    if kind == "not_array":
        name = names[pick % len(names)]
        inputs[name] = [[0.0]] if pick % 3 == 0 else (None if pick % 3 == 1 else "x")
        return Built(inputs, attrs, "reject", name)
    return Built(inputs, attrs, "accept")


# ------------------------------------------------------------------------------------ references


def _reference(case: dict, built: Built):
    """float64 outputs for an accepted call (on the values the call actually saw)."""
    with np.errstate(all="ignore"):  # NaN/Inf cases: the reference propagates them too
        return _reference_values(case, built)


def _reference_values(case: dict, built: Built):
    from fbnops.kernels import reference
    from fbnops.ops.canonical import NdView

    i = {k: np.asarray(v) for k, v in built.inputs.items()}
    a = built.attrs
    x = i["x"]
    view = NdView.for_data_format(x.shape, a["data_format"]).view
    if x.size == 0:
        return None
    if case["surface"] == "raw_fwd":
        y, m, v = reference.batch_norm(
            x.reshape(view),
            i["scale"],
            i["offset"],
            i["mean"],
            i["variance"],
            epsilon=a["epsilon"],
            is_training=a["is_training"],
            compute=np.float64,
        )
        return {"y": y.reshape(x.shape)}
    dx, ds, do = reference.batch_norm_grad(
        x.reshape(view),
        i["y_backprop"].reshape(view),
        i["scale"],
        i["reserve_space_1"],
        i["reserve_space_2"],
        epsilon=a["epsilon"],
        is_training=a["is_training"],
        compute=np.float64,
    )
    return {"x_backprop": dx.reshape(x.shape), "scale_backprop": ds, "offset_backprop": do}


def _close(got, want, dtype: str) -> bool:
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    if got.shape != want.shape:
        return False
    finite = np.isfinite(want)
    if not np.array_equal(np.isnan(got), np.isnan(want)) or not np.array_equal(
        got[np.isinf(want)], want[np.isinf(want)]
    ):
        return False
    if not finite.any():
        return True
    scale = max(np.max(np.abs(want[finite])), 1.0)
    tol = {"float32": 1e-4, "float16": 5e-3, "bfloat16": 4e-2}[dtype]
    return bool(np.max(np.abs(got[finite] - want[finite])) <= tol * scale)


# ------------------------------------------------------------------------------------ surfaces


def _alias_names(arg: str) -> set[str]:
    from bindings_mirror.generate import camel

    members = {
        "x": "InputTensor",
        "y_backprop": "InputGradientTensor",
        "scale": "ScaleTensor",
        "reserve_space_1": "MeanTensor",
        "reserve_space_2": "VarianceTensor",
    }
    return (
        {arg, camel(arg), members.get(arg, arg), arg.replace("_", " ")}
        | ({"saved mean"} if arg == "reserve_space_1" else {"saved variance"} if arg == "reserve_space_2" else set())
        | ({"estimated_mean"} if arg == "mean" else {"estimated_variance"} if arg == "variance" else set())
        | ({"y_backprop", "channels"} if arg == "x" else set())
    )


def _check_rejection(exc: BaseException, allowed: tuple, built: Built) -> str:
    if not isinstance(exc, allowed):
        return f"bad-error: {type(exc).__name__}: {exc}"
    if built.arg is not None and not any(n in str(exc) for n in _alias_names(built.arg)):
        return f"bad-error: message does not name '{built.arg}': {exc}"
    return "rejected"


def run_case(case: dict) -> str:
    """Execute one case in this process and classify it."""
    import fbnops
    from bindings_mirror import java
    from fbnops.errors import OpError

    surface = case["surface"]
    if surface == "__segfault__":  # for testing the harness itself
        import ctypes

        ctypes.string_at(0)
    if surface in ("dml", "onednn"):
        return _run_dml_onednn(case)
    built = build_inputs(dict(case, surface="raw_fwd" if surface == "raw_fwd" else "raw_grad"))
    java_defaults = {}
    if surface == "java" and any(v is None for v in built.attrs.values()):
        built.expect = "accept"  # Java: an option set to null is not set (the default applies), as in TF Java
        java_defaults = {"epsilon": 1e-4}
    op_type = "FusedBatchNormV3" if surface == "raw_fwd" else "FusedBatchNormGradV3"
    try:
        if surface in ("raw_grad", "raw_fwd"):
            out = getattr(fbnops.raw_ops, op_type)(**built.inputs, **built.attrs)._asdict()
        elif surface == "graph":
            out = _run_graph(op_type, built)
        elif surface == "java":
            out = _run_java(op_type, built)
        elif surface == "cc":
            out = _run_cc(op_type, built)
            if isinstance(out, str):  # a non-OK Status: C++ never raises
                if built.expect == "accept":
                    return f"bad-error: Status {out}"
                if built.arg is not None and not any(n in out for n in _alias_names(built.arg)):
                    return f"bad-error: status does not name '{built.arg}': {out}"
                return "rejected"
        else:
            out = _run_runfile(op_type, built)
    except Exception as e:  # classify: documented type + message naming the argument
        if built.expect == "accept":
            return f"bad-error: accepted call raised {type(e).__name__}: {e}"
        allowed = {
            "raw_grad": (OpError, TypeError),
            "raw_fwd": (OpError, TypeError),
            "graph": (OpError, TypeError),
            "java": (java.TensorFlowException, java.IllegalArgumentException, TypeError),
            "cc": (TypeError,),
            "runfile": (ValueError,),
        }[surface]
        return _check_rejection(e, allowed, built)
    if built.expect == "reject":
        return "bad-error: accepted a call that must be rejected"
    built.attrs.update({k: v for k, v in java_defaults.items() if built.attrs.get(k) is None})
    ref = _reference(dict(case, surface="raw_fwd" if surface == "raw_fwd" else "raw_grad"), built)
    if ref is None:
        return "accepted"
    for name, want in ref.items():
        if not _close(out[name], want, case["dtype"]):
            return f"mismatch: {name}"
    return "accepted"


def _run_graph(op_type, built):
    from fbnops.framework.graph import Graph
    from fbnops.framework.scope import Scope
    from fbnops.framework.session import Session
    from fbnops.framework.tensor import as_array
    from fbnops.specs import get_spec

    spec = get_spec(op_type)
    s = Scope(Graph())
    if set(built.inputs) != set(spec.input_names):
        raise TypeError(f"inputs {sorted(built.inputs)} are not {list(spec.input_names)}")
    args = [s.constant(as_array(built.inputs[n], n, op_type), name=n) for n in spec.input_names]
    op = s.add_op(op_type, args, built.attrs)
    return dict(zip(spec.output_names, Session(s.graph).run(list(op.outputs)), strict=True))


def _run_java(op_type, built):
    from bindings_mirror import java
    from bindings_mirror.generate import camel
    from fbnops.specs import get_spec

    spec = get_spec(op_type)
    cls = getattr(java, op_type)
    g = java.Graph()
    s = g.baseScope()
    if set(built.inputs) != set(spec.input_names):
        raise TypeError(f"inputs {sorted(built.inputs)} are not {list(spec.input_names)}")
    operands = []
    for n in spec.input_names:
        v = built.inputs[n]
        operands.append(java.Constant.create(s.withName(n), v) if isinstance(v, (np.ndarray, np.generic)) else v)
    options = [getattr(cls, camel(k))(v) for k, v in built.attrs.items()]
    op = cls.create(s, *operands, *options)
    outs = [getattr(op, camel(n))() for n in spec.output_names]
    runner = java.Session(g).runner()
    for o in outs:
        runner.fetch(o)
    return dict(zip(spec.output_names, (t for _, t in runner.run()), strict=True))  # Result: (name, Tensor)


def _run_cc(op_type, built):
    from bindings_mirror import cc
    from bindings_mirror.generate import pascal
    from fbnops.specs import get_spec

    spec = get_spec(op_type)
    cls = getattr(cc.ops, op_type)
    root = cc.Scope.NewRootScope()
    if set(built.inputs) != set(spec.input_names):
        raise TypeError(f"inputs {sorted(built.inputs)} are not {list(spec.input_names)}")
    attrs = cls.Attrs()
    for k, v in built.attrs.items():
        attrs = getattr(attrs, pascal(k))(v)
    # arrays become Consts named after their argument, so NodeDef-form errors name it (as Java's withName)
    args = [built.inputs[n] for n in spec.input_names]
    literal = (np.ndarray, list, tuple, float, int)
    args = [cc.ops.Const(root.WithOpName(n), v) if isinstance(v, literal) else v for n, v in zip(spec.input_names, args)]
    op = cls(root, *args, attrs)
    outputs: list = []
    status = cc.ClientSession(root).Run([getattr(op, n) for n in spec.output_names], outputs)
    if not status.ok():
        return status.ToString()
    return dict(zip(spec.output_names, outputs, strict=True))


def _run_runfile(op_type, built):
    import tempfile
    from pathlib import Path

    from fbnops.tools import runfile

    with tempfile.TemporaryDirectory() as tmp:
        refs = {}
        for k, v in built.inputs.items():
            if isinstance(v, np.ndarray) and v.size > (1 << 26):  # no file holds it: a generator literal
                refs[k] = {"random": {"shape": list(v.shape), "seed": 0}}
                continue
            try:
                arr = np.asarray(v)
                np.save(Path(tmp) / f"{k}.npy", arr, allow_pickle=False)
                refs[k] = {"npy": f"{k}.npy"}
                if arr.dtype == np.dtype("bfloat16"):
                    refs[k]["dtype"] = "bfloat16"
            except (ValueError, TypeError):
                refs[k] = v if isinstance(v, (str, list)) else {"value": None}
        doc = {
            "ops": [{"name": "op", "op": op_type, "inputs": refs, "attrs": {k: v for k, v in built.attrs.items()}}],
            "fetch": ["op.y"]
            if op_type == "FusedBatchNormV3"
            else ["op.x_backprop", "op.scale_backprop", "op.offset_backprop"],
        }
        out = runfile.run(doc, Path(tmp))
    return {k.split(".", 1)[1]: v for k, v in out.items()}


def _run_dml_onednn(case: dict) -> str:
    """Mutated DirectML descs / oneDNN graphs; accepted ones must match the float64 reference."""
    from bindings_mirror import directml as dml
    from bindings_mirror import onednn_graph as dg

    rng = np.random.default_rng(case["seed"])
    shape = list(case["shape"])
    c = shape[1]
    dt_name = "float16" if case["dtype"] == "float16" else "float32"
    x = rng.standard_normal(shape).astype(dt_name)
    dy = rng.standard_normal(shape).astype(dt_name)
    mean, var = (rng.standard_normal(c) * 0.1).astype(np.float32), (rng.random(c) + 0.5).astype(np.float32)
    gamma = (rng.random(c) + 0.5).astype(np.float32)
    pick, kind = case["mutation"]["pick"], case["mutation"]["kind"]
    mutate = kind not in ("none", "layout", "values", "zero_dim")
    training = case["is_training"]
    stat_shape = [1, c] + [1] * (len(shape) - 2)
    if case["surface"] == "dml":
        f = dml.DML_TENSOR_DATA_TYPE_FLOAT16 if dt_name == "float16" else dml.DML_TENSOR_DATA_TYPE_FLOAT32
        T = dml.make_tensor_desc
        members = dict(
            InputTensor=T(f, shape),
            InputGradientTensor=T(f, shape),
            MeanTensor=T(f, stat_shape),
            VarianceTensor=T(f, stat_shape),
            ScaleTensor=T(f, stat_shape),
            OutputGradientTensor=T(f, shape),
            OutputScaleGradientTensor=T(f, stat_shape),
            OutputBiasGradientTensor=T(f, stat_shape),
        )
        names = list(members)
        target = names[pick % len(names)]
        if mutate:
            b = members[target].Desc
            which = pick % 7
            if which == 0:
                b.Sizes = [s + 1 for s in b.Sizes]
                b.TotalTensorSizeInBytes = dml.DMLCalcBufferTensorSize(b.DataType, b.DimensionCount, b.Sizes, None)
            elif which == 1:
                b.DataType = dml.DML_TENSOR_DATA_TYPE_INT32 if pick % 2 else (3 - f)
            elif which == 2:
                b.Sizes = b.Sizes + [1]
                b.DimensionCount += 1
            elif which == 3:
                b.TotalTensorSizeInBytes = max(0, b.TotalTensorSizeInBytes - 8)
            elif which == 4:
                b.Sizes = [0] + list(b.Sizes[1:])
            elif which == 5:
                b.Strides = [1] * (b.DimensionCount - 1)
            else:
                members[target] = None
        cls = (
            dml.DML_BATCH_NORMALIZATION_TRAINING_GRAD_OPERATOR_DESC
            if training
            else dml.DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC
        )
        op_type = (
            dml.DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD
            if training
            else dml.DML_OPERATOR_BATCH_NORMALIZATION_GRAD
        )
        try:
            out = dml.run_operator(
                dml.DMLCreateDevice(),
                dml.DML_OPERATOR_DESC(op_type, cls(**members, Epsilon=1e-3)),
                dict(
                    InputTensor=x,
                    InputGradientTensor=dy,
                    MeanTensor=mean.reshape(stat_shape),
                    VarianceTensor=var.reshape(stat_shape),
                    ScaleTensor=gamma.reshape(stat_shape),
                ),
            )
        except Exception as e:
            if not mutate:
                return f"bad-error: accepted DML call raised {type(e).__name__}: {e}"
            if not isinstance(e, dml.HRESULTError):
                return f"bad-error: {type(e).__name__}: {e}"
            return "rejected" if target in str(e) else f"bad-error: message does not name {target}: {e}"
        if mutate:
            return "bad-error: accepted a mutated DML desc"
        got = out["OutputGradientTensor"]
    else:
        LT = dg.logical_tensor
        ldt = LT.data_type.f16 if dt_name == "float16" else LT.data_type.f32
        s = LT.layout_type.strided
        ins = [LT(0, ldt, shape, s), LT(1, ldt, shape, s)] + [LT(i, LT.data_type.f32, [c], s) for i in (2, 3, 4)]
        outs = [LT(10, ldt, shape, s), LT(11, LT.data_type.f32, [c], s), LT(12, LT.data_type.f32, [c], s)]
        eps_set, fmt = True, "NCX"
        which = pick % 6
        if mutate:
            if which == 0:
                outs = outs[:2]
            elif which == 1:
                eps_set = False
            elif which == 2:
                fmt = "NHWC"
            elif which == 3:
                ins[2] = LT(2, LT.data_type.bf16, [c], s)
            elif which == 4:
                ins[3] = LT(3, LT.data_type.f32, [c + 1], s)
            else:
                ins = ins[:3]
        try:
            bn = dg.op(0, dg.op.kind.BatchNormTrainingBackward, ins, outs, "bn")
            if eps_set:
                bn.set_attr(dg.op.attr.epsilon, 1e-3)
            bn.set_attr(dg.op.attr.data_format, fmt)
            g = dg.graph(dg.engine.kind.cpu)
            g.add_op(bn)
            g.finalize()
            eng = dg.engine(dg.engine.kind.cpu)
            cp = g.get_partitions()[0].compile(ins, outs, eng)
            res = [np.empty(lt.get_dims(), dg._NUMPY[lt.get_data_type()]) for lt in outs]
            cp.execute(
                dg.stream(eng),
                [dg.tensor(lt, eng, a) for lt, a in zip(ins, [x, dy, mean, var, gamma], strict=False)],
                [dg.tensor(lt, eng, r) for lt, r in zip(outs, res, strict=True)],
            )
        except Exception as e:
            if not mutate:
                return f"bad-error: accepted oneDNN call raised {type(e).__name__}: {e}"
            return "rejected" if isinstance(e, dg.error) else f"bad-error: {type(e).__name__}: {e}"
        if mutate:
            return "bad-error: accepted a mutated oneDNN graph"
        got = res[0]
        training = True
    from fbnops.kernels import reference

    view = (shape[0], c, int(np.prod(shape[2:])))
    want, _, _ = reference.batch_norm_grad(
        x.reshape(view), dy.reshape(view), gamma, mean, var, epsilon=1e-3, is_training=training, compute=np.float64
    )
    return "accepted" if _close(got, want.reshape(shape), dt_name) else "mismatch: diff"


# ------------------------------------------------------------------------------------ the crash-safe runner


def _worker(conn):
    while True:
        case = conn.recv()
        if case is None:
            return
        try:
            conn.send(run_case(case))
        except BaseException as e:  # harness bug: report, do not die
            conn.send(f"harness-error: {type(e).__name__}: {e}\n{traceback.format_exc()}")


@dataclass
class Tally:
    cases: int = 0
    accepted: int = 0
    rejected: int = 0
    crashes: list = field(default_factory=list)
    hangs: list = field(default_factory=list)
    failures: list = field(default_factory=list)
    by_surface: dict = field(default_factory=dict)

    def add(self, case: dict, outcome: str) -> None:
        self.cases += 1
        self.by_surface[case["surface"]] = self.by_surface.get(case["surface"], 0) + 1
        if outcome == "accepted":
            self.accepted += 1
        elif outcome == "rejected":
            self.rejected += 1
        elif outcome == "crash":
            self.crashes.append(case)
        elif outcome == "hang":
            self.hangs.append(case)
        else:
            self.failures.append((case, outcome))


class Runner:
    """A persistent child process; replaced when it dies or hangs."""

    def __init__(self, timeout: float = 60.0):
        self.timeout = timeout
        self.ctx = mp.get_context("spawn")
        self._start()

    def _start(self):
        self.parent, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker, args=(child,), daemon=True)
        self.proc.start()

    def run(self, case: dict) -> str:
        try:
            self.parent.send(case)
            if self.parent.poll(self.timeout):
                return self.parent.recv()
            outcome = "hang"
        except (EOFError, BrokenPipeError, ConnectionResetError):
            outcome = "crash"
        self.proc.kill()
        self.proc.join()
        self._start()
        return outcome if outcome == "hang" else "crash"

    def close(self):
        try:
            self.parent.send(None)
        except (BrokenPipeError, OSError):
            pass
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.kill()
