"""Graph framework: construction-time inference, scopes, sessions, gradients, GraphDef."""

from __future__ import annotations

import os

import numpy as np
import pytest

import fbnops
from fbnops.errors import InvalidArgumentError, NotFoundError
from fbnops.framework import dtypes
from fbnops.framework.gradients import gradients
from fbnops.framework.graph import Graph
from fbnops.framework.layouts import DATA_FORMATS, channel_axis, to_channels_last
from fbnops.framework.scope import EagerContext, Scope
from fbnops.framework.session import Session
from fbnops.framework.tensor import TensorName, parse_tensor_name
from fbnops.testing import extras, forward_f64

F = np.float32


def _forward_graph(shape=(4, 3, 3, 2), data_format="NHWC", is_training=True, scope=None):
    scope = scope or Scope(Graph())
    c = shape[channel_axis(data_format, len(shape))]
    x = scope.placeholder(F, shape, name="x")
    scale = scope.constant(np.linspace(0.5, 1.5, c).astype(F), name="scale")
    offset = scope.constant(np.linspace(-1, 1, c).astype(F), name="offset")
    mean = scope.constant(np.full(c, 0.1, F), name="mean")
    var = scope.constant(np.full(c, 0.9, F), name="variance")
    fwd = scope.add_op(
        "FusedBatchNormV3",
        [x, scale, offset, mean, var],
        {"epsilon": 1e-3, "data_format": data_format, "is_training": is_training},
    )
    return scope, x, fwd


def test_static_shapes_and_dtypes_at_construction():
    _, _, fwd = _forward_graph()
    assert [o.shape for o in fwd.outputs] == [(4, 3, 3, 2), (2,), (2,), (2,), (2,), None]
    assert all(o.dtype == np.float32 for o in fwd.outputs)
    assert fwd.attrs["T"] == np.float32 and fwd.attrs["U"] == np.float32
    assert fwd.attrs["exponential_avg_factor"] == 1.0  # defaults filled from the spec


@pytest.mark.parametrize(
    "shape,fmt,message",
    [
        ((4, 3, 3, 2, 2), "NHWC", "Shape must be rank 4 but is rank 5"),
        ((4, 3, 3, 2), "NDHWC", "Shape must be rank 5 but is rank 4"),
    ],
)
def test_graph_rank_errors_name_the_op(shape, fmt, message):
    s = Scope(Graph())
    x = s.placeholder(F, shape)
    v = s.constant(np.ones(2, F))
    with pytest.raises(InvalidArgumentError, match=message) as info:
        s.with_op_name("bn").add_op("FusedBatchNormV3", [x, v, v, v, v], {"data_format": fmt})
    assert "{{node bn}} = FusedBatchNormV3" in str(info.value)


def test_graph_channel_merge_error_and_unknown_dims():
    s = Scope(Graph())
    x = s.placeholder(F, (None, 4, 4, None))
    v3 = s.constant(np.ones(3, F))
    op = s.add_op("FusedBatchNormV3", [x, v3, v3, v3, v3], {})
    assert op.outputs[0].shape == (None, 4, 4, 3)  # channel dim merged from scale
    v2 = s.constant(np.ones(2, F))
    with pytest.raises(InvalidArgumentError, match="Dimensions must be equal, but are 3 and 2"):
        s.add_op("FusedBatchNormV3", [x, v3, v2, v3, v3], {})
    with pytest.raises(InvalidArgumentError, match="Value for attr 'data_format'"):
        s.add_op("FusedBatchNormV3", [x, v3, v3, v3, v3], {"data_format": "HWCN"})
    with pytest.raises(InvalidArgumentError, match="was expected to be a float tensor but is a half"):
        s.add_op("FusedBatchNormV3", [x, v3, s.constant(np.ones(3, np.float16)), v3, v3], {})


def test_scope_naming_rules():
    root = Scope(Graph())
    assert root.unique_name("FusedBatchNormV3") == "FusedBatchNormV3"
    assert root.unique_name("FusedBatchNormV3") == "FusedBatchNormV3_1"
    assert root.with_op_name("W").unique_name("X") == "W"
    assert root.with_op_name("W").unique_name("X") == "W_1"
    linear = root.sub_scope("linear")
    assert linear.unique_name("MatMul") == "linear/MatMul"
    assert root.sub_scope("linear").unique_name("MatMul") == "linear_1/MatMul"
    assert linear.sub_scope("inner").with_op_name("op").unique_name("X") == "linear/inner/op"
    # a generated name never collides with an explicit one already taken
    s = Scope(Graph())
    s.unique_name("A")
    s.with_op_name("A_1").unique_name("x")
    assert s.unique_name("A") == "A_2"


def test_session_runs_only_what_fetches_need_and_checks_feeds():
    scope, x, fwd = _forward_graph()
    sess = Session(scope.graph)
    xv = np.random.default_rng(0).standard_normal((4, 3, 3, 2)).astype(F)
    y, mean = sess.run([fwd.outputs[0], fwd.outputs[1]], {x: xv})
    ref = fbnops.raw_ops.FusedBatchNormV3(
        x=xv,
        scale=np.linspace(0.5, 1.5, 2).astype(F),
        offset=np.linspace(-1, 1, 2).astype(F),
        mean=np.full(2, 0.1, F),
        variance=np.full(2, 0.9, F),
        epsilon=1e-3,
    )
    np.testing.assert_array_equal(y, ref.y)
    np.testing.assert_array_equal(mean, ref.batch_mean)
    assert sess.run("scale:0").shape == (2,)  # needs no feed
    with pytest.raises(InvalidArgumentError, match="You must feed a value for placeholder tensor 'x'"):
        sess.run(fwd.outputs[0])
    with pytest.raises(InvalidArgumentError, match="Cannot feed value of shape"):
        sess.run(fwd.outputs[0], {x: xv[:2]})
    with pytest.raises(InvalidArgumentError, match="has dtype double"):
        sess.run(fwd.outputs[0], {x: xv.astype(np.float64)})
    with pytest.raises(NotFoundError):
        sess.run("nope:0")


def test_control_dependencies_and_kernel_labels():
    scope, x, fwd = _forward_graph()
    later = (
        scope.with_control_dependencies([fwd]).with_kernel_label("reference").add_op("Identity", [fwd.outputs[1]], {})
    )
    assert later.control_inputs == (fwd,) and later.kernel_label == "reference"
    with pytest.raises(NotFoundError, match="Unknown backend"):
        scope.with_kernel_label("gpu").add_op("Identity", [x], {})


def test_kernel_label_selects_the_backend():
    """Each label runs its own kernel; results agree within float32 tolerance."""
    results = {}
    xv = np.random.default_rng(1).standard_normal((4, 3, 3, 2)).astype(F)
    for label in fbnops.available_backends():
        scope, x, _ = _forward_graph(scope=Scope(Graph()).with_kernel_label(label))
        op = scope.graph.get_operation("FusedBatchNormV3")
        assert op.kernel_label == label
        results[label] = Session(scope.graph).run(op.outputs[0], {x: xv})
    for label, y in results.items():
        np.testing.assert_allclose(y, results["reference"], rtol=1e-5, atol=1e-5, err_msg=label)


def test_eager_context_runs_ops_as_built():
    s = Scope(EagerContext())
    xv = np.random.default_rng(2).standard_normal((2, 2, 2, 3)).astype(F)
    x = s.constant(xv)
    v = s.constant(np.ones(3, F))
    op = s.add_op("FusedBatchNormV3", [x, v, v, v, v], {})
    ref = fbnops.raw_ops.FusedBatchNormV3(
        x=xv, scale=np.ones(3, F), offset=np.ones(3, F), mean=np.ones(3, F), variance=np.ones(3, F)
    )
    np.testing.assert_array_equal(op.outputs[0].value(), ref.y)


@pytest.mark.parametrize("is_training", [True, False])
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
def test_gradients_agree_with_finite_differences(fmt, is_training):
    shape = (3, 2, 2, 2) if fmt == "NHWC" else (3, 2, 3, 2)  # NCHW: C=2, H != W
    scope, x, fwd = _forward_graph(shape, fmt, is_training)
    y = fwd.outputs[0]
    w = np.random.default_rng(3).standard_normal(shape)
    gy = scope.constant(w.astype(F), name="w")
    scale_op, offset_op = scope.graph.get_operation("scale"), scope.graph.get_operation("offset")
    dx, dscale, doffset = gradients(y, [x, scale_op.outputs[0], offset_op.outputs[0]], grad_ys=[gy])
    assert dx.op.graph is scope.graph and dx.shape == shape
    xv = np.random.default_rng(4).standard_normal(shape)
    gx, gs, go = Session(scope.graph).run([dx, dscale, doffset], {x: xv.astype(F)})
    scale = np.linspace(0.5, 1.5, 2)
    offset = np.linspace(-1, 1, 2)

    def loss(xx, ss, oo):
        yy, _, _ = forward_f64(xx, ss, oo, np.full(2, 0.1), np.full(2, 0.9), 1e-3, fmt, is_training)
        return float(np.sum(yy * w))

    h = 1e-5
    idx = (1, 1, 0, 1)
    xp, xm = xv.copy(), xv.copy()
    xp[idx] += h
    xm[idx] -= h
    np.testing.assert_allclose(
        gx[idx], (loss(xp, scale, offset) - loss(xm, scale, offset)) / (2 * h), rtol=1e-3, atol=1e-4
    )
    e = np.array([h, 0])
    np.testing.assert_allclose(
        gs[0], (loss(xv, scale + e, offset) - loss(xv, scale - e, offset)) / (2 * h), rtol=1e-3, atol=1e-4
    )
    np.testing.assert_allclose(
        go[0], (loss(xv, scale, offset + e) - loss(xv, scale, offset - e)) / (2 * h), rtol=1e-3, atol=1e-4
    )
    types = {op.type for op in scope.graph.operations()}
    assert "FusedBatchNormGradV3" in types
    if fmt == "NCHW" and not is_training:
        assert "Transpose" in types  # TF's wrapper: the frozen gradient kernel sees channels-last


def test_gradients_default_grad_ys_and_unreachable():
    scope, x, fwd = _forward_graph()
    other = scope.placeholder(F, (2,), name="other")
    dx, dother = gradients(fwd.outputs[0], [x, other])
    assert dother is None
    assert "OnesLike" in {op.type for op in scope.graph.operations()}
    xv = np.random.default_rng(5).standard_normal((4, 3, 3, 2)).astype(F)
    # d(sum y)/dx of a batch norm is ~0 (y is normalized): a real, checkable property
    np.testing.assert_allclose(Session(scope.graph).run(dx, {x: xv}), 0, atol=1e-5)


def test_graphdef_round_trip():
    scope, x, fwd = _forward_graph(is_training=False)
    (dx,) = gradients(fwd.outputs[0], [x])
    text = scope.graph.to_pbtxt()
    assert 'op: "FusedBatchNormV3"' in text and 'key: "exponential_avg_factor"' in text
    g2 = Graph.from_pbtxt(text)
    assert [op.name for op in g2.operations()] == [op.name for op in scope.graph.operations()]
    assert g2.to_pbtxt() == text
    xv = np.random.default_rng(6).standard_normal((4, 3, 3, 2)).astype(F)
    a = Session(scope.graph).run([fwd.outputs[0], dx], {x: xv})
    b = Session(g2).run([fwd.outputs[0].name, dx.name], {"x:0": xv})
    for u, v in zip(a, b, strict=True):
        np.testing.assert_array_equal(u, v)


def test_graphdef_kernel_labels_and_bad_text():
    scope, x, fwd = _forward_graph(scope=Scope(Graph()).with_kernel_label("reference"))
    text = scope.graph.to_pbtxt(include_kernel_labels=True)
    assert 'key: "_kernel"' in text
    assert Graph.from_pbtxt(text).get_operation("FusedBatchNormV3").kernel_label == "reference"
    with pytest.raises(InvalidArgumentError, match="unknown node"):
        Graph.from_pbtxt('node { name: "a" op: "Identity" input: "missing" }')
    with pytest.raises(InvalidArgumentError, match="unbalanced"):
        Graph.from_pbtxt('node { name: "a" op: "Identity"')
    with pytest.raises(NotFoundError, match="Op type not registered 'Conv2D'"):
        Graph.from_pbtxt('node { name: "a" op: "Conv2D" }')


@pytest.mark.parametrize("fmt,is_training", [("NHWC", True), ("NCHW", True), ("NHWC", False), ("NCHW", False)])
def test_tensorflow_imports_and_runs_the_exported_graph(fmt, is_training):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    tf = extras.require("tensorflow", "oracle")
    from google.protobuf import text_format

    shape = (4, 3, 3, 2) if fmt == "NHWC" else (4, 2, 3, 3)
    scope, x, fwd = _forward_graph(shape, fmt, is_training)
    (dx,) = gradients(fwd.outputs[0], [x])
    fetches = [fwd.outputs[0].name, fwd.outputs[1].name, fwd.outputs[2].name, dx.name]
    xv = np.random.default_rng(7).standard_normal(shape).astype(F)
    ours = Session(scope.graph).run(fetches, {x: xv})
    graph_def = text_format.Parse(scope.graph.to_pbtxt(), tf.compat.v1.GraphDef())
    with tf.Graph().as_default() as tg:
        tf.compat.v1.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session(graph=tg) as sess:
            theirs = sess.run(fetches, {"x:0": xv})
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize(
    "name,default,expected",
    [
        ("bn", None, TensorName("bn", None)),
        ("bn", 0, TensorName("bn", 0)),
        ("bn:2", None, TensorName("bn", 2)),
        ("scope/bn_1:10", 0, TensorName("scope/bn_1", 10)),
        ("^bn", 0, TensorName("bn", None, True)),
    ],
)
def test_one_tensor_name_parser(name, default, expected):
    assert parse_tensor_name(name, default_index=default) == expected


@pytest.mark.parametrize("name", ["", ":0", "bn:", "bn:x", "bn:-1", "bn:01", "bn:1:2", "^bn:0", "^", "bn:١"])
def test_tensor_name_parser_refuses_malformed_names(name):
    with pytest.raises(InvalidArgumentError, match="is not a valid tensor name"):
        parse_tensor_name(name, default_index=0)


def test_each_surface_default_for_a_bare_name():
    """Session (TF1): a bare name is a target, fetched as None; Graph.get_output: output 0."""
    scope, x, fwd = _forward_graph()
    g = scope.graph
    assert g.get_output("FusedBatchNormV3") == fwd.outputs[0] and g.get_output("FusedBatchNormV3:4") == fwd.outputs[4]
    with pytest.raises(InvalidArgumentError, match="names output 9 of 'FusedBatchNormV3', which has 6"):
        g.get_output("FusedBatchNormV3:9")
    with pytest.raises(InvalidArgumentError, match="control input"):
        g.get_output("^FusedBatchNormV3")
    xv = np.ones((4, 3, 3, 2), F)
    assert Session(g).run("FusedBatchNormV3", {"x": xv}) is None
    assert Session(g).run("FusedBatchNormV3:0", {"x:0": xv}).shape == (4, 3, 3, 2)


def test_a_bare_name_in_session_run_is_a_target_in_tensorflow_too():
    """The TF1 semantics the core Session keeps, checked against TensorFlow itself."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    tf = extras.require("tensorflow", "oracle")
    from google.protobuf import text_format

    scope, x, fwd = _forward_graph()
    graph_def = text_format.Parse(scope.graph.to_pbtxt(), tf.compat.v1.GraphDef())
    xv = np.ones((4, 3, 3, 2), F)
    with tf.Graph().as_default() as tg:
        tf.compat.v1.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session(graph=tg) as sess:
            theirs = sess.run(["FusedBatchNormV3", "FusedBatchNormV3:1"], {"x:0": xv})
    ours = Session(scope.graph).run(["FusedBatchNormV3", "FusedBatchNormV3:1"], {"x:0": xv})
    assert theirs[0] is None and ours[0] is None
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6)


@pytest.mark.parametrize("fmt", DATA_FORMATS)
def test_channel_axis_and_channels_last_twin(fmt):
    for ndim in (4, 5):  # eager kernels take either rank for any format
        assert channel_axis(fmt, ndim) == (1 if fmt.startswith("NC") else ndim - 1)
    if fmt.startswith("NC"):
        last, to_last, to_first = to_channels_last(fmt)
        a = np.empty(tuple(range(2, 2 + len(fmt))))
        assert last in DATA_FORMATS and not last.startswith("NC")
        assert a.transpose(to_last).shape[-1] == a.shape[1]
        assert a.transpose(to_last).transpose(to_first).shape == a.shape


def test_dtype_table_round_trips_and_matches_tensorflow():
    for row in dtypes.TABLE:
        assert dtypes.from_enum(row.enum) == dtypes.from_enum(row.number) == row.numpy
        assert dtypes.enum_name(row.numpy) == row.enum and dtypes.enum_number(row.numpy) == row.number
        assert dtypes.tf_name(row.numpy) == row.tf_name
        assert all(dtypes.from_user_name(n) == row.numpy for n in (row.tf_name, *row.user_names))
    with pytest.raises(KeyError, match="unknown dtype 'float8'; known: bfloat16, bool"):
        dtypes.from_user_name("float8")
    tf = extras.require("tensorflow", "oracle")
    from tensorflow.core.framework import types_pb2

    for row in dtypes.TABLE:
        assert tf.as_dtype(row.numpy).as_datatype_enum == row.number
        assert tf.dtypes.DType(row.number).as_numpy_dtype == row.numpy.type
        assert types_pb2.DataType.Name(row.number) == row.enum
