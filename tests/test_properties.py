"""Property tests: random shapes, layouts, dtypes and modes against the float64 oracle."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fbnops
from fbnops.framework.layouts import channel_axis
from fbnops.testing import DTYPES, FORMATS, channels_of, forward_f64, grad_f64

# Relative tolerance per storage dtype for tensor outputs (one rounding of T plus
# float32 arithmetic), and for the float32 per-channel outputs.
TENSOR_TOL = {"float32": 2e-6, "float16": 1.5e-3, "bfloat16": 1e-2}
VECTOR_TOL = 2e-6


@st.composite
def cases(draw):
    rank = draw(st.sampled_from([4, 5]))
    data_format = draw(st.sampled_from(FORMATS[rank]))
    dims = draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank))
    c = draw(st.sampled_from([1, 2, 3, 5, 8, 17, 64, 70]))
    dims[channel_axis(data_format, rank)] = c
    if draw(st.booleans()) and draw(st.booleans()):  # sometimes an empty batch
        dims[0] = 0
    return dict(
        shape=tuple(dims),
        data_format=data_format,
        dtype=draw(st.sampled_from(sorted(DTYPES))),
        is_training=draw(st.booleans()),
        epsilon=draw(st.sampled_from([1e-5, 1e-3, 0.1])),
        layout=draw(st.sampled_from(["contiguous", "strided", "reversed"])),
        seed=draw(st.integers(0, 2**16)),
    )


def _layout(a: np.ndarray, how: str) -> np.ndarray:
    if how == "strided":  # every other element of a twice-as-large buffer along axis 0
        big = np.zeros((2 * a.shape[0],) + a.shape[1:], a.dtype)
        big[::2] = a
        return big[::2]
    if how == "reversed":
        return np.ascontiguousarray(a[::-1])[::-1]
    return a


def _err(got, want, magnitude):
    return np.max(np.abs(np.asarray(got, np.float64) - want), initial=0.0) / max(magnitude, 1e-30)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_gradient_matches_float64(case, backend):
    rng = np.random.default_rng(case["seed"])
    shape, fmt, dt = case["shape"], case["data_format"], DTYPES[case["dtype"]]
    c = channels_of(shape, fmt)
    inputs = dict(
        y_backprop=rng.standard_normal(shape).astype(dt),
        x=rng.standard_normal(shape).astype(dt),
        scale=(rng.random(c) + 0.5).astype(np.float32),
        reserve_space_1=(rng.standard_normal(c) * 0.2).astype(np.float32),
        reserve_space_2=(rng.random(c) + 0.2).astype(np.float32),
        reserve_space_3=np.zeros((), np.float32),
    )
    attrs = dict(epsilon=case["epsilon"], data_format=fmt, is_training=case["is_training"])
    out = fbnops.raw_ops.FusedBatchNormGradV3(
        **{k: _layout(v, case["layout"]) if v.ndim > 1 else v for k, v in inputs.items()}, **attrs
    )
    dx, ds, do = grad_f64(inputs, **attrs)
    assert out.x_backprop.shape == shape and out.x_backprop.dtype == np.dtype(dt)
    # The terms of dx are of the size of scale*r*dy: measure errors against that.
    r = 1 / np.sqrt(inputs["reserve_space_2"].astype(np.float64) + np.float32(case["epsilon"]))
    terms = np.max(np.abs(inputs["scale"] * r)) * (np.max(np.abs(inputs["y_backprop"]), initial=0) + 1)
    assert _err(out.x_backprop, dx, terms) <= TENSOR_TOL[case["dtype"]]
    n = max(1, np.prod(shape) // c)
    assert _err(out.offset_backprop, do, np.sqrt(n) * 4 + np.max(np.abs(do), initial=0)) <= VECTOR_TOL
    assert _err(out.scale_backprop, ds, (np.sqrt(n) * 4 + np.max(np.abs(ds), initial=0)) * r.max()) <= VECTOR_TOL


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_forward_matches_float64(case, backend):
    rng = np.random.default_rng(case["seed"])
    shape, fmt, dt = case["shape"], case["data_format"], DTYPES[case["dtype"]]
    c = channels_of(shape, fmt)
    x = (rng.standard_normal(shape) * 2 + 1).astype(dt)
    scale = (rng.random(c) + 0.5).astype(np.float32)
    offset = rng.standard_normal(c).astype(np.float32)
    mean = rng.standard_normal(c).astype(np.float32)
    var = (rng.random(c) + 0.5).astype(np.float32)
    out = fbnops.raw_ops.FusedBatchNormV3(
        x=_layout(x, case["layout"]),
        scale=scale,
        offset=offset,
        mean=mean,
        variance=var,
        epsilon=case["epsilon"],
        data_format=fmt,
        is_training=case["is_training"],
    )
    if x.size == 0:
        assert np.isnan(out.batch_mean).all()
        return
    y, m, v = forward_f64(x, scale, offset, mean, var, case["epsilon"], fmt, case["is_training"])
    r = 1 / np.sqrt(np.asarray(v, np.float64) + np.float32(case["epsilon"]))
    terms = np.max(np.abs(scale * r)) * (np.max(np.abs(x.astype(np.float64))) + 1) + np.max(np.abs(offset))
    assert _err(out.y, y, terms) <= TENSOR_TOL[case["dtype"]]
    if case["is_training"]:
        assert _err(out.reserve_space_1, m, np.max(np.abs(x.astype(np.float64)))) <= VECTOR_TOL
        assert _err(out.reserve_space_2, v, np.max(v) + 1) <= 4 * VECTOR_TOL
