"""Compiled-kernel properties: determinism, thread safety, exact 16-bit conversions."""

from __future__ import annotations

import threading
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from data import make_kernel_bits as lock  # tests/data, on the path as `data`

import fbnops
from fbnops.framework import threads
from fbnops.testing import extras, grad_inputs

raw = fbnops.raw_ops
PARALLEL = [b for b in fbnops.available_backends() if b != "reference"]

# Big enough for several work items and for the parallel path (>= 32768 elements).
SHAPES = [
    ((8, 24, 20, 24), "NHWC"),
    ((4, 3, 60, 61), "NCHW"),
    ((3, 70, 33, 5), "NHWC"),
    ((2, 4, 3, 40, 50), "NCDHW"),
    ((64, 3, 3, 301), "NHWC"),
    ((24, 37, 7, 7), "NCHW"),  # channel blocks of small planes, split over the batch
    ((2, 512, 7, 7), "NCHW"),  # one fused item per channel block
]


@pytest.fixture(params=PARALLEL)
def parallel_backend(request):
    with fbnops.backend(request.param):
        yield request.param


@pytest.fixture
def restore_threads():
    with threads.setting_kept():
        yield


def _all_outputs(shape, data_format, dtype, is_training):
    inputs = grad_inputs(shape, data_format, dtype, seed=5)
    g = raw.FusedBatchNormGradV3(**inputs, data_format=data_format, is_training=is_training)
    f = raw.FusedBatchNormV3(
        x=inputs["x"],
        scale=inputs["scale"],
        offset=inputs["reserve_space_1"],
        mean=inputs["reserve_space_1"],
        variance=inputs["reserve_space_2"],
        data_format=data_format,
        is_training=is_training,
    )
    return [np.asarray(a).view(np.uint8) for a in (*g[:3], *f[:5])]


@pytest.mark.parametrize("shape,data_format", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("is_training", [True, False])
def test_bitwise_identical_for_any_thread_count(
    parallel_backend, restore_threads, shape, data_format, dtype, is_training
):
    results = []
    for n in (1, 2, 3, 4):
        fbnops.set_num_threads(n)
        results.append(_all_outputs(shape, data_format, dtype, is_training))
    for other in results[1:]:
        for a, b in zip(results[0], other, strict=True):
            np.testing.assert_array_equal(a, b)


def test_two_python_threads_at_once(parallel_backend):
    cases = [grad_inputs(s, f, seed=i) | {"data_format": f} for i, (s, f) in enumerate(SHAPES[:2])]
    expected = [raw.FusedBatchNormGradV3(**c) for c in cases]
    errors = []

    def worker(k):
        try:
            with fbnops.backend(parallel_backend):  # backend blocks are per thread, like TF's device scopes
                for _ in range(5):
                    got = raw.FusedBatchNormGradV3(**cases[k])
                    for a, b in zip(got, expected[k], strict=True):
                        np.testing.assert_array_equal(a, b)
        except Exception as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k % 2,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


cython = pytest.importorskip("fbnops.kernels._cython.batch_norm") if "cython" in PARALLEL else None
tools = pytest.importorskip("fbnops.kernels._cython._tools") if "cython" in PARALLEL else None


@pytest.mark.skipif(cython is None, reason=extras.backend_reason("cython"))
class TestConversions:
    def test_every_half_widens_exactly(self):
        bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
        got = tools.widen(bits.view(np.float16))
        want = bits.view(np.float16).astype(np.float32)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))

    def test_every_bfloat16_widens_exactly(self):
        bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
        got = tools.widen(bits.view(ml_dtypes.bfloat16))
        np.testing.assert_array_equal(got.view(np.uint32), bits.astype(np.uint32) << 16)

    @staticmethod
    def _floats():
        rng = np.random.default_rng(0)
        random_bits = rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32)
        # every half rounding boundary: the midpoints between neighbouring halves, +-1 ulp
        halves = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
        h = halves[np.isfinite(halves)].astype(np.float64)
        h.sort()
        mids = ((h[1:] + h[:-1]) / 2).astype(np.float32)
        near = np.concatenate([mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf)])
        special = np.array(
            [0.0, -0.0, np.inf, -np.inf, np.nan, 65504, 65519.99, 65520, 1e-8, 6e-8, 3e-8, -3e-8, 2.98e-8], np.float32
        )
        return np.concatenate([random_bits.view(np.float32), near, special])

    def test_round_to_half_is_round_to_nearest_even(self):
        f = self._floats()
        got = tools.round_to_half(f)
        with np.errstate(over="ignore", invalid="ignore"):
            want = f.astype(np.float16)
        nan = np.isnan(want)
        assert np.isnan(got[nan]).all()
        np.testing.assert_array_equal(got[~nan].view(np.uint16), want[~nan].view(np.uint16))

    def test_round_to_bfloat16_is_round_to_nearest_even(self):
        f = self._floats()
        got = tools.round_to_bfloat16(f)
        with np.errstate(over="ignore", invalid="ignore"):
            want = f.astype(ml_dtypes.bfloat16)
        nan = np.isnan(want.astype(np.float32))
        assert np.isnan(got[nan].astype(np.float32)).all()
        np.testing.assert_array_equal(got[~nan].view(np.uint16), want[~nan].view(np.uint16))

    def test_partition_depends_on_shape_only(self):
        a = tools.plan(100352, 64, 1)
        assert a["channels_last"] and a["nitems"] == 64
        b = tools.plan(32, 3, 4096)
        assert not b["channels_last"] and b["per_channel"] * 3 >= 16
        small_c = tools.plan(1000, 3, 1)
        assert small_c["width"] % 16 == 0 and small_c["width"] >= 64  # folded rows
        small_planes = tools.plan(24, 37, 49)
        assert (small_planes["block"], small_planes["run"], small_planes["width"]) == (11, 49, 539)
        assert small_planes["nitems"] == 4 * small_planes["per_channel"]  # 4 blocks, the last of 4 channels

    def test_forward_strips_only_while_the_input_fits_a_share_of_the_last_level_cache(self):
        """_strips: a forward's pass (one input) adds rows in strips below STRIP_MAX_BYTES (half the
        last-level cache) on channels-first planes, and on channels-last rows while the input as
        float32 values is under a STRIP_ROWS_SHARE-th of it (a quarter of the cache); a gradient's
        (x and dy) below CACHED_MAX_BYTES whatever the cache and layout; 0 turns strips off (the test
        hook).  An unknown cache strips every input, as on hosts whose L3 held them."""
        from fbnops.framework.caches import last_level_cache_bytes
        from fbnops.kernels import _host, _plan

        cached, top = _plan.CACHED_MAX_BYTES, _host.strip_max_bytes(32 << 20)
        assert top == 16 << 20 and _host.strip_max_bytes(0) > 1 << 60
        assert _host.STRIP_MAX_BYTES == _host.strip_max_bytes(last_level_cache_bytes())
        assert _plan._strips(top // 2 - 1, 2, 1, cached, top, False)
        assert not _plan._strips(top // 2, 2, 1, cached, top, False)
        rows_top = top // _plan.STRIP_ROWS_SHARE // 4  # channels-last: values, each counted as a float32
        assert rows_top == 2 << 20
        for itemsize in (2, 4):
            assert _plan._strips(rows_top - 1, itemsize, 1, cached, top, True)
            assert not _plan._strips(rows_top, itemsize, 1, cached, top, True)
        for last in (False, True):
            assert _plan._strips(cached // 8 - 1, 4, 2, cached, top, last)
            assert not _plan._strips(cached // 8, 4, 2, cached, top, last)
            unknown = _plan._strips(cached // 8, 4, 2, cached, 1 << 62, last)
            assert unknown == _plan._strips(cached // 8, 4, 2, cached, top, last)
            assert _plan._strips(top, 4, 1, cached, 1 << 62, last)  # (an unknown cache: every input)
            assert not _plan._strips(10, 4, 1, 0, top, last) and not _plan._strips(10, 4, 2, 0, top, last)

    def test_channels_last_applies_stream_from_the_hosts_threshold(self):
        """_streams: a channels-last apply streams from STREAM_ROWS_MIN_BYTES (on AMD, 3/4 of the
        last-level cache; elsewhere, or with the cache unknown, STREAM_MIN_BYTES), a channels-first
        one of whole planes from STREAM_MIN_BYTES, blocks of small planes never; the C kernels read
        the host's value."""
        from fbnops.framework.caches import cpu_vendor, last_level_cache_bytes
        from fbnops.kernels import _host, _plan, cython_backend

        low = _plan.STREAM_MIN_BYTES
        assert _host.stream_rows_min_bytes(32 << 20, "AuthenticAMD") == 24 << 20
        assert _host.stream_rows_min_bytes(32 << 20, "GenuineIntel") == low
        assert _host.stream_rows_min_bytes(0, "AuthenticAMD") == low  # (the cache unknown)
        assert _host.stream_rows_min_bytes(2 << 20, "AuthenticAMD") == low
        assert _host.STREAM_ROWS_MIN_BYTES == _host.stream_rows_min_bytes(last_level_cache_bytes(), cpu_vendor())
        rows = 24 << 20
        elems = (16 << 20) // 8  # a forward of float32: x and the output, 16 MB together
        # (channels-last, block): streamed at 16 MB moved, at 32 MB
        for kind, below, above in (((True, 1), False, True), ((False, 1), True, True), ((False, 3), False, False)):
            assert _plan._streams(*kind, elems, 4, False, low, rows) == below, kind
            assert _plan._streams(*kind, elems * 2, 4, False, low, rows) == above, kind
        old = tools.set_stream_min_bytes(cython_backend._bn, (1, 2))
        assert tools.set_stream_min_bytes(cython_backend._bn, old) == (1, 2)
        assert old == (low, _host.STREAM_ROWS_MIN_BYTES)

    def test_fused_blocks_prefetch_up_to_the_hosts_threshold(self):
        """_prefetches: a fused channels-first block requests the next block's planes while its inputs
        are at most PREFETCH_BLOCK_MAX_BYTES (on AMD, half of L2; elsewhere, or with L2 unknown,
        PREFETCH_MAX_BYTES); the C kernels read the host's value, and the bits do not depend on it."""
        from fbnops.framework.caches import cache_sizes, cpu_vendor
        from fbnops.kernels import _host, _plan, cython_backend

        low = _plan.PREFETCH_MAX_BYTES
        assert _host.prefetch_block_max_bytes(1 << 20, "AuthenticAMD") == 512 << 10
        assert _host.prefetch_block_max_bytes(1 << 20, "GenuineIntel") == low
        assert _host.prefetch_block_max_bytes(0, "AuthenticAMD") == low  # (L2 unknown)
        assert _host.prefetch_block_max_bytes(128 << 10, "AuthenticAMD") == low
        assert _host.PREFETCH_BLOCK_MAX_BYTES == _host.prefetch_block_max_bytes(cache_sizes().get("L2"), cpu_vendor())
        # (32,128,28,28) float32: a block is one channel, 196 KB of x and dy, 98 KB of x alone
        assert not _plan._prefetches(32, 1, 784, 4, 2, low) and _plan._prefetches(32, 1, 784, 4, 1, low)
        assert _plan._prefetches(32, 1, 784, 4, 2, 512 << 10)
        old = tools.set_prefetch_block_max_bytes(cython_backend._bn, 0)
        assert tools.set_prefetch_block_max_bytes(cython_backend._bn, old) == 0
        assert old == _host.PREFETCH_BLOCK_MAX_BYTES
        rng = np.random.default_rng(3)
        x, dy = (rng.standard_normal((32, 24, 28, 28)).astype(np.float32) for _ in range(2))
        v = np.linspace(0.5, 1.5, 24, dtype=np.float32)
        runs = []
        for threshold in (0, 1 << 40):  # no block prefetches; every block does
            old = tools.set_prefetch_block_max_bytes(cython_backend._bn, threshold)
            try:
                args = (x.reshape(32, 24, -1), dy.reshape(32, 24, -1), v, v, v)
                runs.append(cython_backend._bn.batch_norm_grad(*args, epsilon=1e-3, is_training=True, num_threads=2))
            finally:
                tools.set_prefetch_block_max_bytes(cython_backend._bn, old)
        for got, want in zip(runs[1], runs[0], strict=True):
            assert got.tobytes() == want.tobytes()

    def test_cython_plan_is_the_python_plan(self):
        """_plan.plan is the one definition; the C make_plan the kernels run must agree with it."""
        from fbnops.kernels import _plan

        rng = np.random.default_rng(7)
        shapes = [(1, 1, 1), (1, 513, 1), (3, 1, 600), (70000, 3, 1), (2, 2000, 1), (5, 7, 511), (5, 7, 512)]
        shapes += [
            tuple(int(v) for v in rng.integers(1, hi)) for hi in ((5000, 700, 2), (64, 300, 5000)) for _ in range(200)
        ]
        for outer, C, inner in shapes:
            for itemsize in (2, 4):
                want = _plan.plan(outer, C, inner, itemsize)._asdict()
                assert tools.plan(outer, C, inner, itemsize) == want, (outer, C, inner, itemsize)

    def test_generated_kernel_contract_is_in_step(self):
        """_plan.pxd and _contract.h are generated from _plan.py, _dispatch.pxi from its Tempita template."""
        from fbnops.kernels import _plan

        stale = "is stale: run python -m fbnops.kernels._plan"
        assert (_plan.CYTHON_DIR / "_plan.pxd").read_text() == _plan.render_plan_pxd(), f"_plan.pxd {stale}"
        assert (_plan.CYTHON_DIR / "_contract.h").read_text() == _plan.render_contract_h(), f"_contract.h {stale}"
        pytest.importorskip("Cython", reason="the dtype dispatch is rendered with Cython.Tempita")
        for path, text in _plan.generated_files().items():
            assert path.read_text() == text, f"{path.name} {stale}"

    def test_c_rendering_of_a_rule_answers_as_the_python_rule(self, tmp_path):
        """_contract.h's fb_adds_to, compiled, gives _adds_to's answer for every mode and total; a rule
        outside the renderer's subset is refused, not rendered wrongly."""
        import shutil
        import subprocess

        from fbnops.kernels import _plan

        with pytest.raises(ValueError, match="no C rendering"):
            _plan._as_c(_plan._moves, "int")  # (arithmetic is outside the subset)

        def nested(a, b):
            return a != (b == 0)  # (C's == binds tighter than !=: each comparison is bracketed)

        assert _plan._as_c(nested, "int") == "static inline int fbnested(int a, int b) { return (a != (b == 0)); }"
        if shutil.which("gcc") is None:
            pytest.skip("no gcc to compile _contract.h")
        modes, totals = [m.value for m in _plan.Reduce], (0, 1)
        main = tmp_path / "rule.c"
        calls = " ".join(f'printf("%d ", fb_adds_to({m}, {h}));' for m in modes for h in totals)
        main.write_text(f'#include <stdio.h>\n#include "_contract.h"\nint main(void) {{ {calls} return 0; }}\n')
        subprocess.run(["gcc", f"-I{_plan.CYTHON_DIR}", str(main), "-o", str(tmp_path / "rule")], check=True)
        answers = subprocess.run([str(tmp_path / "rule")], check=True, capture_output=True, text=True).stdout.split()
        assert answers == [str(int(_plan._adds_to(m, h))) for m in modes for h in totals]
        assert answers.count("1") == 4  # (the gradient's pass adds to both totals, the forward's to one each)

    def test_each_kernel_constant_is_defined_in_one_place(self):
        """The tunables and the mode enums are assigned in _plan.py and nowhere else by hand (the generated
        _plan.pxd/_contract.h/_dispatch.pxi are checked in step above)."""
        import re

        from fbnops.kernels import _plan

        names = [*_plan.PXI_CONSTANTS, *(m.name for enum in _plan.CONTRACT_ENUMS for m in enum)]
        generated = set(_plan.generated_files()) | {_plan.CYTHON_DIR / "_plan.pxd", _plan.CYTHON_DIR / "_contract.h"}
        root = Path(__file__).resolve().parent.parent
        sources = [p for p in (root / "fbnops").rglob("*") if p.suffix in (".py", ".pyx", ".pxi", ".pxd", ".h", ".tp")]
        for name in names:
            # an assignment, a cdef/DEF/enum member or a #define (FB_RED_SUM for RED_SUM) of the name
            pattern = re.compile(
                rf"^\s*(?:cdef\s+\w+\s+|DEF\s+|#define\s+(?:FB_\w*?)?)?{name}\s*(?::[^=\n]*)?(?:=|\s+\d)", re.M
            )
            places = [p.name for p in sources if p not in generated and pattern.search(p.read_text(errors="ignore"))]
            assert places == ["_plan.py"], (name, places)

    @pytest.mark.parametrize("streaming", [False, True])
    def test_stream_add_is_the_exact_sum(self, streaming):
        """The benchmark's floor: out = a + b, ordinary or non-temporal stores, any alignment."""
        rng = np.random.default_rng(3)
        for n in (1, 7, 1003, 1 << 18):
            a = rng.standard_normal(n).astype(np.float32)
            b = rng.standard_normal(n).astype(np.float32)
            for shift in (0, 1, 3):  # out starting 0, 4 and 12 bytes past a 16-byte boundary
                out = np.full(n + shift, np.nan, np.float32)[shift:]
                tools.stream_add(a, b, out, 2, streaming)
                np.testing.assert_array_equal(out, a + b)

    def test_stream_sum_reads_both_arrays_once_into_their_total(self):
        """The 2-pass floor's read: the total of a + b (float32 lanes, then float64), any length and
        thread count; anything but contiguous float32 arrays of a's size is refused."""
        rng = np.random.default_rng(4)
        for n in (1, 15, 16, 1003, 1 << 18):
            a = rng.standard_normal(n).astype(np.float32)
            b = rng.standard_normal(n).astype(np.float32)
            exact = a.astype(np.float64).sum() + b.astype(np.float64).sum()
            for nthreads in (1, 2):
                assert tools.stream_sum(a, b, nthreads) == pytest.approx(exact, rel=1e-5, abs=1e-3)
        a = np.ones(64, np.float32)
        assert tools.stream_sum(a, a, 2) == 128.0
        for bad in (np.ones(128, np.float32)[::2], a[:63], a.astype(np.float64)):
            with pytest.raises(ValueError, match="contiguous float32 array of 64 elements"):
                tools.stream_sum(a, bad)

    def test_kernel_entry_rejects_bad_buffers(self):
        x = np.ones((4, 3, 5), np.float32)
        v = np.ones(3, np.float32)
        with pytest.raises(ValueError, match="contiguous 3-D"):
            cython.batch_norm_grad(x[:, :, ::2], x[:, :, ::2], v, v, v, epsilon=1e-3, is_training=True)
        with pytest.raises(ValueError, match="shape and dtype of x"):
            cython.batch_norm_grad(x, x[:2], v, v, v, epsilon=1e-3, is_training=True)
        with pytest.raises(ValueError, match="float32 vector of length 3"):
            cython.batch_norm_grad(x, x, v[:2], v, v, epsilon=1e-3, is_training=True)
        with pytest.raises(ValueError):
            cython.batch_norm_grad(x.astype(np.float64), x, v, v, v, epsilon=1e-3, is_training=True)


def test_openmp_build():
    """CI builds with OpenMP; FBNOPS_NO_OPENMP=1 builds are single-threaded but correct."""
    import os

    if "cython" not in PARALLEL or os.environ.get("FBNOPS_NO_OPENMP", "") not in ("", "0"):
        pytest.skip("not an OpenMP build")
    from fbnops.kernels import cython_backend

    assert cython_backend.OPENMP_ENABLED


def test_compiled_backend_is_available():
    """A build that silently lost its Cython kernels must not pass as green."""
    import os

    if os.environ.get("FBNOPS_ALLOW_NO_CYTHON"):
        pytest.skip("FBNOPS_ALLOW_NO_CYTHON set")
    assert "cython" in fbnops.available_backends()
    assert fbnops.get_backend() == "cython"


@pytest.mark.parametrize("backend", lock.BACKENDS)
def test_kernel_bits_are_locked(backend):
    """Every backend's output bytes over the grid of tests/data/make_kernel_bits.py are unchanged
    (``cython-baseline``: the portable build, which the x86-64-v3 build's FMA contraction differs from)."""
    import json

    extras.require_backend(backend.split("-")[0])
    stored = json.loads(lock.BITS_FILE.read_text())["bits"]
    got = lock.compute_bits((backend,))
    changed = sorted(k for k in got if stored.get(k) != got[k])
    assert len(got) == sum(k.startswith(backend + "/") for k in stored)
    assert not changed, f"{len(changed)} of {len(got)} cases changed bits, e.g. {changed[:5]}"


def test_every_vector_build_has_the_locked_bits(monkeypatch):
    """The x86-64-v3 and x86-64-v4 builds (bfloat16 narrowed by the hardware) give the same bytes:
    each one this CPU runs is checked against the lock's ``cython`` digests, not only the one chosen."""
    import json

    from fbnops.kernels import cython_backend

    builds = [b for b in cython_backend.available_builds() if b.SIMD_VARIANT != "baseline"]
    if not builds:
        pytest.skip("this CPU runs no x86-64-v3 or -v4 build of the kernels (or none is built here)")
    stored = json.loads(lock.BITS_FILE.read_text())["bits"]
    for build in builds:
        monkeypatch.setattr(cython_backend, "_bn", build)
        got = lock.compute_bits(("cython",))
        changed = sorted(k for k in got if stored.get(k) != got[k])
        assert got and not changed, f"{build.SIMD_VARIANT}: {len(changed)} cases changed bits, e.g. {changed[:5]}"


@pytest.mark.parametrize("simd", ["baseline", "x86-64-v3", "x86-64-v4"])
def test_non_temporal_stores_change_no_bit(simd, monkeypatch):
    """Outputs past the caches are written with streaming stores (from the registers in the
    x86-64-v3 build, each row from its first 32-byte boundary; through L1 buffers in the baseline); forcing that
    path on the whole bits-lock grid (small, unaligned shapes included) changes no output byte.
    (With it the cache threshold goes to 0 too, so that no reduction uses strips: this also checks
    that strips and the one-row loop give the same bits; the x86-64-v4 build's forward rows go in
    register blocks either way, checked by the bits lock.)"""
    from fbnops.kernels import cython_backend

    builds = {b.SIMD_VARIANT: b for b in cython_backend.available_builds()}
    if simd not in builds:
        pytest.skip(f"this CPU cannot run the {simd} build (or it is not built here)")
    module = builds[simd]
    monkeypatch.setattr(cython_backend, "_bn", module)
    ordinary = lock.compute_bits(("cython",))
    old = tools.set_stream_min_bytes(module, 0), tools.set_cached_max_bytes(module, 0)
    try:
        streamed = lock.compute_bits(("cython",))
    finally:
        tools.set_stream_min_bytes(module, old[0]), tools.set_cached_max_bytes(module, old[1])
    changed = sorted(k for k in streamed if ordinary[k] != streamed[k])
    grid = len(lock.CASES) * len(lock.DTYPES) * len(lock.MODES) * len(lock.THREADS)
    assert len(streamed) == grid and not changed, f"{len(changed)} cases changed bits, e.g. {changed[:5]}"
