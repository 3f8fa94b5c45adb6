"""fbnops.kernels.stages: partials -> finish -> apply composes to the fused op's bits."""

from __future__ import annotations

import numpy as np
import pytest
from data import make_kernel_bits as bits  # tests/data, on the path as `data`

import fbnops
from fbnops.errors import InvalidArgumentError
from fbnops.framework import threads as thread_setting
from fbnops.kernels import stages
from fbnops.testing import extras

EPS = bits.EPSILON


@pytest.fixture(params=["cython", "numba", "reference"])
def backend(request):
    extras.require_backend(request.param)
    with fbnops.backend(request.param):
        yield bits.backend_module(request.param)


@pytest.fixture(params=[1, 2], ids=["t1", "t2"])
def threads(request):
    with thread_setting.setting_kept():
        fbnops.set_num_threads(request.param)
        yield request.param


def _composed(mode, inp):
    x, dy = inp["x"], inp["dy"]
    n = x.shape[0] * x.shape[2]
    scale, offset, mean, variance = inp["scale"], inp["offset"], inp["mean"], inp["variance"]
    if mode.startswith("grad"):
        training = mode == "grad_training"
        sums = stages.sum_grad(x, dy, mean)
        sbp, obp, coeffs = stages.finish_grad(sums, n, scale, mean, variance, EPS, training)
        return stages.apply_grad(x, dy, coeffs), sbp, obp
    if mode == "forward_training":
        s = stages.sum_x(x)
        m = stages.finish_mean(s, n)
        m2, v, coeffs = stages.finish_forward(s, stages.sum_sq(x, m), n, scale, offset, EPS)
        np.testing.assert_array_equal(m.view(np.uint32), m2.view(np.uint32))
        return stages.apply_forward(x, coeffs), m2, v
    coeffs = stages.finish_inference(scale, offset, mean, variance, EPS)
    return stages.apply_forward(x, coeffs), mean, variance


@pytest.mark.parametrize("index", range(len(bits.CASES)), ids=[f"{f}-{'x'.join(map(str, s))}" for f, s in bits.CASES])
def test_composition_is_the_fused_op_bitwise(backend, threads, index):
    layout, shape = bits.CASES[index]
    for dtype in bits.DTYPES:
        inp = bits.case_inputs(index, shape, layout, dtype)
        for mode in bits.MODES:
            with np.errstate(all="ignore"):
                fused = bits.run_mode(backend, mode, inp)
                composed = _composed(mode, inp)
            assert bits.digest(composed) == bits.digest(fused), (dtype, mode)


@pytest.mark.parametrize("layout,shape", [("NHWC", (6, 5, 7, 24)), ("NCHW", (6, 37, 7, 7)), ("NCHW", (5, 3, 30, 31))])
def test_apply_on_a_shard_is_the_rows_of_the_full_call(backend, threads, layout, shape):
    rows = int(np.prod(shape[1:-1])) if layout == "NHWC" else 1  # outer rows per sample
    for dtype in bits.DTYPES:
        inp = bits.case_inputs(0, shape, layout, dtype)
        x, dy, mean = inp["x"], inp["dy"], inp["mean"]
        n = x.shape[0] * x.shape[2]
        _, _, gc = stages.finish_grad(stages.sum_grad(x, dy, mean), n, inp["scale"], mean, inp["variance"], EPS, True)
        s = stages.sum_x(x)
        _, _, fc = stages.finish_forward(
            s, stages.sum_sq(x, stages.finish_mean(s, n)), n, inp["scale"], inp["offset"], EPS
        )
        full_dx, full_y = stages.apply_grad(x, dy, gc), stages.apply_forward(x, fc)
        for k0, k1 in ((0, 1), (1, 4), (4, shape[0]), (2, 2)):
            sl = slice(k0 * rows, k1 * rows)
            np.testing.assert_array_equal(
                stages.apply_grad(x[sl], dy[sl], gc).view(np.uint8), full_dx[sl].view(np.uint8)
            )
            np.testing.assert_array_equal(stages.apply_forward(x[sl], fc).view(np.uint8), full_y[sl].view(np.uint8))


@pytest.mark.parametrize("layout,shape", [("NHWC", (6, 5, 7, 24)), ("NHWC", (7, 1, 1, 3)), ("NCHW", (6, 37, 7, 7))])
def test_per_sample_partials_depend_on_the_sample_only(backend, threads, layout, shape):
    rows = int(np.prod(shape[1:-1])) if layout == "NHWC" else 1
    inp = bits.case_inputs(1, shape, layout, "float32")
    x, dy, mean = inp["x"], inp["dy"], inp["mean"]
    per = {
        "sum_x": stages.sum_x(x, rows_per_sample=rows),
        "sum_sq": stages.sum_sq(x, mean, rows_per_sample=rows),
        "sum_grad": stages.sum_grad(x, dy, mean, rows_per_sample=rows),
    }
    assert per["sum_x"].shape == (shape[0], x.shape[1]) and per["sum_grad"].shape == (shape[0], 2, x.shape[1])
    k0, k1 = 2, 5
    sl = slice(k0 * rows, k1 * rows)
    shard = {
        "sum_x": stages.sum_x(x[sl], rows_per_sample=rows),
        "sum_sq": stages.sum_sq(x[sl], mean, rows_per_sample=rows),
        "sum_grad": stages.sum_grad(x[sl], dy[sl], mean, rows_per_sample=rows),
    }
    for name, whole in per.items():
        np.testing.assert_array_equal(shard[name], whole[k0:k1], err_msg=name)
    # the per-sample sums add up to the totals (float64 oracle)
    x64, dy64 = x.astype(np.float64), dy.astype(np.float64)
    xc = x64 - mean.astype(np.float64)[None, :, None]
    np.testing.assert_allclose(per["sum_x"].sum(0), x64.sum((0, 2)), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(per["sum_sq"].sum(0), (xc**2).sum((0, 2)), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(per["sum_grad"].sum(0)[1], (dy64 * xc).sum((0, 2)), rtol=1e-5, atol=1e-5)


def test_empty_shards_give_zero_sums_and_empty_outputs(backend):
    x = np.zeros((0, 4, 3), np.float32)
    v = np.ones(4, np.float32)
    np.testing.assert_array_equal(stages.sum_x(x), np.zeros(4))
    assert stages.sum_grad(x, x, v).shape == (2, 4)
    assert stages.sum_sq(x, v, rows_per_sample=2).shape == (0, 4)
    coeffs = stages.finish_inference(v, v, v, v, EPS)
    assert stages.apply_forward(x, coeffs).shape == x.shape


def test_bad_arguments_are_typed_errors_naming_the_argument(backend):
    x = np.ones((4, 3, 5), np.float32)
    v = np.ones(3, np.float32)
    cases = [
        (lambda: stages.sum_x(x.astype(np.float64)), "x"),
        (lambda: stages.sum_x(x, rows_per_sample=3), "rows_per_sample"),
        (lambda: stages.sum_x(x, rows_per_sample=0), "rows_per_sample"),
        (lambda: stages.sum_sq(x, v[:2]), "mean"),
        (lambda: stages.sum_grad(x, x[:2], v), "y_backprop"),
        (lambda: stages.finish_grad(np.zeros(3), 20, v, v, v, EPS, True), "sums"),
        (lambda: stages.finish_forward(np.zeros(3), np.zeros(3), -1, v, v, EPS), "count"),
        (lambda: stages.finish_inference(v, v, v, v, 1e40), "epsilon"),
        (lambda: stages.apply_grad(x, x, (v, v, v, v, 0, "compiled")), "coeffs"),
        (lambda: stages.apply_forward(x, stages.finish_grad(np.zeros((2, 3)), 20, v, v, v, EPS, True)[2]), "coeffs"),
    ]
    for call, name in cases:
        with pytest.raises(InvalidArgumentError, match=name):
            call()


def test_every_backend_registers_its_stages_with_the_registry():
    from fbnops.framework import registry

    for name in fbnops.available_backends():
        for stage in registry.STAGES:
            assert callable(registry.get_stage(stage, name)), (stage, name)


def test_one_sign_convention_coefficients_apply_on_any_backend():
    """Every backend's finish gives A, B, K of one formula (B = -r^2 s1/n, K = -s0/n), so the
    reference's coefficients applied by a compiled backend give that backend's x_backprop."""
    inp = bits.case_inputs(0, (6, 5, 7), "NCHW", "float32")
    x, dy, scale, mean, variance = (inp[k] for k in ("x", "dy", "scale", "mean", "variance"))
    with fbnops.backend("reference"):
        sums = stages.sum_grad(x, dy, mean)
        ref_coeffs = stages.finish_grad(sums, 42, scale, mean, variance, EPS, True)[2]
    for name in fbnops.available_backends():
        with fbnops.backend(name):
            own = stages.finish_grad(sums, 42, scale, mean, variance, EPS, True)[2]
            for field in ("a", "b", "k"):
                np.testing.assert_allclose(getattr(ref_coeffs, field), getattr(own, field), rtol=1e-6)
            dx_ref, dx_own = stages.apply_grad(x, dy, ref_coeffs), stages.apply_grad(x, dy, own)
            np.testing.assert_allclose(dx_ref, dx_own, rtol=1e-5, atol=1e-6)
