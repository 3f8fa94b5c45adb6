"""The TensorFlow Java (seed 000) and C++ (seed 001) mirrors.

The seed pages' usage, written in each style, must agree bit-for-bit with
fbnops.raw_ops; naming, attrs and both error models are checked too.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import fbnops
from bindings_mirror import cc, java
from bindings_mirror.cc import ClientSession, ops
from bindings_mirror.java import (
    Constant,
    DataType,
    EagerSession,
    FusedBatchNormGradV3,
    FusedBatchNormV3,
    Graph,
    IllegalArgumentException,
    Ops,
    Placeholder,
    Session,
    Shape,
    TFInvalidArgumentException,
)

F = np.float32
RNG = np.random.default_rng(42)
X = RNG.standard_normal((4, 3, 3, 2)).astype(F)
DY = RNG.standard_normal((4, 3, 3, 2)).astype(F)
SCALE = np.array([0.7, 1.3], F)
OFFSET = np.array([0.1, -0.2], F)
EMPTY = np.zeros(0, F)


def raw_reference(epsilon=1e-3, data_format="NHWC", is_training=True):
    fwd = fbnops.raw_ops.FusedBatchNormV3(
        x=X, scale=SCALE, offset=OFFSET, mean=EMPTY, variance=EMPTY, epsilon=epsilon, data_format=data_format
    )
    grad = fbnops.raw_ops.FusedBatchNormGradV3(
        y_backprop=DY,
        x=X,
        scale=SCALE,
        reserve_space_1=fwd.reserve_space_1,
        reserve_space_2=fwd.reserve_space_2,
        reserve_space_3=fwd.reserve_space_3,
        epsilon=epsilon,
        data_format=data_format,
        is_training=is_training,
    )
    return fwd, grad


def assert_same(outputs, reference):
    assert len(outputs) == len(reference)
    for a, b in zip(outputs, reference, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------------------ Java


def test_java_graph_session_runner():
    fwd_ref, grad_ref = raw_reference()
    with Graph() as g:
        scope = g.baseScope()
        x = Placeholder.create(scope, DataType.TFloat32, Placeholder.shape(Shape.of(4, 3, 3, 2)))
        fwd = FusedBatchNormV3.create(
            scope,
            x,
            Constant.create(scope, SCALE),
            Constant.create(scope, OFFSET),
            Constant.create(scope, EMPTY),
            Constant.create(scope, EMPTY),
            FusedBatchNormV3.epsilon(1e-3),
        )
        grad = FusedBatchNormGradV3.create(
            scope,
            Constant.create(scope, DY),
            x,
            Constant.create(scope, SCALE),
            fwd.reserveSpace1(),
            fwd.reserveSpace2(),
            fwd.reserveSpace3(),
            FusedBatchNormGradV3.epsilon(1e-3),
            FusedBatchNormGradV3.isTraining(True),
            FusedBatchNormGradV3.dataFormat("NHWC"),
        )
        assert grad.xBackprop().shape() == Shape.of(4, 3, 3, 2)
        assert grad.reserveSpace4().shape() == Shape.of(0)
        with Session(g) as s:
            out = (
                s.runner()
                .feed(x, X)
                .fetch(grad.xBackprop())
                .fetch(grad.scaleBackprop())
                .fetch(grad.offsetBackprop())
                .fetch(grad.reserveSpace4())
                .fetch(grad.reserveSpace5())
                .run()
            )
            assert_same(out, list(grad_ref))
            (y,) = s.runner().feed("Placeholder", X).fetch("FusedBatchNormV3", 0).run()
            np.testing.assert_array_equal(y, fwd_ref.y)


def test_java_eager_and_ops_facade():
    _, grad_ref = raw_reference()
    with EagerSession.create() as env:
        tf = Ops.create(env)
        fwd = tf.nn.fusedBatchNorm(
            tf.constant(X),
            tf.constant(SCALE),
            tf.constant(OFFSET),
            tf.constant(EMPTY),
            tf.constant(EMPTY),
            FusedBatchNormV3.epsilon(1e-3),
        )
        grad = tf.nn.fusedBatchNormGrad(
            tf.constant(DY),
            tf.constant(X),
            tf.constant(SCALE),
            fwd.reserveSpace1(),
            fwd.reserveSpace2(),
            fwd.reserveSpace3(),
            FusedBatchNormGradV3.epsilon(1e-3),
        )
        assert_same(
            [grad.xBackprop().asTensor(), grad.scaleBackprop().asTensor(), grad.offsetBackprop().asTensor()],
            list(grad_ref[:3]),
        )
        assert isinstance(grad, java.FusedBatchNormGrad)  # tensorflow/java's endpoint name


def test_java_naming():
    g = Graph()
    scope = g.baseScope()
    c = Constant.create(scope, SCALE)
    names = [FusedBatchNormV3.create(scope, Constant.create(scope, X), c, c, c, c).op().name() for _ in range(3)]
    assert names == ["FusedBatchNormV3", "FusedBatchNormV3_1", "FusedBatchNormV3_2"]
    sub = scope.withSubScope("layer")
    op = FusedBatchNormV3.create(sub.withName("bn"), Constant.create(sub, X), c, c, c, c)
    assert op.op().name() == "layer/bn"
    assert scope.withSubScope("layer").makeOpName("bn") == "layer_1/bn"
    assert sub.makeOpName("Const") == "layer/Const_1"
    with pytest.raises(IllegalArgumentException, match="invalid name"):
        scope.withName("-bad name")
    with pytest.raises(IllegalArgumentException, match="invalid name"):
        scope.withSubScope("a/b")


def test_java_options_are_per_call_builders():
    o = FusedBatchNormGradV3.epsilon(0.5)
    assert o._epsilon == 0.5 and o._dataFormat is None and o._isTraining is None
    chained = o.dataFormat("NCHW")
    assert chained is o and o._dataFormat == "NCHW"  # Java's Options setters mutate and return this
    g = Graph()
    s = g.baseScope()
    c = Constant.create(s, SCALE)
    op = FusedBatchNormGradV3.create(s, Constant.create(s, X), Constant.create(s, X), c, c, c, c)
    assert op.op()._core.attrs["epsilon"] == pytest.approx(1e-4)  # the spec's default
    assert op.op()._core.attrs["is_training"] is True


def test_java_error_model_is_exceptions():
    g = Graph()
    s = g.baseScope()
    c = Constant.create(s, SCALE)
    with pytest.raises(TFInvalidArgumentException, match="Dimensions must be equal"):
        FusedBatchNormGradV3.create(
            s, Constant.create(s, X), Constant.create(s, X), Constant.create(s, SCALE[:1]), c, c, c
        )
    with pytest.raises(TFInvalidArgumentException, match="Value for attr 'data_format'"):
        FusedBatchNormGradV3.create(
            s, Constant.create(s, X), Constant.create(s, X), c, c, c, c, FusedBatchNormGradV3.dataFormat("XYZW")
        )
    with pytest.raises(IllegalArgumentException, match="yBackprop must be an Operand"):
        FusedBatchNormGradV3.create(s, X, Constant.create(s, X), c, c, c, c)
    with pytest.raises(IllegalArgumentException, match="expected FusedBatchNormGradV3.Options"):
        FusedBatchNormGradV3.create(s, c, c, c, c, c, c, FusedBatchNormV3.epsilon(1.0))
    x = Placeholder.create(s, DataType.TFloat32)
    with Session(g) as sess, pytest.raises(TFInvalidArgumentException, match="You must feed a value"):
        sess.runner().fetch(x).run()


def test_java_kernel_label():
    g = Graph()
    s = g.baseScope().withKernelLabel("reference")
    c = Constant.create(s, SCALE)
    op = FusedBatchNormV3.create(s, Constant.create(s, X), c, c, c, c)
    assert op.op()._core.kernel_label == "reference"
    bad = g.baseScope().withKernelLabel("tpu")
    with pytest.raises(java.TFNotFoundException, match="Unknown backend 'tpu'"):
        FusedBatchNormV3.create(bad, Constant.create(bad, X), c, c, c, c)
    assert issubclass(java.TFNotFoundException, RuntimeError)


# ------------------------------------------------------------------------------ C++


def test_cc_client_session_matches_raw_ops():
    fwd_ref, grad_ref = raw_reference(is_training=False)
    root = cc.Scope.NewRootScope()
    x = ops.Placeholder(root, cc.DT_FLOAT, ops.Placeholder.Shape(cc.PartialTensorShape([4, 3, 3, 2])))
    fwd = ops.FusedBatchNormV3(root, x, SCALE, OFFSET, EMPTY, EMPTY, ops.FusedBatchNormV3.Epsilon(1e-3))
    attrs = ops.FusedBatchNormGradV3.Attrs().Epsilon(1e-3).IsTraining(False)
    grad = ops.FusedBatchNormGradV3(
        root, DY, x, SCALE, fwd.reserve_space_1, fwd.reserve_space_2, fwd.reserve_space_3, attrs
    )
    assert root.ok(), root.status()
    outputs: list = []
    status = ClientSession(root).Run(
        {x.output: X},
        [grad.x_backprop, grad.scale_backprop, grad.offset_backprop, grad.reserve_space_4, grad.reserve_space_5],
        outputs,
    )
    assert status.ok(), status.ToString()
    assert_same(outputs, list(grad_ref))
    outputs2: list = []
    assert ClientSession(root).Run({x.output: X}, [fwd.y, fwd.batch_mean], outputs2).ok()
    assert_same(outputs2, [fwd_ref.y, fwd_ref.batch_mean])


def test_cc_attrs_are_immutable_values_with_static_helpers():
    base = ops.FusedBatchNormGradV3.Attrs()
    changed = base.Epsilon(0.5).DataFormat("NCHW")
    assert (base.epsilon_, base.data_format_, base.is_training_) == (0.0001, "NHWC", True)
    assert (changed.epsilon_, changed.data_format_) == (0.5, "NCHW")
    assert ops.FusedBatchNormGradV3.IsTraining(False).is_training_ is False
    assert ops.FusedBatchNormV3.ExponentialAvgFactor(0.3).exponential_avg_factor_ == 0.3
    assert ops.FusedBatchNormV3.Attrs().exponential_avg_factor_ == 1.0


def test_cc_naming():
    root = cc.Scope.NewRootScope()
    assert root.GetUniqueNameForOp("FusedBatchNormV3") == "FusedBatchNormV3"
    assert root.GetUniqueNameForOp("FusedBatchNormV3") == "FusedBatchNormV3_1"
    linear = root.NewSubScope("linear")
    w = ops.Placeholder(linear.WithOpName("W"), cc.DT_FLOAT)
    assert w.operation.name() == "linear/W"
    bn = ops.FusedBatchNormV3(linear.WithOpName("bn", 1), w, SCALE, OFFSET, SCALE, SCALE)
    assert bn.operation.name() == "linear/bn1"
    assert [i.op.name for i in bn.operation.node().inputs[1:3]] == ["linear/Const/Const", "linear/Const_1/Const"]
    assert root.NewSubScope("linear").GetUniqueNameForOp("MatMul") == "linear_1/MatMul"


def test_cc_error_model_records_status_and_stops():
    root = cc.Scope.NewRootScope()
    x = ops.Placeholder(root, cc.DT_FLOAT, ops.Placeholder.Shape(cc.PartialTensorShape([4, 3, 3, 2])))
    bad = ops.FusedBatchNormGradV3(root, DY, x, SCALE[:1], SCALE, SCALE, SCALE)
    assert not root.ok()
    assert root.status().code() == "INVALID_ARGUMENT"
    assert "Dimensions must be equal, but are 2 and 1" in root.status().message()
    assert bad.operation.node() is None and bad.x_backprop.node() is None
    later = ops.FusedBatchNormV3(root, x, SCALE, OFFSET, EMPTY, EMPTY)  # does nothing on a failed scope
    assert later.operation.node() is None
    assert root.graph().operation("FusedBatchNormV3") is None
    outputs: list = []
    status = ClientSession(root).Run([later.y], outputs)
    assert not status.ok() and outputs == []
    with pytest.raises(cc.FatalError):
        ops.FusedBatchNormV3(cc.Scope.NewRootScope().ExitOnError(), DY, SCALE[:1], SCALE, SCALE, SCALE)


def test_cc_run_errors_are_statuses():
    root = cc.Scope.NewRootScope()
    x = ops.Placeholder(root, cc.DT_FLOAT)
    fwd = ops.FusedBatchNormV3(root, x, SCALE, OFFSET, EMPTY, EMPTY)
    outputs: list = []
    status = ClientSession(root).Run([fwd.y], outputs)
    assert status.code() == "INVALID_ARGUMENT" and "You must feed a value" in status.message()
    status = ClientSession(root).Run({x.output: X[..., :1]}, [fwd.y], outputs)  # wrong channel count at run
    assert not status.ok() and "scale must have the same number of elements" in status.message()
    ok = ops.FusedBatchNormV3(root.WithKernelLabel("reference"), x, SCALE, OFFSET, EMPTY, EMPTY)
    assert ok.operation.node().kernel_label == "reference"
    assert ClientSession(root).Run({x.output: X}, [ok.y], outputs).ok()
    gdef = cc.GraphDef()
    assert root.ToGraphDef(gdef).ok() and 'op: "FusedBatchNormV3"' in gdef.text


# ------------------------------------------------------------------------------ generated code


def test_generated_mirrors_are_current():
    result = subprocess.run(
        [sys.executable, "-m", "bindings_mirror.generate", "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
