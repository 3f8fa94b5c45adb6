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
"""

from __future__ import annotations

from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from .. import raw_ops
from ..framework import dtypes

__all__ = ["Step", "Check", "Explanation", "explain", "example_inputs"]

CHANNELS_FIRST = ("NCHW", "NCDHW")


@dataclass(frozen=True)
class Step:
    """One intermediate: its symbol, formula (LaTeX and plain text), value and meaning."""

    name: str
    latex: str
    text: str
    value: np.ndarray  # per channel (C,) or per element (C, n): the channel's elements in memory order
    meaning: str


@dataclass(frozen=True)
class Check:
    """An explained value against the kernel's output of the same name."""

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
        return all(c.ok for c in self.checks)

    def step(self, name: str) -> Step:
        return next(s for s in (*self.forward, *self.gradient) if s.name == name)

    def to_text(self) -> str:
        lines = [self._title(), ""]
        for title, steps in (
            ("Forward (FusedBatchNormV3)", self.forward),
            ("Gradient (FusedBatchNormGradV3)", self.gradient),
        ):
            lines.append(title)
            for s in steps:
                lines += [f"  {s.name:16s} {s.text}", f"  {'':16s} ({s.meaning})"]
                lines += [f"  {'':16s} {row}" for row in _rows(s.value)]
            lines.append("")
        lines.append(f"Checked against the {self.backend} kernels:")
        lines += [
            f"  {c.output:16s} = {c.step:14s} max |diff| {c.max_abs_diff:.1e} <= {c.tolerance:.0e}  "
            f"{'OK' if c.ok else 'FAILED'}"
            for c in self.checks
        ]
        return "\n".join(lines) + "\n"

    def to_markdown(self) -> str:
        lines = [f"*{self._title()}*", "", "### Inputs", ""]
        for name, value in self.inputs.items():
            shown = _per_channel(value, self.data_format) if value.ndim > 1 else value
            lines += [f"**{name}**", "", *_markdown_table(shown.astype(np.float64)), ""]
        for title, steps in (
            ("Forward: `FusedBatchNormV3`", self.forward),
            ("Gradient: `FusedBatchNormGradV3`", self.gradient),
        ):
            lines += [f"### {title}", ""]
            for s in steps:
                lines += [f"**{s.name}**: {s.meaning}.", "", "$$", s.latex, "$$", ""]
                if s.value.size == 1:
                    lines += [f"$n = {s.value[0]:.0f}$", ""]
                else:
                    lines += [*_markdown_table(s.value), ""]
        lines += [
            f"### Checked against the `{self.backend}` kernels",
            "",
            "| kernel output | step | max abs diff | tolerance | |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| `{c.output}` | {c.step} | {c.max_abs_diff:.1e} | {c.tolerance:.0e} | {'OK' if c.ok else 'FAILED'} |"
            for c in self.checks
        ]
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict:
        def steps(ss):
            return [
                {"name": s.name, "formula": s.text, "latex": s.latex, "meaning": s.meaning, "value": s.value.tolist()}
                for s in ss
            ]

        return {
            "shape": list(self.shape),
            "data_format": self.data_format,
            "dtype": self.dtype,
            "epsilon": self.epsilon,
            "is_training": self.is_training,
            "backend": self.backend,
            "inputs": {k: v.tolist() for k, v in self.inputs.items()},
            "forward": steps(self.forward),
            "gradient": steps(self.gradient),
            "checks": [
                {
                    "output": c.output,
                    "step": c.step,
                    "max_abs_diff": c.max_abs_diff,
                    "tolerance": c.tolerance,
                    "ok": c.ok,
                }
                for c in self.checks
            ],
            "ok": self.ok,
        }

    def _title(self) -> str:
        mode = "training" if self.is_training else "frozen statistics (is_training=False)"
        return (
            f"x {list(self.shape)} {self.data_format} {self.dtype}, epsilon {self.epsilon:g}, {mode}; "
            f"n = {self.step('n').value[0]:.0f} elements per channel"
        )


def _markdown_table(value: np.ndarray) -> list[str]:
    """A channel vector as one row with a column per channel; a (C, n) array as a row per channel."""
    cells = [f"{v:+.5f}" for v in value.reshape(-1)]
    if value.ndim == 1:
        return [
            "| c | " + " | ".join(map(str, range(value.size))) + " |",
            "|---" * (value.size + 1) + "|",
            "| value | " + " | ".join(cells) + " |",
        ]
    return ["| c | the channel's elements, in memory order |", "|---|---|"] + [
        f"| {c} | `{row}` |" for c, row in enumerate(_rows(value, label=False))
    ]


def _rows(value: np.ndarray, label: bool = True) -> list[str]:
    fmt = {"float_kind": lambda v: f"{v:+.5f}"}
    if value.ndim == 1:
        return [np.array2string(value, formatter=fmt, max_line_width=200)]
    return [
        (f"c={c}: " if label else "") + np.array2string(row, formatter=fmt, max_line_width=10_000)
        for c, row in enumerate(value)
    ]


def _per_channel(a: np.ndarray, data_format: str) -> np.ndarray:
    """(C, n): channel c's elements in memory order, as the kernels' canonical view sees them."""
    axis = 1 if data_format in CHANNELS_FIRST else a.ndim - 1
    return np.moveaxis(a, axis, 0).reshape(a.shape[axis], -1)


def example_inputs(shape=(2, 2, 2, 3), data_format: str = "NHWC", seed: int = 0, dtype=np.float32) -> dict:
    """Small inputs with round numbers (2 decimals), so every intermediate is easy to follow."""
    rng = np.random.default_rng(seed)
    c = shape[1] if data_format in CHANNELS_FIRST else shape[-1]
    return dict(
        x=np.round(rng.standard_normal(shape) * 2, 2).astype(dtype),
        dy=np.round(rng.standard_normal(shape), 1).astype(dtype),
        scale=np.round(rng.random(c) + 0.5, 2).astype(np.float32),
        offset=np.round(rng.standard_normal(c) * 0.5, 2).astype(np.float32),
        mean=np.round(rng.standard_normal(c) * 0.5, 2).astype(np.float32),
        variance=np.round(rng.random(c) + 0.5, 2).astype(np.float32),
    )


def explain(
    x,
    dy,
    scale,
    offset,
    *,
    mean=None,
    variance=None,
    epsilon: float = 1e-3,
    data_format: str = "NHWC",
    is_training: bool = True,
) -> Explanation:
    """Every intermediate of the forward and the gradient for ``x``/``dy``, checked against the kernels.

    ``mean``/``variance`` are the running statistics used when ``is_training=False``.
    """
    from ..framework.registry import get_backend

    x, dy = np.asarray(x), np.asarray(dy)
    scale, offset = np.asarray(scale, np.float32), np.asarray(offset, np.float32)
    c = scale.shape[0]
    frozen_stats = (
        np.zeros(c, np.float32) if mean is None else np.asarray(mean, np.float32),
        np.ones(c, np.float32) if variance is None else np.asarray(variance, np.float32),
    )
    e = Explanation(
        tuple(x.shape),
        data_format,
        dtypes.tf_name(x.dtype),
        float(epsilon),
        is_training,
        get_backend(),
        inputs=dict(x=x, dy=dy, scale=scale, offset=offset),
    )
    if not is_training:
        e.inputs.update(mean=frozen_stats[0], variance=frozen_stats[1])
    _explain_math(
        e,
        _per_channel(x.astype(np.float64), data_format),
        _per_channel(dy.astype(np.float64), data_format),
        scale.astype(np.float64),
        offset.astype(np.float64),
        *(s.astype(np.float64) for s in frozen_stats),
    )
    _check_against_kernels(e, x, dy, scale, offset, *frozen_stats)
    return e


def _explain_math(e: Explanation, x, dy, gamma, beta, mu_frozen, var_frozen) -> None:
    n = x.shape[1]
    col = np.newaxis
    f, g = e.forward.append, e.gradient.append
    f(
        Step(
            "n",
            r"n = \text{elements per channel}",
            "n = N*H*W (all axes but C)",
            np.array([float(n)]),
            "how many values each channel's statistics are taken over",
        )
    )
    if e.is_training:
        mu = x.mean(axis=1)
        var = ((x - mu[:, col]) ** 2).mean(axis=1)
        f(
            Step(
                "mean",
                r"\mu_c = \frac{1}{n}\sum_i x_{ic}",
                "mean = sum(x) / n",
                mu,
                "the batch mean: reserve_space_1 and batch_mean",
            )
        )
        f(
            Step(
                "variance",
                r"\sigma^2_c = \frac{1}{n}\sum_i (x_{ic}-\mu_c)^2",
                "variance = sum((x - mean)^2) / n",
                var,
                "the biased batch variance: reserve_space_2, what the gradient needs",
            )
        )
        f(
            Step(
                "batch_variance",
                r"s^2_c = \frac{n}{n-1}\,\sigma^2_c",
                "batch_variance = variance * n / (n - 1)",
                var * n / max(n - 1, 1),
                "Bessel-corrected, only for the running statistics (output batch_variance)",
            )
        )
    else:
        mu, var = mu_frozen, var_frozen
        f(
            Step(
                "mean",
                r"\mu_c = \text{mean input}",
                "mean = the mean input",
                mu,
                "frozen: the running mean, not the batch's",
            )
        )
        f(
            Step(
                "variance",
                r"\sigma^2_c = \text{variance input}",
                "variance = the variance input",
                var,
                "frozen: the running variance",
            )
        )
    r = 1 / np.sqrt(var + e.epsilon)
    xc = x - mu[:, col]
    xhat = xc * r[:, col]
    f(
        Step(
            "rstd",
            r"r_c = \frac{1}{\sqrt{\sigma^2_c + \epsilon}}",
            "rstd = 1 / sqrt(variance + epsilon)",
            r,
            "the reciprocal standard deviation",
        )
    )
    f(
        Step(
            "x_hat",
            r"\hat x_{ic} = (x_{ic}-\mu_c)\,r_c",
            "x_hat = (x - mean) * rstd",
            xhat,
            "x normalized: mean 0, variance 1 per channel",
        )
    )
    f(
        Step(
            "y",
            r"y_{ic} = \gamma_c\,\hat x_{ic} + \beta_c",
            "y = scale * x_hat + offset",
            gamma[:, col] * xhat + beta[:, col],
            "the output",
        )
    )

    sum_dy = dy.sum(axis=1)
    sum_dy_xc = (dy * xc).sum(axis=1)
    g(
        Step(
            "sum_dy",
            r"\textstyle\sum_i \partial y_{ic}",
            "sum_dy = sum(dy)",
            sum_dy,
            "channel sum 1; it is offset_backprop",
        )
    )
    g(
        Step(
            "sum_dy_xc",
            r"\textstyle\sum_i \partial y_{ic}\,(x_{ic}-\mu_c)",
            "sum_dy_xc = sum(dy * (x - mean))",
            sum_dy_xc,
            "channel sum 2; times rstd it is scale_backprop",
        )
    )
    g(
        Step(
            "offset_backprop",
            r"\partial\beta_c = \textstyle\sum_i \partial y_{ic}",
            "offset_backprop = sum_dy",
            sum_dy,
            "dL/d offset",
        )
    )
    g(
        Step(
            "scale_backprop",
            r"\partial\gamma_c = r_c \textstyle\sum_i \partial y_{ic}(x_{ic}-\mu_c)",
            "scale_backprop = rstd * sum_dy_xc",
            r * sum_dy_xc,
            "dL/d scale = sum(dy * x_hat)",
        )
    )
    direct = gamma[:, col] * r[:, col] * dy
    g(
        Step(
            "dx_direct",
            r"\gamma_c r_c\,\partial y_{ic}",
            "dx_direct = scale * rstd * dy",
            direct,
            "through x_hat with the statistics held fixed (all of dx when they are frozen)",
        )
    )
    if e.is_training:
        through_mean = np.repeat((-gamma * r * sum_dy / n)[:, col], n, axis=1)
        through_var = -(gamma * r**3 * sum_dy_xc / n)[:, col] * xc
        g(
            Step(
                "dx_via_mean",
                r"-\gamma_c r_c\,\frac{1}{n}\textstyle\sum_j \partial y_{jc}",
                "dx_via_mean = -scale * rstd * sum_dy / n",
                through_mean,
                "through the mean: every x of the channel moves it",
            )
        )
        g(
            Step(
                "dx_via_variance",
                r"-\gamma_c r_c^3\,(x_{ic}-\mu_c)\,\frac{1}{n}\textstyle\sum_j \partial y_{jc}(x_{jc}-\mu_c)",
                "dx_via_variance = -scale * rstd^3 * (x - mean) * sum_dy_xc / n",
                through_var,
                "through the variance",
            )
        )
        dx = direct + through_mean + through_var
        latex, text = (
            r"\partial x_{ic} = \text{direct} + \text{via mean} + \text{via variance}",
            "x_backprop = the sum of the three terms",
        )
    else:
        dx, latex, text = direct, r"\partial x_{ic} = \gamma_c r_c\,\partial y_{ic}", "x_backprop = dx_direct"
    g(Step("x_backprop", latex, text, dx, "dL/dx"))


def _check_against_kernels(e: Explanation, x, dy, scale, offset, mean, variance) -> None:
    empty = np.zeros(0, np.float32)
    fwd = raw_ops.FusedBatchNormV3(
        x=x,
        scale=scale,
        offset=offset,
        mean=mean if not e.is_training else empty,
        variance=variance if not e.is_training else empty,
        epsilon=e.epsilon,
        data_format=e.data_format,
        is_training=e.is_training,
    )
    grad = raw_ops.FusedBatchNormGradV3(
        y_backprop=dy,
        x=x,
        scale=scale,
        reserve_space_1=fwd.reserve_space_1,
        reserve_space_2=fwd.reserve_space_2,
        reserve_space_3=fwd.reserve_space_3,
        epsilon=e.epsilon,
        data_format=e.data_format,
        is_training=e.is_training,
    )
    eps32 = float(np.finfo(np.float32).eps)
    # tensors are rounded once to their storage type; channel vectors are float32 accumulated in float64
    tensor_tol = 4 * float(ml_dtypes.finfo(x.dtype).eps) if dtypes.is_16bit(x.dtype) else 64 * eps32
    pairs = [
        ("y", fwd.y, "y", e.data_format),
        ("reserve_space_1", fwd.reserve_space_1, "mean", None),
        ("reserve_space_2", fwd.reserve_space_2, "variance", None),
        ("x_backprop", grad.x_backprop, "x_backprop", e.data_format),
        ("scale_backprop", grad.scale_backprop, "scale_backprop", None),
        ("offset_backprop", grad.offset_backprop, "offset_backprop", None),
    ]
    if e.is_training:
        pairs.insert(3, ("batch_variance", fwd.batch_variance, "batch_variance", None))
    for output, got, step, fmt in pairs:
        want = e.step(step).value
        got = _per_channel(got.astype(np.float64), fmt) if fmt else got.astype(np.float64)
        scale_of = max(float(np.max(np.abs(want))), 1.0)
        tol = (tensor_tol if fmt else 64 * eps32) * scale_of
        e.checks.append(Check(output, step, float(np.max(np.abs(got - want))), tol))
