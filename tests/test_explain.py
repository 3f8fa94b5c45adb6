"""``fbnops explain``: every intermediate, its numbers against an independent float64
computation and against the kernels, on every dtype, layout and mode."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

import fbnops
from fbnops.framework.layouts import channel_axis
from fbnops.kernels import reference
from fbnops.tools.explain import example_inputs, explain

LAYOUTS = [("NHWC", (2, 2, 2, 3)), ("NCHW", (2, 3, 2, 2)), ("NDHWC", (1, 2, 2, 2, 3)), ("NCDHW", (2, 3, 1, 2, 2))]
FORWARD = ["n", "mean", "variance", "rstd", "x_hat", "y"]
GRADIENT = ["sum_dy", "sum_dy_xc", "offset_backprop", "scale_backprop", "dx_direct", "x_backprop"]


def _explained(fmt, shape, dtype=np.float32, training=True):
    inp = example_inputs(shape, fmt, seed=3, dtype=dtype)
    e = explain(inp["x"], inp["dy"], inp["scale"], inp["offset"], mean=inp["mean"], variance=inp["variance"],
                data_format=fmt, is_training=training)  # fmt: skip
    return e, inp


@pytest.mark.parametrize("training", [True, False], ids=["training", "frozen"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16], ids=["float", "half", "bfloat16"])
@pytest.mark.parametrize("fmt,shape", LAYOUTS, ids=[f for f, _ in LAYOUTS])
def test_every_step_is_checked_against_the_kernels(fmt, shape, dtype, training):
    e, _ = _explained(fmt, shape, dtype, training)
    names = [s.name for s in e.forward + e.gradient]
    assert [n for n in FORWARD + GRADIENT if n not in names] == []
    if training:
        assert {"dx_via_mean", "dx_via_variance", "batch_variance"} <= set(names)
    checked = {c.output for c in e.checks}
    assert {"y", "reserve_space_1", "reserve_space_2", "x_backprop", "scale_backprop", "offset_backprop"} <= checked
    assert e.ok, [c for c in e.checks if not c.ok]


@pytest.mark.parametrize("fmt,shape", LAYOUTS[:2], ids=[f for f, _ in LAYOUTS[:2]])
def test_numbers_match_the_float64_reference_kernel(fmt, shape):
    e, inp = _explained(fmt, shape)
    c = inp["scale"].shape[0]
    axis = channel_axis(fmt, inp["x"].ndim)
    moved = np.moveaxis(inp["x"], axis, 1).astype(np.float64)
    dmoved = np.moveaxis(inp["dy"], axis, 1).astype(np.float64)
    x3 = moved.reshape(moved.shape[0], c, -1)  # (outer, C, inner) as the reference expects
    dy3 = dmoved.reshape(x3.shape)
    _, mean, var = reference.batch_norm(x3, inp["scale"], inp["offset"], None, None, epsilon=1e-3, is_training=True,
                                        compute=np.float64)  # fmt: skip
    dx, dscale, doffset = reference.batch_norm_grad(x3, dy3, inp["scale"], mean, var, epsilon=1e-3,
                                                    is_training=True, compute=np.float64)  # fmt: skip
    np.testing.assert_allclose(e.step("mean").value, mean, rtol=1e-12)
    np.testing.assert_allclose(e.step("variance").value, var, rtol=1e-12)
    np.testing.assert_allclose(e.step("scale_backprop").value, dscale, rtol=1e-12)
    np.testing.assert_allclose(e.step("offset_backprop").value, doffset, rtol=1e-12, atol=1e-12)
    ours = e.step("x_backprop").value  # (C, n): channel c's elements in memory order
    np.testing.assert_allclose(ours, np.moveaxis(dx, 1, 0).reshape(c, -1), rtol=1e-10, atol=1e-12)


def test_dx_is_the_sum_of_its_three_terms_and_x_hat_is_normalized():
    e, _ = _explained("NHWC", (2, 2, 2, 3))
    terms = e.step("dx_direct").value + e.step("dx_via_mean").value + e.step("dx_via_variance").value
    np.testing.assert_allclose(e.step("x_backprop").value, terms, rtol=1e-14)
    xhat = e.step("x_hat").value
    np.testing.assert_allclose(xhat.mean(axis=1), 0, atol=1e-12)
    np.testing.assert_allclose(xhat.var(axis=1), e.step("variance").value / (e.step("variance").value + 1e-3))
    n = e.step("n").value[0]
    np.testing.assert_allclose(e.step("batch_variance").value, e.step("variance").value * n / (n - 1))


def test_frozen_gradient_is_only_the_direct_term():
    e, inp = _explained("NCHW", (2, 3, 2, 2), training=False)
    np.testing.assert_array_equal(e.step("x_backprop").value, e.step("dx_direct").value)
    np.testing.assert_array_equal(e.step("mean").value, inp["mean"].astype(np.float64))


def test_a_wrong_kernel_is_caught(monkeypatch):
    real = fbnops.raw_ops.FusedBatchNormGradV3

    def off_by_a_bit(**kw):
        out = real(**kw)
        return out._replace(scale_backprop=out.scale_backprop * np.float32(1.001))

    monkeypatch.setattr(fbnops.raw_ops, "FusedBatchNormGradV3", off_by_a_bit)
    e, _ = _explained("NHWC", (2, 2, 2, 3))
    assert not e.ok and [c.output for c in e.checks if not c.ok] == ["scale_backprop"]


def test_a_variance_below_minus_epsilon_is_nan_in_both_and_agrees():
    """epsilon = -5 puts variance + epsilon below 0 in two of the three channels (variances 10.3,
    3.4, 0.8): their rstd, y and dx are NaN in the float64 math and in the kernels alike (as in
    TensorFlow), the third channel's numbers agree as usual, and every check holds; no warning."""
    inp = example_inputs((2, 2, 2, 3), "NHWC", seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        e = explain(inp["x"], inp["dy"], inp["scale"], inp["offset"], epsilon=-5.0, data_format="NHWC")
    below = e.step("variance").value - 5.0 < 0
    assert below.tolist() == [False, True, True]
    assert (np.isnan(e.step("rstd").value) == below).all()
    assert (np.isnan(e.step("y").value).all(axis=1) == below).all()
    assert e.ok, [c for c in e.checks if not c.ok]


def test_a_nan_against_a_number_fails_the_check(monkeypatch):
    """A NaN where the math has a number is an infinite difference, not a NaN that compares false."""
    real = fbnops.raw_ops.FusedBatchNormV3

    def one_nan(**kw):
        out = real(**kw)
        y = out.y.copy()
        y.flat[0] = np.nan
        return out._replace(y=y)

    monkeypatch.setattr(fbnops.raw_ops, "FusedBatchNormV3", one_nan)
    e, _ = _explained("NHWC", (2, 2, 2, 3))
    failed = [c for c in e.checks if not c.ok]
    assert [c.output for c in failed] == ["y"] and failed[0].max_abs_diff == np.inf


def test_a_non_finite_epsilon_is_refused_before_any_math():
    """The op refuses it with TensorFlow's message; the float64 math never runs (no NumPy warning)."""
    inp = example_inputs((2, 2, 2, 3), "NHWC", seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(fbnops.errors.InvalidArgumentError, match="epsilon"):
            explain(inp["x"], inp["dy"], inp["scale"], inp["offset"], epsilon=-np.inf, data_format="NHWC")


def test_renderings_carry_every_step_formula_and_number():
    e, _ = _explained("NHWC", (2, 2, 2, 3))
    md, text, d = e.to_markdown(), e.to_text(), e.to_dict()
    for s in e.forward + e.gradient:
        assert f"**{s.name}**" in md and s.latex in md and s.text in text
    assert f"{e.step('mean').value[0]:+.5f}" in md and f"{e.step('mean').value[0]:+.5f}" in text
    assert md.count("$$") % 2 == 0 and "FAILED" not in md
    assert d["ok"] and [s["name"] for s in d["forward"]][:2] == ["n", "mean"]
