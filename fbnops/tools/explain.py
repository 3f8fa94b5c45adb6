"""``fbnops explain``: batch norm and its gradient, one intermediate at a time, with numbers.

:func:`explain` computes every intermediate of ``FusedBatchNormV3`` and
``FusedBatchNormGradV3`` in float64 from the formulas (mean, variance, rstd, x̂, y, the
two channel sums, each term of dx), then runs the real kernels on the same input and
checks each result against them.  :class:`Explanation` renders as text (the command
line), Markdown with LaTeX (the docs' derivation page is generated from it, so the prose
and the numbers cannot drift) or a dict (``--json``)::

    e = explain(x, dy, scale, offset, epsilon=1e-3, data_format="NHWC")
    assert e.ok
    print(e.to_markdown())

Values are shown per channel: a per-channel quantity as a vector of C numbers, a
per-element one as a (C, n) array whose row c holds channel c's n elements in memory
order (the kernels' canonical view).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from .. import raw_ops
from ..framework import dtypes
from ..framework.layouts import channel_axis
from . import _explain_render

__all__ = ["Step", "Check", "Explanation", "explain", "example_inputs"]

# name: (LaTeX, plain text, what it is).  The order is the order of the computation.
FORWARD_STEPS = {
    "n": (r"n = \text{elements per channel}", "n = N*H*W (all axes but C)",
          "how many values each channel's statistics are taken over"),
    "mean": (r"\mu_c = \frac{1}{n}\sum_i x_{ic}", "mean = sum(x) / n",
             "the batch mean: reserve_space_1 and batch_mean"),
    "variance": (r"\sigma^2_c = \frac{1}{n}\sum_i (x_{ic}-\mu_c)^2", "variance = sum((x - mean)^2) / n",
                 "the biased batch variance: reserve_space_2, what the gradient needs"),
    "batch_variance": (r"s^2_c = \frac{n}{n-1}\,\sigma^2_c", "batch_variance = variance * n / (n - 1)",
                       "Bessel-corrected, only for the running statistics (output batch_variance)"),
    "rstd": (r"r_c = \frac{1}{\sqrt{\sigma^2_c + \epsilon}}", "rstd = 1 / sqrt(variance + epsilon)",
             "the reciprocal standard deviation"),
    "x_hat": (r"\hat x_{ic} = (x_{ic}-\mu_c)\,r_c", "x_hat = (x - mean) * rstd",
              "x normalized: mean 0, variance 1 per channel"),
    "y": (r"y_{ic} = \gamma_c\,\hat x_{ic} + \beta_c", "y = scale * x_hat + offset", "the output"),
}  # fmt: skip
FROZEN_STEPS = {
    "mean": (r"\mu_c = \text{the mean input}", "mean = the mean input", "frozen: the running mean, not the batch's"),
    "variance": (r"\sigma^2_c = \text{the variance input}", "variance = the variance input",
                 "frozen: the running variance"),
    "x_backprop": (r"\partial x_{ic} = \gamma_c r_c\,\partial y_{ic}", "x_backprop = dx_direct",
                   "dL/dx: the statistics are constants, so only the direct term remains"),
}  # fmt: skip
GRADIENT_STEPS = {
    "sum_dy": (r"\textstyle\sum_i \partial y_{ic}", "sum_dy = sum(dy)", "channel sum 1; it is offset_backprop"),
    "sum_dy_xc": (r"\textstyle\sum_i \partial y_{ic}\,(x_{ic}-\mu_c)", "sum_dy_xc = sum(dy * (x - mean))",
                  "channel sum 2; times rstd it is scale_backprop"),
    "offset_backprop": (r"\partial\beta_c = \textstyle\sum_i \partial y_{ic}", "offset_backprop = sum_dy",
                        "dL/d offset"),
    "scale_backprop": (r"\partial\gamma_c = r_c \textstyle\sum_i \partial y_{ic}(x_{ic}-\mu_c)",
                       "scale_backprop = rstd * sum_dy_xc", "dL/d scale = sum(dy * x_hat)"),
    "dx_direct": (r"\gamma_c r_c\,\partial y_{ic}", "dx_direct = scale * rstd * dy",
                  "through x_hat with the statistics held fixed"),
    "dx_via_mean": (r"-\gamma_c r_c\,\frac{1}{n}\textstyle\sum_j \partial y_{jc}",
                    "dx_via_mean = -scale * rstd * sum_dy / n", "through the mean: every x of the channel moves it"),
    "dx_via_variance": (r"-\gamma_c r_c^3\,(x_{ic}-\mu_c)\,\frac{1}{n}\textstyle\sum_j \partial y_{jc}(x_{jc}-\mu_c)",
                        "dx_via_variance = -scale * rstd^3 * (x - mean) * sum_dy_xc / n", "through the variance"),
    "x_backprop": (r"\partial x_{ic} = \text{direct} + \text{via mean} + \text{via variance}",
                   "x_backprop = dx_direct + dx_via_mean + dx_via_variance", "dL/dx"),
}  # fmt: skip
# kernel output -> (explained step, per element?)
CHECKED = {"y": ("y", True), "reserve_space_1": ("mean", False), "reserve_space_2": ("variance", False),
           "batch_variance": ("batch_variance", False), "x_backprop": ("x_backprop", True),
           "scale_backprop": ("scale_backprop", False), "offset_backprop": ("offset_backprop", False)}  # fmt: skip


@dataclass(frozen=True)
class Step:
    """One intermediate: its formula (LaTeX and plain text), its value and what it is."""

    name: str
    latex: str
    text: str
    meaning: str
    value: np.ndarray  # per channel (C,) or per element (C, n)


@dataclass(frozen=True)
class Check:
    """An explained value against the kernel's output of the same meaning."""

    output: str
    step: str
    max_abs_diff: float
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.max_abs_diff <= self.tolerance


@dataclass
class Explanation:
    shape: tuple[int, ...]
    data_format: str
    dtype: str
    epsilon: float
    is_training: bool
    backend: str
    inputs: dict[str, np.ndarray]
    forward: list[Step] = field(default_factory=list)
    gradient: list[Step] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    def step(self, name: str) -> Step:
        return next(s for s in (*self.forward, *self.gradient) if s.name == name)

    def title(self) -> str:
        mode = "training" if self.is_training else "frozen statistics (is_training=False)"
        return (f"x {list(self.shape)} {self.data_format} {self.dtype}, epsilon {self.epsilon:g}, {mode}; "
                f"n = {self.step('n').value[0]:.0f} elements per channel")  # fmt: skip

    def to_text(self) -> str:
        return _explain_render.to_text(self)

    def to_markdown(self) -> str:
        """Markdown with ``$$`` LaTeX blocks: the docs' derivation page."""
        return _explain_render.to_markdown(self, per_channel)

    def to_dict(self) -> dict:
        return _explain_render.to_dict(self)


def per_channel(a: np.ndarray, data_format: str) -> np.ndarray:
    """(C, n): channel c's elements in memory order, as the kernels' canonical view sees them."""
    axis = channel_axis(data_format, a.ndim)
    return np.moveaxis(a, axis, 0).reshape(a.shape[axis], -1)


def example_inputs(shape=(2, 2, 2, 3), data_format: str = "NHWC", seed: int = 0, dtype=np.float32) -> dict:
    """Small inputs with round numbers (2 decimals), so every intermediate is easy to follow."""
    rng = np.random.default_rng(seed)
    c = shape[channel_axis(data_format, len(shape))]
    return dict(
        x=np.round(rng.standard_normal(shape) * 2, 2).astype(dtype),
        dy=np.round(rng.standard_normal(shape), 1).astype(dtype),
        scale=np.round(rng.random(c) + 0.5, 2).astype(np.float32),
        offset=np.round(rng.standard_normal(c) * 0.5, 2).astype(np.float32),
        mean=np.round(rng.standard_normal(c) * 0.5, 2).astype(np.float32),
        variance=np.round(rng.random(c) + 0.5, 2).astype(np.float32),
    )


def explain(x, dy, scale, offset, *, mean=None, variance=None, epsilon: float = 1e-3, data_format: str = "NHWC",
            is_training: bool = True) -> Explanation:  # fmt: skip
    """Every intermediate of the forward and the gradient for ``x``/``dy``, checked against the kernels.

    ``mean``/``variance`` are the running statistics used when ``is_training=False``
    (default zeros and ones).
    """
    from ..framework.registry import get_backend

    x, dy = np.asarray(x), np.asarray(dy)
    scale, offset = np.asarray(scale, np.float32), np.asarray(offset, np.float32)
    c = scale.shape[0]
    mean = np.zeros(c, np.float32) if mean is None else np.asarray(mean, np.float32)
    variance = np.ones(c, np.float32) if variance is None else np.asarray(variance, np.float32)
    e = Explanation(tuple(x.shape), data_format, dtypes.tf_name(x.dtype), float(epsilon), is_training, get_backend(),
                    inputs=dict(x=x, dy=dy, scale=scale, offset=offset))  # fmt: skip
    if not is_training:
        e.inputs.update(mean=mean, variance=variance)
    outputs = _kernel_outputs(e, x, dy, scale, offset, mean, variance)  # (first: the op refuses bad input)
    values = _intermediates(per_channel(x.astype(np.float64), data_format), per_channel(dy.astype(np.float64),
                            data_format), *(v.astype(np.float64) for v in (scale, offset, mean, variance)),
                            float(epsilon), is_training)  # fmt: skip
    text = {**FORWARD_STEPS, **GRADIENT_STEPS, **({} if is_training else FROZEN_STEPS)}
    for name, value in values.items():
        (e.forward if name in FORWARD_STEPS else e.gradient).append(Step(name, *text[name], value))
    _check_against_kernels(e, outputs, x.dtype)
    return e


@np.errstate(invalid="ignore", divide="ignore", over="ignore")
def _intermediates(x, dy, gamma, beta, mean, variance, eps, training) -> dict[str, np.ndarray]:
    """The math, in float64 on (C, n) views; names as in the step tables.  A variance + epsilon of 0
    or below gives infinities and NaNs, as it does in the op: they are shown, not warned about."""
    n = x.shape[1]
    v: dict[str, np.ndarray] = {"n": np.array([float(n)])}
    if training:
        mean = x.mean(axis=1)
        variance = ((x - mean[:, None]) ** 2).mean(axis=1)
    v["mean"], v["variance"] = mean, variance
    if training:
        v["batch_variance"] = variance * n / max(n - 1, 1)
    r = v["rstd"] = 1 / np.sqrt(variance + eps)
    xc = x - mean[:, None]
    v["x_hat"] = xc * r[:, None]
    v["y"] = gamma[:, None] * v["x_hat"] + beta[:, None]
    sum_dy = v["sum_dy"] = dy.sum(axis=1)
    sum_dy_xc = v["sum_dy_xc"] = (dy * xc).sum(axis=1)
    v["offset_backprop"], v["scale_backprop"] = sum_dy, r * sum_dy_xc
    v["dx_direct"] = (gamma * r)[:, None] * dy
    if training:
        v["dx_via_mean"] = np.repeat((-gamma * r * sum_dy / n)[:, None], n, axis=1)
        v["dx_via_variance"] = -(gamma * r**3 * sum_dy_xc / n)[:, None] * xc
        v["x_backprop"] = v["dx_direct"] + v["dx_via_mean"] + v["dx_via_variance"]
    else:
        v["x_backprop"] = v["dx_direct"]
    return v


def _kernel_outputs(e: Explanation, x, dy, scale, offset, mean, variance) -> dict[str, np.ndarray]:
    """The forward's and the gradient's outputs from the kernels (raw_ops: their checks and errors)."""
    empty = np.zeros(0, np.float32)
    stats = dict(mean=empty, variance=empty) if e.is_training else dict(mean=mean, variance=variance)
    attrs = dict(epsilon=e.epsilon, data_format=e.data_format, is_training=e.is_training)
    fwd = raw_ops.FusedBatchNormV3(x=x, scale=scale, offset=offset, **stats, **attrs)
    grad = raw_ops.FusedBatchNormGradV3(y_backprop=dy, x=x, scale=scale, reserve_space_1=fwd.reserve_space_1,
                                        reserve_space_2=fwd.reserve_space_2, reserve_space_3=fwd.reserve_space_3,
                                        **attrs)  # fmt: skip
    return {**fwd._asdict(), **grad._asdict()}


def _max_diff(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want|, where a NaN matches a NaN and an infinity the same infinity (the math
    and the kernels agree there); a NaN or infinity against anything else is an infinite diff."""
    with np.errstate(invalid="ignore"):
        diff = np.abs(got - want)
    diff[(got == want) | (np.isnan(got) & np.isnan(want))] = 0.0
    diff[np.isnan(diff)] = np.inf
    return float(np.max(diff, initial=0.0))


def _check_against_kernels(e: Explanation, outputs: dict[str, np.ndarray], dtype) -> None:
    eps32 = float(np.finfo(np.float32).eps)
    # tensors are rounded once to their storage type; channel vectors are float32, accumulated in float64
    tensor_tol = 4 * float(ml_dtypes.finfo(dtype).eps) if dtypes.is_16bit(dtype) else 64 * eps32
    for output, (step, per_element) in CHECKED.items():
        if output == "batch_variance" and not e.is_training:
            continue
        want = e.step(step).value
        got = outputs[output].astype(np.float64)
        got = per_channel(got, e.data_format) if per_element else got
        scale = max(float(np.max(np.abs(want[np.isfinite(want)]), initial=0.0)), 1.0)  # (finite values set it)
        tol = (tensor_tol if per_element else 64 * eps32) * scale
        e.checks.append(Check(output, step, _max_diff(got, want), tol))
