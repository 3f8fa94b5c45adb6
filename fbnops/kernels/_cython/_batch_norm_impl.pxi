# Kernel source shared by batch_norm.pyx (baseline x86-64) and batch_norm_avx2.pyx
# (x86-64-v3: AVX2, FMA, F16C); the two are compiled from this one text.

import ml_dtypes
import numpy as np

cimport numpy as cnp
from cython.parallel cimport prange
from libc.math cimport sqrt
from cpython.mem cimport PyMem_RawCalloc, PyMem_RawFree

from ._fp cimport fb_bf16, fb_f32_to_bf16, fb_f32_to_half, fb_half, load, storage_t, store
from ._openmp cimport FBNOPS_OPENMP_ENABLED

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

cdef enum:
    LANES = 512         # minimum row width: folded channels-last rows, channel blocks of small planes
    MAX_W = 2 * LANES   # widest row: a block of ceil(LANES / inner) planes
    BLOCK_ROWS = 128    # rows summed in float32 before flushing into float64
    ROW_ITEM_ELEMS = 32768  # channels-last: target elements per item
    MAX_ROW_ITEMS = 64
    PLANE_ITEM_BYTES = 4194304  # channels-first: bytes of (a, b) per item: about one L2
    MIN_ITEMS = 16      # channels-first: split channels so few channels still share out

# The partition of the work: a function of the shape (and element size) only.
cdef struct Plan:
    bint channels_last
    Py_ssize_t outer, C, inner
    Py_ssize_t width        # lanes per row
    Py_ssize_t fold         # channels-last: input rows per folded row
    Py_ssize_t rows         # channels-last: folded rows in total
    Py_ssize_t nitems
    Py_ssize_t block        # channels-first: channels per item (planes side by side in one row)
    Py_ssize_t run          # channels-first: lanes per channel in a row (lane j is channel j // run)
    Py_ssize_t per_channel  # channels-first: items per channel block (batch ranges)

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


cdef Py_ssize_t _gcd(Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    while b:
        a, b = b, a % b
    return a


cdef Plan make_plan(Py_ssize_t outer, Py_ssize_t C, Py_ssize_t inner, Py_ssize_t itemsize) noexcept nogil:
    cdef Plan P
    cdef Py_ssize_t k, nblocks
    P.outer = outer
    P.C = C
    P.inner = inner
    P.channels_last = inner == 1
    if P.channels_last:
        P.fold = 1
        if C < LANES:  # fold rows until the row is a multiple of 16 lanes and >= LANES
            P.fold = 16 // _gcd(C, 16)
            while P.fold * C < LANES and P.fold < outer:
                P.fold *= 2
        P.width = C * P.fold
        P.rows = (outer + P.fold - 1) // P.fold
        k = (outer * C + ROW_ITEM_ELEMS - 1) // ROW_ITEM_ELEMS
        P.nitems = max(1, min(k, MAX_ROW_ITEMS, P.rows))
        P.block = 0
        P.run = 0
        P.per_channel = 0
    else:
        P.fold = 1
        P.rows = 0
        if inner < LANES:  # small planes: a row is `block` whole planes (contiguous in memory)
            P.block = min(C, (LANES + inner - 1) // inner)
            P.run = inner
            P.width = P.block * inner
        else:  # large planes: rows of LANES lanes, all of one channel
            P.block = 1
            P.run = LANES
            P.width = LANES
        nblocks = (C + P.block - 1) // P.block
        k = (outer * P.block * inner * 2 * itemsize + PLANE_ITEM_BYTES - 1) // PLANE_ITEM_BYTES
        k = max(k, (MIN_ITEMS + nblocks - 1) // nblocks)
        P.per_channel = max(1, min(k, outer))
        P.nitems = nblocks * P.per_channel
    return P


# ---------------------------------------------------------------------------------------
# Innermost loops.  All data is processed as rows of W lanes with per-lane tiles
# (m, A, B, K) and per-lane float32 accumulators in L1.  A lane always holds the same
# channel: channels-last rows are (folded) rows of C; channels-first rows are a block
# of whole small planes side by side, or a LANES-wide piece of one large plane.
# ---------------------------------------------------------------------------------------

cdef inline void reduce_rows(Reduce mode, const storage_t* a, const storage_t* b, Py_ssize_t nrows,
                             Py_ssize_t W, const float* m, float* s0, float* s1) noexcept nogil:
    cdef Py_ssize_t r, j
    cdef float d, g
    for r in range(nrows):
        if mode == RED_GRAD:
            for j in range(W):
                g = load(b, j)
                s0[j] += g
                s1[j] += (load(a, j) - m[j]) * g
        elif mode == RED_SUM:
            for j in range(W):
                s0[j] += load(a, j)
        else:
            for j in range(W):
                d = load(a, j) - m[j]
                s1[j] += d * d
        a += W
        b += W


cdef inline void apply_rows(Apply mode, const storage_t* a, const storage_t* b, storage_t* out,
                            Py_ssize_t nrows, Py_ssize_t W, const float* A, const float* B,
                            const float* K, const float* m) noexcept nogil:
    cdef Py_ssize_t r, j
    for r in range(nrows):
        if mode == APPLY_FULL:
            for j in range(W):
                store(out, j, A[j] * ((load(b, j) + K[j]) + B[j] * (load(a, j) - m[j])))
        elif mode == APPLY_B:
            for j in range(W):
                store(out, j, A[j] * load(b, j))
        else:
            for j in range(W):
                store(out, j, B[j] * (load(a, j) - m[j]) + K[j])
        a += W
        b += W
        out += W


cdef inline void apply_run(Apply mode, const storage_t* a, const storage_t* b, storage_t* out,
                           Py_ssize_t L, float A, float B, float K, float m) noexcept nogil:
    cdef Py_ssize_t i
    if mode == APPLY_FULL:
        for i in range(L):
            store(out, i, A * ((load(b, i) + K) + B * (load(a, i) - m)))
    elif mode == APPLY_B:
        for i in range(L):
            store(out, i, A * load(b, i))
    else:
        for i in range(L):
            store(out, i, B * (load(a, i) - m) + K)


cdef inline void flush(Py_ssize_t W, float* acc, double* part) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(2 * W):
        part[j] += acc[j]
        acc[j] = 0


cdef inline void reduce_span(Reduce mode, const storage_t* a, const storage_t* b, Py_ssize_t start,
                             Py_ssize_t stop, Py_ssize_t W, const float* m, float* acc, double* part,
                             Py_ssize_t* rows_in_block) noexcept nogil:
    """Accumulate elements [start, stop) as rows of W lanes (the last row may be short).

    float32 lanes ``acc[0:2W]`` take at most BLOCK_ROWS rows, then flush into the
    float64 ``part``; the row count carries over between spans of the same item.
    """
    cdef Py_ssize_t n, pos = start
    while pos < stop:
        n = min((stop - pos) // W, BLOCK_ROWS - rows_in_block[0])
        if n > 0:
            reduce_rows(mode, a + pos, b + pos, n, W, m, acc, acc + W)
            pos += n * W
        else:  # a short last row
            n = 1
            reduce_rows(mode, a + pos, b + pos, 1, stop - pos, m, acc, acc + W)
            pos = stop
        rows_in_block[0] += n
        if rows_in_block[0] == BLOCK_ROWS:
            flush(W, acc, part)
            rows_in_block[0] = 0


# ---------------------------------------------------------------------------------------
# Items.  Channels-last: a range of folded rows.  Channels-first: (channel block, batch range).
# ---------------------------------------------------------------------------------------

cdef inline void row_item_bounds(const Plan* P, Py_ssize_t item, Py_ssize_t* r0, Py_ssize_t* r1,
                                 Py_ssize_t* tail) noexcept nogil:
    """Full folded rows [r0, r1) of the item, plus `tail` elements of a last partial row."""
    cdef Py_ssize_t total = P.outer * P.C
    r0[0] = P.rows * item // P.nitems
    r1[0] = P.rows * (item + 1) // P.nitems
    tail[0] = 0
    if r1[0] * P.width > total:  # the last folded row is partial
        r1[0] -= 1
        tail[0] = total - r1[0] * P.width


cdef void reduce_row_item(const Plan* P, Reduce mode, Py_ssize_t item, const storage_t* a,
                          const storage_t* b, const float* m_tile, float* acc, double* part) noexcept nogil:
    cdef Py_ssize_t r0, r1, tail, j, nrows = 0, W = P.width
    for j in range(2 * W):
        acc[j] = 0
        part[j] = 0
    row_item_bounds(P, item, &r0, &r1, &tail)
    reduce_span(mode, a, b, r0 * W, r1 * W + tail, W, m_tile, acc, part, &nrows)
    flush(W, acc, part)


cdef void apply_row_item(const Plan* P, Apply mode, Py_ssize_t item, const storage_t* a,
                         const storage_t* b, storage_t* out, const float* tiles) noexcept nogil:
    cdef Py_ssize_t r0, r1, tail, W = P.width
    row_item_bounds(P, item, &r0, &r1, &tail)
    apply_rows(mode, a + r0 * W, b + r0 * W, out + r0 * W, r1 - r0, W,
               tiles, tiles + W, tiles + 2 * W, tiles + 3 * W)
    if tail:
        apply_rows(mode, a + r1 * W, b + r1 * W, out + r1 * W, 1, tail,
                   tiles, tiles + W, tiles + 2 * W, tiles + 3 * W)


cdef inline void block_bounds(const Plan* P, Py_ssize_t item, Py_ssize_t* c0, Py_ssize_t* nch,
                              Py_ssize_t* n0, Py_ssize_t* n1) noexcept nogil:
    """Channels [c0, c0 + nch) and batch range [n0, n1) of a channels-first item."""
    cdef Py_ssize_t blk = item // P.per_channel, k = item % P.per_channel
    c0[0] = blk * P.block
    nch[0] = min(P.block, P.C - c0[0])
    n0[0] = P.outer * k // P.per_channel
    n1[0] = P.outer * (k + 1) // P.per_channel


cdef void reduce_plane_item(const Plan* P, Reduce mode, Py_ssize_t item, const storage_t* a,
                            const storage_t* b, const float* center, double* sums) noexcept nogil:
    """Totals of one (channel block, batch range) item: sums[0:nch] and sums[block:block+nch].

    Each batch index contributes the item's planes as rows of `width` lanes; lane j
    belongs to channel c0 + j // run.  The lanes are folded per channel at the end.
    """
    cdef float acc[2 * MAX_W]
    cdef double lanes[2 * MAX_W]
    cdef float m_tile[MAX_W]
    cdef Py_ssize_t j, c, n, base, c0, nch, n0, n1, nrows = 0
    cdef Py_ssize_t W = P.width, R = P.run, span
    cdef double t0, t1
    block_bounds(P, item, &c0, &nch, &n0, &n1)
    span = nch * P.inner
    for c in range(nch):  # (nested loops, not j // R: integer division is slow)
        for j in range(c * R, (c + 1) * R):
            m_tile[j] = center[c0 + c] if center != NULL else 0
    for j in range(2 * W):
        acc[j] = 0
        lanes[j] = 0
    for n in range(n0, n1):
        base = (n * P.C + c0) * P.inner
        reduce_span(mode, a, b, base, base + span, W, m_tile, acc, lanes, &nrows)
    flush(W, acc, lanes)
    for c in range(nch):
        t0 = 0
        t1 = 0
        for j in range(c * R, (c + 1) * R):
            t0 += lanes[j]
            t1 += lanes[W + j]
        sums[c] = t0
        sums[P.block + c] = t1


cdef void apply_plane_item(const Plan* P, const Params* g, Apply mode, Py_ssize_t item,
                           const storage_t* a, const storage_t* b, storage_t* out) noexcept nogil:
    cdef float tiles[4 * MAX_W]
    cdef Py_ssize_t j, c, n, base, c0, nch, n0, n1, span, W = P.width
    block_bounds(P, item, &c0, &nch, &n0, &n1)
    span = nch * P.inner
    if P.block == 1:  # large planes: one channel, scalar coefficients (fewer loads per element)
        for n in range(n0, n1):
            base = (n * P.C + c0) * P.inner
            apply_run(mode, a + base, b + base, out + base, P.inner, g.A[c0], g.B[c0], g.K[c0], g.center[c0])
        return
    for c in range(c0, c0 + nch):
        for j in range((c - c0) * P.run, (c - c0 + 1) * P.run):
            tiles[j] = g.A[c]
            tiles[W + j] = g.B[c]
            tiles[2 * W + j] = g.K[c]
            tiles[3 * W + j] = g.center[c]
    for n in range(n0, n1):
        base = (n * P.C + c0) * P.inner
        apply_rows(mode, a + base, b + base, out + base, 1, span, tiles, tiles + W, tiles + 2 * W, tiles + 3 * W)


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

cdef void fused_block(const Plan* P, Params* g, Py_ssize_t item, const Reduce* passes, int npasses,
                      Apply amode, const storage_t* a, const storage_t* b, storage_t* out) noexcept nogil:
    """A whole channel block in one item: reduce, coefficients, apply while it is in cache."""
    cdef double s[2 * MAX_W]
    cdef Py_ssize_t c, c0, nch, n0, n1
    cdef int p
    block_bounds(P, item, &c0, &nch, &n0, &n1)
    for p in range(npasses):
        reduce_plane_item(P, passes[p], item, a, b, g.center, s)
        for c in range(nch):
            channel_done(g, p, c0 + c, s[c], s[P.block + c])
    apply_plane_item(P, g, amode, item, a, b, out)


cdef enum Region:
    FUSED = 0   # channels-first, one item per channel block: reduce + coefficients + apply
    REDUCE = 1
    APPLY = 2


cdef struct Work:
    # Everything one parallel region needs, so that a single item function serves all.
    const Plan* P
    Params* g
    Region region
    int pass_index
    int npasses
    Reduce passes[2]
    Apply amode
    const float* tiles  # channels-last: A, B, K, m tiles of P.width lanes
    float* acc          # channels-last: float32 lanes per item
    double* part        # partials per item


cdef void do_item(const Work* w, const storage_t* a, const storage_t* b, storage_t* out,
                  Py_ssize_t item) noexcept nogil:
    cdef const Plan* P = w.P
    cdef Py_ssize_t W = P.width
    if w.region == FUSED:
        fused_block(P, w.g, item, w.passes, w.npasses, w.amode, a, b, out)
    elif w.region == REDUCE:
        if P.channels_last:
            reduce_row_item(P, w.passes[w.pass_index], item, a, b, w.tiles + 3 * W,
                            w.acc + item * 2 * W, w.part + item * 2 * W)
        else:
            reduce_plane_item(P, w.passes[w.pass_index], item, a, b, w.g.center, w.part + 2 * P.block * item)
    elif P.channels_last:
        apply_row_item(P, w.amode, item, a, b, out, w.tiles)
    else:
        apply_plane_item(P, w.g, w.amode, item, a, b, out)


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


cdef void run(const Plan* P, Params* g, const storage_t* a, const storage_t* b, storage_t* out,
              float* work_f, double* work_d, int nthreads) noexcept nogil:
    cdef Work w
    cdef int p
    cdef Py_ssize_t item, c, W = P.width
    # work_d: partials (nitems*2*W or nitems*2*block) then totals s[2][C]; work_f: lanes, then tiles
    cdef double* s = work_d + P.nitems * 2 * (W if P.channels_last else P.block)
    cdef float* tiles = work_f + (P.nitems * 2 * W if P.channels_last else 0)
    w.P = P
    w.g = g
    w.tiles = tiles
    w.acc = work_f
    w.part = work_d
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
        w.npasses = 0
        w.amode = APPLY_A

    if not P.channels_last and P.per_channel == 1 and w.npasses > 0:
        w.region = FUSED
        for_items(&w, P.nitems, nthreads, a, b, out)
        return

    w.region = REDUCE
    for p in range(w.npasses):
        w.pass_index = p
        if P.channels_last:
            tile_row_coefficients(P, g, tiles)  # only the centers (tile 3) are read here
        for_items(&w, P.nitems, nthreads, a, b, out)
        if P.channels_last:
            combine_rows(P, work_d, s)
        else:
            combine_blocks(P, work_d, s)
        for c in range(P.C):
            channel_done(g, p, c, s[c], s[P.C + c])
    if w.npasses == 0:
        for c in range(P.C):
            channel_done(g, 0, c, 0, 0)

    w.region = APPLY
    if P.channels_last:
        tile_row_coefficients(P, g, tiles)
    for_items(&w, P.nitems, nthreads, a, b, out)


# ---------------------------------------------------------------------------------------
# Python entry points: check (cheaply, again) what the op layer validated, allocate, run.
# ---------------------------------------------------------------------------------------

cdef int BF16_NUM = np.dtype(ml_dtypes.bfloat16).num


cdef int _storage_kind(int type_num) noexcept:
    """0: float32, 1: float16, 2: bfloat16, -1: anything else."""
    if type_num == cnp.NPY_FLOAT:
        return 0
    if type_num == cnp.NPY_FLOAT16:
        return 1
    if type_num == BF16_NUM:
        return 2
    return -1


cdef const float* _vector(object v, Py_ssize_t C, str name) except NULL:
    cdef cnp.ndarray a
    if isinstance(v, cnp.ndarray):
        a = <cnp.ndarray> v
        if (cnp.PyArray_TYPE(a) == cnp.NPY_FLOAT and cnp.PyArray_NDIM(a) == 1
                and cnp.PyArray_DIMS(a)[0] == C and cnp.PyArray_IS_C_CONTIGUOUS(a)
                and cnp.PyArray_ISALIGNED(a)):
            return <const float*> cnp.PyArray_DATA(a)
    raise ValueError(f"{name} must be a contiguous float32 vector of length {C}")


cdef void* _data(object t, object like, str name) except NULL:
    """Pointer to a contiguous 3-D (outer, C, inner) array of a storage type."""
    cdef cnp.ndarray a, b
    if isinstance(t, cnp.ndarray):
        a = <cnp.ndarray> t
        if (cnp.PyArray_NDIM(a) == 3 and cnp.PyArray_IS_C_CONTIGUOUS(a) and cnp.PyArray_ISALIGNED(a)
                and _storage_kind(cnp.PyArray_TYPE(a)) >= 0):
            if like is None:
                return cnp.PyArray_DATA(a)
            b = <cnp.ndarray> like
            if (cnp.PyArray_TYPE(a) == cnp.PyArray_TYPE(b) and cnp.PyArray_DIMS(a)[0] == cnp.PyArray_DIMS(b)[0]
                    and cnp.PyArray_DIMS(a)[1] == cnp.PyArray_DIMS(b)[1]
                    and cnp.PyArray_DIMS(a)[2] == cnp.PyArray_DIMS(b)[2]):
                return cnp.PyArray_DATA(a)
            raise ValueError(f"{name} must have the shape and dtype of x")
    raise ValueError(f"{name} must be a contiguous 3-D (outer, C, inner) float32/float16/bfloat16 array")


cdef _call(Op op, x, dy, scale, offset, mean, variance, float epsilon, int num_threads):
    cdef void* px = _data(x, None, "x")
    cdef void* pb = _data(dy, x, "y_backprop") if dy is not None else px
    cdef cnp.ndarray xa = <cnp.ndarray> x
    cdef Py_ssize_t outer = cnp.PyArray_DIMS(xa)[0], C = cnp.PyArray_DIMS(xa)[1], inner = cnp.PyArray_DIMS(xa)[2]
    cdef int kind = _storage_kind(cnp.PyArray_TYPE(xa))
    if outer * C * inner == 0:
        raise ValueError("empty inputs are handled by the op layer")
    cdef Params g
    cdef Plan P = make_plan(outer, C, inner, cnp.PyArray_ITEMSIZE(xa))
    g.op = op
    g.eps = epsilon
    g.n = <double>outer * <double>inner
    g.scale = _vector(scale, C, "scale")
    g.offset = _vector(offset, C, "offset") if offset is not None else NULL
    g.var_in = _vector(variance, C, "variance") if variance is not None else NULL

    out = cnp.PyArray_EMPTY(3, cnp.PyArray_DIMS(xa), cnp.PyArray_TYPE(xa), 0)
    cdef cnp.npy_intp nvec = C
    res0 = cnp.PyArray_ZEROS(1, &nvec, cnp.NPY_FLOAT, 0)
    res1 = cnp.PyArray_ZEROS(1, &nvec, cnp.NPY_FLOAT, 0)
    # Scratch, one block: float64 partials + totals, then float32 coefficients, lanes, tiles.
    cdef Py_ssize_t nd = P.nitems * 2 * (P.width if P.channels_last else P.block) + 2 * C
    cdef Py_ssize_t nf = 3 * C + (P.nitems * 2 * P.width + 4 * P.width if P.channels_last else 0)
    # PyMem_Raw*: thread-safe without the GIL, and visible to tracemalloc
    cdef double* wd = <double*> PyMem_RawCalloc(nd * sizeof(double) + nf * sizeof(float), 1)
    if wd == NULL:
        raise MemoryError(f"fbnops: cannot allocate {nd * 8 + nf * 4} bytes of kernel scratch")
    cdef float* pcoef = <float*> (wd + nd)
    cdef float* wf = pcoef + 3 * C
    cdef void* po = cnp.PyArray_DATA(out)
    g.A = pcoef
    g.B = pcoef + C
    g.K = pcoef + 2 * C
    g.res0 = <float*> cnp.PyArray_DATA(res0)
    g.res1 = <float*> cnp.PyArray_DATA(res1)
    try:
        g.center = g.res0 if op == FWD_TRAIN else _vector(mean, C, "mean")
        if num_threads < 1:
            num_threads = 1
        with nogil:
            if kind == 0:
                run(&P, &g, <const float*> px, <const float*> pb, <float*> po, wf, wd, num_threads)
            elif kind == 1:
                run(&P, &g, <const fb_half*> px, <const fb_half*> pb, <fb_half*> po, wf, wd, num_threads)
            else:
                run(&P, &g, <const fb_bf16*> px, <const fb_bf16*> pb, <fb_bf16*> po, wf, wd, num_threads)
    finally:
        PyMem_RawFree(wd)
    return out, res0, res1


def batch_norm_grad(x, dy, scale, mean, variance, *, float epsilon, bint is_training, int num_threads=1):
    """x, dy: contiguous (outer, C, inner); scale/mean/variance: float32 (C,).

    Returns ``(x_backprop, scale_backprop, offset_backprop)``.
    """
    return _call(GRAD_TRAIN if is_training else GRAD_FROZEN, x, dy, scale, None, mean, variance,
                 epsilon, num_threads)


def batch_norm(x, scale, offset, mean, variance, *, float epsilon, bint is_training, int num_threads=1):
    """Forward.  Returns ``(y, mean_used, variance_used)``: the batch statistics
    (mean, biased variance) in training, the given ones in inference."""
    if is_training:
        return _call(FWD_TRAIN, x, None, scale, offset, None, None, epsilon, num_threads)
    y, _, _ = _call(FWD_INFER, x, None, scale, offset, mean, variance, epsilon, num_threads)
    return y, mean, variance


def plan(Py_ssize_t outer, Py_ssize_t C, Py_ssize_t inner, Py_ssize_t itemsize=4):
    """The work partition for a shape (for tests and teaching)."""
    cdef Plan P = make_plan(outer, C, inner, itemsize)
    return dict(P)


# Conversion hooks, so the tests can check _fp.h exhaustively against NumPy/ml_dtypes.
def round_to_half(const float[::1] v):
    out = np.empty(v.shape[0], np.uint16)
    cdef unsigned short[::1] o = out
    cdef Py_ssize_t i
    for i in range(v.shape[0]):
        o[i] = fb_f32_to_half(v[i]).bits
    return out.view(np.float16)


def round_to_bfloat16(const float[::1] v):
    out = np.empty(v.shape[0], np.uint16)
    cdef unsigned short[::1] o = out
    cdef Py_ssize_t i
    for i in range(v.shape[0]):
        o[i] = fb_f32_to_bf16(v[i]).bits
    return out.view(ml_dtypes.bfloat16)


def widen(x):
    """float16/bfloat16 array -> float32 through the kernels' load()."""
    x = np.ascontiguousarray(x)
    n = x.size
    out = np.empty(n, np.float32)
    cdef float* o = <float*> cnp.PyArray_DATA(out)
    cdef void* p = cnp.PyArray_DATA(x)
    cdef Py_ssize_t i
    if x.dtype == np.float16:
        for i in range(n):
            o[i] = load(<const fb_half*> p, i)
    elif x.dtype.num == BF16_NUM:
        for i in range(n):
            o[i] = load(<const fb_bf16*> p, i)
    else:
        raise ValueError("widen expects float16 or bfloat16")
    return out.reshape(x.shape)


cdef extern from *:
    """
    /* out = a + b with streaming (non-temporal) stores: no read-for-ownership of `out`. */
    #if defined(__SSE2__) || defined(_M_X64)
    #include <xmmintrin.h>
    #include <stdint.h>
    static void fbnops_add_streaming(const float* a, const float* b, float* o, Py_ssize_t n) {
        Py_ssize_t i = 0;
        for (; i < n && ((uintptr_t)(o + i) & 15); i++) o[i] = a[i] + b[i];
        for (; i + 4 <= n; i += 4)
            _mm_stream_ps(o + i, _mm_add_ps(_mm_loadu_ps(a + i), _mm_loadu_ps(b + i)));
        for (; i < n; i++) o[i] = a[i] + b[i];
        _mm_sfence();
    }
    #else
    static void fbnops_add_streaming(const float* a, const float* b, float* o, Py_ssize_t n) {
        for (Py_ssize_t i = 0; i < n; i++) o[i] = a[i] + b[i];
    }
    #endif
    """
    void fbnops_add_streaming(const float* a, const float* b, float* o, Py_ssize_t n) noexcept nogil


def stream_add(a, b, out, int num_threads=1, bint streaming=False):
    """out = a + b over float32 arrays: the streaming-bandwidth yardstick of the benchmarks
    (2 reads + 1 write per element, the same threads and static partition as the kernels;
    `streaming`: non-temporal stores, which skip reading `out` into the cache first)."""
    cdef const float* pa = _vector(a.reshape(-1), a.size, "a")
    cdef const float* pb = _vector(b.reshape(-1), a.size, "b")
    cdef float* po = <float*> _vector(out.reshape(-1), a.size, "out")
    cdef Py_ssize_t n = a.size, nchunks = 64, k, i, i0, i1
    with nogil:
        for k in prange(nchunks, schedule="static", num_threads=num_threads, use_threads_if=num_threads > 1):
            i0 = n * k // nchunks
            i1 = n * (k + 1) // nchunks
            if streaming:
                fbnops_add_streaming(pa + i0, pb + i0, po + i0, i1 - i0)
            else:
                for i in range(i0, i1):
                    po[i] = pa[i] + pb[i]
