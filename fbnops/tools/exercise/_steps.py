"""The graded pieces of the NumPy exercises: steps (explain's intermediates) and end-to-end outputs.

The expected value of every step comes from :func:`fbnops.tools.explain._intermediates` (the
same float64 math the ``explain`` command prints), put back into the case's layout; the
expected end-to-end outputs come from the op itself (``fbnops.raw_ops``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...framework.layouts import channel_axis
from ..explain import _intermediates, per_channel
from ._grading import Case, Mismatch, Wrong, call, differs

EPSILON = 1e-3
STEP_TOLERANCE = 1e-6  # the learner computes in float64, as the expected values are


def from_channel_rows(v: np.ndarray, like: np.ndarray, data_format: str) -> np.ndarray:
    """Inverse of :func:`per_channel`: a (C, n) array back to ``like``'s shape and layout."""
    axis = channel_axis(data_format, like.ndim)
    moved = np.moveaxis(np.empty(like.shape, dtype=np.uint8), axis, 0).shape
    return np.moveaxis(v.reshape(moved), 0, axis)


def context(case: Case, training: bool, seed: int = 0) -> dict:
    """The case's inputs and every explained intermediate, per element ones in the case's layout."""
    inputs = case.inputs(seed)
    fmt, x = case.data_format, inputs["x"]
    rows = {k: per_channel(inputs[k].astype(np.float64), fmt) for k in ("x", "dy")}
    vectors = (inputs[k].astype(np.float64) for k in ("scale", "offset", "mean", "variance"))
    with np.errstate(all="ignore"), warnings.catch_warnings():  # an empty batch's statistics are 0/0 = NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        values = _intermediates(rows["x"], rows["dy"], *vectors, EPSILON, training)
    ctx = dict(inputs, data_format=fmt, epsilon=EPSILON, running_mean=inputs["mean"],
               running_variance=inputs["variance"])  # fmt: skip
    for name, v in values.items():
        ctx[name] = from_channel_rows(v, x, fmt) if v.ndim == 2 else v
    ctx["n"] = values["n"][0]
    return ctx


def other_layout(fmt: str) -> str:
    return {"NHWC": "NCHW", "NCHW": "NHWC", "NDHWC": "NCDHW", "NCDHW": "NDHWC"}[fmt]


def per_channel_in(fmt_of: Callable[[dict], str], fn: Callable[[np.ndarray], np.ndarray], key: str = "x"):
    """A per-channel reduction of ``ctx[key]`` computed in the layout ``fmt_of(ctx)`` (for wrong answers)."""
    return lambda ctx: fn(per_channel(ctx[key].astype(np.float64), fmt_of(ctx)))


SWAPPED_LAYOUT = "data_format says where the channels are: axis 1 for NCHW/NCDHW, the last axis for NHWC/NDHWC"


@dataclass(frozen=True)
class Step:
    """``function(*args)`` must equal ``ctx[expected]``; ``wrongs`` are known mistakes and their hints."""

    function: str
    args: tuple[str, ...]
    expected: str
    hint: str
    wrongs: tuple[Wrong, ...] = ()

    def grade(self, module, case: Case, ctx: dict, path: Path) -> Mismatch | None:
        got = call(module, self.function, *(ctx[a] for a in self.args), path=path)
        return compare(f"{self.function}()", got, np.asarray(ctx[self.expected], np.float64), STEP_TOLERANCE,
                       case, ctx, self.hint, self.wrongs)  # fmt: skip


@dataclass(frozen=True)
class Outputs:
    """``function(*args)`` returns a tuple whose items must equal the op's outputs ``names``."""

    function: str
    args: tuple[str, ...]
    names: tuple[str, ...]
    op: Callable[[dict], dict]  # ctx -> the op's outputs by name
    hints: dict[str, str] = field(default_factory=dict)
    wrongs: dict[str, tuple[Wrong, ...]] = field(default_factory=dict)

    def grade(self, module, case: Case, ctx: dict, path: Path, tolerance: float) -> Mismatch | None:
        got = call(module, self.function, *(ctx[a] for a in self.args), path=path)
        if not isinstance(got, tuple) or len(got) != len(self.names):
            n = len(got) if isinstance(got, tuple) else type(got).__name__
            return Mismatch(
                f"{self.function}()",
                case.name,
                f"  expected a tuple of {len(self.names)} ({', '.join(self.names)}), got {n}",
                "return the values in the order of the docstring",
            )
        want = self.op(ctx)
        for name, value in zip(self.names, got, strict=True):
            hint = self.hints.get(name, "each step passed on its own: look at how the function combines them")
            m = compare(f"{self.function}() -> {name}", value, np.asarray(want[name], np.float64), tolerance, case,
                        ctx, hint, self.wrongs.get(name, ()))  # fmt: skip
            if m:
                return m
        return None


def compare(what: str, got, want: np.ndarray, tolerance: float, case: Case, ctx: dict, hint: str,
            wrongs: tuple[Wrong, ...]) -> Mismatch | None:  # fmt: skip
    detail = differs(got, want, tolerance)
    if detail is None:
        return None
    for wrong in wrongs:  # a known mistake: say which, not how to fix the code
        try:
            with np.errstate(all="ignore"):
                alternative = np.asarray(wrong.compute(ctx), np.float64)
        except (ValueError, IndexError, KeyError):
            continue
        if alternative.shape == np.shape(got) and differs(got, alternative, tolerance) is None:
            return Mismatch(what, case.name, detail, wrong.hint)
    return Mismatch(what, case.name, detail, hint)
