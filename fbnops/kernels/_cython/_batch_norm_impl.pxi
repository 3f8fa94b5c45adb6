# Kernel source shared by batch_norm.pyx (baseline x86-64) and batch_norm_avx2.pyx
# (x86-64-v3: AVX2, FMA, F16C); the two are compiled from this one text.

import ml_dtypes
import numpy as np

cimport numpy as cnp
from cython.parallel cimport prange
from libc.math cimport sqrt
from cpython.mem cimport PyMem_RawCalloc, PyMem_RawFree
from libc.string cimport memcpy

from ._fp cimport fb_bf16, fb_half, load, storage_t, store
from ._openmp cimport FBNOPS_OPENMP_ENABLED
from ._plan cimport BLOCK_ROWS, LANES, MAX_W, STREAM_MIN_BYTES, Plan, make_plan

cnp.import_array()

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
    """
    int fbnops_cpu_has_x86_64_v3() noexcept nogil


def cpu_has_x86_64_v3():
    """Whether this CPU runs the x86-64-v3 (AVX2/FMA/F16C) build of the kernels."""
    return bool(fbnops_cpu_has_x86_64_v3())

cdef enum Op:
    GRAD_TRAIN = 0
    GRAD_FROZEN = 1
    FWD_TRAIN = 2
    FWD_INFER = 3

cdef enum Reduce:
    RED_GRAD = 0  # s0 += b;  s1 += (a - m) * b
    RED_SUM = 1   # s0 += a
    RED_SQ = 2    # s1 += (a - m) ** 2

cdef enum Apply:
    APPLY_FULL = 0  # A*((b + K) + B*(a - m))  (training gradient; gamma*r stays outside, as in TF)
    APPLY_B = 1     # A*b                   (frozen gradient)
    APPLY_A = 2     # B*(a - m) + K         (forward)

# Per-channel inputs and outputs of one call.
cdef struct Params:
    Op op
    float eps
    double n
    const float* scale
    const float* offset
    const float* var_in
    const float* center   # what x is centered on: rs1 / the mean input / the batch mean
    float* A
    float* B
    float* K
    float* res0           # gradient: scale_backprop; forward training: batch mean
    float* res1           # gradient: offset_backprop; forward training: batch variance


include "_loops.pxi"


# ---------------------------------------------------------------------------------------
# The op's math: per-channel totals -> outputs and apply coefficients.
# ---------------------------------------------------------------------------------------

cdef void channel_done(Params* g, int pass_index, Py_ssize_t c, double s0, double s1) noexcept nogil:
    cdef double var, r, gamma = g.scale[c], n = g.n
    if g.op == FWD_TRAIN and pass_index == 0:
        g.res0[c] = <float>(s0 / n)  # batch mean; the next pass centers on it
        return
    if g.op == FWD_TRAIN:
        var = s1 / n  # biased variance
        g.res1[c] = <float>var
        var = g.res1[c]
    else:
        var = g.var_in[c]
    r = 1.0 / sqrt(<double>(<float>var + g.eps))
    if g.op == GRAD_TRAIN or g.op == GRAD_FROZEN:
        g.res0[c] = <float>(s1 * r)  # scale_backprop = sum(dy * (x - mean)) * r
        g.res1[c] = <float>s0        # offset_backprop = sum(dy)
        g.A[c] = <float>(gamma * r)
        if g.op == GRAD_TRAIN:  # dx = gamma*r * ((dy - s0/n) - (x - mean) * r*r*s1/n), as TF groups it
            g.B[c] = <float>(-r * r * s1 / n)
            g.K[c] = <float>(-s0 / n)
        else:
            g.B[c] = 0
            g.K[c] = 0
    else:  # forward: y = (x - mean) * (scale * r) + offset
        g.A[c] = 0
        g.B[c] = <float>(gamma * r)
        g.K[c] = g.offset[c]


cdef void combine_rows(const Plan* P, const double* part, double* s) noexcept nogil:
    """Fold row-item partials [item][2][width] into s[2][C], in a fixed order."""
    cdef Py_ssize_t item, q, c, W = P.width, C = P.C
    for c in range(2 * C):
        s[c] = 0
    for item in range(P.nitems):
        for q in range(P.fold):
            for c in range(C):
                s[c] += part[item * 2 * W + q * C + c]
                s[C + c] += part[item * 2 * W + W + q * C + c]


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


cdef void tile_row_coefficients(const Plan* P, const Params* g, float* tiles) noexcept nogil:
    cdef Py_ssize_t j, c, W = P.width
    for j in range(W):
        c = j % P.C
        tiles[j] = g.A[c]
        tiles[W + j] = g.B[c]
        tiles[2 * W + j] = g.K[c]
        tiles[3 * W + j] = g.center[c] if g.center != NULL else 0


# ---------------------------------------------------------------------------------------
# The driver.
# ---------------------------------------------------------------------------------------

cdef Py_ssize_t stream_min_bytes = STREAM_MIN_BYTES  # (a test hook sets it: _set_stream_min_bytes)


def _set_stream_min_bytes(Py_ssize_t nbytes):
    """Outputs of at least ``nbytes`` are written with non-temporal stores; returns the old
    threshold (tests stream small outputs to check that the bits do not change)."""
    global stream_min_bytes
    old = stream_min_bytes
    stream_min_bytes = nbytes
    return old


cdef inline bint streams(const Plan* P, Py_ssize_t itemsize) noexcept nogil:
    """Whether the output is too large for the caches: written with non-temporal stores.

    Never for blocks of small planes: their rows are short runs (at most MAX_W elements) whose
    end lines other items write too, and streamed partial lines cost more than the cached
    stores save (paired runs: 1.08x slower in float32, up to 1.6x in float16)."""
    if not P.channels_last and P.block > 1:
        return False
    return P.outer * P.C * P.inner * itemsize >= stream_min_bytes


cdef void fused_block(const Plan* P, Params* g, Py_ssize_t item, const Reduce* passes, int npasses,
                      Apply amode, const storage_t* a, const storage_t* b, storage_t* out, bint stream) noexcept nogil:
    """A whole channel block in one item: reduce, coefficients, apply while it is in cache."""
    cdef double s[2 * MAX_W]
    cdef Py_ssize_t c, c0, nch, n0, n1
    cdef int p
    block_bounds(P, item, &c0, &nch, &n0, &n1)
    for p in range(npasses):
        reduce_plane_item(P, passes[p], item, a, b, g.center, s)
        for c in range(nch):
            channel_done(g, p, c0 + c, s[c], s[P.block + c])
    apply_plane_item(P, g, amode, item, a, b, out, stream)


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


cdef inline Py_ssize_t scratch_doubles(const Plan* P) noexcept nogil:
    return P.nitems * 2 * (P.width if P.channels_last else P.block) + 2 * P.C


cdef inline Py_ssize_t scratch_floats(const Plan* P) noexcept nogil:
    return P.nitems * 2 * P.width + 4 * P.width if P.channels_last else 0


cdef inline Scratch carve(const Plan* P, double* d, float* f) noexcept nogil:
    cdef Scratch S
    S.part = d
    S.s = d + P.nitems * 2 * (P.width if P.channels_last else P.block)
    S.acc = f
    S.tiles = f + P.nitems * 2 * P.width if P.channels_last else NULL
    return S


cdef struct Work:
    # Everything one parallel region needs, so that a single item function serves all.
    const Plan* P
    Params* g
    const Scratch* S
    Region region
    Reduce mode         # REDUCE: the pass
    int npasses         # FUSED: the passes
    Reduce passes[2]
    Apply amode
    bint stream         # FUSED/APPLY: the output is written with non-temporal stores


cdef void do_item(const Work* w, const storage_t* a, const storage_t* b, storage_t* out,
                  Py_ssize_t item) noexcept nogil:
    cdef const Plan* P = w.P
    cdef Py_ssize_t W = P.width
    if w.region == FUSED:
        fused_block(P, w.g, item, w.passes, w.npasses, w.amode, a, b, out, w.stream)
    elif w.region == REDUCE:
        if P.channels_last:
            reduce_row_item(P, w.mode, item, a, b, w.S.tiles + 3 * W,
                            w.S.acc + item * 2 * W, w.S.part + item * 2 * W)
        else:
            reduce_plane_item(P, w.mode, item, a, b, w.g.center, w.S.part + 2 * P.block * item)
    elif P.channels_last:
        apply_row_item(P, w.amode, item, a, b, out, w.S.tiles, w.stream)
    else:
        apply_plane_item(P, w.g, w.amode, item, a, b, out, w.stream)


cdef void for_items(const Work* w, Py_ssize_t n, int nthreads, const storage_t* a, const storage_t* b,
                    storage_t* out) noexcept nogil:
    """Run items 0..n-1: a static prange when threads pay, a plain loop otherwise (no
    OpenMP region at all, which costs about a microsecond even with one thread)."""
    cdef Py_ssize_t item
    if nthreads > 1 and n > 1:
        for item in prange(n, schedule="static", num_threads=nthreads):
            do_item(w, a, b, out, item)
    else:
        for item in range(n):
            do_item(w, a, b, out, item)


cdef inline Work make_work(const Plan* P, Params* g, const Scratch* S, Region region) noexcept nogil:
    cdef Work w
    w.P = P
    w.g = g
    w.S = S
    w.region = region
    w.mode = RED_GRAD
    w.npasses = 0
    w.passes[0] = RED_GRAD
    w.passes[1] = RED_GRAD
    w.amode = APPLY_A
    w.stream = False
    return w


# The three stages (partials, finish, apply); the op is their composition, except that
# fused channel blocks run all three back to back in one region.

cdef void reduce_pass(const Plan* P, Params* g, Reduce mode, const Scratch* S, const storage_t* a,
                      const storage_t* b, int nthreads) noexcept nogil:
    """One reduction pass over every item, combined in a fixed order into S.s[0:2C]."""
    cdef Work w = make_work(P, g, S, REDUCE)
    w.mode = mode
    if P.channels_last:
        tile_row_coefficients(P, g, S.tiles)  # only the centers (tile 3) are read here
    for_items(&w, P.nitems, nthreads, a, b, <storage_t*> NULL)
    if P.channels_last:
        combine_rows(P, S.part, S.s)
    else:
        combine_blocks(P, S.part, S.s)


cdef void finish_pass(Params* g, int pass_index, const double* s, Py_ssize_t C) noexcept nogil:
    cdef Py_ssize_t c
    for c in range(C):
        channel_done(g, pass_index, c, s[c], s[C + c])


cdef void apply_pass(const Plan* P, Params* g, Apply amode, const Scratch* S, const storage_t* a,
                     const storage_t* b, storage_t* out, int nthreads) noexcept nogil:
    cdef Work w = make_work(P, g, S, APPLY)
    w.amode = amode
    w.stream = streams(P, sizeof(storage_t))
    if P.channels_last:
        tile_row_coefficients(P, g, S.tiles)
    for_items(&w, P.nitems, nthreads, a, b, out)


cdef void run(const Plan* P, Params* g, const storage_t* a, const storage_t* b, storage_t* out,
              const Scratch* S, int nthreads) noexcept nogil:
    """The whole op: every reduction pass with its finish, then the apply pass."""
    cdef Work w = make_work(P, g, S, FUSED)
    cdef int p
    w.stream = streams(P, sizeof(storage_t))
    if g.op == GRAD_TRAIN or g.op == GRAD_FROZEN:
        w.passes[0] = RED_GRAD
        w.npasses = 1
        w.amode = APPLY_FULL if g.op == GRAD_TRAIN else APPLY_B
    elif g.op == FWD_TRAIN:
        w.passes[0] = RED_SUM
        w.passes[1] = RED_SQ
        w.npasses = 2
        w.amode = APPLY_A
    else:
        w.amode = APPLY_A

    if not P.channels_last and P.per_channel == 1 and w.npasses > 0:
        for_items(&w, P.nitems, nthreads, a, b, out)
        return
    for p in range(w.npasses):
        reduce_pass(P, g, w.passes[p], S, a, b, nthreads)
        finish_pass(g, p, S.s, P.C)
    if w.npasses == 0:
        finish_pass(g, 0, S.s, P.C)  # (totals unused: inference)
    apply_pass(P, g, w.amode, S, a, b, out, nthreads)


cdef void reduce_samples(const Plan* SP, Params* g, Reduce mode, Py_ssize_t nsamples, double* work_d,
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
            tile_row_coefficients(SP, g, S.tiles)
    for t in prange(nchunks, schedule="static", num_threads=nthreads, use_threads_if=nchunks > 1):
        S = carve(SP, work_d + t * nd, work_f + t * nf)
        w = make_work(SP, g, &S, REDUCE)
        w.mode = mode
        k0 = nsamples * t // nchunks
        k1 = nsamples * (t + 1) // nchunks
        for k in range(k0, k1):
            for item in range(SP.nitems):
                do_item(&w, a + k * elems, b + k * elems, <storage_t*> NULL, item)
            if SP.channels_last:
                combine_rows(SP, S.part, out + k * 2 * SP.C)
            else:
                combine_blocks(SP, S.part, out + k * 2 * SP.C)


include "_entry_points.pxi"
