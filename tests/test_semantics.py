"""TensorFlow CPU semantics beyond the golden cases (tf_semantics.md sections 2-3, 7.2)."""

from __future__ import annotations

import numpy as np
import pytest

import fbnops
from fbnops.ops.fused_batch_norm_v3 import running_statistics
from fbnops.testing import extras, grad_f64, grad_inputs, rel_err, run_grad

raw = fbnops.raw_ops
F = np.float32


def test_forward_verified_example(backend):
    """tf_semantics.md 2.4: NHWC [1,1,6,2], gamma 4, beta 2, eps 0.001."""
    x = np.repeat(np.array([5, 7, 9, 11, 13, 15], F), 2).reshape(1, 1, 6, 2)
    out = raw.FusedBatchNormV3(
        x=x,
        scale=np.full(2, 4, F),
        offset=np.full(2, 2, F),
        mean=np.zeros(0, F),
        variance=np.zeros(0, F),
        epsilon=0.001,
    )
    want_y = [-3.855149, -1.513089, 0.82897, 3.17103, 5.513089, 7.855149]
    np.testing.assert_allclose(out.y[0, 0, :, 0], want_y, rtol=1e-6)
    np.testing.assert_allclose(out.batch_mean, [10, 10], rtol=1e-7)
    np.testing.assert_allclose(out.batch_variance, [14.000001, 14.000001], rtol=1e-7)  # Bessel
    np.testing.assert_allclose(out.reserve_space_1, [10, 10], rtol=1e-7)
    np.testing.assert_allclose(out.reserve_space_2, [11.666667, 11.666667], rtol=1e-7)  # biased
    assert out.reserve_space_3.shape == () and out.reserve_space_3.dtype == F and out.reserve_space_3 == 0

    blended = raw.FusedBatchNormV3(
        x=x,
        scale=np.full(2, 4, F),
        offset=np.full(2, 2, F),
        mean=np.full(2, 6, F),
        variance=np.full(2, 16, F),
        epsilon=0.001,
        exponential_avg_factor=0.5,
    )
    np.testing.assert_allclose(blended.batch_mean, [8, 8], rtol=1e-7)
    np.testing.assert_allclose(blended.batch_variance, [15, 15], rtol=1e-6)


def test_gradient_verified_example(backend):
    """tf_semantics.md 3.5: both modes on the same data."""
    dy = np.repeat(np.array([2, 9, -4, 5, 8, 7], F), 2).reshape(1, 1, 6, 2)
    x = np.repeat(np.array([1, 7, 4, -3, -11, 13], F), 2).reshape(1, 1, 6, 2)
    args = dict(
        y_backprop=dy,
        x=x,
        scale=np.full(2, 4, F),
        reserve_space_1=np.full(2, 1.833, F),
        reserve_space_2=np.full(2, 57.472, F),
        reserve_space_3=np.zeros((), F),
        epsilon=0.001,
    )
    train = raw.FusedBatchNormGradV3(**args)
    np.testing.assert_allclose(
        train.x_backprop[0, 0, :, 0],
        [-1.334991, 2.47308, -4.443424, 0.171445, 1.601432, 1.532496],
        rtol=2e-6,
        atol=1e-6,
    )
    np.testing.assert_allclose(train.scale_backprop, [-1.647653] * 2, rtol=1e-6)
    np.testing.assert_allclose(train.offset_backprop, [27, 27], rtol=1e-7)
    assert train.reserve_space_4.shape == (0,) and train.reserve_space_5.shape == (0,)
    frozen = raw.FusedBatchNormGradV3(**args, is_training=False)
    np.testing.assert_allclose(frozen.x_backprop[0, 0, :2, 0], [1.055257, 4.748655], rtol=1e-6)
    np.testing.assert_allclose(frozen.scale_backprop, [-1.647652] * 2, rtol=1e-6)


def test_gradient_trusts_reserve_spaces(backend):
    """The kernel uses the supplied rs1/rs2 (nothing is recomputed from x)."""
    inputs = grad_inputs((3, 4, 5, 4), seed=3)
    inputs["reserve_space_1"] = np.array([0.3, -1, 2, 0], F)
    inputs["reserve_space_2"] = np.array([0.5, 2, 1, 3], F)
    out = run_grad(inputs)
    dx, ds, do = grad_f64(inputs, 1e-4, "NHWC", True)
    assert rel_err(out.x_backprop, dx) < 1e-6
    assert rel_err(out.scale_backprop, ds) < 1e-6


def test_reserve_space_3_any_shape(backend):
    inputs = grad_inputs((2, 3, 3, 2))
    ref = run_grad(inputs)
    for rs3 in (np.zeros((7, 7), F), np.zeros((0,), F), np.zeros((), F), np.zeros((5,), F)):
        out = run_grad({**inputs, "reserve_space_3": rs3})
        np.testing.assert_array_equal(out.x_backprop, ref.x_backprop)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW", "NDHWC", "NCDHW"])
def test_empty_inputs(backend, data_format):
    shape = {"NHWC": (0, 3, 3, 4), "NCHW": (0, 4, 3, 3), "NDHWC": (2, 0, 3, 3, 4), "NCDHW": (2, 4, 3, 0, 3)}
    inputs = grad_inputs(shape[data_format], data_format)
    out = run_grad(inputs, data_format=data_format)
    assert out.x_backprop.shape == shape[data_format]
    np.testing.assert_array_equal(out.scale_backprop, np.zeros(4, F))
    np.testing.assert_array_equal(out.offset_backprop, np.zeros(4, F))
    for factor in (1.0, 0.5):
        fwd = raw.FusedBatchNormV3(
            x=inputs["x"],
            scale=inputs["scale"],
            offset=inputs["scale"],
            mean=np.zeros(4, F),
            variance=np.ones(4, F),
            exponential_avg_factor=factor,
            data_format=data_format,
        )
        assert fwd.y.shape == shape[data_format]
        assert np.isnan(fwd.batch_mean).all() and np.isnan(fwd.batch_variance).all()


def test_inference_forward_reports_statistics_used(backend):
    """Better than TF (uninitialized memory): rs1/rs2 carry the statistics used."""
    x = np.random.default_rng(0).standard_normal((2, 3, 3, 4)).astype(F)
    mean, var = np.arange(4, dtype=F), np.arange(1, 5, dtype=F)
    out = raw.FusedBatchNormV3(
        x=x,
        scale=np.ones(4, F),
        offset=np.zeros(4, F),
        mean=mean,
        variance=var,
        is_training=False,
        exponential_avg_factor=0.3,  # ignored in inference, as in TF
    )
    for got in (out.batch_mean, out.reserve_space_1):
        np.testing.assert_array_equal(got, mean)
    for got in (out.batch_variance, out.reserve_space_2):
        np.testing.assert_array_equal(got, var)
    np.testing.assert_allclose(out.y, (x - mean) / np.sqrt(var + 1e-4), rtol=1e-6, atol=1e-6)


def test_training_ignores_mean_variance_of_any_length(backend):
    x = np.random.default_rng(1).standard_normal((2, 2, 2, 2)).astype(F)
    a = raw.FusedBatchNormV3(
        x=x, scale=np.ones(2, F), offset=np.zeros(2, F), mean=np.zeros(3, F), variance=np.zeros(0, F)
    )
    b = raw.FusedBatchNormV3(
        x=x, scale=np.ones(2, F), offset=np.zeros(2, F), mean=np.ones(2, F), variance=np.ones(2, F)
    )
    np.testing.assert_array_equal(a.y, b.y)


def test_single_element_per_channel(backend):
    """n == 1: Bessel factor 1, variance 0, y = offset."""
    x = np.array([[[[3.0, -2.0]]]], F)
    out = raw.FusedBatchNormV3(
        x=x, scale=np.ones(2, F), offset=np.array([0.5, 7], F), mean=np.zeros(0, F), variance=np.zeros(0, F)
    )
    np.testing.assert_array_equal(out.batch_variance, [0, 0])
    np.testing.assert_allclose(out.y.ravel(), [0.5, 7])


@pytest.mark.parametrize("data_format", ["NCHW", "NCDHW"])
def test_frozen_gradient_channels_first(backend, data_format):
    """TF refuses is_training=False with channels-first; fbnops computes what it means."""
    shape = (2, 3, 4, 5) if data_format == "NCHW" else (2, 3, 2, 2, 3)
    inputs = grad_inputs(shape, data_format, seed=7)
    out = run_grad(inputs, data_format=data_format, is_training=False)
    perm = (0, 2, 3, 1) if data_format == "NCHW" else (0, 2, 3, 4, 1)
    last = {**inputs, "x": inputs["x"].transpose(perm), "y_backprop": inputs["y_backprop"].transpose(perm)}
    ref = run_grad(last, data_format="NHWC", is_training=False)
    np.testing.assert_allclose(out.x_backprop.transpose(perm), ref.x_backprop, rtol=1e-6)
    np.testing.assert_allclose(out.scale_backprop, ref.scale_backprop, rtol=1e-5)


def test_five_d_with_two_d_format_is_channels_last(backend):
    """Eager TF accepts 5-D input with data_format NHWC (channel = last dim)."""
    inputs = grad_inputs((2, 2, 3, 3, 4), "NDHWC")
    a = run_grad(inputs, data_format="NHWC")
    b = run_grad(inputs, data_format="NDHWC")
    np.testing.assert_array_equal(a.x_backprop, b.x_backprop)


def test_non_contiguous_and_foreign_inputs(backend):
    base = grad_inputs((4, 6, 5, 8), seed=2)
    ref = run_grad(base)
    strided = {k: v for k, v in base.items()}
    big = np.zeros((4, 12, 5, 8), F)
    big[:, ::2] = base["x"]
    strided["x"] = big[:, ::2]  # non-contiguous
    strided["y_backprop"] = np.ascontiguousarray(base["y_backprop"][::-1])[::-1]  # negative strides
    strided["scale"] = np.repeat(base["scale"], 2)[::2]
    strided["reserve_space_1"] = base["reserve_space_1"].astype(">f4")  # big-endian

    class ArrayLike:
        def __init__(self, a):
            self.a = a

        def __array__(self, dtype=None, copy=None):
            return self.a

    strided["reserve_space_2"] = ArrayLike(base["reserve_space_2"])
    out = run_grad(strided)
    np.testing.assert_array_equal(out.x_backprop, ref.x_backprop)
    np.testing.assert_array_equal(out.scale_backprop, ref.scale_backprop)


def test_dlpack_input(backend):
    torch = extras.require("torch", "oracle")
    inputs = grad_inputs((2, 3, 3, 4))
    ref = run_grad(inputs)
    out = run_grad({**inputs, "x": torch.from_numpy(inputs["x"].copy())})
    np.testing.assert_array_equal(out.x_backprop, ref.x_backprop)


def test_output_types_and_namedtuple(backend):
    out = run_grad(grad_inputs((2, 2, 2, 3), dtype="bfloat16"))
    assert out._fields == ("x_backprop", "scale_backprop", "offset_backprop", "reserve_space_4", "reserve_space_5")
    assert out.x_backprop.dtype == np.dtype("bfloat16")
    assert out.scale_backprop.dtype == np.float32


@pytest.mark.parametrize("factor", [1.0, 0.3])
def test_running_statistics_is_the_forward_arithmetic(backend, factor):
    """The function distributed training shares: the same bits as FusedBatchNormV3's running outputs."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 5, 4, 2)).astype(F)
    running_mean, running_var = np.array([0.25, -1.0], F), np.array([2.0, 0.5], F)
    out = raw.FusedBatchNormV3(
        x=x, scale=np.ones(2, F), offset=np.zeros(2, F), mean=running_mean, variance=running_var,
        exponential_avg_factor=factor,
    )  # fmt: skip
    m, v = running_statistics(out.reserve_space_1, out.reserve_space_2, 60, running_mean, running_var, factor)
    assert m.dtype == v.dtype == np.float32
    assert m.tobytes() == out.batch_mean.tobytes() and v.tobytes() == out.batch_variance.tobytes()
    bessel = out.reserve_space_2.astype(np.float64) * 60 / 59
    want = (1 - factor) * running_var + factor * bessel
    np.testing.assert_allclose(v, want, rtol=1e-6)
    # n = 1: the correction is n / max(n - 1, 1) = 1, not a division by zero
    one = running_statistics(np.array([3.0], F), np.array([0.0], F), 1, np.zeros(1, F), np.zeros(1, F), 1.0)
    assert one[1].tolist() == [0.0]
