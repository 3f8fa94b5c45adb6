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
    build's internals through its capsules (the stream, cache and prefetch thresholds, the narrowing runs)."""
    public = {n for n in dir(build) if not n.startswith("_") and n not in ("np", "ml_dtypes")}
    entry_points = {"batch_norm", "batch_norm_grad", "reduce_totals", "finish", "apply", "cpu_has_x86_64_v3",
                    "cpu_has_avx512_bf16"}  # fmt: skip
    constants = {"OPENMP_ENABLED", "SIMD_VARIANT", "NARROW_RUNS_ADDRESS"}
    constants |= {"STREAM_MIN_BYTES_ADDRESS", "STREAM_ROWS_MIN_BYTES_ADDRESS", "CACHED_MAX_BYTES_ADDRESS"}
    constants |= {"PREFETCH_BLOCK_MAX_BYTES_ADDRESS"}
    assert public == entry_points | constants


def _run_planes(dtype) -> np.ndarray:
    """Every bit pattern of `dtype` in runs of one channel: two samples whose planes are 16 values
    past a power of two, so the second starts half a line past a line boundary (the x86-64-v4
    build's runs first take a 16-value step to a whole line)."""
    values = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype)
    plane = np.concatenate([values, values[:16]])
    return np.stack([plane, plane[::-1]]).reshape(2, 1, -1)


def _row_planes(dtype) -> np.ndarray:
    """Every bit pattern of `dtype` (and 32 more) in channels-last rows of 48 channels: folded rows
    of 528 lanes (1056 bytes), so every other row starts half a line past a line boundary."""
    values = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype)
    return np.concatenate([values, values[:32]]).reshape(-1, 48, 1)


def _run_outputs(build, t: np.ndarray, gamma: float, streamed: bool, ops: str) -> list[np.ndarray]:
    """The build's outputs on t (runs or rows), stored ordinarily or streamed: "frozen" the frozen
    gradient (A * dy, t as dy); "all" also the inference forward (B * (x - m) + K, t as x) and the
    training gradient (A * ((dy + K) + B * (x - m)), t as both).  The coefficients differ by channel."""
    c = np.arange(t.shape[1], dtype=np.float32)
    scale, mean = np.float32(gamma) * (1 - c / 256), 0.25 + c / 64
    var, offset = np.full_like(c, 0.999), np.full_like(c, -0.5)
    old = _tools.set_stream_min_bytes(build, 0 if streamed else 1 << 62)
    try:
        outs = [build.batch_norm_grad(np.zeros_like(t), t, scale, mean, var, epsilon=1e-3, is_training=False)[0]]
        if ops == "all":
            outs.append(build.batch_norm(t, scale, offset, mean, var, epsilon=1e-3, is_training=False)[0])
            outs.append(build.batch_norm_grad(t, t, scale, mean, var, epsilon=1e-3, is_training=True)[0])
    finally:
        _tools.set_stream_min_bytes(build, old)
    return [o.view(np.uint16) for o in outs]


def _v4_and_v3_builds():
    from fbnops.kernels.cython_backend import available_builds

    builds = {b.SIMD_VARIANT: b for b in available_builds()}
    if "x86-64-v4" not in builds:
        pytest.skip("this CPU runs no x86-64-v4 build of the kernels (AVX-512 with AVX512-BF16)")
    return builds["x86-64-v4"], builds["x86-64-v3"]


@pytest.mark.parametrize("build", _builds(vector_only=True))
@pytest.mark.parametrize("streamed", [False, True], ids=["ordinary", "streamed"])
@pytest.mark.parametrize("gamma", [1.0, 1.00390625, 1.0039215, 0.7071068, 3.0e38, 1.0e-38])
def test_bf16_runs_round_as_the_portable_build(gamma, streamed, build):
    """Runs of one channel (planes of 512 values or more) narrow bfloat16 in pairs in the x86-64-v3
    build (the even and odd values of a 32-byte load computed apart and blended back), by the
    hardware in the x86-64-v4 one, 32 values a step (a step with a denormal product, gamma 1e-38,
    by the integer code).  Every bfloat16 bit pattern as dy, scaled by gamma/sqrt(var + eps)
    (products that round, tie, overflow or are NaN), comes out as the element-by-element
    narrowing of the portable build writes it, stored ordinarily or streamed.  (The frozen
    gradient only: the portable build has no FMA, so the other passes round apart by design.)"""
    t = _run_planes(ml_dtypes.bfloat16)
    got, want = (_run_outputs(b, t, gamma, streamed, "frozen") for b in (build, baseline))
    np.testing.assert_array_equal(got[0], want[0])


@pytest.mark.parametrize("layout", ["runs", "rows"])
@pytest.mark.parametrize("streamed", [False, True], ids=["ordinary", "streamed"])
@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16], ids=["bfloat16", "float16"])
@pytest.mark.parametrize("gamma", [1.0, 1.00390625, 0.7071068, 3.0e38, 1.0e-38])
def test_wide_steps_write_the_bits_of_the_x86_64_v3_build(gamma, dtype, streamed, layout):
    """The x86-64-v4 build's 32-value steps (_wide512.h) against the x86-64-v3 build's 16-value
    ones, in channel runs (channels-first planes) and in rows with per-lane coefficients
    (channels-last): every 16-bit bit pattern through the three element passes (A * dy;
    B * (x - m) + K; A * ((dy + K) + B * (x - m))), the same bits, NaNs included."""
    v4, v3 = _v4_and_v3_builds()
    t = _run_planes(dtype) if layout == "runs" else _row_planes(dtype)
    got, want = (_run_outputs(b, t, gamma, streamed, "all") for b in (v4, v3))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("strips", [True, False], ids=["strips", "one-by-one"])
@pytest.mark.parametrize("shape", [(4096, 48, 1), (2, 40, 784), (64, 24, 49)], ids=["rows", "planes", "small-planes"])
@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16], ids=["bfloat16", "float16"])
def test_wide_reductions_add_as_the_x86_64_v3_build(dtype, shape, strips):
    """The x86-64-v4 build's 16-lane reduction steps against the x86-64-v3 build's 8-lane ones, rows
    added in strips (as from cache) or one by one (as from memory): the training forward's and
    gradient's outputs, every byte."""
    v4, v3 = _v4_and_v3_builds()
    rng = np.random.default_rng(7)
    x, dy = ((rng.standard_normal(shape, dtype=np.float32) * 3 + 1).astype(dtype) for _ in range(2))
    c = np.arange(shape[1], dtype=np.float32)
    scale, offset = 1 + c / 32, c / 8
    outs = {}
    for b in (v4, v3):
        old = _tools.set_cached_max_bytes(b, 1 << 62 if strips else 0)  # (0: every reduction row by row)
        try:
            fwd = b.batch_norm(x, scale, offset, None, None, epsilon=1e-3, is_training=True)
            grad = b.batch_norm_grad(x, dy, scale, fwd[1], fwd[2], epsilon=1e-3, is_training=True)
        finally:
            _tools.set_cached_max_bytes(b, old)
        outs[b] = [np.asarray(o).view(np.uint8) for o in (*fwd, *grad) if o is not None]
    for g, w in zip(outs[v4], outs[v3], strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("layout", ["runs", "rows"])
@pytest.mark.parametrize("streamed", [False, True], ids=["ordinary", "streamed"])
@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16], ids=["bfloat16", "float16"])
@pytest.mark.parametrize("gamma", [1.0, 1.00390625, 0.7071068, 3.0e38, 1.0e-38])
def test_numba_16bit_runs_round_as_cythons(gamma, dtype, streamed, layout, monkeypatch):
    """The Numba backend's runs and rows narrow as the Cython build this CPU loads does: every bit
    pattern through the frozen gradient (A * dy) and the inference forward (B * (x - m) + K), in a
    run of odd length (the last value alone) and in channels-last rows of per-lane coefficients.
    Ordinary: bfloat16 two values to a 32-bit word, or 16 values narrowed by the CPU where it has
    AVX512-BF16 (a denormal product, gamma 1e-38, by the integer code).  Streamed (every output
    past the threshold): 8 values at a time in the vector intrinsic, whose bfloat16 rounding and
    NaN quieting are written out in vector IR apart from the scalar ones.  (The loaded build
    against the portable one: test_bf16_runs_round_as_the_portable_build.)"""
    extras.require_backend("cython")
    extras.require_backend("numba")
    from fbnops.kernels import cython_backend, numba_backend

    if streamed:
        if dtype == np.float16 and not numba_backend.HARDWARE_HALF:
            pytest.skip("Numba streams float16 only where it converts with F16C (x86-64-v3)")
        monkeypatch.setattr(numba_backend, "stream_min_bytes", 0)
        monkeypatch.setattr(numba_backend, "stream_rows_min_bytes", 0)
    values = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype)
    t = np.concatenate([values, values[:1]]).reshape(1, 1, -1) if layout == "runs" else _row_planes(dtype)
    c = np.arange(t.shape[1], dtype=np.float32)
    scale, mean = np.float32(gamma) * (1 - c / 256), 0.25 + c / 64
    var, offset = np.full_like(c, 0.999), np.full_like(c, -0.5)
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
