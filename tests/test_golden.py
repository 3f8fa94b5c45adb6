"""Every TensorFlow golden case, forward and gradient, through every backend.

Two checks per output: agreement with TensorFlow's own result, and agreement with
float64 math.  Where TensorFlow's float32 result is itself further from float64
than the README's tolerance (it sums in float32), fbnops may differ from TF by up
to twice TF's own error - but must still meet the tolerance against float64.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import fbnops
from fbnops.kernels import reference
from fbnops.ops.canonical import NdView
from fbnops.testing import STAT_TOL, X_TOL, Golden, rel_err

GOLDEN = Golden(Path(__file__).parent / "data" / "tf_fused_batch_norm_v3.npz")
CASES = range(len(GOLDEN))


def _f64_grad(i, case):
    x = GOLDEN.get(i, "x")
    view = NdView.for_data_format(x.shape, case["data_format"]).view
    dx, dscale, doffset = reference.batch_norm_grad(
        x.reshape(view),
        GOLDEN.get(i, "y_backprop").reshape(view),
        GOLDEN.get(i, "scale"),
        GOLDEN.get(i, "reserve_space_1"),
        GOLDEN.get(i, "reserve_space_2"),
        epsilon=case["epsilon"],
        is_training=case["is_training"],
        compute=np.float64,
    )
    return {"x_backprop": dx.reshape(x.shape), "scale_backprop": dscale, "offset_backprop": doffset}


def _check(name, got, tf, f64, tol):
    tf_err = rel_err(tf, f64)
    assert rel_err(got, f64) <= max(tol, 1.01 * tf_err), f"{name}: vs float64"
    assert rel_err(got, tf) <= max(tol, 2.0 * tf_err), f"{name}: vs TensorFlow"


@pytest.mark.parametrize("i", CASES)
def test_gradient_matches_tensorflow(i, backend):
    case = GOLDEN.meta[i]
    out = fbnops.raw_ops.FusedBatchNormGradV3(
        y_backprop=GOLDEN.get(i, "y_backprop"),
        x=GOLDEN.get(i, "x"),
        scale=GOLDEN.get(i, "scale"),
        reserve_space_1=GOLDEN.get(i, "reserve_space_1"),
        reserve_space_2=GOLDEN.get(i, "reserve_space_2"),
        reserve_space_3=GOLDEN.get(i, "reserve_space_3"),
        epsilon=case["epsilon"],
        data_format=case["data_format"],
        is_training=case["is_training"],
    )
    f64 = _f64_grad(i, case)
    assert out.x_backprop.dtype == GOLDEN.get(i, "x_backprop").dtype
    # x_backprop is rounded to T: the tolerance is T's, plus one rounding step of T.
    _check("x_backprop", out.x_backprop, GOLDEN.get(i, "x_backprop"), f64["x_backprop"], X_TOL[case["dtype"]])
    for name in ("scale_backprop", "offset_backprop"):
        assert getattr(out, name).dtype == np.float32
        _check(name, getattr(out, name), GOLDEN.get(i, name), f64[name], STAT_TOL)
    for name in ("reserve_space_4", "reserve_space_5"):
        assert getattr(out, name).shape == GOLDEN.get(i, name).shape == (0,)


@pytest.mark.parametrize("i", [i for i in CASES if GOLDEN.meta[i]["is_training"]])
def test_forward_matches_tensorflow(i, backend):
    case = GOLDEN.meta[i]
    x = GOLDEN.get(i, "x")
    c = GOLDEN.get(i, "scale").shape[0]
    out = fbnops.raw_ops.FusedBatchNormV3(
        x=x,
        scale=GOLDEN.get(i, "scale"),
        offset=GOLDEN.get(i, "offset"),
        mean=np.zeros(c, np.float32),
        variance=np.ones(c, np.float32),
        epsilon=case["epsilon"],
        data_format=case["data_format"],
        is_training=True,
    )
    view = NdView.for_data_format(x.shape, case["data_format"])
    y64, mean64, var64 = reference.batch_norm(
        x.reshape(view.view),
        GOLDEN.get(i, "scale"),
        GOLDEN.get(i, "offset"),
        None,
        None,
        epsilon=case["epsilon"],
        is_training=True,
        compute=np.float64,
    )
    n = view.count
    _check("y", out.y, GOLDEN.get(i, "fwd_y"), y64.reshape(x.shape), X_TOL[case["dtype"]])
    _check("batch_mean", out.batch_mean, GOLDEN.get(i, "fwd_batch_mean"), mean64, STAT_TOL)
    _check(
        "batch_variance",
        out.batch_variance,
        GOLDEN.get(i, "fwd_batch_variance"),
        var64 * n / max(n - 1, 1),
        STAT_TOL,
    )
    # The reserve spaces the gradient cases were fed are exactly what TF's forward returned.
    _check("reserve_space_1", out.reserve_space_1, GOLDEN.get(i, "reserve_space_1"), mean64, STAT_TOL)
    _check("reserve_space_2", out.reserve_space_2, GOLDEN.get(i, "reserve_space_2"), var64, STAT_TOL)
    assert out.reserve_space_3.shape == () and out.reserve_space_3 == 0


def test_golden_file_is_the_expected_one():
    assert len(GOLDEN) == 65
    assert GOLDEN.tf_version.startswith("2.21")
