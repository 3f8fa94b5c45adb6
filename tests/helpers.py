"""Small builders for op inputs used across the tests."""

from __future__ import annotations

import ml_dtypes
import numpy as np

import fbnops
from fbnops.framework.layouts import channel_axis
from fbnops.kernels import reference
from fbnops.ops.canonical import NdView

DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
FORMATS = {4: ("NHWC", "NCHW"), 5: ("NDHWC", "NCDHW")}


def channels_of(shape, data_format) -> int:
    return shape[channel_axis(data_format, len(shape))]


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
    view = NdView.for_data_format(x.shape, data_format).view
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
    view = NdView.for_data_format(x.shape, data_format).view
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


# The published TensorFlow crash inputs (tf_semantics.md 7.1): op, the argument the rejection must
# name, inputs, attrs and TensorFlow's message.  Used per surface by test_fuzz.py and for the exact
# raw_ops messages by test_errors.py.
_F = np.float32


def _fwd(**override):
    base = dict(
        x=np.ones((2, 3, 3, 4), _F),
        scale=np.ones(4, _F),
        offset=np.ones(4, _F),
        mean=np.ones(4, _F),
        variance=np.ones(4, _F),
    )
    return {**base, **override}


def _grad(shape=(2, 2, 2, 2), c=2, **override):
    base = dict(
        y_backprop=np.ones(shape, _F),
        x=np.ones(shape, _F),
        scale=np.ones(c, _F),
        reserve_space_1=np.ones(c, _F),
        reserve_space_2=np.ones(c, _F),
        reserve_space_3=np.ones(1, _F),
    )
    return {**base, **override}


_TRAIN_NCHW = dict(data_format="NCHW", is_training=True, epsilon=1e-4)
_INFER_NHWC = dict(data_format="NHWC", is_training=False, epsilon=1e-4)
PUBLISHED_CRASH_INPUTS = {
    "CVE-2021-41223 PoC (mismatched y_backprop/x)": (
        "FusedBatchNormGradV3",
        "x",
        _grad((1, 1, 3, 3), 2, x=np.ones((1, 1, 1, 2), _F), reserve_space_2=np.ones(3, _F)),
        _TRAIN_NCHW,
        "x and y_backprop must have same shape, but x has shape [1,1,1,2] and y_backprop has shape [1,1,3,3]",
    ),
    "CVE-2021-41223 (reserve_space_2 too long)": (
        "FusedBatchNormGradV3",
        "reserve_space_2",
        _grad((1, 1, 1, 2), 1, reserve_space_2=np.ones(3, _F)),
        _TRAIN_NCHW,
        "reserve_space_2 must have the same number of elements as the channels of x, got 3 and 1",
    ),
    **{
        f"CVE-2021-29583 (short {name})": (
            "FusedBatchNormV3",
            name,
            _fwd(**{name: np.ones(1, _F)}),
            _INFER_NHWC,
            ("When is_training=false, " if name in ("mean", "variance") else "")
            + f"{name} must have the same number of elements as the channels of x, got 1 and 4",
        )
        for name in ("scale", "offset", "mean", "variance")
    },
    **{
        f"fuzzer #59001/#58999/#59014 (empty {name})": (
            "FusedBatchNormGradV3",
            name,
            _grad(**{name: np.zeros(0, _F)}),
            dict(_TRAIN_NCHW, data_format="NHWC"),
            f"{name} must have the same number of elements as the channels of x, got 0 and 2",
        )
        for name in ("scale", "reserve_space_1", "reserve_space_2")
    },
}
