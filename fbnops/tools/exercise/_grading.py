"""How a learner's answer is graded: the case grid, loading the file, and what a mismatch says.

An exercise is a list of *steps* (the ``fbnops explain`` intermediates, in the order of the
computation) and an end-to-end function checked against the real op. Each step is called
with the **right** inputs, so the first step that differs is the first mistake, not the
place where an earlier one shows up. A mismatch reports the case, where it differs, the
expected and actual values and a hint; the hint names a known wrong answer when the value
matches one (biased for unbiased variance, the other layout, a missing term), never the code.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import ml_dtypes
import numpy as np

from ...framework.layouts import channel_axis


@dataclass(frozen=True)
class Case:
    """One point of the grid: the data tensor's shape, layout and dtype, and what is special about it."""

    name: str
    shape: tuple[int, ...]
    data_format: str
    dtype: str = "float32"
    shift: float = 0.0  # added to x: a large offset exposes E[x^2] - E[x]^2 cancellation
    nan: bool = False  # one NaN in channel 0

    @property
    def channels(self) -> int:
        return self.shape[channel_axis(self.data_format, len(self.shape))]

    def inputs(self, seed: int = 0) -> dict[str, np.ndarray]:
        """x, dy in the case's dtype; scale, offset, running mean and variance in float32."""
        rng = np.random.default_rng(seed)
        dtype = ml_dtypes.bfloat16 if self.dtype == "bfloat16" else np.dtype(self.dtype)
        x = rng.standard_normal(self.shape) * 1.5 + 0.25 + self.shift
        if self.nan and x.size:
            x[(0,) * x.ndim] = np.nan  # channel 0 of the first element
        c = self.channels
        return dict(
            x=x.astype(dtype),
            dy=rng.standard_normal(self.shape).astype(dtype),
            scale=(rng.random(c) + 0.5).astype(np.float32),
            offset=rng.standard_normal(c).astype(np.float32),
            mean=rng.standard_normal(c).astype(np.float32),
            variance=(rng.random(c) + 0.5).astype(np.float32),
        )


GRID = (
    Case("NHWC float32", (2, 3, 3, 4), "NHWC"),
    Case("NCHW float32", (2, 4, 3, 5), "NCHW"),
    Case("NDHWC float32", (2, 2, 3, 2, 3), "NDHWC"),
    Case("NCDHW float32", (2, 3, 2, 2, 3), "NCDHW"),
    Case("NHWC float16", (3, 2, 2, 4), "NHWC", "float16"),
    Case("NCHW bfloat16", (3, 4, 2, 2), "NCHW", "bfloat16"),
    Case("N = 1", (1, 2, 2, 3), "NHWC"),
    Case("one element per channel", (1, 1, 1, 3), "NHWC"),
    Case("large offset (x + 1000)", (4, 3, 3, 2), "NHWC", shift=1000.0),
    Case("a NaN in channel 0", (2, 2, 2, 3), "NHWC", nan=True),
    Case("empty batch (N = 0)", (0, 2, 2, 3), "NCHW"),
)


@dataclass(frozen=True)
class Wrong:
    """A known wrong answer: how to compute it, and the hint to give when the learner's value matches it."""

    compute: Callable[..., np.ndarray]
    hint: str


@dataclass
class Mismatch:
    what: str  # the step or output that differs
    case: str
    detail: str
    hint: str

    def __str__(self) -> str:
        return f"{self.what} differs on case '{self.case}':\n{self.detail}\n  hint: {self.hint}"


@dataclass
class Report:
    exercise: str
    checked: list[str] = field(default_factory=list)
    mismatch: Mismatch | None = None

    @property
    def ok(self) -> bool:
        return self.mismatch is None

    def __str__(self) -> str:
        if self.ok:
            return f"{self.exercise}: all {len(self.checked)} checks pass. Well done."
        return f"{self.exercise}: {self.mismatch}"


class AnswerError(Exception):
    """The learner's code could not be run (not written yet, raised, wrong return type)."""


def load_answer(path: Path):
    """Import the learner's file as a fresh module (it is their code: run it as they wrote it)."""
    name = f"_fbnops_exercise_answer_{abs(hash(path.resolve()))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise AnswerError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise AnswerError(f"{path} does not import: {_where(e, path)}") from None
    finally:
        sys.modules.pop(name, None)
    return module


def call(module, function: str, *args, path: Path) -> object:
    fn = getattr(module, function, None)
    if not callable(fn):
        raise AnswerError(f"{path.name} has no function {function}() (keep the names of the template)")
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():  # 0/0 on an empty batch is NaN, as in the op
            warnings.simplefilter("ignore", RuntimeWarning)
            return fn(*args)
    except NotImplementedError:
        raise AnswerError(f"{function}() is not written yet (it raises NotImplementedError)") from None
    except Exception as e:
        raise AnswerError(f"{function}() raised {_where(e, path)}") from None


def _where(e: Exception, path: Path) -> str:
    frames = [f for f in traceback.extract_tb(e.__traceback__) if Path(f.filename).name == path.name]
    at = f" (line {frames[-1].lineno}: {frames[-1].line})" if frames else ""
    return f"{type(e).__name__}: {e}{at}"


def differs(got, want, tolerance: float) -> str | None:
    """None when ``got`` matches ``want``; else where and how it differs, in a few lines."""
    try:
        g = np.asarray(got, dtype=np.float64)
    except (TypeError, ValueError):
        return f"  expected an array of shape {want.shape}, got {type(got).__name__}"
    if g.shape != want.shape:
        return f"  expected shape {want.shape}, got {g.shape}"
    with np.errstate(invalid="ignore"):
        bad = ~((np.abs(g - want) <= tolerance * max(1.0, float(np.nanmax(np.abs(want), initial=0))))
                | (np.isnan(g) & np.isnan(want)))  # fmt: skip
    if not bad.any():
        return None
    at = tuple(int(i) for i in np.argwhere(bad)[0])
    where = f"at index {at}" if want.ndim else "the value"
    return (f"  {where}: expected {want[at] if want.ndim else want:.6g}, got {g[at] if g.ndim else g:.6g}"
            f" ({int(bad.sum())} of {bad.size} values differ)")  # fmt: skip


def tolerance_for(dtype: str) -> float:
    """Relative to the largest expected magnitude: a few roundings of the output type."""
    eps = float(ml_dtypes.finfo(ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)).eps)
    return max(4 * eps, 1e-5)
