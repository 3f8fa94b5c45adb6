"""The NumPy exercises: forward, training gradient, frozen gradient, running statistics, layouts.

Each is a list of steps (explain's intermediates, graded one by one with the right inputs) and
an end-to-end function graded against the op on the whole grid.
"""

from __future__ import annotations

import numpy as np

from ... import raw_ops
from ...framework.layouts import channel_axis
from ..explain import per_channel
from ._grading import Wrong
from ._steps import SWAPPED_LAYOUT, Outputs, Step, other_layout, per_channel_in

FACTORS = (0.1, 1.0, 0.5)  # exponential_avg_factor, by case (cycled)

_EMPTY = np.zeros(0, np.float32)


def _forward_op(ctx: dict, **attrs) -> dict:
    stats = (
        dict(mean=_EMPTY, variance=_EMPTY)
        if not attrs
        else dict(mean=ctx["running_mean"], variance=ctx["running_variance"])
    )
    return raw_ops.FusedBatchNormV3(x=ctx["x"], scale=ctx["scale"], offset=ctx["offset"], epsilon=ctx["epsilon"],
                                    data_format=ctx["data_format"], **stats, **attrs)._asdict()  # fmt: skip


def _grad_op(ctx: dict, training: bool) -> dict:
    fwd = _forward_op(ctx)
    rs1, rs2 = ("reserve_space_1", "reserve_space_2") if training else ("running_mean", "running_variance")
    rs1, rs2 = (fwd[rs1], fwd[rs2]) if training else (ctx[rs1], ctx[rs2])
    return raw_ops.FusedBatchNormGradV3(y_backprop=ctx["dy"], x=ctx["x"], scale=ctx["scale"], reserve_space_1=rs1,
                                        reserve_space_2=rs2, reserve_space_3=fwd["reserve_space_3"],
                                        epsilon=ctx["epsilon"], data_format=ctx["data_format"],
                                        is_training=training)._asdict()  # fmt: skip


def _bessel(ctx: dict) -> float:
    return ctx["n"] / max(ctx["n"] - 1, 1)


_OTHER = lambda ctx: other_layout(ctx["data_format"])  # noqa: E731
_UNBIASED = Wrong(lambda ctx: ctx["variance"] * _bessel(ctx),
                  "this is the Bessel-corrected (unbiased) variance, n/(n-1) times too big: the forward normalizes "
                  "with the biased variance, sum((x - mean)^2) / n")  # fmt: skip
_NAN_SKIPPED = "a NaN in a channel makes that channel's statistics NaN (TensorFlow does not skip NaNs)"

FORWARD = (
    Step(
        "count",
        ("x", "data_format"),
        "n",
        "n counts the values of ONE channel: every axis but the channel axis",
        (
            Wrong(lambda ctx: ctx["x"].size, "that is every value of x: n is per channel (divide by C)"),
            Wrong(
                lambda ctx: ctx["x"].size // ctx["x"].shape[channel_axis(_OTHER(ctx), ctx["x"].ndim)], SWAPPED_LAYOUT
            ),
        ),
    ),
    Step(
        "channel_mean",
        ("x", "data_format"),
        "mean",
        "the mean over every axis but the channel axis",
        (
            Wrong(per_channel_in(_OTHER, lambda r: r.mean(axis=1)), SWAPPED_LAYOUT),
            Wrong(per_channel_in(lambda ctx: ctx["data_format"], lambda r: np.nanmean(r, axis=1)), _NAN_SKIPPED),
        ),
    ),
    Step(
        "channel_variance",
        ("x", "mean", "data_format"),
        "variance",
        "the biased variance: the mean of (x - mean)^2 over the channel's n values",
        (_UNBIASED,),
    ),
    Step(
        "bessel",
        ("variance", "n"),
        "batch_variance",
        "batch_variance (for the running statistics) is variance * n / (n - 1); with n = 1 TensorFlow divides "
        "by max(n - 1, 1)",
        (
            Wrong(lambda ctx: ctx["variance"], "that is the biased variance: batch_variance is Bessel-corrected"),
            Wrong(
                lambda ctx: ctx["variance"] * ctx["n"] / (ctx["n"] - 1) if ctx["n"] == 1 else np.nan,
                "with n = 1 there is no n - 1 to divide by: TensorFlow uses max(n - 1, 1)",
            ),
        ),
    ),
    Step(
        "rstd",
        ("variance", "epsilon"),
        "rstd",
        "rstd = 1 / sqrt(variance + epsilon)",
        (
            Wrong(lambda ctx: 1 / np.sqrt(ctx["variance"]), "epsilon is missing: it keeps 1/sqrt finite"),
            Wrong(
                lambda ctx: np.sqrt(ctx["variance"] + ctx["epsilon"]), "that is the standard deviation, not 1 over it"
            ),
        ),
    ),
    Step(
        "normalize",
        ("x", "mean", "rstd", "data_format"),
        "x_hat",
        "x_hat = (x - mean) * rstd, with the per-channel vectors broadcast along the channel axis",
    ),
)
FORWARD_OUTPUTS = Outputs(
    "forward", ("x", "scale", "offset", "epsilon", "data_format"),
    ("y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"), _forward_op,
    hints={"y": "y = scale * x_hat + offset, returned in x's dtype",
           "reserve_space_2": "reserve_space_2 is the biased variance the gradient needs"},
    wrongs={"reserve_space_2": (_UNBIASED,),
            "batch_variance": (Wrong(lambda ctx: ctx["variance"], "batch_variance is the Bessel-corrected one"),)},
)  # fmt: skip

_WITHOUT_MEAN = Wrong(
    lambda ctx: ctx["dx_direct"] + ctx["dx_via_variance"],
    "the term through the mean is missing: every x of a channel moves its mean",
)
_WITHOUT_VARIANCE = Wrong(
    lambda ctx: ctx["dx_direct"] + ctx["dx_via_mean"],
    "the term through the variance is missing: every x of a channel moves its variance",
)
_DIRECT_ONLY = Wrong(
    lambda ctx: ctx["dx_direct"],
    "only the direct term: in training the batch statistics depend on x, so two more terms follow",
)
TRAINING_GRADIENT = (
    Step(
        "sum_dy",
        ("dy", "data_format"),
        "sum_dy",
        "the sum of dy over each channel's n values",
        (
            Wrong(per_channel_in(_OTHER, lambda r: r.sum(axis=1), "dy"), SWAPPED_LAYOUT),
            Wrong(
                per_channel_in(lambda ctx: ctx["data_format"], lambda r: r.mean(axis=1), "dy"),
                "that is the mean of dy: offset_backprop is the sum",
            ),
        ),
    ),
    Step("sum_dy_xc", ("dy", "x", "mean", "data_format"), "sum_dy_xc", "the sum of dy * (x - mean) per channel"),
    Step("dx_direct", ("dy", "scale", "rstd", "data_format"), "dx_direct", "scale * rstd * dy, per channel"),
    Step(
        "dx_via_mean",
        ("x", "scale", "rstd", "sum_dy", "n", "data_format"),
        "dx_via_mean",
        "-scale * rstd * sum_dy / n, the same for every value of a channel (shaped like x)",
    ),
    Step(
        "dx_via_variance",
        ("x", "mean", "scale", "rstd", "sum_dy_xc", "n", "data_format"),
        "dx_via_variance",
        "-scale * rstd^3 * (x - mean) * sum_dy_xc / n",
    ),
)
TRAINING_OUTPUTS = Outputs(
    "gradient", ("dy", "x", "scale", "mean", "variance", "epsilon", "data_format"),
    ("x_backprop", "scale_backprop", "offset_backprop"), lambda ctx: _grad_op(ctx, True),
    hints={"x_backprop": "x_backprop is the sum of the three terms",
           "scale_backprop": "scale_backprop = sum(dy * x_hat) per channel (0 for an empty batch)"},
    wrongs={"x_backprop": (_WITHOUT_MEAN, _WITHOUT_VARIANCE, _DIRECT_ONLY)},
)  # fmt: skip

FROZEN_GRADIENT = (
    Step("rstd", ("variance", "epsilon"), "rstd", "rstd = 1 / sqrt(variance + epsilon), from the given variance"),
    Step(
        "scale_backprop",
        ("dy", "x", "mean", "rstd", "data_format"),
        "scale_backprop",
        "sum(dy * (x - mean)) * rstd per channel, with the given (running) mean",
    ),
    Step(
        "x_backprop",
        ("dy", "scale", "rstd", "data_format"),
        "x_backprop",
        "with frozen statistics the mean and variance are constants: only the direct term scale * rstd * dy",
    ),
)


def _batch_stats(ctx: dict, unbiased: bool = True) -> tuple[np.ndarray, np.ndarray]:
    rows = per_channel(ctx["x"].astype(np.float64), ctx["data_format"])
    n = rows.shape[1]
    with np.errstate(all="ignore"):
        return rows.mean(axis=1), rows.var(axis=1) * (n / max(n - 1, 1) if unbiased else 1)


def _scale_backprop_about_batch_mean(ctx: dict) -> np.ndarray:
    rows = per_channel(ctx["x"].astype(np.float64), ctx["data_format"])
    dy = per_channel(ctx["dy"].astype(np.float64), ctx["data_format"])
    return (dy * (rows - _batch_stats(ctx)[0][:, None])).sum(axis=1) * ctx["rstd"]


FROZEN_OUTPUTS = Outputs(
    "gradient", ("dy", "x", "scale", "mean", "variance", "epsilon", "data_format"),
    ("x_backprop", "scale_backprop", "offset_backprop"), lambda ctx: _grad_op(ctx, False),
    hints={"x_backprop": "frozen: x_backprop = scale * rstd * dy with the given mean and variance"},
    wrongs={"scale_backprop": (Wrong(_scale_backprop_about_batch_mean, "that is about the batch's own mean: with "
                                     "frozen statistics, x is centred on the given (running) mean"),)},
)  # fmt: skip


def _running_op(ctx: dict) -> dict:
    return _forward_op(ctx, exponential_avg_factor=ctx["factor"])


RUNNING_STATS = (
    Step(
        "blend",
        ("running_mean", "mean", "factor"),
        "blend",
        "new = (1 - factor) * running + factor * batch: factor 1 keeps only the batch",
        (
            Wrong(
                lambda ctx: ctx["factor"] * ctx["running_mean"] + (1 - ctx["factor"]) * ctx["mean"],
                "the factor weighs the batch, not the running value: it is reversed",
            ),
        ),
    ),
)
RUNNING_OUTPUTS = Outputs(
    "update", ("x", "running_mean", "running_variance", "factor", "data_format"), ("batch_mean", "batch_variance"),
    _running_op, hints={"batch_variance": "the running variance blends in the Bessel-corrected batch variance"},
    wrongs={"batch_variance": (Wrong(lambda ctx: (1 - ctx["factor"]) * ctx["running_variance"]
                                     + ctx["factor"] * _batch_stats(ctx, unbiased=False)[1],
                                     "the biased batch variance was blended: TensorFlow blends the n/(n-1) one"),)},
)  # fmt: skip


def _canonical(ctx: dict) -> np.ndarray:
    x, fmt = ctx["x"], ctx["data_format"]
    axis = channel_axis(fmt, x.ndim)
    return x.reshape(int(np.prod(x.shape[:axis])), x.shape[axis], int(np.prod(x.shape[axis + 1 :])))


def _to_last(ctx: dict) -> np.ndarray:
    x = ctx["x"]
    return np.moveaxis(x, 1, -1) if ctx["data_format"].startswith("NC") else x


_PERM = "channels-last moves axis 1 (C) to the end and keeps the others in order: NCHW -> NHWC is (0, 2, 3, 1)"
LAYOUT = (
    Step(
        "channel_axis",
        ("data_format", "ndim"),
        "channel_axis",
        SWAPPED_LAYOUT,
        (Wrong(lambda ctx: channel_axis(other_layout(ctx["data_format"]), ctx["ndim"]), SWAPPED_LAYOUT),),
    ),
    Step(
        "to_channels_last",
        ("x", "data_format"),
        "to_channels_last",
        _PERM,
        (Wrong(lambda ctx: np.moveaxis(ctx["x"], -1, 1), "that moves the last axis to position 1: the other way"),),
    ),
    Step(
        "from_channels_last",
        ("to_channels_last", "data_format"),
        "x",
        "the inverse move: the last axis goes back to position 1 for a channels-first format",
    ),
    Step(
        "canonical_view",
        ("x", "data_format"),
        "canonical_view",
        "(outer, C, inner): outer = product of the axes before C, inner = the product of those after it",
    ),
)


def running_context(ctx: dict, index: int) -> dict:
    """Adds the factor of case ``index`` and the blended mean (the step's expected value)."""
    f = FACTORS[index % len(FACTORS)]
    return dict(ctx, factor=f, blend=(1 - f) * ctx["running_mean"].astype(np.float64) + f * ctx["mean"])


def layout_context(ctx: dict, index: int) -> dict:
    """Adds the layout exercise's expected values (the op computes none of them)."""
    x = ctx["x"]
    return dict(ctx, ndim=x.ndim, channel_axis=channel_axis(ctx["data_format"], x.ndim),
                to_channels_last=_to_last(ctx), canonical_view=_canonical(ctx))  # fmt: skip
