"""Small builders for op inputs used across the tests."""

from __future__ import annotations

import ml_dtypes
import numpy as np

import fbnops
from fbnops.kernels import reference
from fbnops.ops.batch_norm import canonical_view

DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
FORMATS = {4: ("NHWC", "NCHW"), 5: ("NDHWC", "NCDHW")}


def channels_of(shape, data_format) -> int:
    return shape[1] if data_format in ("NCHW", "NCDHW") else shape[-1]


def grad_inputs(shape, data_format="NHWC", dtype="float32", seed=0, offset=0.0):
    rng = np.random.default_rng(seed)
    c = channels_of(shape, data_format)
    dt = DTYPES[dtype]
    return dict(
        y_backprop=rng.standard_normal(shape).astype(dt),
        x=(rng.standard_normal(shape) + offset).astype(dt),
        scale=(rng.random(c) + 0.5).astype(np.float32),
        reserve_space_1=(rng.standard_normal(c) * 0.1 + offset).astype(np.float32),
        reserve_space_2=(rng.random(c) + 0.5).astype(np.float32),
        reserve_space_3=np.zeros((), np.float32),
    )


def grad_f64(inputs, epsilon, data_format, is_training):
    """The float64 oracle for FusedBatchNormGradV3, on the original layout."""
    x = np.asarray(inputs["x"])
    view = canonical_view(x.shape, data_format)
    dx, ds, do = reference.batch_norm_grad(
        x.reshape(view),
        np.asarray(inputs["y_backprop"]).reshape(view),
        np.asarray(inputs["scale"]),
        np.asarray(inputs["reserve_space_1"]),
        np.asarray(inputs["reserve_space_2"]),
        epsilon=epsilon,
        is_training=is_training,
        compute=np.float64,
    )
    return dx.astype(np.float64).reshape(x.shape), ds, do


def forward_f64(x, scale, offset, mean, variance, epsilon, data_format, is_training):
    x = np.asarray(x)
    view = canonical_view(x.shape, data_format)
    y, m, v = reference.batch_norm(
        x.reshape(view),
        scale,
        offset,
        mean,
        variance,
        epsilon=epsilon,
        is_training=is_training,
        compute=np.float64,
    )
    return y.astype(np.float64).reshape(x.shape), m, v


def run_grad(inputs, **attrs):
    return fbnops.raw_ops.FusedBatchNormGradV3(**inputs, **attrs)
