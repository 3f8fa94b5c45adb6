"""BatchNormWithGlobalNormalization and its Grad through every surface, against real TensorFlow.

TensorFlow refuses both ops at GraphDef version 9 and later (its own eager and graph
APIs included), so the reference values come from a GraphDef whose ``versions.producer``
is 8, imported and run in a ``tf.compat.v1.Session``.  The elementwise outputs are
TensorFlow's bits (but float32 with 8 or more channels, where Eigen's packet ``rsqrt``
is approximate); the per-channel sums are exact sums rounded once, TensorFlow's within
its own rounding (both documented in the op modules).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import fbnops
from bindings_mirror import cc, java
from fbnops.errors import InvalidArgumentError, NotFoundError, UnimplementedError
from fbnops.framework.gradients import gradients
from fbnops.framework.graph import Graph
from fbnops.framework.scope import Scope
from fbnops.testing import extras

FWD, GRAD = "BatchNormWithGlobalNormalization", "BatchNormWithGlobalNormalizationGrad"
DTYPES = [np.float16, np.float32, np.float64]


def make(dtype, shape=(4, 5, 6, 7), seed=1):
    """t, m, v, beta, gamma and a backprop of ``shape`` (channels last)."""
    rng = np.random.default_rng(seed)
    c = shape[-1]
    t = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    m, v, beta, gamma = ((rng.random(c) + 0.5).astype(dtype) for _ in range(4))
    return {"t": t, "m": m, "v": v, "beta": beta, "gamma": gamma}, rng.standard_normal(shape).astype(dtype)


def grad_inputs(a, backprop):
    return {"t": a["t"], "m": a["m"], "v": a["v"], "gamma": a["gamma"], "backprop": backprop}


def tf_run(op_type: str, inputs: dict[str, np.ndarray], attrs: dict, producer: int = 8):
    """Run one node of ``op_type`` in real TensorFlow, from a GraphDef produced at ``producer``."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    tf = extras.require("tensorflow", "oracle")
    dtype = tf.as_dtype(next(iter(inputs.values())).dtype)
    with tf.Graph().as_default() as g:
        for name in inputs:
            tf.compat.v1.placeholder(dtype, name=name)
    gd = g.as_graph_def()
    node = gd.node.add(name="bn", op=op_type, input=list(inputs))
    node.attr["T"].type = dtype.as_datatype_enum
    for key, value in attrs.items():
        if isinstance(value, bool):
            node.attr[key].b = value
        else:
            node.attr[key].f = value
    gd.versions.producer = producer
    with tf.Graph().as_default() as g2:
        tf.graph_util.import_graph_def(gd, name="")
        n_out = len(fbnops.specs.get_spec(op_type).outputs)
        with tf.compat.v1.Session(graph=g2) as sess:
            return sess.run([f"bn:{i}" for i in range(n_out)], {f"{k}:0": v for k, v in inputs.items()})


def magnitudes(a, backprop, scale_after_normalization):
    """Per output, the float64 sum of the absolute terms it is computed from: the scale of its rounding."""
    t, m, v, beta, gamma, dy = (x.astype(np.float64) for x in (*a.values(), backprop))
    r = 1 / np.sqrt(v + np.float64(np.float32(1e-3)))
    g = np.abs(gamma) if scale_after_normalization else 1.0
    rows_dy, rows_s = np.abs(dy).sum((0, 1, 2)), np.abs(dy * (t - m)).sum((0, 1, 2))
    return {
        "result": np.abs(t - m) * r * g + np.abs(beta),
        "dx": np.abs(dy) * r * g,
        "dm": rows_dy * r * g,
        "dv": rows_s * 0.5 * r**3 * g,
        "db": rows_dy,
        "dg": rows_s * r,
    }


def assert_tensorflows(name, got, want, magnitude, exact):
    """TensorFlow's bits when ``exact``, else within 4 * eps(T) of the output's magnitude."""
    assert got.dtype == want.dtype and got.shape == want.shape, name
    if exact:
        assert got.tobytes() == want.tobytes(), name
        return
    eps = float(np.finfo(got.dtype).eps)
    error = np.abs(got.astype(np.float64) - want.astype(np.float64))
    assert np.all(error <= 4 * eps * magnitude + np.finfo(got.dtype).tiny), (name, float((error / magnitude).max()))


@pytest.mark.parametrize("scale_after_normalization", [True, False])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(4, 5, 6, 7), (8, 33, 31, 64)], ids=["C7", "C64"])
def test_forward_and_grad_are_tensorflows(shape, dtype, scale_after_normalization):
    """Elementwise outputs: TensorFlow's bits (float32 with 8+ channels: Eigen's approximate packet
    rsqrt, within 4 eps); per-channel sums: within 4 eps of their magnitude (Eigen's order)."""
    a, backprop = make(dtype, shape)
    attrs = {"variance_epsilon": 1e-3, "scale_after_normalization": scale_after_normalization}
    size = magnitudes(a, backprop, scale_after_normalization)
    elementwise_exact = dtype != np.float32 or shape[-1] < 8
    (theirs,) = tf_run(FWD, a, attrs)
    ours = getattr(fbnops.raw_ops, FWD)(**a, **attrs)
    assert_tensorflows("result", ours.result, theirs, size["result"], elementwise_exact)
    theirs = tf_run(GRAD, grad_inputs(a, backprop), attrs)
    ours = getattr(fbnops.raw_ops, GRAD)(**grad_inputs(a, backprop), **attrs)
    for name, got, want in zip(ours._fields, ours, theirs, strict=True):
        exact = elementwise_exact if name == "dx" else not scale_after_normalization and name == "dg"
        assert_tensorflows(name, got, want, size[name], exact)


def test_float64_matches_the_formula():
    """Independent of TensorFlow: the forward and every gradient from the closed form, in float64."""
    a, dy = make(np.float64)
    eps = np.float64(np.float32(1e-3))  # a float attr is a float32
    out = fbnops.raw_ops.BatchNormWithGlobalNormalization(**a, variance_epsilon=1e-3, scale_after_normalization=True)
    r = 1 / np.sqrt(a["v"] + eps)
    np.testing.assert_allclose(out.result, (a["t"] - a["m"]) * r * a["gamma"] + a["beta"], rtol=1e-13)
    g = fbnops.raw_ops.BatchNormWithGlobalNormalizationGrad(
        **grad_inputs(a, dy), variance_epsilon=1e-3, scale_after_normalization=True
    )
    xc, axes = a["t"] - a["m"], (0, 1, 2)
    np.testing.assert_allclose(g.dx, dy * r * a["gamma"], rtol=1e-13)
    np.testing.assert_allclose(g.db, dy.sum(axes), rtol=1e-12)
    np.testing.assert_allclose(g.dm, -dy.sum(axes) * r * a["gamma"], rtol=1e-12)
    np.testing.assert_allclose(g.dg, (dy * xc).sum(axes) * r, rtol=1e-12)
    np.testing.assert_allclose(g.dv, (dy * xc).sum(axes) * a["gamma"] * -0.5 * r**3, rtol=1e-12)


# ---------------------------------------------------------------------------------------- bad input

A = {"variance_epsilon": 1e-3, "scale_after_normalization": True}


def _replace(a, **changes):
    return {**a, **changes}


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda a: {"t": a["t"][0]}, "input must be 4-dimensional[5,6,7]"),
        (lambda a: {"t": a["t"][None]}, "input must be 4-dimensional[1,4,5,6,7]"),
        (lambda a: {"m": a["m"][None]}, "mean must be 1-dimensional[1,7]"),
        (lambda a: {"v": a["v"][None]}, "var must be 1-dimensional[1,7]"),
        (lambda a: {"beta": a["beta"][None]}, "beta must be 1-dimensional[1,7]"),
        (lambda a: {"gamma": a["gamma"][None]}, "gamma must be 1-dimensional[1,7]"),
    ],
    ids=["t3d", "t5d", "m2d", "v2d", "beta2d", "gamma2d"],
)
def test_bad_ranks_have_tensorflows_messages(change, message):
    a, _ = make(np.float32)
    bad = _replace(a, **change(a))
    with pytest.raises(InvalidArgumentError, match=r"^" + message.replace("[", r"\[").replace("]", r"\]")):
        fbnops.raw_ops.BatchNormWithGlobalNormalization(**bad, **A)
    with pytest.raises(Exception, match=message.replace("[", r"\[").replace("]", r"\]")):
        tf_run(FWD, bad, A)


def test_grad_bad_ranks_have_tensorflows_messages():
    a, dy = make(np.float32)
    with pytest.raises(InvalidArgumentError, match=r"^out_backprop must be 4-dimensional\[5,6,7\]"):
        fbnops.raw_ops.BatchNormWithGlobalNormalizationGrad(**grad_inputs(a, dy[0]), **A)
    with pytest.raises(Exception, match=r"out_backprop must be 4-dimensional\[5,6,7\]"):
        tf_run(GRAD, grad_inputs(a, dy[0]), A)


def test_mismatched_channels_and_shapes_are_refused():
    """TensorFlow's kernel reads past such vectors (its shape function refuses them in graphs): refused here."""
    a, dy = make(np.float32)
    with pytest.raises(InvalidArgumentError, match="m must have the same number of elements as the channels of t"):
        fbnops.raw_ops.BatchNormWithGlobalNormalization(**_replace(a, m=a["m"][:3]), **A)
    with pytest.raises(InvalidArgumentError, match="gamma must have the same number of elements"):
        fbnops.raw_ops.BatchNormWithGlobalNormalizationGrad(**grad_inputs(_replace(a, gamma=a["gamma"][:2]), dy), **A)
    with pytest.raises(InvalidArgumentError, match="t and backprop must have same shape"):
        fbnops.raw_ops.BatchNormWithGlobalNormalizationGrad(**grad_inputs(a, dy[:1]), **A)
    scope = Scope(Graph())
    ins = [scope.placeholder(np.float32, v.shape, name=k) for k, v in _replace(a, m=a["m"][:3]).items()]
    with pytest.raises(InvalidArgumentError, match="Dimensions must be equal, but are 7 and 3"):
        scope.add_op(FWD, ins, A)


def test_dtypes_without_a_cpu_kernel_are_tensorflows_not_found():
    a, _ = make(np.float32)
    ints = {k: v.astype(np.int32) for k, v in a.items()}
    with pytest.raises(NotFoundError, match=r"No registered 'BatchNormWithGlobalNormalization' OpKernel.*T=int32"):
        fbnops.raw_ops.BatchNormWithGlobalNormalization(**ints, **A)
    with pytest.raises(Exception, match="No OpKernel was registered to support Op 'BatchNormWithGlobalNormalization'"):
        tf_run(FWD, ints, A)


def test_required_attrs_have_no_default():
    a, _ = make(np.float32)
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'scale_after_normalization'"):
        fbnops.raw_ops.BatchNormWithGlobalNormalization(**a, variance_epsilon=1e-3)
    with pytest.raises(TypeError, match="Expected float for argument 'variance_epsilon' not None"):
        fbnops.raw_ops.BatchNormWithGlobalNormalization(**a, variance_epsilon=None, scale_after_normalization=True)
    message = "NodeDef missing attr 'scale_after_normalization' from Op<name=BatchNormWithGlobalNormalization"
    scope = Scope(Graph())
    ins = [scope.placeholder(np.float32, v.shape, name=k) for k, v in a.items()]
    with pytest.raises(InvalidArgumentError, match=message):
        scope.add_op(FWD, ins, {"variance_epsilon": 1e-3})
    with pytest.raises(ValueError, match=message):
        tf_run(FWD, a, {"variance_epsilon": 1e-3})


# ------------------------------------------------------------------------------ graphs and GraphDef


def _graph(a, dtype=np.float32):
    scope = Scope(Graph())
    ins = [scope.placeholder(dtype, v.shape, name=k) for k, v in a.items()]
    return scope, ins, scope.add_op(FWD, ins, A)


def test_gradients_build_the_grad_op_and_give_its_values():
    a, dy = make(np.float32)
    scope, ins, op = _graph(a)
    w = scope.constant(dy, name="w")
    grads = gradients(op.output(0), ins, grad_ys=[w])
    assert "BatchNormWithGlobalNormalizationGrad" in {o.type for o in scope.graph.operations()}
    got = fbnops.Session(scope.graph).run(grads, dict(zip(ins, a.values(), strict=True)))
    want = fbnops.raw_ops.BatchNormWithGlobalNormalizationGrad(**grad_inputs(a, dy), **A)
    for g, name in zip(got, ["dx", "dm", "dv", "db", "dg"], strict=True):  # t, m, v, beta, gamma
        assert g.tobytes() == getattr(want, name).tobytes(), name


def test_graphdef_round_trip_and_tensorflow_runs_the_export():
    a, _ = make(np.float32)
    scope, ins, op = _graph(a)
    text = scope.graph.to_pbtxt()
    again = Graph.from_pbtxt(text)
    assert again.to_pbtxt() == text
    feeds = {f"{k}:0": v for k, v in a.items()}
    ours = fbnops.Session(again).run(op.output(0).name, feeds)
    tf = extras.require("tensorflow", "oracle")
    from google.protobuf import text_format

    graph_def = text_format.Parse(text, tf.compat.v1.GraphDef())  # no versions: producer 0 < 9
    with tf.Graph().as_default() as tg:
        tf.compat.v1.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session(graph=tg) as sess:
            assert sess.run(op.output(0).name, feeds).tobytes() == ours.tobytes()


def test_a_graphdef_produced_at_version_9_is_refused_as_tensorflow_does():
    a, _ = make(np.float32)
    scope, _, _ = _graph(a)
    text = scope.graph.to_pbtxt() + "versions { producer: 9 }\n"
    message = (
        "Op BatchNormWithGlobalNormalization is not available in GraphDef version 9. It has been removed in "
        "version 9. Use tf.nn.batch_normalization()."
    )
    with pytest.raises(UnimplementedError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        Graph.from_pbtxt(text)
    assert Graph.from_pbtxt(scope.graph.to_pbtxt() + "versions { producer: 8 }\n") is not None
    with pytest.raises(Exception, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        tf_run(FWD, a, A, producer=9)


# ------------------------------------------------------------------------------------- the mirrors


def test_cc_mirror_required_attrs_are_constructor_arguments_and_the_op_is_an_input():
    a, _ = make(np.float32)
    root = cc.Scope.NewRootScope()
    bn = cc.ops.BatchNormWithGlobalNormalization(root, *a.values(), 1e-3, True)
    assert not hasattr(cc.ops.BatchNormWithGlobalNormalization, "Attrs")  # no optional attrs
    again = cc.ops.BatchNormWithGlobalNormalization(root, bn, *list(a.values())[1:], 1e-3, True)  # operator Output()
    assert root.ok(), root.status()
    outputs: list = []
    assert cc.ClientSession(root).Run([bn.result, again.result], outputs).ok()
    first = fbnops.raw_ops.BatchNormWithGlobalNormalization(**a, **A).result
    assert np.asarray(outputs[0]).tobytes() == first.tobytes()
    second = fbnops.raw_ops.BatchNormWithGlobalNormalization(**_replace(a, t=first), **A).result
    assert np.asarray(outputs[1]).tobytes() == second.tobytes()


def test_cc_mirror_missing_attr_is_tensorflows_nodedef_status():
    from bindings_mirror.cc.nodedef import op_summary

    spec = fbnops.specs.get_spec(FWD)
    assert op_summary(spec).endswith("attr=variance_epsilon:float; attr=scale_after_normalization:bool>")
    root = cc.Scope.NewRootScope()
    cc.ops.BatchNormWithGlobalNormalization(root, *make(np.float32)[0].values(), 1e-3, "yes")
    assert not root.ok() and "AttrValue had value with type 'string' when 'bool' expected" in root.status().message()


def test_java_mirror_classes_are_in_nn_and_run():
    a, dy = make(np.float32)
    assert java.nn.BatchNormWithGlobalNormalization.__name__ == FWD and not hasattr(
        java.nn.BatchNormWithGlobalNormalization, "Options"
    )
    g = java.Graph()
    tf = java.Ops.create(g)
    consts = [tf.constant(v) for v in a.values()]
    bn = tf.nn.batchNormWithGlobalNormalization(*consts, 1e-3, True)
    t, m, v, _, gamma = consts
    grad = tf.nn.batchNormWithGlobalNormalizationGrad(t, m, v, gamma, tf.constant(dy), 1e-3, True)
    with java.Session(g) as s:
        runner = s.runner().fetch(bn)  # a single-output op is an Operand
        for name in ["dx", "dm", "dv", "db", "dg"]:
            runner.fetch(getattr(grad, name)())
        with runner.run() as result:
            got = [np.asarray(result.get(i)) for i in range(result.size())]
    assert got[0].tobytes() == fbnops.raw_ops.BatchNormWithGlobalNormalization(**a, **A).result.tobytes()
    want = fbnops.raw_ops.BatchNormWithGlobalNormalizationGrad(**grad_inputs(a, dy), **A)
    for g_out, w_out in zip(got[1:], want, strict=True):
        assert g_out.tobytes() == w_out.tobytes()
    with pytest.raises(java.NullPointerException, match="varianceEpsilon is null"):
        tf.nn.batchNormWithGlobalNormalization(*consts, None, True)
    with pytest.raises(java.IllegalArgumentException, match=r"scaleAfterNormalization\(Boolean\) cannot take int 1"):
        tf.nn.batchNormWithGlobalNormalization(*consts, 1e-3, 1)


def test_grad_graph_shape_merges_whole_shapes_as_tensorflow():
    """TF's shape function merges t and backprop whole (not just their channels): dx takes each known dimension."""
    tf = extras.require("tensorflow", "oracle")
    c = 7
    shapes = {"t": (2, None, None, c), "m": (c,), "v": (c,), "gamma": (c,), "backprop": (None, 4, 5, c)}
    scope = Scope(Graph())
    op = scope.add_op(GRAD, [scope.placeholder(np.float32, s, name=k) for k, s in shapes.items()], A)
    with tf.Graph().as_default() as g:
        for name, shape in shapes.items():
            tf.compat.v1.placeholder(tf.float32, shape, name=name)
    gd = g.as_graph_def()
    node = gd.node.add(name="bn", op=GRAD, input=list(shapes))
    node.attr["T"].type = tf.float32.as_datatype_enum
    node.attr["variance_epsilon"].f = A["variance_epsilon"]
    node.attr["scale_after_normalization"].b = A["scale_after_normalization"]
    gd.versions.producer = 8
    with tf.Graph().as_default() as g2:
        tf.graph_util.import_graph_def(gd, name="")
        want = g2.get_operation_by_name("bn").outputs[0].shape.as_list()
    assert op.outputs[0].shape == tuple(want) == (2, 4, 5, c)
    shapes["backprop"] = (3, 4, 5, c)
    with pytest.raises(InvalidArgumentError, match="Dimensions must be equal, but are 2 and 3"):
        scope.add_op(GRAD, [scope.placeholder(np.float32, s, name=f"{k}2") for k, s in shapes.items()], A)
