"""How close is close enough: one tolerance table per dtype, and float64 oracle comparisons.

Every comparison here is *relative to the largest magnitude of the float64 oracle*
(``max |got - want| / max |want|``): batch-norm outputs are sums of many terms, so an
error is only meaningful against the size of the result, not element by element.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "Tolerance",
    "TOLERANCES",
    "X_TOL",
    "STAT_TOL",
    "tolerance",
    "rel_err",
    "close_to_oracle",
    "assert_close_to_oracle",
]


@dataclass(frozen=True)
class Tolerance:
    """``golden``: what TensorFlow itself meets on the golden cases; ``any_input``: for arbitrary
    (fuzzed) inputs, where a near-zero variance amplifies every rounding of the input."""

    golden: float
    any_input: float
    why: str


TOLERANCES: dict[str, Tolerance] = {
    "float32": Tolerance(
        1e-6,
        1e-4,
        "float32 outputs from float64 channel sums: a few float32 roundings (2^-24 each) of the largest "
        "value; arbitrary inputs with variance near epsilon amplify them up to ~100x.",
    ),
    "float16": Tolerance(
        5e-4,
        5e-3,
        "computed in float32 and rounded once to half: at most half an ulp, 2^-11 ~ 4.9e-4 of the largest "
        "value; ten ulps for arbitrary inputs whose own half rounding is amplified.",
    ),
    "bfloat16": Tolerance(
        3e-3,
        4e-2,
        "computed in float32 and rounded once to bfloat16 (8 significant bits): half an ulp is 2^-9 ~ 2e-3 "
        "of the largest value, plus the float32 error; ten ulps for arbitrary inputs.",
    ),
}
X_TOL = {name: t.golden for name, t in TOLERANCES.items()}  # tensors of dtype T (x_backprop, y)
STAT_TOL = TOLERANCES["float32"].golden  # per-channel float32 outputs (scale/offset backprop, statistics)


def tolerance(dtype, any_input: bool = False) -> float:
    """The relative tolerance for outputs of ``dtype`` (a name or a NumPy dtype)."""
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    t = TOLERANCES[name]
    return t.any_input if any_input else t.golden


def rel_err(got, want) -> float:
    """``max |got - want| / max |want|`` in float64 (the absolute error when ``want`` is all zero)."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        raise AssertionError(f"shapes differ: got {got.shape}, want {want.shape}")
    if want.size == 0:
        return 0.0
    scale = np.max(np.abs(want))
    err = np.max(np.abs(got - want))
    return float(err / scale) if scale > 0 else float(err)


def close_to_oracle(got, want, dtype, any_input: bool = True) -> bool:
    """NaN where the oracle has NaN, the same infinities, finite values within the dtype's tolerance
    of ``max(max |want|, 1)`` (a floor of 1: near-zero results are compared absolutely)."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    if got.shape != want.shape or not np.array_equal(np.isnan(got), np.isnan(want)):
        return False
    inf = np.isinf(want)
    if not np.array_equal(got[inf], want[inf]):
        return False
    finite = np.isfinite(want)
    if not finite.any():
        return True
    scale = max(float(np.max(np.abs(want[finite]))), 1.0)
    return bool(np.max(np.abs(got[finite] - want[finite])) <= tolerance(dtype, any_input) * scale)


def assert_close_to_oracle(got, want, dtype, any_input: bool = False, err_msg: str = "") -> None:
    """Assert ``rel_err(got, want) <= tolerance(dtype)``, with NaN/Inf placed as in ``want``."""
    got64, want64 = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got64.shape != want64.shape:
        raise AssertionError(f"{err_msg} shapes differ: got {got64.shape}, want {want64.shape}".strip())
    np.testing.assert_array_equal(np.isnan(got64), np.isnan(want64), err_msg=f"{err_msg} NaN positions")
    finite = np.isfinite(want64)
    np.testing.assert_array_equal(got64[~finite & ~np.isnan(want64)], want64[~finite & ~np.isnan(want64)])
    err, tol = rel_err(got64[finite], want64[finite]), tolerance(dtype, any_input)
    if err > tol:
        raise AssertionError(f"{err_msg} relative error {err:.3g} > tolerance {tol:g} for {dtype}".strip())
