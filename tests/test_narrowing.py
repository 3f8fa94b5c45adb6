"""The kernels' vector narrowing to float16/bfloat16 (16 and 8 lanes at a time in the x86-64-v3
build; bfloat16 by the hardware in the x86-64-v4 one) rounds every value as NumPy and ml_dtypes
do: to nearest even, NaN kept a NaN, denormals kept.

Each loaded build is checked (the portable one always; the x86-64-v3 and -v4 ones where this CPU
runs them), on random bit patterns, every float16 rounding boundary (+-1 ulp), runs of denormals
and special values, at lengths that exercise the 16-lane, 8-lane and one-by-one paths.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from fbnops.kernels._cython import _tools
from fbnops.kernels._cython import batch_norm as baseline
from fbnops.testing import extras


def _builds(vector_only: bool = False):
    """Every build this CPU runs (cython_backend.available_builds), or those past the portable one."""
    from fbnops.kernels.cython_backend import available_builds

    found = [b for b in available_builds() if not (vector_only and b is baseline)]
    return [pytest.param(b, id=b.SIMD_VARIANT) for b in found] or [
        pytest.param(None, marks=pytest.mark.skip(reason="this CPU runs no x86-64-v3 or -v4 build of the kernels"))
    ]


def _floats() -> np.ndarray:
    rng = np.random.default_rng(1)
    random_bits = rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)
    halves = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    h = np.sort(halves[np.isfinite(halves)].astype(np.float64))
    mids = ((h[1:] + h[:-1]) / 2).astype(np.float32)
    # bfloat16 ties: the odd/even upper halves with exactly 0x8000 below, and +-1 around them
    tie_bits = (np.arange(1 << 16, dtype=np.uint32) << 16) | 0x8000
    ties = np.concatenate([tie_bits, tie_bits + 1, tie_bits - 1]).view(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 65504, 65520, 3e38, 1e-40, 6e-8], np.float32)
    nans = np.array([0x7F800001, 0xFF800001, 0x7FC00000, 0x7FFFFFFF], np.uint32).view(np.float32)
    near = [mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf)]
    # denormals in whole vectors (the hardware bfloat16 narrowing reads them as zero: the integer code takes them)
    mantissas = np.arange(1, 1 << 23, 997, dtype=np.uint32)
    denormals = (mantissas | (np.arange(mantissas.size, dtype=np.uint32) % 2) << 31).view(np.float32)
    return np.concatenate([random_bits, *near, ties, special, nans, denormals])


@pytest.mark.parametrize("build", _builds())
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_narrowing_is_round_to_nearest_even(build, dtype):
    f = _floats()
    with np.errstate(over="ignore", invalid="ignore"):
        want = f.astype(dtype)
    nan = np.isnan(want.astype(np.float32))
    for n in (f.size, 16 * 5 + 8 + 3, 7):  # the vector paths and tails, and a tail alone
        got = _tools.narrow(build, f[:n], dtype)
        assert got.dtype == np.dtype(dtype)
        assert np.isnan(got[nan[:n]].astype(np.float32)).all()
        np.testing.assert_array_equal(got[~nan[:n]].view(np.uint16), want[:n][~nan[:n]].view(np.uint16))


@pytest.mark.parametrize("build", _builds())
def test_narrowing_keeps_nan_sign_and_payload_top_bits(build):
    # a quiet NaN stays the same NaN with the quiet bit set (what the scalar store does)
    bits = np.array([0x7F800001, 0xFF800001, 0x7FA00000, 0xFFC12345], np.uint32)
    got = _tools.narrow(build, np.tile(bits.view(np.float32), 8), ml_dtypes.bfloat16).view(np.uint16)
    np.testing.assert_array_equal(got, np.tile(((bits >> 16) | 0x40).astype(np.uint16), 8))


@pytest.mark.parametrize("build", _builds())
def test_narrowing_other_dtype_is_a_value_error(build):
    with pytest.raises(ValueError, match="dtype"):
        _tools.narrow(build, np.zeros(3, np.float32), np.float32)


@pytest.mark.parametrize("build", _builds())
def test_kernel_modules_export_no_test_entry_points(build):
    """The production modules hold the kernels' entry points only; test hooks live in _tools and reach a
    build's internals through its capsules (the stream and cache thresholds, the narrowing runs)."""
    public = {n for n in dir(build) if not n.startswith("_") and n not in ("np", "ml_dtypes")}
    entry_points = {"batch_norm", "batch_norm_grad", "reduce_totals", "finish", "apply", "cpu_has_x86_64_v3",
                    "cpu_has_avx512_bf16"}  # fmt: skip
    constants = {"OPENMP_ENABLED", "SIMD_VARIANT", "NARROW_RUNS_ADDRESS"}
    constants |= {"STREAM_MIN_BYTES_ADDRESS", "CACHED_MAX_BYTES_ADDRESS"}
    assert public == entry_points | constants


@pytest.mark.parametrize("build", _builds(vector_only=True))
@pytest.mark.parametrize("gamma", [1.0, 1.00390625, 1.0039215, 0.7071068, 3.0e38, 1.0e-38])
def test_bf16_runs_round_as_the_portable_build(gamma, build):
    """Runs of one channel (planes of 512 values or more) narrow bfloat16 in pairs in the x86-64-v3
    build (the even and odd values of a 32-byte load computed apart and blended back), by the
    hardware in the x86-64-v4 one (denormal products, gamma 1e-38, by the integer code).  Every bfloat16 bit pattern as
    dy, scaled by gamma/sqrt(var + eps) (products that round, tie, overflow or are NaN), comes out
    as the element-by-element narrowing of the portable build writes it."""
    dy = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(ml_dtypes.bfloat16).reshape(1, 1, -1)
    x = np.zeros_like(dy)
    scale, mean, var = (np.array([v], np.float32) for v in (gamma, 0.0, 0.999))
    outs = [
        b.batch_norm_grad(x, dy, scale, mean, var, epsilon=1e-3, is_training=False)[0].view(np.uint16)
        for b in (baseline, build)
    ]
    np.testing.assert_array_equal(outs[1], outs[0])


@pytest.mark.parametrize("streamed", [False, True], ids=["ordinary", "streamed"])
@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16], ids=["bfloat16", "float16"])
@pytest.mark.parametrize("gamma", [1.0, 1.00390625, 0.7071068, 3.0e38])
def test_numba_16bit_runs_round_as_cythons(gamma, dtype, streamed, monkeypatch):
    """The Numba backend's runs narrow as the Cython build this CPU loads does: every bit pattern
    through the frozen gradient (A * dy) and the inference forward (B * (x - m) + K), at an odd
    run length (the last value alone).  Ordinary: bfloat16 two values to a 32-bit word.  Streamed
    (every output past the threshold): 8 values at a time in the vector intrinsic, whose
    bfloat16 rounding and NaN quieting are written out in vector IR apart from the scalar ones.
    (The loaded build against the portable one: test_bf16_runs_round_as_the_portable_build.)"""
    extras.require_backend("cython")
    extras.require_backend("numba")
    from fbnops.kernels import cython_backend, numba_backend

    if streamed:
        if dtype == np.float16 and not numba_backend.HARDWARE_HALF:
            pytest.skip("Numba streams float16 only where it converts with F16C (x86-64-v3)")
        monkeypatch.setattr(numba_backend, "stream_min_bytes", 0)
    values = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype)
    t = np.concatenate([values, values[:1]]).reshape(1, 1, -1)  # (an odd length)
    scale, mean, var, offset = (np.array([v], np.float32) for v in (gamma, 0.25, 0.999, -0.5))
    cython = cython_backend._bn
    for build in (cython, numba_backend):
        kw = {"num_threads": 1} if build is cython else {}
        grad = build.batch_norm_grad(np.zeros_like(t), t, scale, mean, var, epsilon=1e-3, is_training=False, **kw)
        fwd = build.batch_norm(t, scale, offset, mean, var, epsilon=1e-3, is_training=False, **kw)
        if build is cython:
            want = grad[0], fwd[0]
        else:
            _assert_same_bits(grad[0], want[0])
            _assert_same_bits(fwd[0], want[1])


def _assert_same_bits(got: np.ndarray, want: np.ndarray) -> None:
    """Bit for bit, but a float16 NaN only as a NaN: F16C keeps the top bits of its payload, the
    portable build's conversion (Numba's too, without F16C) writes the canonical one (bfloat16
    NaNs are rounded in code, the same way everywhere)."""
    nan = np.isnan(want.astype(np.float32)) if want.dtype == np.float16 else np.zeros(want.shape, bool)
    assert np.isnan(got[nan].astype(np.float32)).all()
    np.testing.assert_array_equal(got.view(np.uint16)[~nan], want.view(np.uint16)[~nan])
