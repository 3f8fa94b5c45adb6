"""The published TensorFlow crash inputs (CVE-2021-41223, CVE-2021-29583, fuzzer reports).

``PUBLISHED_CRASH_INPUTS[name] = (op, argument the rejection must name, inputs, attrs,
TensorFlow's message)``: every TF-shaped surface must reject each with a typed error
naming the argument, and ``fbnops.raw_ops`` with TensorFlow's exact message.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PUBLISHED_CRASH_INPUTS"]

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
