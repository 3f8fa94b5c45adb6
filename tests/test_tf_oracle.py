"""TensorFlow itself as the oracle (tensorflow-cpu 2.21, Eigen kernels: ``TF_ENABLE_ONEDNN_OPTS=0``,
set in conftest.py).

Skipped, with the reason, when TensorFlow is not installed (``pip install 'fbnops[oracle]'``).
Every test below is one case compared with TensorFlow:

* the port of TensorFlow's own ``tensorflow/python/ops/nn_fused_batchnorm_test.py``
  (``_test_inference``/``_test_training`` shapes, dtypes, formats and averaging factors;
  ``_test_gradient``; ``_testBatchNormGradGrad`` configs 1-6; the eager shape errors):
  fbnops' numbers next to TensorFlow's, instead of next to the test's own reference;
* the V1/V2 ops, eagerly and as a GraphDef that TensorFlow imports and runs;
* every row of the ``raw_ops`` conversion table (raw_ops_cases.py): TensorFlow behaves as
  the row says, and where both run, the numbers agree.

Count the cases with ``python -m pytest tests/test_tf_oracle.py -q``.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from raw_ops_cases import ROWS, Row, call_inputs

from fbnops.testing import extras

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = extras.require("tensorflow", "oracle")

import fbnops  # noqa: E402
from fbnops import Graph, Scope, Session, gradients  # noqa: E402
from fbnops.specs import get_spec  # noqa: E402
from fbnops.testing import DTYPES, STAT_TOL, forward_f64, grad_f64, rel_err, tolerance  # noqa: E402

F = np.float32
EPS = 0.001


def _close(got, want, dtype, name: str, factor: float = 2.0) -> None:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{name}: shapes {got.shape} vs {want.shape}"
    nan = np.isnan(want)
    assert (np.isnan(got) == nan).all(), f"{name}: NaN pattern"
    tol = tolerance(dtype) if got.ndim > 1 else STAT_TOL
    assert rel_err(np.where(nan, 0, got), np.where(nan, 0, want)) <= factor * tol, name


def _scale_shape(shape, fmt):
    return (shape[1],) if fmt.startswith("NC") else (shape[-1],)


# ---------------------------------------------------------------------------------------
# nn_fused_batchnorm_test.py: _runtests (forward, training and inference)
# ---------------------------------------------------------------------------------------

FORWARD_SHAPES = [(1, 1, 6, 1), (1, 1, 6, 2), (1, 2, 1, 6), (27, 131, 127, 6), (0, 131, 127, 6), (1, 1, 1, 1),
                  (1, 2, 6, 1, 3)]  # fmt: skip


def _runtests(shapes) -> list[tuple]:
    """TensorFlow's ``_runtests`` grid (with bfloat16, which TF 2.21 runs on CPU)."""
    return [
        (shape, dtype, fmt, factor, training)
        for shape in shapes
        for dtype in DTYPES
        for fmt in (("NHWC", "NCHW") if len(shape) == 4 else ("NCDHW", "NDHWC"))
        for factor in (1.0, 0.6)
        for training in (True, False)
    ]


FORWARD_CASES = _runtests(FORWARD_SHAPES)


def _forward_inputs(shape, dtype, fmt, factor, training):
    np.random.seed(1)  # as the TensorFlow test
    c = _scale_shape(shape, fmt)
    x = np.random.random_sample(shape).astype(DTYPES[dtype])
    scale, offset = (np.random.random_sample(c).astype(F) for _ in range(2))
    if training and factor == 1.0:
        mean = variance = np.zeros(0, F)
    else:
        mean, variance = (np.random.random_sample(c).astype(F) for _ in range(2))
    return dict(x=x, scale=scale, offset=offset, mean=mean, variance=variance)


def _forward_f64(inputs, factor, fmt, training):
    """float64 math for the five outputs TensorFlow initializes (running statistics with Bessel's correction)."""
    x = np.asarray(inputs["x"], np.float64)
    y, m, v = forward_f64(x, *(np.asarray(inputs[k], np.float64) for k in ("scale", "offset", "mean", "variance")),
                          epsilon=EPS, data_format=fmt, is_training=training)  # fmt: skip
    if not training:
        return y, m, v
    n = x.size // max(m.size, 1)
    running_var = v * n / max(n - 1, 1)
    if factor != 1.0:
        m_run = (1 - factor) * inputs["mean"] + factor * m
        running_var = (1 - factor) * inputs["variance"] + factor * running_var
    else:
        m_run = m
    return y, m_run, running_var, m, v


@pytest.mark.parametrize("shape,dtype,fmt,factor,training", FORWARD_CASES)
def test_forward_like_tensorflows_test(shape, dtype, fmt, factor, training):
    inputs = _forward_inputs(shape, dtype, fmt, factor, training)
    attrs = dict(epsilon=EPS, exponential_avg_factor=factor, data_format=fmt, is_training=training)
    ours = fbnops.raw_ops.FusedBatchNormV3(**inputs, **attrs)
    theirs = tf.raw_ops.FusedBatchNormV3(**inputs, **attrs)
    names = ["y", "batch_mean", "batch_variance"] + (["reserve_space_1", "reserve_space_2"] if training else [])
    if inputs["x"].size == 0:  # NaN running statistics; reserve spaces uninitialized in TensorFlow
        for i in range(3):
            _close(ours[i], theirs[i].numpy(), dtype, names[i])
        return
    with np.errstate(all="ignore"):
        oracle = _forward_f64(inputs, factor, fmt, training)
    for name, got, want, exact in zip(names, ours, theirs, oracle, strict=False):
        _agree(got, want.numpy(), exact, dtype, name)


def _agree(got, want, exact, dtype, name: str) -> None:
    """TensorFlow sums in float32: on long channels (27*131*127) or cancelling sums (scale_backprop) its own
    error exceeds the float32 tolerance.  As in test_golden.py: fbnops meets the tolerance against float64,
    or TF's own error, and agrees with TF within twice TF's error."""
    tol = tolerance(dtype) if np.ndim(got) > 1 else STAT_TOL
    tf_err = rel_err(want, exact)
    assert rel_err(got, exact) <= max(2 * tol, 1.01 * tf_err), f"{name}: vs float64"
    assert rel_err(got, want) <= max(2 * tol, 2 * tf_err), f"{name}: vs TensorFlow"


# ---------------------------------------------------------------------------------------
# _test_gradient and _testBatchNormGradGrad: graph-mode gradients next to TensorFlow's
# ---------------------------------------------------------------------------------------

GRADIENT_SHAPES = [
    (1, 1, 6, 1),
    (1, 1, 6, 2),
    (1, 2, 1, 6),
    (5, 7, 11, 4),
    (0, 7, 11, 4),
    (1, 1, 1, 1),
    (1, 2, 6, 1, 3),
]
GRADIENT_CASES = _runtests(GRADIENT_SHAPES)
GRADGRAD_CONFIGS = [((2, 3, 4, 5), "float32"), ((2, 3, 2, 2), "float32"), ((2, 3, 4, 5), "float16"),
                    ((2, 3, 2, 2), "float16"), ((2, 3, 2, 2, 2), "float32"), ((2, 3, 2, 2, 2), "float16")]  # fmt: skip
GRADGRAD_CASES = [
    (shape, dtype, fmt, training)
    for shape, dtype in GRADGRAD_CONFIGS
    for training in (True, False)
    for fmt in (("NHWC", "NCHW") if len(shape) == 4 else ("NDHWC", "NCDHW"))
]


def _tf_gradients(inputs, attrs, dy, second: tuple | None = None):
    """First-order gradients of y w.r.t. (x, scale, offset) given dy, and the forward's reserve spaces; with
    ``second`` = (A, B, D), the gradients of sum(A*dx + B*dscale + D*doffset) w.r.t. (dy, x, scale) instead."""
    x, scale, offset, dyt = (tf.constant(v) for v in (inputs["x"], inputs["scale"], inputs["offset"], dy))
    with tf.GradientTape() as outer:
        outer.watch([dyt, x, scale])
        with tf.GradientTape() as inner:
            inner.watch([x, scale, offset])
            fwd = tf.raw_ops.FusedBatchNormV3(
                x=x, scale=scale, offset=offset, mean=inputs["mean"], variance=inputs["variance"], **attrs
            )
        first = inner.gradient(fwd[0], [x, scale, offset], output_gradients=dyt)
    if second is None:
        return [g.numpy() for g in first], fwd[3].numpy(), fwd[4].numpy()
    return [
        g.numpy() for g in outer.gradient(first, [dyt, x, scale], output_gradients=[tf.constant(s) for s in second])
    ]


def _our_gradients(inputs, attrs, dy, second: tuple | None = None):
    scope = Scope(Graph())
    ph = {k: scope.placeholder(v.dtype, v.shape, name=k) for k, v in inputs.items()}
    dyp = scope.placeholder(dy.dtype, dy.shape, name="dy")
    y = scope.add_op("FusedBatchNormV3", list(ph.values()), attrs).output(0)
    first = gradients(y, [ph["x"], ph["scale"], ph["offset"]], grad_ys=[dyp])
    feeds = {**{ph[k]: v for k, v in inputs.items()}, dyp: dy}
    if second is None:
        return Session(scope.graph).run(first, feeds)
    ups = [scope.placeholder(s.dtype, s.shape, name=n) for s, n in zip(second, "ABD", strict=True)]
    result = gradients(first, [dyp, ph["x"], ph["scale"]], grad_ys=ups)
    return Session(scope.graph).run(result, {**feeds, **dict(zip(ups, second, strict=True))})


@pytest.mark.parametrize("shape,dtype,fmt,factor,training", GRADIENT_CASES)
def test_gradient_like_tensorflows_test(shape, dtype, fmt, factor, training):
    inputs = _forward_inputs(shape, dtype, fmt, factor, training)
    attrs = dict(epsilon=EPS, exponential_avg_factor=factor, data_format=fmt, is_training=training)
    dy = np.random.random_sample(shape).astype(DTYPES[dtype])
    ours = _our_gradients(inputs, attrs, dy)
    theirs, tf_rs1, tf_rs2 = _tf_gradients(inputs, attrs, dy)
    if inputs["x"].size == 0:
        for name, a, b in zip(("x", "scale", "offset"), ours, theirs, strict=True):
            _close(a, b, dtype, f"d{name}")
        return
    # The gradient is fed the forward's float32 statistics; in a cancelling sum (scale_backprop with dy >= 0,
    # as here) their rounding dominates.  So each side has its float64 oracle, given its own statistics, and
    # the two oracles' gap bounds how far apart two exact implementations could be.
    if training:
        fwd = fbnops.raw_ops.FusedBatchNormV3(**inputs, **attrs)
        stats = {"ours": (fwd.reserve_space_1, fwd.reserve_space_2), "tf": (tf_rs1, tf_rs2)}
    else:
        stats = dict.fromkeys(("ours", "tf"), (inputs["mean"], inputs["variance"]))
    exact = {
        side: grad_f64(
            {
                "x": inputs["x"].astype(np.float64),
                "y_backprop": dy.astype(np.float64),
                "scale": inputs["scale"],
                "reserve_space_1": m.astype(np.float64),
                "reserve_space_2": v.astype(np.float64),
            },
            EPS,
            fmt,
            training,
        )  # fmt: skip
        for side, (m, v) in stats.items()
    }
    for i, name in enumerate(("dx", "dscale", "doffset")):
        tol = 2 * (tolerance(dtype) if i == 0 else STAT_TOL)
        gap = rel_err(exact["ours"][i], exact["tf"][i])
        tf_err = rel_err(theirs[i], exact["tf"][i])  # (n = 2 per channel: dx cancels to rounding noise)
        assert rel_err(ours[i], exact["ours"][i]) <= max(tol, 2 * tf_err), f"{name}: vs float64"
        assert rel_err(ours[i], theirs[i]) <= max(tol, 2 * tf_err + gap), f"{name}: vs TF"


@pytest.mark.parametrize("shape,dtype,fmt,training", GRADGRAD_CASES)
def test_second_order_like_tensorflows_test(shape, dtype, fmt, training):
    inputs = _forward_inputs(shape, dtype, fmt, 1.0, training)
    attrs = dict(epsilon=EPS, data_format=fmt, is_training=training)
    rng = np.random.default_rng(7)
    dy = np.random.random_sample(shape).astype(DTYPES[dtype])
    c = _scale_shape(shape, fmt)
    second = (rng.standard_normal(shape).astype(DTYPES[dtype]), rng.standard_normal(c).astype(F),
              rng.standard_normal(c).astype(F))  # fmt: skip
    ours = _our_gradients(inputs, attrs, dy, second)
    theirs = _tf_gradients(inputs, attrs, dy, second)
    for name, a, b in zip(("dy", "x", "scale"), ours, theirs, strict=True):
        # TF differentiates float32 ops (with their roundings), fbnops the closed form: a few ulps of T
        _close(a, b, dtype, f"second-order d{name}", factor=8.0)


EAGER_SHAPE_ERRORS = [
    ("FusedBatchNormV3", dict(x=(2, 2, 2, 2), scale=(3,), offset=(2,)), {},
     "scale must have the same number of elements"),
    ("FusedBatchNormV3", dict(x=(2, 2, 2, 2), scale=(2,), offset=(3,)), {},
     "offset must have the same number of elements"),
    ("FusedBatchNormV3", dict(x=(2, 2, 2, 2), scale=(2,), offset=(2,), mean=(0,), variance=(2,)),
     {"is_training": False}, "When is_training=false, mean must have the same number of elements"),
    ("FusedBatchNormV3", dict(x=(2, 2, 2, 2), scale=(2,), offset=(2,), mean=(2,), variance=(0,)),
     {"is_training": False}, "When is_training=false, variance must have the same number of elements"),
    ("FusedBatchNormV3", dict(x=(2, 2, 2, 2), scale=(2,), offset=(2,), mean=(0,), variance=(2,)),
     {"exponential_avg_factor": 0.5}, "When exponential_avg_factor != 1, mean must have the same number of elements"),
    ("FusedBatchNormV3", dict(x=(2, 2, 2, 2), scale=(2,), offset=(2,), mean=(2,), variance=(0,)),
     {"exponential_avg_factor": 0.5}, "When exponential_avg_factor != 1, variance must have the same number of"),
    ("FusedBatchNormGradV2", dict(y_backprop=(2, 2, 2, 3), x=(2, 2, 2, 2), scale=(2,), reserve_space_1=(2,),
     reserve_space_2=(2,)), {}, "x and y_backprop must have same shape,"),
    ("FusedBatchNormGradV2", dict(y_backprop=(2, 2, 2, 2), x=(2, 2, 2, 2), scale=(3,), reserve_space_1=(2,),
     reserve_space_2=(2,)), {}, "scale must have the same number of elements"),
    ("FusedBatchNormGradV2", dict(y_backprop=(2, 2, 2, 2), x=(2, 2, 2, 2), scale=(2,), reserve_space_1=(3,),
     reserve_space_2=(2,)), {}, "reserve_space_1 must have the same number of elements"),
    ("FusedBatchNormGradV2", dict(y_backprop=(2, 2, 2, 2), x=(2, 2, 2, 2), scale=(2,), reserve_space_1=(2,),
     reserve_space_2=(3,)), {}, "reserve_space_2 must have the same number of elements"),
]  # fmt: skip


@pytest.mark.parametrize("op,shapes,attrs,message", EAGER_SHAPE_ERRORS)
def test_eager_shape_errors_like_tensorflows_test(op, shapes, attrs, message):
    inputs = {k: np.ones(s, F) for k, s in shapes.items()}
    for name in get_spec(op).input_names:  # nn_impl passes empty mean/variance in training
        inputs.setdefault(name, np.zeros(0, F))
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        getattr(tf.raw_ops, op)(**inputs, **attrs)
    with pytest.raises(fbnops.errors.InvalidArgumentError, match=message):
        getattr(fbnops.raw_ops, op)(**inputs, **attrs)


# ---------------------------------------------------------------------------------------
# V1/V2 ops: eager, and as a GraphDef TensorFlow imports
# ---------------------------------------------------------------------------------------

V1V2_CASES = [
    (op, dtype, fmt, training)
    for op in ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormGrad", "FusedBatchNormGradV2")
    for dtype in (["float32"] if op in ("FusedBatchNorm", "FusedBatchNormGrad") else list(DTYPES))
    for fmt in ("NHWC", "NCHW")
    for training in (True, False)
    if training or fmt == "NHWC" or "Grad" not in op  # TF's CPU grad kernel refuses NCHW inference
]


def _v1v2_inputs(op, dtype, fmt, seed=3):
    rng = np.random.default_rng(seed)
    shape = (2, 3, 4, 5) if fmt == "NHWC" else (2, 5, 3, 4)
    c = 5
    out = {}
    for a in get_spec(op).inputs:
        dt = DTYPES[dtype] if a.type == "T" and dtype != "float32" else F
        out[a.name] = (rng.standard_normal(shape) if a.kind == "tensor" else rng.random(c) + 0.5).astype(dt)
    return out


@pytest.mark.parametrize("op,dtype,fmt,training", V1V2_CASES)
def test_v1_v2_ops_match_tensorflow(op, dtype, fmt, training):
    inputs = _v1v2_inputs(op, dtype, fmt)
    attrs = dict(epsilon=EPS, data_format=fmt, is_training=training)
    ours = getattr(fbnops.raw_ops, op)(**inputs, **attrs)
    theirs = getattr(tf.raw_ops, op)(**inputs, **attrs)
    for name, a, b in zip(ours._fields, ours, theirs, strict=True):
        if "Grad" not in op and not training and name.startswith("reserve"):
            continue  # uninitialized in TensorFlow
        _close(a, b.numpy(), dtype, name)


@pytest.mark.parametrize("op", ["FusedBatchNorm", "FusedBatchNormV2"])
@pytest.mark.parametrize("fmt,training", [("NHWC", True), ("NCHW", True), ("NHWC", False), ("NCHW", False)])
def test_tensorflow_runs_the_exported_v1_v2_graph(op, fmt, training):
    from google.protobuf import text_format

    inputs = _v1v2_inputs(op, "float32", fmt)
    scope = Scope(Graph())
    ph = {k: scope.placeholder(v.dtype, v.shape, name=k) for k, v in inputs.items()}
    fwd = scope.with_op_name("bn").add_op(op, list(ph.values()), {"data_format": fmt, "is_training": training})
    dy = scope.placeholder(F, inputs["x"].shape, name="dy")  # (ones would make dx cancel to rounding noise)
    grads = gradients(fwd.outputs[0], [ph["x"], ph["scale"], ph["offset"]], grad_ys=[dy])
    assert get_spec(op).gradient in {o.type for o in scope.graph.operations()}
    fetches = [fwd.outputs[0].name, fwd.outputs[1].name, *(g.name for g in grads)]
    dy_value = np.random.default_rng(9).standard_normal(inputs["x"].shape).astype(F)
    feeds = {**{f"{k}:0": v for k, v in inputs.items()}, "dy:0": dy_value}
    ours = Session(scope.graph).run(fetches, feeds)
    graph_def = text_format.Parse(scope.graph.to_pbtxt(), tf.compat.v1.GraphDef())
    with tf.Graph().as_default() as tg:
        tf.compat.v1.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session(graph=tg) as sess:
            theirs = sess.run(fetches, feeds)
    for name, a, b in zip(fetches, ours, theirs, strict=True):
        _close(a, b, "float32", name)


def test_tensorflow_cannot_import_the_internal_second_order_op():
    """Documented: a graph with FusedBatchNormGradGrad (fbnops-internal) is fbnops-only."""
    from google.protobuf import text_format

    scope = Scope(Graph())
    shape = (2, 2, 2, 3)
    ins = [scope.placeholder(F, shape if a.kind == "tensor" else (3,), name=a.name)
           for a in get_spec("FusedBatchNormGradV3").inputs]  # fmt: skip
    g = scope.add_op("FusedBatchNormGradV3", ins, {})
    gradients(g.outputs[0], ins[1])
    graph_def = text_format.Parse(scope.graph.to_pbtxt(), tf.compat.v1.GraphDef())
    with tf.Graph().as_default(), pytest.raises(Exception, match="FusedBatchNormGradGrad"):
        tf.compat.v1.import_graph_def(graph_def, name="")


# ---------------------------------------------------------------------------------------
# The raw_ops conversion table, against TensorFlow
# ---------------------------------------------------------------------------------------

TF_CLASSES = {
    "InvalidArgumentError": tf.errors.InvalidArgumentError,
    "TypeError": TypeError,
    "ValueError": ValueError,
    "OverflowError": OverflowError,
    "UnicodeDecodeError": UnicodeDecodeError,
}


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_conversion_row_matches_tensorflow(row: Row):
    kind, detail = row.tf_outcome
    inputs = call_inputs(row)
    if kind != "ok":
        with pytest.raises(TF_CLASSES[kind]) as info:
            getattr(tf.raw_ops, row.op)(**inputs, **row.attrs)
        assert detail in str(info.value)
        return
    theirs = getattr(tf.raw_ops, row.op)(**inputs, **row.attrs)
    assert theirs[0].dtype.name == detail
    if row.ours[0] == "ok":  # both run: the same numbers
        ours = getattr(fbnops.raw_ops, row.op)(**call_inputs(row), **row.attrs)
        for name, a, b in zip(ours._fields[:3], ours, theirs, strict=False):
            _close(a, b.numpy(), detail, name)
