"""How a fuzz case is run on each surface: the graph and Session, the Java and C++ mirrors,
run files, DirectML and oneDNN Graph (each returns outputs by TensorFlow name, or raises the
surface's own error)."""

from __future__ import annotations

import numpy as np

from fbnops.testing import close_to_oracle

__all__ = ["alias_names", "check_rejection", "run_graph", "run_java", "run_cc", "run_runfile", "run_dml_onednn"]


def alias_names(arg: str) -> set[str]:
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


def check_rejection(exc: BaseException, allowed: tuple, built) -> str:
    if not isinstance(exc, allowed):
        return f"bad-error: {type(exc).__name__}: {exc}"
    if built.arg is not None and not any(n in str(exc) for n in alias_names(built.arg)):
        return f"bad-error: message does not name '{built.arg}': {exc}"
    return "rejected"


def run_graph(op_type, built):
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


def run_java(op_type, built):
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


def run_cc(op_type, built):
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
    args = []
    for n in spec.input_names:
        v = built.inputs[n]
        literal = isinstance(v, (np.ndarray, list, tuple, float, int))  # C++ Input::Initializer forms
        args.append(cc.ops.Const(root.WithOpName(n), v) if literal else v)
    op = cls(root, *args, attrs)
    outputs: list = []
    status = cc.ClientSession(root).Run([getattr(op, n) for n in spec.output_names], outputs)
    if not status.ok():
        return status.ToString()
    return dict(zip(spec.output_names, outputs, strict=True))


def run_runfile(op_type, built):
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


def run_dml_onednn(case: dict) -> str:
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
    from fbnops.ops.canonical import NdView

    view = NdView.for_data_format(shape, "NCHW").view  # oneDNN's plain layout
    want, _, _ = reference.batch_norm_grad(
        x.reshape(view), dy.reshape(view), gamma, mean, var, epsilon=1e-3, is_training=training, compute=np.float64
    )
    return "accepted" if close_to_oracle(got, want.reshape(shape), dt_name) else "mismatch: diff"
