"""Backend selection (global, per block, per op) and agreement between backends."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from data import make_kernel_bits as lock  # tests/data, on the path as `data`

import fbnops
from fbnops.errors import NotFoundError
from fbnops.testing import X_TOL, extras, grad_inputs


def test_available_backends_and_default():
    names = fbnops.available_backends()
    assert "reference" in names
    assert fbnops.get_backend() == ("cython" if "cython" in names else "reference")


def test_global_and_block_selection():
    before = fbnops.get_backend()
    try:
        fbnops.set_backend("reference")
        assert fbnops.get_backend() == "reference"
        with fbnops.backend(before) as name:
            assert name == before and fbnops.get_backend() == before
            with fbnops.backend("reference"):
                assert fbnops.get_backend() == "reference"
            assert fbnops.get_backend() == before
        assert fbnops.get_backend() == "reference"
    finally:
        fbnops.set_backend(before)
    with pytest.raises(NotFoundError, match="Unknown backend"):
        with fbnops.backend("opencl"):
            pass


def test_a_block_ends_on_an_error_and_also_decorates():
    """A block's backend ends with the block, raised out of or not; ``@backend(name)`` puts a
    function's calls in one (every call), and an unknown name is refused when the block starts."""
    before = fbnops.get_backend()
    with pytest.raises(RuntimeError, match="in the block"):
        with fbnops.backend("reference"):
            raise RuntimeError("in the block")
    assert fbnops.get_backend() == before

    @fbnops.backend("reference")
    def inside():
        return fbnops.get_backend()

    assert [inside(), inside(), fbnops.get_backend()] == ["reference", "reference", before]
    unknown = fbnops.backend("opencl")  # (refused on entering, as a with statement would)
    with pytest.raises(NotFoundError, match="Unknown backend"):
        unknown.__enter__()
    assert fbnops.get_backend() == before


def test_missing_numba_is_a_clear_error_and_import_still_works():
    code = textwrap.dedent("""
        import sys
        sys.modules["numba"] = None          # as if the extra were not installed
        import fbnops
        assert "numba" not in fbnops.available_backends(), fbnops.available_backends()
        try:
            fbnops.set_backend("numba")
        except fbnops.errors.NotFoundError as e:
            print(e)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "Backend 'numba' is not available" in out and "pip install 'fbnops[numba]'" in out


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize(
    "shape,fmt",
    [
        ((6, 5, 7, 9), "NHWC"),
        ((6, 9, 5, 7), "NCHW"),
        ((40, 30, 30, 3), "NHWC"),
        ((8, 3, 40, 41), "NCHW"),
        # small planes grouped in channel blocks: batch-split items with a short last block,
        # and one fused item per block
        ((24, 37, 7, 7), "NCHW"),
        ((2, 512, 7, 7), "NCHW"),
    ],
)
@pytest.mark.parametrize("is_training", [True, False])
def test_backends_agree(shape, fmt, dtype, is_training):
    inputs = grad_inputs(shape, fmt, dtype, seed=9)
    results = {}
    for name in fbnops.available_backends():
        with fbnops.backend(name):
            results[name] = fbnops.raw_ops.FusedBatchNormGradV3(**inputs, data_format=fmt, is_training=is_training)
    ref = results["reference"]
    scale = np.max(np.abs(ref.x_backprop.astype(np.float64)))
    for name, out in results.items():
        err = np.max(np.abs(out.x_backprop.astype(np.float64) - ref.x_backprop.astype(np.float64))) / scale
        # two roundings of T at most apart (each backend rounds once from slightly different float32s)
        assert err <= 2 * X_TOL[dtype] + 1e-6, name
        np.testing.assert_allclose(out.scale_backprop, ref.scale_backprop, rtol=2e-5, atol=2e-5, err_msg=name)
        np.testing.assert_allclose(out.offset_backprop, ref.offset_backprop, rtol=2e-5, atol=2e-5, err_msg=name)


def test_per_op_kernel_labels_in_every_builder():
    """The C++ WithKernelLabel, the Java withKernelLabel and the graph API pick the backend per op."""
    from bindings_mirror import cc, java
    from fbnops.framework.graph import Graph
    from fbnops.framework.scope import Scope

    for name in fbnops.available_backends():
        root = cc.Scope.NewRootScope().WithKernelLabel(name)
        v = np.ones(2, np.float32)
        op = cc.ops.FusedBatchNormV3(root, np.ones((2, 2, 2, 2), np.float32), v, v, v, v)
        assert op.operation.node().kernel_label == name
        g = java.Graph()
        s = g.baseScope().withKernelLabel(name)
        c = java.Constant.create(s, v)
        jop = java.FusedBatchNormV3.create(s, java.Constant.create(s, np.ones((2, 2, 2, 2), np.float32)), c, c, c, c)
        assert jop.op()._core.kernel_label == name
        assert Scope(Graph()).with_kernel_label(name).kernel_label == name


def test_numba_is_a_bitwise_twin_of_cython():
    """Every output byte equal, over the bits-lock grid: all dtypes, layouts and modes, 1 and 2 threads."""
    extras.require_backend("cython")
    extras.require_backend("numba")
    got = lock.compute_bits(("cython", "numba"))
    cases = [k.split("/", 1)[1] for k in got if k.startswith("cython/")]
    assert len(cases) == len(lock.CASES) * len(lock.DTYPES) * len(lock.MODES) * len(lock.THREADS)
    differ = [c for c in cases if got["cython/" + c] != got["numba/" + c]]
    assert not differ, f"{len(differ)} of {len(cases)} cases differ, e.g. {differ[:5]}"


@pytest.mark.parametrize("dtype", sorted(lock.DTYPES))
@pytest.mark.parametrize("C", [64, 520])
def test_numba_gradient_rows_from_memory_are_bitwise_cythons(dtype, C):
    """Channels-last gradients whose x and dy are past CACHED_MAX_BYTES add their rows one at a
    time (not in strips), which the bits-lock grid's small cases reach only for leftover rows.
    Numba's rows take 16 lanes a vector where it compiles for AVX-512 (_numba_reduce.grad_lanes):
    every output byte must still be Cython's, for folded 512-lane rows (C=64) and for rows of 520
    lanes (a tail of 8 after the vectors), on 1 and 2 threads."""
    extras.require_backend("cython")
    extras.require_backend("numba")
    from fbnops.framework import threads
    from fbnops.kernels import _plan, cython_backend, numba_backend

    rows = -(-_plan.CACHED_MAX_BYTES // (2 * C * np.dtype(lock.DTYPES[dtype]).itemsize)) + 3  # just past the rule
    rng = np.random.default_rng(C)
    x = (rng.standard_normal((rows, C, 1)) * 2 + 1).astype(lock.DTYPES[dtype])
    dy = rng.standard_normal((rows, C, 1)).astype(lock.DTYPES[dtype])
    scale, mean, var = (rng.random(C).astype(np.float32) + 0.5 for _ in range(3))
    for n in (1, 2):
        with threads.setting_kept():
            fbnops.set_num_threads(n)
            want = cython_backend.batch_norm_grad(x, dy, scale, mean, var, epsilon=1e-3, is_training=True)
            got = numba_backend.batch_norm_grad(x, dy, scale, mean, var, epsilon=1e-3, is_training=True)
        for name, w, g in zip(("x_backprop", "scale_backprop", "offset_backprop"), want, got, strict=True):
            assert w.tobytes() == g.tobytes(), f"{name} differs on {n} thread(s)"


def test_numba_streamed_outputs_are_bitwise_cythons(monkeypatch):
    """With every output streamed (both thresholds at 0: non-temporal stores, 8 values at a time
    from Numba's vector intrinsic, 16 at a time from the C kernels' registers), the two backends still agree byte
    for byte over the bits-lock grid, and Numba's bytes are those of its ordinary stores."""
    extras.require_backend("cython")
    extras.require_backend("numba")
    from fbnops.kernels import cython_backend, numba_backend
    from fbnops.kernels._cython import _tools as tools

    ordinary = lock.compute_bits(("numba",))
    monkeypatch.setattr(numba_backend, "stream_min_bytes", 0)
    monkeypatch.setattr(numba_backend, "stream_rows_min_bytes", 0)
    old = tools.set_stream_min_bytes(cython_backend._bn, 0)
    try:
        got = lock.compute_bits(("cython", "numba"))
    finally:
        tools.set_stream_min_bytes(cython_backend._bn, old)
    cases = [k.split("/", 1)[1] for k in got if k.startswith("numba/")]
    assert len(cases) == len(lock.CASES) * len(lock.DTYPES) * len(lock.MODES) * len(lock.THREADS)
    differ = [c for c in cases if got["cython/" + c] != got["numba/" + c]]
    assert not differ, f"{len(differ)} of {len(cases)} cases differ from Cython's, e.g. {differ[:5]}"
    changed = [c for c in cases if ordinary["numba/" + c] != got["numba/" + c]]
    assert not changed, f"streaming changed {len(changed)} of Numba's outputs, e.g. {changed[:5]}"


def test_numba_streamed_stores_are_non_temporal():
    """The streamed row compiles to non-temporal stores for every storage dtype, not only to the
    same bytes: with AVX512-FP16, LLVM had compiled a float16 row's nontemporal stores as ordinary
    ones (vmovdqa64), read for ownership line by line.  On x86-64 the machine code is read
    (vmovntps, vmovntdq); elsewhere the LLVM IR's stores must carry !nontemporal."""
    extras.require_backend("numba")
    import platform
    import re

    from numba import njit

    from fbnops.kernels import numba_backend
    from fbnops.kernels._numba_fp import WIDE_VECTORS
    from fbnops.kernels._numba_stream import stream_fence
    from fbnops.kernels._numba_vrows import HARDWARE_BF16, streamed_row
    from fbnops.kernels._plan import Apply

    mode = int(Apply.APPLY_A)  # (a free variable: a compile-time constant to Numba)

    @njit
    def row(a, out, coefficient):
        streamed_row(a, a, out, mode, 0, a.shape[0], coefficient, coefficient, coefficient, coefficient)
        stream_fence()

    x86 = platform.machine().lower() in ("x86_64", "amd64")
    storage = [np.float32, np.int16] + ([np.uint16] if numba_backend.HARDWARE_HALF else [])
    for dtype in storage:
        a = np.zeros(256, dtype)
        row(a, np.empty_like(a), np.float32(1))
        if x86:
            code, pattern = row.inspect_asm(row.signatures[-1]), r"\bv?movnt(ps|dq)\b"
        else:
            code, pattern = row.inspect_llvm(row.signatures[-1]), r"store .*!nontemporal"
        assert re.search(pattern, code), f"{np.dtype(dtype)}: no non-temporal store in the streamed row"
        if dtype == np.int16 and HARDWARE_BF16:  # 32 values per 64-byte store, as the C kernels' v4 build
            assert re.search(r"\bvmovntdq\s+%zmm", code), "bfloat16: no 64-byte streamed store in the streamed row"
        if dtype == np.uint16 and WIDE_VECTORS:  # (the same, float16)
            assert re.search(r"\bvmovntdq\s+%zmm", code), "float16: no 64-byte streamed store in the streamed row"


def test_numba_sweeps_take_512_bit_vectors_where_it_compiles_for_avx512():
    """The loops LLVM vectorizes itself in the sweeps (an ordinary float16 apply row here) use
    512-bit registers where Numba compiles for AVX-512 (_numba_fp.wide_vectors): LLVM's tuning for
    Intel's AVX-512 CPUs had kept them to 256 bits, 1.4-1.6x the C kernels' time."""
    extras.require_backend("numba")
    import re

    from fbnops.kernels import _numba_rows
    from fbnops.kernels._numba_fp import WIDE_VECTORS

    if not WIDE_VECTORS:  # (an x86 feature: the machine code below is x86's)
        pytest.skip("Numba does not compile for AVX-512 here: its loops take the widest vectors the CPU has")
    W = 512
    rows = np.zeros(4 * W, np.uint16)
    tiles = [np.zeros(W, np.float32) for _ in range(4)]
    sweep = _numba_rows._apply_a
    sweep(rows, rows, np.empty_like(rows), 0, W, 4, W, W, *tiles, np.zeros((2, 8, 1), np.float32), False)
    code = sweep.inspect_asm(sweep.signatures[-1])
    assert re.search(r"\bvcvtph2psx?\s+[^\n]*%zmm", code), "the float16 apply row widens into no 512-bit register"


def test_numba_bfloat16_rows_narrow_in_hardware_where_the_cpu_does():
    """Where the CPU has AVX512-BF16, Numba's bfloat16 rows narrow with vcvtne2ps2bf16, as the C
    kernels' x86-64-v4 build does (the same bits: test_numba_16bit_runs_round_as_cythons)."""
    extras.require_backend("numba")
    from numba import njit

    from fbnops.kernels._numba_vrows import HARDWARE_BF16, hardware_bf16_row
    from fbnops.kernels._plan import Apply

    if not HARDWARE_BF16:
        pytest.skip("Numba compiles for a CPU without AVX512-BF16 here: bfloat16 narrows by the integer code")
    mode = int(Apply.APPLY_A)

    @njit
    def row(a, out, coefficient):
        hardware_bf16_row(a, a, out, mode, 0, a.shape[0], coefficient, coefficient, coefficient, coefficient)

    a = np.zeros(256, np.int16)
    row(a, np.empty_like(a), np.float32(1))
    assert "vcvtne2ps2bf16" in row.inspect_asm(row.signatures[-1])


def test_numba_float64_totals_are_bitwise_cythons():
    """The per-channel float64 totals, before any rounding to float32, on values from 2^-40 to
    2^40: there the float64 fold of a channel's lanes is inexact, and the bits are equal only if
    both backends fold in the same order (running totals lane j % 8, joined pairwise).  (On
    data of one scale the fold is exact in any order, and the outputs cannot tell.)"""
    extras.require_backend("cython")
    extras.require_backend("numba")
    from fbnops.kernels import stages

    rng = np.random.default_rng(7)
    for shape in [(3, 5, 1640), (5, 37, 49), (2, 512, 9)]:  # (outer, C, inner): large planes; blocks of 49, 9 lanes
        for dtype in (np.float32, lock.DTYPES["bfloat16"]):
            x, dy = (np.ldexp(rng.standard_normal(shape), rng.integers(-40, 40, shape)).astype(dtype) for _ in "ab")
            mean = rng.standard_normal(shape[1]).astype(np.float32)
            totals = {}
            for name in ("cython", "numba"):
                with fbnops.backend(name):
                    totals[name] = [stages.sum_x(x), stages.sum_sq(x, mean), stages.sum_grad(x, dy, mean)]
            for what, a, b in zip(("sum_x", "sum_sq", "sum_grad"), totals["cython"], totals["numba"], strict=True):
                assert a.dtype == np.float64 and a.view(np.uint64).tolist() == b.view(np.uint64).tolist(), (
                    shape,
                    dtype,
                    what,
                )


def test_numba_read_only_inputs_share_the_compiled_specialization():
    """Read-only and writeable inputs reach the Numba kernels typed alike (read-only views), so a
    caller's frozen arrays use what warm_up compiled and cached instead of compiling anew."""
    extras.require_backend("numba")
    from fbnops.kernels import _numba_loops as loops
    from fbnops.kernels import numba_backend as nb

    x = np.random.default_rng(0).standard_normal((4, 8, 16)).astype(np.float32)
    v = np.ones(8, np.float32)
    nb.batch_norm_grad(x, x, v, v, v, epsilon=1e-3, is_training=True)
    before = len(loops.drive[0].signatures)
    frozen = [a.copy() for a in (x, v)]
    for a in frozen:
        a.flags.writeable = False
    out = nb.batch_norm_grad(frozen[0], frozen[0], frozen[1], frozen[1], frozen[1], epsilon=1e-3, is_training=True)
    assert len(loops.drive[0].signatures) == before, loops.drive[0].signatures[before:]
    ref = nb.batch_norm_grad(x, x, v, v, v, epsilon=1e-3, is_training=True)
    assert all(np.array_equal(a, b) for a, b in zip(out, ref, strict=True))


def test_numba_kernel_refuses_a_storage_dtype_it_has_no_loads_for():
    """A float64 array is refused by name, never read as another type's bits."""
    from fbnops.errors import InvalidArgumentError

    extras.require_backend("numba")
    from fbnops.kernels import numba_backend

    v = np.ones(3, np.float32)
    with pytest.raises(InvalidArgumentError, match="x \\(and dy\\) must be float32, float16 or bfloat16, got float64"):
        numba_backend.batch_norm(np.ones((2, 3, 4)), v, v, v, v, epsilon=1e-3, is_training=True)


def test_numba_calls_free_what_they_allocate():
    """Numba's runtime frees every block a call allocated once its outputs are dropped: the row
    sweeps' borrowed views (arrays without a reference count) neither leak nor free an owner
    early, and the per-call record built inside the driver goes with the call."""
    extras.require_backend("numba")
    from numba.core.runtime import _nrt_python as nrt  # (its stats switch: Numba >= 0.58, as Numba's own tests use it)
    from numba.core.runtime import rtsys

    from fbnops.kernels import numba_backend as nb
    from fbnops.kernels import stages

    rng = np.random.default_rng(1)
    calls = []
    for shape in [(64, 8, 1), (4, 8, 49), (8192, 8, 1), (4, 8, 2048)]:  # serial and parallel, both layouts
        for dtype in (np.float32, lock.DTYPES["bfloat16"]):
            x = rng.standard_normal(shape).astype(dtype)
            v = np.ones(shape[1], np.float32)
            calls += [
                lambda x=x, v=v: nb.batch_norm_grad(x, x, v, v, v, epsilon=1e-3, is_training=True),
                lambda x=x, v=v: nb.batch_norm(x, v, v, None, None, epsilon=1e-3, is_training=True),
                lambda x=x, v=v: nb.batch_norm(x, v, v, v, v, epsilon=1e-3, is_training=False),
            ]

    def staged():
        with fbnops.backend("numba"):
            x = rng.standard_normal((4, 8, 49)).astype(np.float32)
            v = np.ones(8, np.float32)
            return stages.finish_grad(stages.sum_grad(x, x, v), 4 * 49, v, v, v, 1e-3, True)[2]

    calls.append(staged)
    for call in calls:  # compiled (or loaded) before counting: loading allocates what it keeps
        call()
    nrt.memsys_enable_stats()
    try:
        before = rtsys.get_allocation_stats()
        for call in calls:
            outputs = call()
            assert all(np.isfinite(np.asarray(o, np.float32)).all() for o in outputs)
            del outputs
        after = rtsys.get_allocation_stats()
    finally:
        nrt.memsys_disable_stats()
    assert after.alloc - before.alloc > 0, (before, after)  # (the calls did allocate)
    assert after.alloc - before.alloc == after.free - before.free, (before, after)
    assert after.mi_alloc - before.mi_alloc == after.mi_free - before.mi_free, (before, after)
