"""The V1/V2 ops (FusedBatchNorm, FusedBatchNormV2, FusedBatchNormGrad, FusedBatchNormGradV2).

Each is a spec plus an ops module on V3's kernels.  Checked here: the op definitions
against TensorFlow 2.21's OpDefs (copied below), every output against TensorFlow's
golden vectors (tests/data/tf_v1_v2_gradgrad.npz), the type and format rules, graph
mode with the registered gradients, GraphDef, and the generated C++/Java mirrors.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import fbnops
from bindings_mirror.cc import ops_gen as cc_ops
from bindings_mirror.java import ops_gen as java_ops
from fbnops import Graph, Scope, Session, gradients
from fbnops.errors import InvalidArgumentError
from fbnops.framework.layouts import channel_axis
from fbnops.specs import get_spec
from fbnops.testing import Golden, rel_err, tolerance

GOLDEN = Golden(Path(__file__).parent / "data" / "tf_v1_v2_gradgrad.npz")
OP_CASES = [i for i, m in enumerate(GOLDEN.meta) if m["kind"] == "op"]
F = np.float32

# TensorFlow 2.21's OpDefs (tensorflow.python.framework.op_def_registry): inputs, outputs (name: type),
# the type attrs' allowed values and data_format's.
TF_OPDEFS = {
    "FusedBatchNorm": (
        "x:T scale:T offset:T mean:T variance:T",
        "y:T batch_mean:T batch_variance:T reserve_space_1:T reserve_space_2:T",
        {"T": ("float",)},
    ),
    "FusedBatchNormV2": (
        "x:T scale:U offset:U mean:U variance:U",
        "y:T batch_mean:U batch_variance:U reserve_space_1:U reserve_space_2:U",
        {"T": ("half", "bfloat16", "float"), "U": ("float",)},
    ),
    "FusedBatchNormGrad": (
        "y_backprop:T x:T scale:T reserve_space_1:T reserve_space_2:T",
        "x_backprop:T scale_backprop:T offset_backprop:T reserve_space_3:T reserve_space_4:T",
        {"T": ("float",)},
    ),
    "FusedBatchNormGradV2": (
        "y_backprop:T x:T scale:float reserve_space_1:U reserve_space_2:U",
        "x_backprop:T scale_backprop:U offset_backprop:U reserve_space_3:U reserve_space_4:U",
        {"T": ("half", "bfloat16", "float"), "U": ("float",)},
    ),
}


@pytest.mark.parametrize("op", sorted(TF_OPDEFS))
def test_spec_matches_tensorflow_opdef(op):
    spec = get_spec(op)
    ins, outs, types = TF_OPDEFS[op]
    assert " ".join(f"{a.name}:{a.type}" for a in spec.inputs) == ins
    assert " ".join(f"{a.name}:{a.type}" for a in spec.outputs) == outs
    assert spec.type_attrs == types
    assert spec.attr("data_format").allowed == ("NHWC", "NCHW")
    assert spec.attr_defaults["epsilon"] == pytest.approx(1e-4)
    assert spec.attr_defaults["is_training"] is True
    if "Grad" not in op:
        assert spec.attr_defaults["exponential_avg_factor"] == 1.0
        assert spec.gradient == op.replace("FusedBatchNorm", "FusedBatchNormGrad")


def _inputs(i: int) -> dict:
    op = get_spec(GOLDEN.meta[i]["op"])
    return {name: GOLDEN.get(i, name) for name in op.input_names}


@pytest.mark.parametrize("i", OP_CASES)
def test_op_matches_tensorflow_golden(i, backend):
    case = GOLDEN.meta[i]
    out = getattr(fbnops.raw_ops, case["op"])(**_inputs(i), **case["attrs"])
    for name, got in zip(out._fields, out, strict=True):
        if not GOLDEN.has(i, name):
            continue  # TF's inference reserve spaces are uninitialized memory
        want = GOLDEN.get(i, name)
        assert got.dtype == want.dtype and got.shape == want.shape, name
        tol = tolerance(want.dtype) if got.ndim > 1 else tolerance("float32")
        assert rel_err(got, want) <= 2 * tol, f"{case['op']} {name}"


def test_forward_has_five_outputs_and_grad_placeholders_are_empty():
    x = np.random.default_rng(0).standard_normal((2, 3, 2, 4)).astype(F)
    vec, empty = np.ones(4, F), np.zeros(0, F)
    for op in ("FusedBatchNorm", "FusedBatchNormV2"):
        fwd = getattr(fbnops.raw_ops, op)(x=x, scale=vec, offset=vec, mean=empty, variance=empty)
        assert fwd._fields == ("y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2")
        grad_op = getattr(fbnops.raw_ops, get_spec(op).gradient)
        g = grad_op(y_backprop=x, x=x, scale=vec, reserve_space_1=fwd[3], reserve_space_2=fwd[4])
        assert g._fields[3:] == ("reserve_space_3", "reserve_space_4")
        assert g[3].shape == (0,) and g[4].shape == (0,)


def test_v1_and_v2_agree_with_v3_bitwise():
    rng = np.random.default_rng(1)
    x, dy = rng.standard_normal((2, 4, 3, 3)).astype(F), rng.standard_normal((2, 4, 3, 3)).astype(F)
    vec, empty = (rng.random(4) + 0.5).astype(F), np.zeros(0, F)
    kw = dict(epsilon=1e-3, data_format="NCHW")
    v3 = fbnops.raw_ops.FusedBatchNormV3(x=x, scale=vec, offset=vec, mean=empty, variance=empty, **kw)
    g3 = fbnops.raw_ops.FusedBatchNormGradV3(
        y_backprop=dy, x=x, scale=vec, reserve_space_1=v3[3], reserve_space_2=v3[4], reserve_space_3=v3[5], **kw
    )
    for fwd, grad in (("FusedBatchNorm", "FusedBatchNormGrad"), ("FusedBatchNormV2", "FusedBatchNormGradV2")):
        f = getattr(fbnops.raw_ops, fwd)(x=x, scale=vec, offset=vec, mean=empty, variance=empty, **kw)
        g = getattr(fbnops.raw_ops, grad)(
            y_backprop=dy, x=x, scale=vec, reserve_space_1=f[3], reserve_space_2=f[4], **kw
        )
        for a, b in zip([*f, *g[:3]], [*v3[:5], *g3[:3]], strict=True):
            np.testing.assert_array_equal(a, b)


def test_type_and_format_rules():
    x16 = np.ones((1, 2, 2, 3), np.float16)
    vec, empty = np.ones(3, F), np.zeros(0, F)
    with pytest.raises(
        InvalidArgumentError, match="Value for attr 'T' of half is not in the list of allowed values: float"
    ):
        fbnops.raw_ops.FusedBatchNorm(x=x16, scale=vec, offset=vec, mean=empty, variance=empty)
    with pytest.raises(InvalidArgumentError, match='of "NDHWC" is not in the list of allowed values: "NHWC", "NCHW"'):
        fbnops.raw_ops.FusedBatchNormV2(x=x16, scale=vec, offset=vec, mean=empty, variance=empty, data_format="NDHWC")
    # V2's U is float only (V3's forward also lists bfloat16): half statistics are refused
    with pytest.raises(
        InvalidArgumentError, match="Value for attr 'U' of half is not in the list of allowed values: float"
    ):
        fbnops.raw_ops.FusedBatchNormV2(x=x16, scale=vec.astype(np.float16), offset=vec, mean=empty, variance=empty)
    out = fbnops.raw_ops.FusedBatchNormV2(x=x16, scale=vec, offset=vec, mean=empty, variance=empty)
    assert out.y.dtype == np.float16 and out.batch_mean.dtype == F


def _forward_graph(op: str, shape, fmt: str, is_training: bool):
    scope = Scope(Graph())
    x = scope.placeholder(F, shape, name="x")
    c = shape[channel_axis(fmt, len(shape))]
    rng = np.random.default_rng(3)
    consts = [scope.constant((rng.random(c) + 0.5).astype(F), name=n) for n in ("scale", "offset", "mean", "variance")]
    fwd = scope.with_op_name("bn").add_op(op, [x, *consts], {"data_format": fmt, "is_training": is_training})
    return scope, x, fwd


@pytest.mark.parametrize("op", ["FusedBatchNorm", "FusedBatchNormV2"])
@pytest.mark.parametrize("fmt,is_training", [("NHWC", True), ("NCHW", True), ("NHWC", False), ("NCHW", False)])
def test_graph_gradient_uses_the_matching_grad_op(op, fmt, is_training):
    shape = (2, 3, 3, 4) if fmt == "NHWC" else (2, 4, 3, 3)
    scope, x, fwd = _forward_graph(op, shape, fmt, is_training)
    (dx,) = gradients(fwd.outputs[0], [x])
    types = {o.type for o in scope.graph.operations()}
    assert get_spec(op).gradient in types and "FusedBatchNormGradV3" not in types
    xv = np.random.default_rng(4).standard_normal(shape).astype(F)
    got_y, got_dx = Session(scope.graph).run([fwd.outputs[0], dx], {x: xv})
    # the same gradient through V3's op, eagerly
    scope3, x3, fwd3 = _forward_graph("FusedBatchNormV3", shape, fmt, is_training)
    (dx3,) = gradients(fwd3.outputs[0], [x3])
    want_y, want_dx = Session(scope3.graph).run([fwd3.outputs[0], dx3], {x3: xv})
    np.testing.assert_array_equal(got_y, want_y)
    np.testing.assert_array_equal(got_dx, want_dx)


@pytest.mark.parametrize("op", sorted(TF_OPDEFS))
def test_graphdef_round_trip(op):
    spec = get_spec(op)
    scope = Scope(Graph())
    shape = (2, 2, 2, 3)
    inputs = [scope.placeholder(F, shape if a.kind == "tensor" else (3,), name=a.name) for a in spec.inputs]
    scope.with_op_name("bn").add_op(op, inputs, {"data_format": "NHWC", "epsilon": 0.01})
    text = scope.graph.to_pbtxt()
    assert f'op: "{op}"' in text and 'key: "U"' in text if "U" in spec.type_attrs else True
    back = Graph.from_pbtxt(text)
    node = back.get_operation("bn")
    assert node.type == op and node.attrs["epsilon"] == pytest.approx(0.01)
    rng = np.random.default_rng(5)
    feeds = {a.name: rng.random(shape if a.kind == "tensor" else (3,)).astype(F) + 0.5 for a in spec.inputs}
    want = getattr(fbnops.raw_ops, op)(**feeds, epsilon=0.01)
    got = Session(back).run([o.name for o in node.outputs], {f"{k}:0": v for k, v in feeds.items()})
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("op", sorted(TF_OPDEFS))
def test_generated_mirrors_have_the_op(op):
    spec = get_spec(op)
    cc = getattr(cc_ops, op)
    assert [a for a in vars(cc.Attrs()) if a.endswith("_")] == [f"{a.name}_" for a in spec.attrs]
    java = getattr(java_ops, op)
    assert java.OP_NAME == op
    for a in spec.outputs:  # one accessor per output, camelCase
        head, *rest = a.name.split("_")
        assert callable(getattr(java, head + "".join(p.capitalize() for p in rest)))


X4 = np.random.default_rng(8).standard_normal((2, 2, 2, 3)).astype(F)
DY4 = np.random.default_rng(9).standard_normal((2, 2, 2, 3)).astype(F)
ONES3, ZEROS3 = [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]


def _raw_pair(fwd: str):
    f = getattr(fbnops.raw_ops, fwd)(x=X4, scale=np.ones(3, F), offset=np.zeros(3, F), mean=np.zeros(0, F),
                                     variance=np.zeros(0, F), epsilon=1e-3)  # fmt: skip
    g = getattr(fbnops.raw_ops, get_spec(fwd).gradient)(
        y_backprop=DY4, x=X4, scale=np.ones(3, F), reserve_space_1=f[3], reserve_space_2=f[4], epsilon=1e-3
    )
    return f, g


@pytest.mark.parametrize("fwd", ["FusedBatchNorm", "FusedBatchNormV2"])
def test_cc_mirror_runs_the_op_and_its_grad(fwd):
    from bindings_mirror import cc
    from bindings_mirror.cc import ClientSession, ops

    grad = get_spec(fwd).gradient
    root = cc.Scope.NewRootScope()
    x = ops.Placeholder(root, cc.DT_FLOAT, ops.Placeholder.Shape([2, 2, 2, 3]))
    f = getattr(ops, fwd)(root, x, ONES3, ZEROS3, [], [], getattr(ops, fwd).Epsilon(1e-3))
    g = getattr(ops, grad)(root, DY4, x, ONES3, f.reserve_space_1, f.reserve_space_2, getattr(ops, grad).Epsilon(1e-3))
    assert root.ok(), root.status()
    outputs: list = []
    status = ClientSession(root).Run({x: X4}, [f.y, f.batch_mean, g.x_backprop, g.scale_backprop, g.reserve_space_3],
                                     outputs)  # fmt: skip
    assert status.ok(), status.ToString()
    want_f, want_g = _raw_pair(fwd)
    for got, want in zip(outputs, [want_f.y, want_f.batch_mean, want_g[0], want_g[1], want_g[3]], strict=True):
        np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("fwd", ["FusedBatchNorm", "FusedBatchNormV2"])
def test_java_mirror_runs_the_op_and_its_grad(fwd):
    from bindings_mirror.java import Graph as JGraph
    from bindings_mirror.java import Ops
    from bindings_mirror.java import Session as JSession

    grad = get_spec(fwd).gradient
    g = JGraph()
    tf = Ops.create(g)
    consts = [tf.constant(v) for v in (np.ones(3, F), np.zeros(3, F), np.zeros(0, F), np.zeros(0, F))]
    method = fwd[:1].lower() + fwd[1:]
    f = getattr(tf, method)(tf.constant(X4), *consts, getattr(java_ops, fwd).epsilon(1e-3))
    gr = getattr(tf, grad[:1].lower() + grad[1:])(
        tf.constant(DY4), tf.constant(X4), consts[0], f.reserveSpace1(), f.reserveSpace2(),
        getattr(java_ops, grad).epsilon(1e-3),
    )  # fmt: skip
    want_f, want_g = _raw_pair(fwd)
    with JSession(g) as s, s.runner().fetch(f.y()).fetch(gr.xBackprop()).fetch(gr.reserveSpace4()).run() as result:
        got = [np.asarray(result.get(i)) for i in range(result.size())]
    for a, b in zip(got, [want_f.y, want_g[0], want_g[4]], strict=True):
        np.testing.assert_array_equal(a, b)
