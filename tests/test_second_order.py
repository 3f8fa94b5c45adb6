"""Second-order gradients: the registered gradient of FusedBatchNormGrad{,V2,V3}.

* against TensorFlow 2.21's ``_FusedBatchNormGradGrad`` (golden vectors in
  tests/data/tf_v1_v2_gradgrad.npz: every grad op, dtype, layout and mode TF runs);
* against finite differences of the float64 first-order gradient;
* ``gradients(gradients(...))`` in graph mode, through FusedBatchNormV3's gradient
  (with its Transposes in channels-first inference), with and without ``grad_ys``;
* the fbnops-internal op in a GraphDef.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fbnops import Graph, Scope, Session, gradients
from fbnops.kernels import reference
from fbnops.ops.canonical import NdView
from fbnops.ops.execute import execute
from fbnops.ops.fused_batch_norm_grad_grad import grad_grad_view
from fbnops.specs import get_spec
from fbnops.testing import DTYPES, STAT_TOL, Golden, rel_err, tolerance

GOLDEN = Golden(Path(__file__).parent / "data" / "tf_v1_v2_gradgrad.npz")
GRADGRAD_CASES = [i for i, m in enumerate(GOLDEN.meta) if m["kind"] == "gradgrad"]
F = np.float32
UPSTREAM = ("grad_x_backprop", "grad_scale_backprop", "grad_offset_backprop")
RESULTS = ("grad_y_backprop", "grad_x", "grad_scale")


def _grad_graph(op: str, feeds: dict, attrs: dict):
    """A graph: placeholders for the grad op's inputs, the op, and the gradient of its three outputs."""
    scope = Scope(Graph())
    spec = get_spec(op)
    ins = {a.name: scope.placeholder(feeds[a.name].dtype, feeds[a.name].shape, name=a.name) for a in spec.inputs}
    grad_op = scope.add_op(op, list(ins.values()), attrs)
    ups = [scope.placeholder(feeds[k].dtype, feeds[k].shape, name=k) for k in UPSTREAM]
    wrt = [ins["y_backprop"], ins["x"], ins["scale"]]
    result = gradients(list(grad_op.outputs[:3]), wrt, grad_ys=ups)
    placeholders = {**ins, **dict(zip(UPSTREAM, ups, strict=True))}
    return scope, {placeholders[k]: v for k, v in feeds.items() if k in placeholders}, result


@pytest.mark.parametrize("i", GRADGRAD_CASES)
def test_registered_gradient_matches_tensorflow(i, backend):
    case = GOLDEN.meta[i]
    feeds = {k: GOLDEN.get(i, k) for k in (*get_spec(case["op"]).input_names, *UPSTREAM) if GOLDEN.has(i, k)}
    if case["op"] == "FusedBatchNormGradV3":
        feeds["reserve_space_3"] = np.zeros((), F)
    scope, feed_dict, result = _grad_graph(case["op"], feeds, case["attrs"])
    assert "FusedBatchNormGradGrad" in {o.type for o in scope.graph.operations()}
    got = Session(scope.graph).run(result, feed_dict)
    for name, g in zip(RESULTS, got, strict=True):
        want = GOLDEN.get(i, name)
        assert g.dtype == want.dtype and g.shape == want.shape, name
        tol = STAT_TOL if name == "grad_scale" else tolerance(want.dtype)
        assert rel_err(g, want) <= 2 * tol, f"{case['op']} {case['dtype']} {case['attrs']} {name}"


def _first_order_loss(dy, x, scale, pm, pv, up, *, eps, training, view):
    """sum(A * x_backprop) + B . scale_backprop + D . offset_backprop, in float64 (the op TF differentiates)."""
    xv, gv = view.to_view(x), view.to_view(dy)
    if training:  # TF's second-order gradient recomputes the batch statistics from x
        pm = xv.mean((0, 2))
        pv = ((xv - pm[None, :, None]) ** 2).mean((0, 2))
    dx, ds, do = reference.batch_norm_grad(xv, gv, scale, pm, pv, epsilon=eps, is_training=training, compute=np.float64)
    return (view.to_view(up[0]) * dx).sum() + up[1] @ ds + up[2] @ do


def _numeric(f, args: list, which: int, h: float = 1e-6) -> np.ndarray:
    out = np.zeros_like(args[which])
    for idx in np.ndindex(args[which].shape):
        plus, minus = [a.copy() for a in args], [a.copy() for a in args]
        plus[which][idx] += h
        minus[which][idx] -= h
        out[idx] = (f(*plus) - f(*minus)) / (2 * h)
    return out


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape,fmt", [((2, 3, 2, 3), "NHWC"), ((2, 3, 2, 2), "NCHW"), ((1, 2, 2, 1, 2), "NCDHW")])
def test_closed_form_matches_finite_differences(shape, fmt, training):
    rng = np.random.default_rng(11)
    view = NdView.for_data_format(shape, fmt)
    c = view.channels
    dy, x, a = (rng.standard_normal(shape) for _ in range(3))
    scale, pm, b, d = rng.standard_normal(c), rng.standard_normal(c), rng.standard_normal(c), rng.standard_normal(c)
    pv = rng.random(c) + 0.5
    eps = 1e-3

    def loss(dy_, x_, scale_):
        return _first_order_loss(dy_, x_, scale_, pm, pv, (a, b, d), eps=eps, training=training, view=view)

    got = grad_grad_view(
        view.to_view(dy), view.to_view(x), scale, pm, pv, view.to_view(a), b, d,
        epsilon=eps, is_training=training, compute=np.float64,
    )  # fmt: skip
    args = [dy, x, scale]
    for which, g in enumerate((view.from_view(got.grad_y_backprop), view.from_view(got.grad_x), got.grad_scale)):
        want = _numeric(loss, args, which)
        assert rel_err(g, want) < 1e-7, RESULTS[which]


def _chain(fmt: str, training: bool, dtype="float32", grad_ys=True):
    """x -> FusedBatchNormV3 -> gradients -> gradients: the second derivative through the first gradient."""
    shape = (2, 3, 3, 4) if fmt == "NHWC" else (2, 4, 3, 3)
    c = 4
    rng = np.random.default_rng(21)
    scope = Scope(Graph())
    dt = DTYPES[dtype]
    x = scope.placeholder(dt, shape, name="x")
    dy = scope.placeholder(dt, shape, name="dy")
    scale = scope.placeholder(F, (c,), name="scale")
    stats = [scope.constant((rng.random(c) + 0.5).astype(F), name=n) for n in ("offset", "mean", "variance")]
    fwd = scope.add_op("FusedBatchNormV3", [x, scale, *stats], {"data_format": fmt, "is_training": training})
    dx, dscale = gradients(fwd.outputs[0], [x, scale], grad_ys=[dy])
    a = scope.placeholder(dt, shape, name="A")
    b = scope.placeholder(F, (c,), name="B")
    second = gradients([dx, dscale], [x, scale, dy], grad_ys=[a, b] if grad_ys else None)
    feeds = {
        x: rng.standard_normal(shape).astype(dt),
        dy: rng.standard_normal(shape).astype(dt),
        scale: (rng.random(c) + 0.5).astype(F),
        a: rng.standard_normal(shape).astype(dt),
        b: rng.standard_normal(c).astype(F),
    }
    return scope, feeds, (x, scale, dy, a, b), stats, second


@pytest.mark.parametrize("fmt,training", [("NHWC", True), ("NCHW", True), ("NHWC", False), ("NCHW", False)])
def test_gradients_of_gradients_in_graph_mode(fmt, training):
    scope, feeds, (x, scale, dy, a, b), stats, second = _chain(fmt, training)
    got = Session(scope.graph).run(second, feeds)
    view = NdView.for_data_format(feeds[x].shape, fmt)
    pm, pv = (np.asarray(s.op.attrs["value"], np.float64) for s in stats[1:])
    zero = np.zeros(view.channels)

    def loss(x_, scale_, dy_):
        f64 = [np.asarray(v, np.float64) for v in (dy_, x_, scale_)]
        up = (feeds[a].astype(np.float64), feeds[b].astype(np.float64), zero)
        return _first_order_loss(*f64, pm, pv, up, eps=1e-4, training=training, view=view)

    args = [feeds[t].astype(np.float64) for t in (x, scale, dy)]
    for which, g in enumerate(got):
        assert rel_err(g, _numeric(loss, args, which, h=1e-5)) < 1e-4, ("x", "scale", "dy")[which]


def test_default_grad_ys_is_ones():
    scope, feeds, (x, scale, dy, a, b), _, second = _chain("NHWC", True, grad_ys=False)
    got = Session(scope.graph).run(second, {**feeds, a: np.ones_like(feeds[a]), b: np.ones_like(feeds[b])})
    scope2, feeds2, (_, _, _, a2, b2), _, second2 = _chain("NHWC", True)
    want = Session(scope2.graph).run(second2, {**feeds2, a2: np.ones_like(feeds2[a2]), b2: np.ones_like(feeds2[b2])})
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_chain_keeps_the_dtypes(dtype):
    scope, feeds, _, _, second = _chain("NCHW", True, dtype=dtype)
    got = Session(scope.graph).run(second, feeds)
    assert [g.dtype for g in got] == [np.dtype(DTYPES[dtype]), np.dtype(F), np.dtype(DTYPES[dtype])]
    scope32, feeds32, _, _, second32 = _chain("NCHW", True)
    want = Session(scope32.graph).run(second32, {k.name: v.astype(F) for k, v in feeds.items()})
    for g, w in zip(got, want, strict=True):  # float32 math inside: only the inputs' and outputs' roundings differ
        assert rel_err(g, w) < 50 * tolerance(dtype)


def test_upstream_gradients_that_are_none_count_as_zero():
    """Only scale_backprop reaches the loss: ZerosLike fills x_backprop's and offset_backprop's."""
    rng = np.random.default_rng(5)
    feeds = {k: v for k, v in GOLDEN_FEEDS(rng).items()}
    scope = Scope(Graph())
    ins = {k: scope.placeholder(v.dtype, v.shape, name=k) for k, v in feeds.items()}
    g = scope.add_op("FusedBatchNormGradV3", list(ins.values()), {})
    (ddy,) = gradients(g.outputs[1], [ins["y_backprop"]])
    assert "ZerosLike" in {o.type for o in scope.graph.operations()}
    got = Session(scope.graph).run(ddy, {ins[k]: v for k, v in feeds.items()})
    c = feeds["scale"].shape[0]
    zeros = np.zeros_like(feeds["x"])
    want = execute(
        "FusedBatchNormGradGrad",
        {**{k: feeds[k] for k in ("y_backprop", "x", "scale", "reserve_space_1", "reserve_space_2")},
         "grad_x_backprop": zeros, "grad_scale_backprop": np.ones(c, F), "grad_offset_backprop": np.zeros(c, F)},
        {"epsilon": 1e-4, "data_format": "NHWC", "is_training": True},
    )[0]  # fmt: skip
    np.testing.assert_array_equal(got, want)


def GOLDEN_FEEDS(rng) -> dict:  # noqa: N802
    shape, c = (2, 2, 3, 3), 3
    return {
        "y_backprop": rng.standard_normal(shape).astype(F),
        "x": rng.standard_normal(shape).astype(F),
        "scale": (rng.random(c) + 0.5).astype(F),
        "reserve_space_1": np.zeros(c, F),
        "reserve_space_2": np.ones(c, F),
        "reserve_space_3": np.zeros((), F),
    }


def test_graphdef_round_trip_of_a_second_order_graph():
    scope, feeds, (x, scale, dy, a, b), _, second = _chain("NCHW", False)
    text = scope.graph.to_pbtxt()
    assert 'op: "FusedBatchNormGradGrad"' in text and 'op: "Transpose"' in text
    back = Graph.from_pbtxt(text)
    names = [t.name for t in second]
    got = Session(back).run(names, {t.name: v for t, v in feeds.items()})
    want = Session(scope.graph).run(second, feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_internal_op_is_not_a_public_op():
    import fbnops

    assert not hasattr(fbnops.raw_ops, "FusedBatchNormGradGrad")
    assert "FusedBatchNormGradGrad" not in [s.name for s in fbnops.specs.all_specs()]
