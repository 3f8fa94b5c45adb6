"""The mirrored operators as data: one schema per DML_OPERATOR_TYPE (members, rules, feature level, execute)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fbnops.ops import canonical, fused_batch_norm_grad_v3, fused_batch_norm_v3

from .descs import (
    DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC,
    DML_BATCH_NORMALIZATION_OPERATOR_DESC,
    DML_BATCH_NORMALIZATION_TRAINING_GRAD_OPERATOR_DESC,
    DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC,
    DML_OPERATOR_DESC,
)
from .enums import (
    DML_FEATURE_LEVEL_1_0,
    DML_FEATURE_LEVEL_3_1,
    DML_FEATURE_LEVEL_4_1,
    DML_OPERATOR_ACTIVATION_IDENTITY,
    DML_OPERATOR_BATCH_NORMALIZATION,
    DML_OPERATOR_BATCH_NORMALIZATION_GRAD,
    DML_OPERATOR_BATCH_NORMALIZATION_TRAINING,
    DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD,
)

Tensors = dict[str, np.ndarray]


@dataclass(frozen=True)
class _OpSchema:
    """What CreateOperator checks and what the dispatch computes, for one operator type."""

    desc_type: type
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    optional: tuple[str, ...] = ()
    same_sizes: tuple[tuple[str, ...], ...] = ()
    stats: tuple[str, ...] = ()  # each dim 1 or equal to InputTensor's
    feature_level: int = DML_FEATURE_LEVEL_3_1  # the DML_FEATURE_LEVEL that introduced the operator
    execute: Callable[[Any, Tensors], Tensors] | None = None


def _kept_axes(stat_shape) -> list[int]:
    return [a for a, s in enumerate(stat_shape) if s != 1]


def _activation(desc: DML_OPERATOR_DESC | None, y: np.ndarray) -> np.ndarray:
    if desc is None or desc.Type == DML_OPERATOR_ACTIVATION_IDENTITY:
        return y
    return np.maximum(y, 0)  # ACTIVATION_RELU (validated at CreateOperator)


def _bn_grad(d, t: Tensors, is_training: bool) -> Tensors:
    view = canonical.nd_view(t["InputTensor"].shape, _kept_axes(t["MeanTensor"].shape))
    dx, ds, db = fused_batch_norm_grad_v3.grad_on_view(
        view,
        t["InputTensor"],
        t["InputGradientTensor"],
        t["ScaleTensor"],
        t["MeanTensor"],
        t["VarianceTensor"],
        epsilon=d.Epsilon,
        is_training=is_training,
    )
    stat_shape = t["MeanTensor"].shape
    return {
        "OutputGradientTensor": dx,
        "OutputScaleGradientTensor": ds.reshape(stat_shape),
        "OutputBiasGradientTensor": db.reshape(stat_shape),
    }


def _bn_forward(d, t: Tensors) -> Tensors:
    x = t["InputTensor"]
    names = ("MeanTensor", "VarianceTensor", "ScaleTensor", "BiasTensor")
    kept = sorted(set().union(*(_kept_axes(t[n].shape) for n in names)))
    stat_shape = tuple(x.shape[a] if a in kept else 1 for a in range(x.ndim))
    s = {n: np.broadcast_to(t[n], stat_shape) for n in names}  # each may broadcast on its own
    view = canonical.nd_view(x.shape, kept)
    compute_dtype = np.float32 if d.FusedActivation is not None else x.dtype  # round once, after the activation
    y, _, _ = fused_batch_norm_v3.forward_on_view(
        view,
        x.astype(compute_dtype),
        s["ScaleTensor"],
        s["BiasTensor"],
        s["MeanTensor"],
        s["VarianceTensor"],
        epsilon=d.Epsilon,
        is_training=False,
    )
    return {"OutputTensor": _activation(d.FusedActivation, y)}


def _bn_training(d, t: Tensors) -> Tensors:
    x = t["InputTensor"]
    stat_shape = t["ScaleTensor"].shape
    view = canonical.nd_view(x.shape, _kept_axes(stat_shape))
    fused = d.FusedActivation is not None or t.get("FusedAddTensor") is not None
    y, mean, var = fused_batch_norm_v3.forward_on_view(
        view,
        x.astype(np.float32) if fused else x,
        t["ScaleTensor"],
        t["BiasTensor"],
        None,
        None,
        epsilon=d.Epsilon,
        is_training=True,
    )
    if t.get("FusedAddTensor") is not None:
        y = y + t["FusedAddTensor"].astype(np.float32)  # added before the activation
    return {
        "OutputTensor": _activation(d.FusedActivation, y),
        "OutputMeanTensor": mean.reshape(stat_shape),
        "OutputVarianceTensor": var.reshape(stat_shape),
    }


_GRAD_IO = dict(
    inputs=("InputTensor", "InputGradientTensor", "MeanTensor", "VarianceTensor", "ScaleTensor"),
    outputs=("OutputGradientTensor", "OutputScaleGradientTensor", "OutputBiasGradientTensor"),
    same_sizes=(
        ("MeanTensor", "OutputBiasGradientTensor", "OutputScaleGradientTensor", "ScaleTensor", "VarianceTensor"),
        ("InputGradientTensor", "InputTensor", "OutputGradientTensor"),
    ),
    stats=("MeanTensor",),
)

SCHEMAS: dict[int, _OpSchema] = {
    DML_OPERATOR_BATCH_NORMALIZATION: _OpSchema(
        DML_BATCH_NORMALIZATION_OPERATOR_DESC,
        "DML_BATCH_NORMALIZATION_OPERATOR_DESC",
        inputs=("InputTensor", "MeanTensor", "VarianceTensor", "ScaleTensor", "BiasTensor"),
        outputs=("OutputTensor",),
        same_sizes=(("InputTensor", "OutputTensor"),),
        stats=("MeanTensor", "VarianceTensor", "ScaleTensor", "BiasTensor"),
        feature_level=DML_FEATURE_LEVEL_1_0,
        execute=_bn_forward,
    ),
    DML_OPERATOR_BATCH_NORMALIZATION_TRAINING: _OpSchema(
        DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC,
        "DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC",
        inputs=("InputTensor", "ScaleTensor", "BiasTensor", "FusedAddTensor"),
        outputs=("OutputTensor", "OutputMeanTensor", "OutputVarianceTensor"),
        optional=("FusedAddTensor",),
        same_sizes=(
            ("BiasTensor", "OutputMeanTensor", "OutputVarianceTensor", "ScaleTensor"),
            ("FusedAddTensor", "InputTensor", "OutputTensor"),
        ),
        stats=("ScaleTensor",),
        feature_level=DML_FEATURE_LEVEL_4_1,
        execute=_bn_training,
    ),
    DML_OPERATOR_BATCH_NORMALIZATION_GRAD: _OpSchema(
        DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC,
        "DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC",
        **_GRAD_IO,
        feature_level=DML_FEATURE_LEVEL_3_1,
        execute=lambda d, t: _bn_grad(d, t, is_training=False),
    ),
    DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD: _OpSchema(
        DML_BATCH_NORMALIZATION_TRAINING_GRAD_OPERATOR_DESC,
        "DML_BATCH_NORMALIZATION_TRAINING_GRAD_OPERATOR_DESC",
        **_GRAD_IO,
        feature_level=DML_FEATURE_LEVEL_4_1,
        execute=lambda d, t: _bn_grad(d, t, is_training=True),
    ),
}
