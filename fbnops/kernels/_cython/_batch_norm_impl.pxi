# Kernel source shared by batch_norm.pyx (baseline x86-64), batch_norm_avx2.pyx (x86-64-v3: AVX2,
# FMA, F16C) and batch_norm_avx512.pyx (x86-64-v4 with AVX512-BF16); all are compiled from this one text.
#
# The call chain, top to bottom (P: the Plan of the call, params: its Params):
#
#   batch_norm / batch_norm_grad          Python entry points       (_entry_points.pxi)
#     -> _call                            check, allocate, fill Params
#       -> run_any                        storage-type switch        (_dispatch.pxi, generated)
#         -> run                          the op: its passes in order            (this file)
#            |-> for_items(FUSED)         channels-first, whole channel blocks:
#            |     -> do_item -> fused_block -> reduce_plane_item, channel_done, apply_plane_item
#            |-> reduce_pass              each reduction pass:
#            |     -> for_items(REDUCE) -> do_item -> reduce_row_item | reduce_plane_item
#            |     -> combine_rows | combine_blocks, then finish_pass -> channel_done
#            '-> apply_pass -> for_items(APPLY) -> do_item -> apply_row_item | apply_plane_item
#   row/plane items -> reduce_span -> reduce_rows (rows from memory) | reduce_strided (rows
#                      in cache: several rows per load and store of the lane totals);
#                      channels-last rows off a line read from it on (_turned_rows.pxi);
#                      apply_rows / apply_run (+ _streamed)   the lane loops  (_loops.pxi)
#   16-bit rows on x86-64-v3 -> fb_reduce_*_row / fb_reduce_*_rows (strips) / fb_apply_*_rows /
#                      fb_apply_*_run (bfloat16: in pairs)   (_rows16.h; x86-64-v4: 512-bit
#                      steps first, _wide512.h)
#
# The stage entry points (reduce_totals, finish, apply) enter the same chain at reduce_any
# -> reduce_pass (or samples_any -> reduce_samples), channel_done and apply_any -> apply_pass.
# The modes (Op, Reduce, Apply), the tunables and make_plan come from _plan.pxd, generated
# from fbnops/kernels/_plan.py.

import ml_dtypes
import numpy as np

cimport numpy as cnp
from cython.parallel cimport prange
from libc.math cimport sqrt
from cpython.mem cimport PyMem_RawFree, PyMem_RawMalloc
from libc.string cimport memcpy

from ._fp cimport NarrowRuns, fb_bf16, fb_f64_lanes, fb_half, fb_narrow_bf16_run, fb_narrow_half_run, load, storage_t, store
from ._openmp cimport FBNOPS_OPENMP_ENABLED
from ._plan cimport (APPLY_A, APPLY_B, APPLY_FULL, BLOCK_ROWS, FOLD_WAYS, FWD_INFER, FWD_TRAIN, GRAD_FROZEN, GRAD_TRAIN, MAX_W,
                    STRIP_PIECES, _adds_to, _ceil_div, _inputs, _prefetches, _reduce_inputs, _streams, _strips,
                    RED_GRAD, RED_SQ, RED_SUM, STREAM_MIN_BYTES, CACHED_MAX_BYTES, Apply, Op, Plan, Reduce, make_plan)

cnp.import_array()

from fbnops.kernels._host import STREAM_ROWS_MIN_BYTES as _host_stream_rows_min_bytes
from fbnops.kernels._host import STRIP_MAX_BYTES as _host_strip_max_bytes
from fbnops.kernels._host import PREFETCH_BLOCK_MAX_BYTES as _host_prefetch_block_max_bytes

OPENMP_ENABLED = bool(FBNOPS_OPENMP_ENABLED)

cdef extern from *:
    """
    static int fbnops_cpu_has_x86_64_v3(void) {
    #if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
            && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi2");
    #else
        return 0;
    #endif
    }
    static int fbnops_cpu_has_avx512_bf16(void) {
    #if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
        __builtin_cpu_init();
        return fbnops_cpu_has_x86_64_v3() && __builtin_cpu_supports("x86-64-v4") && __builtin_cpu_supports("avx512bf16");
    #else
        return 0;
    #endif
    }
    """
    int fbnops_cpu_has_x86_64_v3() noexcept nogil
    int fbnops_cpu_has_avx512_bf16() noexcept nogil


def cpu_has_x86_64_v3():
    """Whether this CPU runs the x86-64-v3 (AVX2/FMA/F16C) build of the kernels."""
    return bool(fbnops_cpu_has_x86_64_v3())


def cpu_has_avx512_bf16():
    """Whether this CPU runs the x86-64-v4 + AVX512-BF16 build of the kernels (batch_norm_avx512)."""
    return bool(fbnops_cpu_has_avx512_bf16())

# Per-channel inputs and outputs of one call (the op decides which outputs it writes).
cdef struct Params:
    Op op
    float eps
    double n                  # elements per channel: outer * inner
    const float* scale
    const float* offset       # forward only
    const float* var_in       # the given variance (not FWD_TRAIN)
    const float* center       # what x is centred on: the given mean, or batch_mean in FWD_TRAIN
    float* A                  # the element pass's coefficients (see Apply)
    float* B
    float* K
    float* scale_backprop     # gradient outputs
    float* offset_backprop
    float* batch_mean         # FWD_TRAIN outputs (biased variance)
    float* batch_var


include "_loops.pxi"


# ---------------------------------------------------------------------------------------
# The op's math: per-channel totals -> outputs and apply coefficients.
# ---------------------------------------------------------------------------------------

cdef void channel_done(Params* params, int pass_index, Py_ssize_t c, double s0, double s1) noexcept nogil:
    cdef double var, r, gamma = params.scale[c], n = params.n
    cdef Op op = params.op
    if op == FWD_TRAIN and pass_index == 0:
        params.batch_mean[c] = <float>(s0 / n)  # the next pass centres on it
        return
    if op == FWD_TRAIN:
        var = s1 / n  # biased variance
        params.batch_var[c] = <float>var
        var = params.batch_var[c]
    else:
        var = params.var_in[c]
    r = 1.0 / sqrt(<double>(<float>var + params.eps))
    if op == GRAD_TRAIN or op == GRAD_FROZEN:
        params.scale_backprop[c] = <float>(s1 * r)  # sum(dy * (x - mean)) * r
        params.offset_backprop[c] = <float>s0       # sum(dy)
        params.A[c] = <float>(gamma * r)
        if op == GRAD_TRAIN:  # dx = gamma*r * ((dy - s0/n) - (x - mean) * r*r*s1/n), as TF groups it
            params.B[c] = <float>(-r * r * s1 / n)
            params.K[c] = <float>(-s0 / n)
        else:
            params.B[c] = 0
            params.K[c] = 0
    else:  # forward: y = (x - mean) * (scale * r) + offset
        params.A[c] = 0
        params.B[c] = <float>(gamma * r)
        params.K[c] = params.offset[c]


cdef void combine_rows(const Plan* P, Reduce mode, const double* part, double* s) noexcept nogil:
    """Fold row-item partials [item][2][width] into s[2][C], in a fixed order: only the totals
    the pass adds to (the items wrote only those; the other stays 0)."""
    cdef Py_ssize_t item, q, c, h, lo, hi, W = P.width, C = P.C
    for c in range(2 * C):
        s[c] = 0
    used_lanes(mode, 1, &lo, &hi)  # (halves: 0 is s0, 1 is s1)
    for item in range(P.nitems):
        for h in range(lo, hi):
            for q in range(P.fold):
                for c in range(C):
                    s[h * C + c] += part[item * 2 * W + h * W + q * C + c]


cdef void combine_blocks(const Plan* P, const double* part, double* s) noexcept nogil:
    """Fold block-item partials [item][2][block] over batch ranges into s[2][C], in a fixed order."""
    cdef Py_ssize_t item, c, j, nb = P.block
    for c in range(2 * P.C):
        s[c] = 0
    for item in range(P.nitems):
        c = item // P.per_channel * nb
        for j in range(min(nb, P.C - c)):
            s[c + j] += part[item * 2 * nb + j]
            s[P.C + c + j] += part[item * 2 * nb + nb + j]


cdef inline void tile_channels(const Plan* P, const float* v, float* tile) noexcept nogil:
    """Lane j of a folded row is channel j % C: the row is `fold` copies of the C channels
    (copied channel by channel, not divided lane by lane: a tiny call's row is 256 lanes)."""
    cdef Py_ssize_t q, c, C = P.C
    for q in range(P.fold):
        for c in range(C):
            tile[q * C + c] = v[c] if v != NULL else 0


cdef void tile_row_coefficients(const Plan* P, const Params* params, float* tiles) noexcept nogil:
    cdef Py_ssize_t W = P.width
    tile_channels(P, params.A, tiles)
    tile_channels(P, params.B, tiles + W)
    tile_channels(P, params.K, tiles + 2 * W)
    tile_channels(P, params.center, tiles + 3 * W)


# ---------------------------------------------------------------------------------------
# The driver.
# ---------------------------------------------------------------------------------------

cdef Py_ssize_t stream_min_bytes = STREAM_MIN_BYTES
cdef Py_ssize_t cached_max_bytes = CACHED_MAX_BYTES
# The host's (from its caches and vendor, read once by fbnops.kernels._host; not
# compile-time constants).
cdef Py_ssize_t strip_max_bytes = _host_strip_max_bytes
cdef Py_ssize_t stream_rows_min_bytes = _host_stream_rows_min_bytes
cdef Py_ssize_t prefetch_block_max_bytes = _host_prefetch_block_max_bytes
# Where the thresholds live, for the test hooks _tools.set_stream_min_bytes, set_cached_max_bytes and
# set_prefetch_block_max_bytes (tests stream small outputs, add rows one by one, and prefetch or not,
# to check that the bits do not change); production code never writes them.
from cpython.pycapsule cimport PyCapsule_New
STREAM_MIN_BYTES_ADDRESS = PyCapsule_New(&stream_min_bytes, b"fbnops.stream_min_bytes", NULL)
STREAM_ROWS_MIN_BYTES_ADDRESS = PyCapsule_New(&stream_rows_min_bytes, b"fbnops.stream_rows_min_bytes", NULL)
CACHED_MAX_BYTES_ADDRESS = PyCapsule_New(&cached_max_bytes, b"fbnops.cached_max_bytes", NULL)
PREFETCH_BLOCK_MAX_BYTES_ADDRESS = PyCapsule_New(&prefetch_block_max_bytes, b"fbnops.prefetch_block_max_bytes", NULL)
# This build's 16-bit narrowing, for the test hook _tools.narrow (tests check it on every rounding boundary).
cdef NarrowRuns narrow_runs
narrow_runs.half = fb_narrow_half_run
narrow_runs.bf16 = fb_narrow_bf16_run
NARROW_RUNS_ADDRESS = PyCapsule_New(&narrow_runs, b"fbnops.narrow_runs", NULL)


cdef inline bint streams(const Plan* P, Py_ssize_t itemsize, Apply amode) noexcept nogil:
    """Whether the apply pass writes the output with non-temporal stores (_plan._streams)."""
    return _streams(P.channels_last, P.block, P.outer * P.C * P.inner, itemsize, amode == APPLY_FULL, stream_min_bytes,
                    stream_rows_min_bytes)


cdef inline bint in_strips(const Plan* P, Py_ssize_t itemsize, int ninputs) noexcept nogil:
    """Whether a reduction pass adds its rows in strips, several rows per load and store of its lane
    totals (_plan._strips)."""
    return _strips(P.outer * P.C * P.inner, itemsize, ninputs, cached_max_bytes, strip_max_bytes, P.channels_last)


cdef void fused_block(const Plan* P, Params* params, Py_ssize_t item, const Reduce* passes, int npasses,
                      Apply amode, const storage_t* a, const storage_t* b, storage_t* out, bint stream,
                      bint strips, bint prefetch) noexcept nogil:
    """A whole channel block in one item: reduce, coefficients, apply while it is in cache
    (after the first pass, the block is in cache whatever the inputs' size); with `prefetch`, the
    apply requests the next block's planes (_plan._prefetches)."""
    cdef fb_f64_lanes s_buf
    cdef double* s = s_buf.v
    cdef Py_ssize_t c, c0, nch, n0, n1
    cdef int p
    block_bounds(P, item, &c0, &nch, &n0, &n1)
    for p in range(npasses):
        reduce_plane_item(P, passes[p], item, a, b, params.center, s, strips or p > 0)
        for c in range(nch):
            channel_done(params, p, c0 + c, s[c], s[P.block + c])
    apply_plane_item(P, params, amode, item, a, b, out, stream, prefetch)


cdef enum Region:
    FUSED = 0   # channels-first, one item per channel block: reduce + coefficients + apply
    REDUCE = 1
    APPLY = 2


cdef struct Scratch:
    # One call's work memory, carved from one block (see scratch_doubles / scratch_floats).
    double* part        # partials per item: nitems * 2 * (width or block)
    double* s           # totals s[2][C]
    float* acc          # channels-last: float32 lanes per item
    float* tiles        # channels-last: A, B, K, m tiles of P.width lanes


cdef inline Py_ssize_t in_lines(Py_ssize_t n, Py_ssize_t per_line) noexcept nogil:
    """n elements rounded up to whole 64-byte lines of per_line: every scratch region starts on a
    line (from a 64-byte aligned block: see _scratch), so no vector access splits a line."""
    return (n + per_line - 1) // per_line * per_line


cdef inline Py_ssize_t part_doubles(const Plan* P) noexcept nogil:
    return in_lines(P.nitems * 2 * (P.width if P.channels_last else P.block), 8)  # the items' partials


cdef inline Py_ssize_t acc_floats(const Plan* P) noexcept nogil:
    return in_lines(P.nitems * 2 * P.width, 16)  # channels-last: the items' float32 lanes


cdef inline Py_ssize_t scratch_doubles(const Plan* P) noexcept nogil:
    return part_doubles(P) + in_lines(2 * P.C, 8)


cdef inline Py_ssize_t scratch_floats(const Plan* P) noexcept nogil:
    return acc_floats(P) + in_lines(4 * P.width, 16) if P.channels_last else 0


cdef inline Py_ssize_t coefficient_floats(Py_ssize_t C) noexcept nogil:
    return in_lines(3 * C, 16)  # A, B, K


cdef inline Scratch carve(const Plan* P, double* d, float* f) noexcept nogil:
    cdef Scratch S
    S.part = d
    S.s = d + part_doubles(P)
    S.acc = f
    S.tiles = f + acc_floats(P) if P.channels_last else NULL
    return S


cdef struct Work:
    # Everything one parallel region needs, so that a single item function serves all.
    const Plan* P
    Params* params
    const Scratch* S
    Region region
    Reduce mode         # REDUCE: the pass
    int npasses         # FUSED: the passes
    Reduce passes[2]
    Apply amode
    bint stream         # FUSED/APPLY: the output is written with non-temporal stores
    bint strips         # FUSED/REDUCE: rows added in strips (see in_strips)
    bint prefetch       # FUSED: each block requests the next one's planes as it applies
    bint backward       # REDUCE/APPLY: each thread runs its items last first (see for_items)


cdef void do_item(const Work* w, const storage_t* a, const storage_t* b, storage_t* out,
                  Py_ssize_t item) noexcept nogil:
    cdef const Plan* P = w.P
    cdef Py_ssize_t W = P.width
    if w.region == FUSED:
        fused_block(P, w.params, item, w.passes, w.npasses, w.amode, a, b, out, w.stream, w.strips, w.prefetch)
    elif w.region == REDUCE:
        if P.channels_last:
            reduce_row_item(P, w.mode, item, a, b, w.S.tiles + 3 * W,
                            w.S.acc + item * 2 * W, w.S.part + item * 2 * W, w.strips)
        else:
            reduce_plane_item(P, w.mode, item, a, b, w.params.center, w.S.part + 2 * P.block * item, w.strips)
    elif P.channels_last:
        apply_row_item(P, w.amode, item, a, b, out, w.S.tiles, w.stream)
    else:
        apply_plane_item(P, w.params, w.amode, item, a, b, out, w.stream, False)


cdef inline void items_in(const Work* w, Py_ssize_t i0, Py_ssize_t i1, const storage_t* a, const storage_t* b,
                          storage_t* out) noexcept nogil:
    """Items [i0, i1) in order, or last first in a `backward` pass (see for_items)."""
    cdef Py_ssize_t k
    for k in range(i0, i1):
        do_item(w, a, b, out, i0 + i1 - 1 - k if w.backward else k)


cdef void for_items(const Work* w, Py_ssize_t n, int nthreads, const storage_t* a, const storage_t* b,
                    storage_t* out) noexcept nogil:
    """Run items 0..n-1: thread t of T the range [n*t/T, n*(t+1)/T), the same in every pass of a
    call; a plain loop when threads do not pay (no OpenMP region at all, which costs about a
    microsecond even with one thread).  A `backward` pass runs each range last item first: the
    passes of a call alternate, so each starts on the items the previous one touched last, which
    are still in the thread's caches."""
    cdef Py_ssize_t t, T = min(<Py_ssize_t> nthreads, n)
    if T > 1:
        for t in prange(T, schedule="static", num_threads=T):
            items_in(w, n * t // T, n * (t + 1) // T, a, b, out)
    else:
        items_in(w, 0, n, a, b, out)


cdef inline Work make_work(const Plan* P, Params* params, const Scratch* S, Region region) noexcept nogil:
    cdef Work w
    w.P = P
    w.params = params
    w.S = S
    w.region = region
    w.mode = RED_GRAD
    w.npasses = 0
    w.passes[0] = RED_GRAD
    w.passes[1] = RED_GRAD
    w.amode = APPLY_A
    w.stream = False
    w.strips = False
    w.prefetch = False
    w.backward = False
    return w


# The three stages (partials, finish, apply); the op is their composition, except that
# fused channel blocks run all three back to back in one region.

cdef void reduce_pass(const Plan* P, Params* params, Reduce mode, const Scratch* S, const storage_t* a,
                      const storage_t* b, int nthreads, bint backward=False) noexcept nogil:
    """One reduction pass over every item, combined in a fixed order into S.s[0:2C]."""
    cdef Work w = make_work(P, params, S, REDUCE)
    w.mode = mode
    w.backward = backward
    w.strips = in_strips(P, sizeof(storage_t), _reduce_inputs(mode))
    if P.channels_last:
        tile_channels(P, params.center, S.tiles + 3 * P.width)  # a reduction reads only the centers
    for_items(&w, P.nitems, nthreads, a, b, <storage_t*> NULL)
    if P.channels_last:
        combine_rows(P, mode, S.part, S.s)
    else:
        combine_blocks(P, S.part, S.s)


cdef void finish_pass(Params* params, int pass_index, const double* s, Py_ssize_t C) noexcept nogil:
    cdef Py_ssize_t c
    for c in range(C):
        channel_done(params, pass_index, c, s[c], s[C + c])


cdef void apply_pass(const Plan* P, Params* params, Apply amode, const Scratch* S, const storage_t* a,
                     const storage_t* b, storage_t* out, int nthreads, bint backward=False) noexcept nogil:
    cdef Work w = make_work(P, params, S, APPLY)
    w.amode = amode
    w.backward = backward
    w.stream = streams(P, sizeof(storage_t), amode)
    if P.channels_last:
        tile_row_coefficients(P, params, S.tiles)
    for_items(&w, P.nitems, nthreads, a, b, out)


cdef void run(const Plan* P, Params* params, const storage_t* a, const storage_t* b, storage_t* out,
              const Scratch* S, int nthreads) noexcept nogil:
    """The whole op: every reduction pass with its finish, then the apply pass; the passes run
    their items forward and backward in turn (see for_items)."""
    cdef Work w = make_work(P, params, S, FUSED)
    cdef int p
    if params.op == GRAD_TRAIN or params.op == GRAD_FROZEN:
        w.passes[0] = RED_GRAD
        w.npasses = 1
        w.amode = APPLY_FULL if params.op == GRAD_TRAIN else APPLY_B
        w.strips = in_strips(P, sizeof(storage_t), _reduce_inputs(RED_GRAD))
    elif params.op == FWD_TRAIN:
        w.passes[0] = RED_SUM
        w.passes[1] = RED_SQ
        w.npasses = 2
        w.amode = APPLY_A
        w.strips = in_strips(P, sizeof(storage_t), _reduce_inputs(RED_SUM))
    else:
        w.amode = APPLY_A
    w.stream = streams(P, sizeof(storage_t), w.amode)
    w.prefetch = _prefetches(P.outer, P.block, P.inner, sizeof(storage_t), _inputs(w.amode), prefetch_block_max_bytes)

    if not P.channels_last and P.per_channel == 1 and w.npasses > 0:
        for_items(&w, P.nitems, nthreads, a, b, out)
        return
    for p in range(w.npasses):
        reduce_pass(P, params, w.passes[p], S, a, b, nthreads, p % 2 == 1)
        finish_pass(params, p, S.s, P.C)
    if w.npasses == 0:
        finish_pass(params, 0, S.s, P.C)  # (totals unused: inference)
    apply_pass(P, params, w.amode, S, a, b, out, nthreads, w.npasses % 2 == 1)


cdef void reduce_samples(const Plan* SP, Params* params, Reduce mode, Py_ssize_t nsamples, double* work_d,
                         float* work_f, const storage_t* a, const storage_t* b, double* out,
                         int nthreads) noexcept nogil:
    """Totals per sample: sample k is the (rows, C, inner) view SP at element k * rows*C*inner,
    reduced by its own plan serially, so its totals depend on its data only (not on which
    other samples share the call).  Chunks of samples share one scratch per thread."""
    cdef Py_ssize_t nchunks = min(nsamples, max(nthreads, 1)), t, k, k0, k1, item
    cdef Py_ssize_t nd = scratch_doubles(SP), nf = scratch_floats(SP)
    cdef Py_ssize_t elems = SP.outer * SP.C * SP.inner
    cdef Scratch S
    cdef Work w
    for t in range(nchunks):
        S = carve(SP, work_d + t * nd, work_f + t * nf)
        if SP.channels_last:
            tile_channels(SP, params.center, S.tiles + 3 * SP.width)
    for t in prange(nchunks, schedule="static", num_threads=nthreads, use_threads_if=nchunks > 1):
        S = carve(SP, work_d + t * nd, work_f + t * nf)
        w = make_work(SP, params, &S, REDUCE)
        w.mode = mode
        k0 = nsamples * t // nchunks
        k1 = nsamples * (t + 1) // nchunks
        for k in range(k0, k1):
            for item in range(SP.nitems):
                do_item(&w, a + k * elems, b + k * elems, <storage_t*> NULL, item)
            if SP.channels_last:
                combine_rows(SP, mode, S.part, out + k * 2 * SP.C)
            else:
                combine_blocks(SP, S.part, out + k * 2 * SP.C)


include "_entry_points.pxi"
