"""The TensorFlow Java mirror (``bindings_mirror.java``) against tensorflow/java's behaviour.

Numbers are compared bit for bit with ``fbnops.raw_ops``; names, overloads, exception
classes and messages are tensorflow/java's (Session.java, Result.java, Graph.java,
AbstractTF_Status.java, Output.java, RawOp.java), point by point as in
docs/fidelity/tensorflow_java.md (J1-J7).
"""

from __future__ import annotations

import numpy as np
import pytest
import spec_examples as examples

import fbnops
from bindings_mirror import java
from bindings_mirror.java import (
    Constant,
    DataType,
    EagerSession,
    FusedBatchNorm,
    FusedBatchNormGrad,
    FusedBatchNormGradV3,
    FusedBatchNormV3,
    Graph,
    IllegalArgumentException,
    IllegalStateException,
    Ops,
    Placeholder,
    Session,
    Shape,
    TFInvalidArgumentException,
    TFloat32,
)
from fbnops.framework import errors

F = np.float32
RNG = np.random.default_rng(42)
X = RNG.standard_normal((4, 3, 3, 2)).astype(F)
DY = RNG.standard_normal((4, 3, 3, 2)).astype(F)
SCALE = np.array([0.7, 1.3], F)
OFFSET = np.array([0.1, -0.2], F)
EMPTY = np.zeros(0, F)


def raw_reference(epsilon=1e-3):
    fwd = fbnops.raw_ops.FusedBatchNormV3(x=X, scale=SCALE, offset=OFFSET, mean=EMPTY, variance=EMPTY, epsilon=epsilon)
    grad = fbnops.raw_ops.FusedBatchNormGradV3(
        y_backprop=DY,
        x=X,
        scale=SCALE,
        reserve_space_1=fwd.reserve_space_1,
        reserve_space_2=fwd.reserve_space_2,
        reserve_space_3=fwd.reserve_space_3,
        epsilon=epsilon,
    )
    return fwd, grad


def assert_same(tensors, reference):
    assert len(tensors) == len(reference)
    for t, want in zip(tensors, reference, strict=True):
        got = np.asarray(t)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def build_graph():
    """A graph with a fed x, the forward op ``bn`` and its gradient ``grad``."""
    g = Graph()
    tf = Ops.create(g)
    x = tf.placeholder(TFloat32, Placeholder.shape(Shape.of(4, 3, 3, 2)))
    consts = [tf.constant(v) for v in (SCALE, OFFSET, EMPTY, EMPTY)]
    bn = tf.withName("bn").nn.fusedBatchNorm(x, *consts, FusedBatchNorm.epsilon(1e-3))
    grad = tf.withName("grad").nn.fusedBatchNormGrad(
        tf.constant(DY),
        x,
        consts[0],
        bn.reserveSpace1(),
        bn.reserveSpace2(),
        bn.reserveSpace3(),
        FusedBatchNormGrad.epsilon(1e-3),
    )
    return g, x, bn, grad


# ------------------------------------------------------------------------------ numbers


def test_graph_run_matches_raw_ops_bit_for_bit():
    fwd_ref, grad_ref = raw_reference()
    g, x, bn, grad = build_graph()
    assert grad.xBackprop().shape() == Shape.of(4, 3, 3, 2)
    assert grad.reserveSpace4().shape() == Shape.of(0)
    with Session(g) as s:
        runner = s.runner().feed(x, TFloat32.tensorOf(X))
        for accessor in ("xBackprop", "scaleBackprop", "offsetBackprop", "reserveSpace4", "reserveSpace5"):
            runner.fetch(getattr(grad, accessor)())
        with runner.run() as result:
            assert_same([result.get(i) for i in range(result.size())], list(grad_ref))
        with s.runner().feed(x, X).fetch(bn.y()).run() as result:
            assert_same([result.get(0)], [fwd_ref.y])


def test_eager_session_and_ops_facade():
    _, grad_ref = raw_reference()
    with EagerSession.create() as env:
        tf = Ops.create(env)
        bn = tf.nn.fusedBatchNorm(
            tf.constant(X),
            tf.constant(SCALE),
            tf.constant(OFFSET),
            tf.constant(EMPTY),
            tf.constant(EMPTY),
            FusedBatchNorm.epsilon(1e-3),
        )
        grad = tf.nn.fusedBatchNormGrad(
            tf.constant(DY),
            tf.constant(X),
            tf.constant(SCALE),
            bn.reserveSpace1(),
            bn.reserveSpace2(),
            bn.reserveSpace3(),
            FusedBatchNormGrad.epsilon(1e-3),
        )
        values = [grad.xBackprop().asTensor(), grad.scaleBackprop().asTensor(), grad.offsetBackprop().asTensor()]
        assert all(isinstance(v, TFloat32) for v in values)
        assert_same(values, list(grad_ref[:3]))
        out = grad.xBackprop()
    with pytest.raises(IllegalStateException, match="Eager session has been closed"):
        out.asTensor()  # J7: tensors of a closed EagerSession are gone


# ------------------------------------------------------------------------------ J1: fetch by name


def test_fetch_by_op_name_is_output_0():
    fwd_ref, _ = raw_reference()
    g, x, bn, _ = build_graph()
    with Session(g) as s, s.runner().feed(x, X).fetch("bn").fetch("bn:1").fetch("bn", 2).run() as result:
        assert result.size() == 3
        assert_same(
            [result.get(0), result.get(1), result.get(2)], [fwd_ref.y, fwd_ref.batch_mean, fwd_ref.batch_variance]
        )
        assert result.keySet() == {"bn", "bn:1", "bn:2"}  # names as given; fetch("bn", 2) records "bn:2"


@pytest.mark.parametrize(
    "fetch, exc, message",
    [
        (("nope",), IllegalArgumentException, "No Operation named [nope] in the Graph"),
        (("bn:x",), IllegalArgumentException, 'Could not get output for badly formatted output name: "bn:x"'),
        (("bn:",), IllegalArgumentException, "No Operation named [bn:] in the Graph"),
        (("nope", 1), IllegalArgumentException, "No Operation named [nope] in the Graph"),
        (("bn", 9), java.IndexOutOfBoundsException, "Can't get output with index 9, this op only has 6 outputs."),
    ],
)
def test_fetch_errors_at_fetch_time(fetch, exc, message):
    g, *_ = build_graph()
    with Session(g) as s, pytest.raises(exc) as info:
        s.runner().fetch(*fetch)
    assert str(info.value) == message


def test_output_index_beyond_the_op_fails_at_fetch():
    """``graph.output("bn:9")`` is not range-checked, but ``fetch`` reads its dtype, and tf-java 1.1.0's
    GraphOperation.dtype(9) throws (recorded from the real library: tests/export/test_java_differential.py)."""
    g, x, *_ = build_graph()
    assert g.output("bn:9").index() == 9
    runner = Session(g).runner().feed(x, X)
    with pytest.raises(java.IndexOutOfBoundsException) as info:
        runner.fetch("bn:9")
    assert str(info.value) == "invalid output index (9) for an operation that has 6 outputs"
    assert runner.isEmpty()  # nothing was added


# ------------------------------------------------------------------------------ J2: Result


def test_result_api_and_use_after_close():
    g, x, bn, _ = build_graph()
    with Session(g) as s:
        result = s.runner().feed(x, X).fetch(bn.y()).fetch("bn", 1).run()
    assert isinstance(result, java.Result) and len(result) == 2
    assert result.containsKey("bn:0") and not result.containsKey("bn")
    assert result.get("bn:1").isPresent() and result.get("missing").isEmpty()
    with pytest.raises(java.NoSuchElementException, match="No value present"):
        result.get("missing").get()
    assert [name for name, _ in result] == ["bn:0", "bn:1"]  # Iterable<Map.Entry<String, Tensor>>
    with pytest.raises(java.IndexOutOfBoundsException):
        result.get(2)
    tensor = result.get(0)
    result.close()
    for use in (lambda: result.get(0), lambda: result.get("bn:0"), lambda: list(result)):
        with pytest.raises(IllegalStateException, match="Result is closed"):
            use()
    with pytest.raises(IllegalStateException):
        np.asarray(tensor)  # closing the Result closed its tensors
    result.close()  # a second close only warns in tf-java


def test_result_rejects_two_outputs_with_one_name():
    g, x, bn, _ = build_graph()
    with Session(g) as s, pytest.raises(IllegalArgumentException) as info:
        s.runner().feed(x, X).fetch(bn.y()).fetch(bn.y()).run()
    assert str(info.value) == "Name collision in the result set, two outputs are named 'bn:0'"


# ------------------------------------------------------------------------------ J3: RawOp is an Op


def test_multi_output_ops_are_ops_not_operands():
    assert issubclass(java.RawOp, java.Op) and not issubclass(java.RawOp, java.Operand)
    assert issubclass(Constant, java.Operand) and issubclass(Placeholder, java.Operand)
    g, x, bn, _ = build_graph()
    tf = Ops.create(g)
    assert not isinstance(bn, java.Operand) and bn.op().name() == "bn"
    with pytest.raises(IllegalArgumentException, match="yBackprop: FusedBatchNorm is an Op with several outputs"):
        tf.nn.fusedBatchNormGrad(bn, x, x, x, x, x)
    assert g.operation("FusedBatchNormGrad") is None  # rejected before a name was taken


# ------------------------------------------------------------------------------ J4: exceptions


@pytest.mark.parametrize(
    "error, cls, base",
    [
        (errors.InvalidArgumentError, java.TFInvalidArgumentException, java.IllegalArgumentException),
        (errors.ResourceExhaustedError, java.TFResourceExhaustedException, java.TensorFlowException),
        (errors.UnimplementedError, java.TFUnimplementedException, java.UnsupportedOperationException),
        (errors.NotFoundError, java.TensorFlowException, java.RuntimeException),
        (errors.InternalError, java.TensorFlowException, java.RuntimeException),
    ],
)
def test_status_codes_map_to_tf_java_classes(error, cls, base):
    exc = java.java_exception(error("boom", "Op"))
    assert type(exc) is cls and isinstance(exc, base) and exc.getMessage() == "boom"


def test_exception_hierarchy_is_tf_javas():
    for name in ("Unauthenticated", "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "OutOfRange"):
        assert getattr(java, f"TF{name}Exception").__mro__[1] is java.TensorFlowException
    assert java.TFInvalidArgumentException.__mro__[1] is java.IllegalArgumentException
    assert not issubclass(java.TFInvalidArgumentException, java.TensorFlowException)
    assert java.TFUnimplementedException.__mro__[1] is java.UnsupportedOperationException
    assert not hasattr(java, "TFNotFoundException")  # NOT_FOUND is a plain TensorFlowException
    assert issubclass(java.TensorFlowException, java.RuntimeException)


def test_unknown_backend_is_a_plain_tensorflow_exception():
    g = Graph()
    c = Constant.create(g.baseScope(), SCALE)
    bad = g.baseScope().withKernelLabel("tpu")
    with pytest.raises(java.TensorFlowException, match="Unknown backend 'tpu'") as info:
        FusedBatchNormV3.create(bad, Constant.create(g.baseScope(), X), c, c, c, c)
    assert type(info.value) is java.TensorFlowException


def test_construction_errors_are_tf_invalid_argument_in_nodedef_form():
    g = Graph()
    tf = Ops.create(g)
    c = tf.constant(SCALE)
    with pytest.raises(TFInvalidArgumentException) as info:
        tf.nn.fusedBatchNormGrad(tf.constant(DY), tf.constant(X), tf.constant(SCALE[:1]), c, c, c)
    assert str(info.value) == (
        "Dimensions must be equal, but are 2 and 1 for '{{node FusedBatchNormGrad}} = FusedBatchNormGradV3"
        '[T=DT_FLOAT, U=DT_FLOAT, data_format="NHWC", epsilon=0.0001, is_training=true]'
        "(Const_1, Const_2, Const_3, Const, Const, Const)' with input shapes: [4,3,3,2], [4,3,3,2], [1], [2], [2], [2]."
    )
    with pytest.raises(TFInvalidArgumentException, match="Value for attr 'data_format' of \"XYZW\""):
        tf.nn.fusedBatchNormGrad(c, c, c, c, c, c, FusedBatchNormGrad.dataFormat("XYZW"))


# ------------------------------------------------------------------------------ J5: overloads


def test_runner_and_session_overloads():
    fwd_ref, _ = raw_reference()
    g, x, bn, grad = build_graph()
    with Session(g) as s:
        with s.runner().feed("Placeholder", 0, TFloat32.tensorOf(X)).fetch("bn").addTarget("grad").run() as r:
            assert_same([r.get(0)], [fwd_ref.y])
        with s.runner().feed("Placeholder", X).addTarget(grad).run() as r:
            assert r.size() == 0
        s.run("Const")  # Session.run(String): one target, nothing fetched
        s.run(Ops.create(g).constant(SCALE))  # Session.run(Op)
        with pytest.raises(TFInvalidArgumentException, match="You must feed a value for placeholder"):
            s.run(grad)
    with pytest.raises(IllegalStateException, match="after close"):
        s.runner().fetch("bn").run()


def test_core_op_classes_on_ops():
    """The seed-era org.tensorflow.op.core classes: tf.fusedBatchNormGradV3(...), default name = op name."""
    g = Graph()
    tf = Ops.create(g)
    c = tf.constant(SCALE)
    fwd = tf.fusedBatchNormV3(tf.constant(X), c, c, tf.constant(EMPTY), tf.constant(EMPTY))
    grad = tf.fusedBatchNormGradV3(
        tf.constant(DY),
        tf.constant(X),
        c,
        fwd.reserveSpace1(),
        fwd.reserveSpace2(),
        fwd.reserveSpace3(),
        FusedBatchNormGradV3.isTraining(True),
    )
    assert type(grad) is FusedBatchNormGradV3 and grad.op().name() == "FusedBatchNormGradV3"
    nn = tf.nn.fusedBatchNormGrad(
        tf.constant(DY), tf.constant(X), c, fwd.reserveSpace1(), fwd.reserveSpace2(), fwd.reserveSpace3()
    )
    assert type(nn) is FusedBatchNormGrad and nn.op().name() == "FusedBatchNormGrad"
    assert nn.op().type() == grad.op().type() == "FusedBatchNormGradV3"
    assert java.FusedBatchNorm is java.nn.FusedBatchNorm and java.nn.FusedBatchNorm.OP_NAME == "FusedBatchNormV3"


# ------------------------------------------------------------------------------ J6: Output and types


def test_output_type_env_expect_and_datatype():
    g, x, bn, _ = build_graph()
    y = bn.y()
    assert y.type() is TFloat32 and y.dataType() is DataType.DT_FLOAT and int(y.dataType()) == 1
    assert y.env() is g and bn.env() is g and y.expect(TFloat32) is y
    with pytest.raises(IllegalArgumentException) as info:
        y.expect(java.TInt32)
    assert str(info.value) == "Cannot cast from output of TFloat32 to output of TInt32"
    assert repr(y) == "<FusedBatchNormV3 'bn:0' shape=[4, 3, 3, 2] dtype=DT_FLOAT>"
    assert repr(bn) == "<FusedBatchNormV3 'bn'>"


def test_typed_tensors():
    t = TFloat32.tensorOf(Shape.of(2, 3))
    assert t.dataType() is DataType.DT_FLOAT and t.shape() == Shape.of(2, 3) and t.numBytes() == 24
    assert TFloat32.scalarOf(1.5).getFloat() == 1.5 and TFloat32.vectorOf(1, 2, 3).getFloat(2) == 3.0
    assert java.TInt32.tensorOf(np.arange(4)).dataType() is DataType.DT_INT32
    with pytest.raises(IllegalArgumentException, match="out of range"):
        TFloat32.scalarOf(1e40)  # never inf
    with pytest.raises(IllegalArgumentException, match="out of range"):
        java.TInt32.scalarOf(2**40)  # never a wrap
    with pytest.raises(IllegalArgumentException, match="cannot hold"):
        java.TInt32.tensorOf(np.array([1.5]))
    t.close()
    with pytest.raises(IllegalStateException, match="closed"):
        t.shape()


# ------------------------------------------------------------------------------ J7: Options and names


def test_options_are_private_builders_typed_at_the_setter():
    o = FusedBatchNormGradV3.epsilon(0.5)
    assert o.dataFormat("NCHW") is o  # Java's Options setters mutate and return this
    with pytest.raises(IllegalArgumentException, match="private"):
        FusedBatchNormGradV3.Options()
    with pytest.raises(IllegalArgumentException, match=r"isTraining\(Boolean\) cannot take int 1"):
        FusedBatchNormGradV3.isTraining(1)
    assert FusedBatchNormGradV3.epsilon(None)._epsilon is None  # null: the attr keeps its default
    g = Graph()
    s = g.baseScope()
    c = Constant.create(s, SCALE)
    with pytest.raises(IllegalArgumentException, match="expected FusedBatchNormGradV3.Options"):
        FusedBatchNormGradV3.create(s, c, c, c, c, c, c, FusedBatchNormV3.epsilon(1.0))
    with pytest.raises(java.NullPointerException):
        FusedBatchNormGradV3.create(s, c, c, c, c, c, c, None)
    op = FusedBatchNormGradV3.create(s, Constant.create(s, X), Constant.create(s, X), c, c, c, c)
    assert op.op()._core.attrs["epsilon"] == pytest.approx(1e-4) and op.op()._core.attrs["is_training"] is True


def test_naming():
    g = Graph()
    scope = g.baseScope()
    c = Constant.create(scope, SCALE)
    names = [FusedBatchNormV3.create(scope, Constant.create(scope, X), c, c, c, c).op().name() for _ in range(3)]
    assert names == ["FusedBatchNormV3", "FusedBatchNormV3_1", "FusedBatchNormV3_2"]
    sub = scope.withSubScope("layer")
    assert FusedBatchNormV3.create(sub.withName("bn"), Constant.create(sub, X), c, c, c, c).op().name() == "layer/bn"
    assert scope.withSubScope("layer").makeOpName("bn") == "layer_1/bn"
    for bad in ("-bad name", "a/b"):
        with pytest.raises(IllegalArgumentException, match="invalid name"):
            scope.withName(bad)


def test_kernel_label():
    g = Graph()
    s = g.baseScope().withKernelLabel("reference")
    c = Constant.create(s, SCALE)
    assert FusedBatchNormV3.create(s, Constant.create(s, X), c, c, c, c).op()._core.kernel_label == "reference"


def test_feed_from_another_graph_is_illegal_state():
    g, x, *_ = build_graph()
    other, *_ = build_graph()
    with Session(other) as s, pytest.raises(IllegalStateException, match="it is from a different graph"):
        s.runner().feed(x, X)


@pytest.mark.parametrize("spec", fbnops.specs.all_specs(), ids=lambda s: s.name)
def test_every_spec_is_a_core_class_on_ops(spec):
    """Generated for every spec: tf.<opName>(...) builds org.tensorflow.op.core.<OpName>, accessors per output."""
    from bindings_mirror.generate import camel

    g = Graph()
    tf = Ops.create(g)
    operands = [tf.constant(v) for v in examples.inputs(spec).values()]
    op = getattr(tf, spec.name[:1].lower() + spec.name[1:])(*operands, *examples.required_attrs(spec).values())
    assert type(op) is getattr(java.core, spec.name) and op.op().type() == spec.name
    accessors = [getattr(op, camel(n))() for n in spec.output_names]
    assert [o.index() for o in accessors] == list(range(len(spec.outputs)))
    with Session(g) as s:
        runner = s.runner()
        for o in accessors:
            runner.fetch(o)
        with runner.run() as result:
            assert result.size() == len(spec.outputs)


# ------------------------------------------------------------------------------ J8: lifecycles


def test_lifecycles_are_tf_javas():
    """Issue 24's Java items, with the classes and messages recorded from tf-java 1.1.0."""
    source = np.array([1.0, 2.0, 3.0], F)
    tensor = TFloat32.tensorOf(source)
    source[0] = 99.0  # tensorOf copied the array
    assert np.asarray(tensor).tolist() == [1.0, 2.0, 3.0]

    g, x, bn, _ = build_graph()
    tf = Ops.create(g)
    g.close()
    closed = "close() has been called on the Graph"
    for use in (
        lambda: tf.withName("late").constant(SCALE),
        lambda: g.operation("bn"),
        lambda: g.outputOrThrow("bn:1"),
        lambda: g.toGraphDef(),
        lambda: Session(g),
    ):
        with pytest.raises(java.IllegalStateException) as info:
            use()
        assert str(info.value) == closed

    eager = java.EagerSession.create()
    etf = Ops.create(eager)
    eager.close()
    with pytest.raises(java.IllegalStateException, match="^Eager session has been closed$"):
        etf.constant(SCALE)
