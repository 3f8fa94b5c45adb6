"""Inputs and float64 oracles for the batch-norm ops, and the TensorFlow golden-vector reader.

The oracle is the NumPy reference kernel run in float64 on the caller's layout:
what the fast kernels are compared with, whatever their dtype.
"""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np

__all__ = [
    "DTYPES",
    "FORMATS",
    "channels_of",
    "canonical",
    "grad_inputs",
    "grad_f64",
    "forward_f64",
    "run_grad",
    "Golden",
]

DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
FORMATS = {4: ("NHWC", "NCHW"), 5: ("NDHWC", "NCDHW")}


def channels_of(shape, data_format: str) -> int:
    """C, the channel count of a tensor of ``shape`` laid out as ``data_format``."""
    from ..framework.layouts import channel_axis

    return shape[channel_axis(data_format, len(shape))]


def canonical(shape, data_format: str) -> tuple[int, int, int]:
    """The ``(outer, C, inner)`` view every kernel takes."""
    from ..ops.canonical import NdView

    return NdView.for_data_format(shape, data_format).view


def grad_inputs(shape, data_format: str = "NHWC", dtype: str = "float32", seed: int = 0, offset: float = 0.0) -> dict:
    """Random, well-conditioned FusedBatchNormGradV3 inputs (variance in [0.5, 1.5))."""
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


def grad_f64(inputs: dict, epsilon: float, data_format: str, is_training: bool):
    """The float64 oracle for FusedBatchNormGradV3: ``(x_backprop, scale_backprop, offset_backprop)``."""
    from ..kernels import reference

    x = np.asarray(inputs["x"])
    view = canonical(x.shape, data_format)
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


def forward_f64(x, scale, offset, mean, variance, epsilon: float, data_format: str, is_training: bool):
    """The float64 oracle for FusedBatchNormV3: ``(y, batch_mean, batch_variance)``."""
    from ..kernels import reference

    x = np.asarray(x)
    view = canonical(x.shape, data_format)
    y, m, v = reference.batch_norm(
        x.reshape(view), scale, offset, mean, variance, epsilon=epsilon, is_training=is_training, compute=np.float64
    )
    return y.astype(np.float64).reshape(x.shape), m, v


def run_grad(inputs: dict, **attrs):
    """``fbnops.raw_ops.FusedBatchNormGradV3(**inputs, **attrs)``: a shorthand for the tests."""
    from .. import raw_ops

    return raw_ops.FusedBatchNormGradV3(**inputs, **attrs)


class Golden:
    """Golden cases recorded from TensorFlow (an ``.npz`` with ``__meta__`` and ``<i>/<name>`` arrays)."""

    def __init__(self, path: str | Path):
        self._npz = np.load(path)
        self.meta = json.loads(bytes(self._npz["__meta__"]).decode())
        self.tf_version = bytes(self._npz["__tf_version__"]).decode()

    def __len__(self) -> int:
        return len(self.meta)

    def get(self, i: int, name: str) -> np.ndarray:
        """Array ``name`` of case ``i`` (bfloat16 arrays come back as ``ml_dtypes.bfloat16``)."""
        a = self._npz[f"{i}/{name}"]
        if f"{i}/{name}__bf16" in self._npz.files:
            a = a.view(ml_dtypes.bfloat16)
        return a

    def has(self, i: int, name: str) -> bool:
        """True if case ``i`` recorded an array ``name``."""
        return f"{i}/{name}" in self._npz.files
