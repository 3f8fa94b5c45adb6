"""Finite differences: FusedBatchNormGradV3 is the derivative of FusedBatchNormV3.

The loss is L = sum(y * w).  Its gradient with respect to x, scale and offset is
computed numerically (4th-order central differences on the float64 forward) and
compared with FusedBatchNormGradV3(y_backprop=w, ...) fed the forward's reserve
spaces - in training (batch statistics) and frozen (given statistics) mode.
"""

from __future__ import annotations

import numpy as np
import pytest

import fbnops
from fbnops.testing import channels_of, forward_f64


def numerical_derivative(f, x0: float, h: float) -> float:
    return (-f(x0 + 2 * h) + 8 * f(x0 + h) - 8 * f(x0 - h) + f(x0 - 2 * h)) / (12 * h)


@pytest.mark.parametrize("is_training", [True, False])
@pytest.mark.parametrize(
    "shape,data_format",
    [((3, 2, 2, 3), "NHWC"), ((2, 3, 2, 3), "NCHW"), ((2, 2, 1, 2, 2), "NDHWC"), ((2, 2, 2, 1, 3), "NCDHW")],
)
def test_gradient_is_derivative_of_forward(backend, shape, data_format, is_training):
    rng = np.random.default_rng(11)
    c = channels_of(shape, data_format)
    x = rng.standard_normal(shape)
    w = rng.standard_normal(shape)
    scale, offset = rng.random(c) + 0.5, rng.standard_normal(c)
    pop_mean, pop_var = rng.standard_normal(c) * 0.1, rng.random(c) + 0.5
    eps = 1e-3

    def loss(x_, scale_, offset_):
        y, _, _ = forward_f64(x_, scale_, offset_, pop_mean, pop_var, eps, data_format, is_training)
        return float(np.sum(y * w))

    f32 = np.float32
    fwd = fbnops.raw_ops.FusedBatchNormV3(
        x=x.astype(f32),
        scale=scale.astype(f32),
        offset=offset.astype(f32),
        mean=pop_mean.astype(f32),
        variance=pop_var.astype(f32),
        epsilon=eps,
        data_format=data_format,
        is_training=is_training,
    )
    grad = fbnops.raw_ops.FusedBatchNormGradV3(
        y_backprop=w.astype(f32),
        x=x.astype(f32),
        scale=scale.astype(f32),
        reserve_space_1=fwd.reserve_space_1,
        reserve_space_2=fwd.reserve_space_2,
        reserve_space_3=fwd.reserve_space_3,
        epsilon=eps,
        data_format=data_format,
        is_training=is_training,
    )
    h = 1e-4
    for idx in [(0,) * len(shape), tuple(d - 1 for d in shape), tuple(d // 2 for d in shape)]:

        def along_x(v, idx=idx):
            x2 = x.copy()
            x2[idx] = v
            return loss(x2, scale, offset)

        np.testing.assert_allclose(grad.x_backprop[idx], numerical_derivative(along_x, x[idx], h), rtol=2e-4, atol=2e-5)
    for k in range(c):

        def along_scale(v, k=k):
            s2 = scale.copy()
            s2[k] = v
            return loss(x, s2, offset)

        def along_offset(v, k=k):
            o2 = offset.copy()
            o2[k] = v
            return loss(x, scale, o2)

        np.testing.assert_allclose(
            grad.scale_backprop[k], numerical_derivative(along_scale, scale[k], h), rtol=2e-4, atol=2e-5
        )
        np.testing.assert_allclose(
            grad.offset_backprop[k], numerical_derivative(along_offset, offset[k], h), rtol=2e-4, atol=2e-5
        )
