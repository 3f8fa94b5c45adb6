# The reproducible tree's block sums (see _tree_sums.pyx): the source of the portable
# build (_tree_sums.pyx) and of the x86-64-v3 one (_tree_sums_avx2.pyx).


import numpy as np

cimport numpy as cnp
from cython.parallel cimport prange
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

from ._fp cimport fb_bf16, fb_half, load, storage_t
from ._openmp cimport omp_get_thread_num

cnp.import_array()

# the leaves, per row and channel (K = C, C, 2 * C): 0.0 + x, (x - m)**2, [dy, dy * (x - m)]
cdef enum:
    LEAF_X = 0
    LEAF_SQ = 1
    LEAF_GRAD = 2
SUM_X, SUM_SQ, SUM_GRAD = LEAF_X, LEAF_SQ, LEAF_GRAD
DEF MAX_LEVELS = 64
DEF TILE_DOUBLES = 1024  # at most, a tile's row of partials (8 KiB): measured fastest at 256x2048 (256: 1.2-1.4x)


cdef inline Py_ssize_t _trailing_ones(Py_ssize_t i) noexcept nogil:
    cdef Py_ssize_t t = 0
    while i & 1:
        i >>= 1
        t += 1
    return t


cdef void _leaf_row(int mode, const storage_t* x, const storage_t* dy, const float* m, double* out,
                    Py_ssize_t W) noexcept nogil:
    """One row's leaves for ``W`` channels: ``out[j]`` (and ``out[W + j]`` for the gradient's pair)."""
    cdef Py_ssize_t j
    cdef float d, g
    if mode == LEAF_X:
        for j in range(W):
            out[j] = <double> (load(x, j) + <float> 0.0)  # an accumulator starting at +0.0
    elif mode == LEAF_SQ:
        for j in range(W):
            d = load(x, j) - m[j]
            out[j] = <double> (d * d)
    else:
        for j in range(W):
            g = load(dy, j)
            out[j] = <double> g
            out[W + j] = <double> (g * (load(x, j) - m[j]))


cdef inline double _leaf(int mode, const storage_t* x, const float* m, Py_ssize_t j) noexcept nogil:
    """One leaf: ``0.0 + x`` (LEAF_X) or ``(x - m)**2`` (LEAF_SQ), in float32, widened."""
    cdef float d
    if mode == LEAF_X:
        return <double> (load(x, j) + <float> 0.0)
    d = load(x, j) - m[j]
    return <double> (d * d)


cdef inline double _product(const storage_t* x, const storage_t* dy, const float* m, Py_ssize_t j) noexcept nogil:
    """The gradient's second leaf: ``dy * (x - m)`` in float32, widened."""
    return <double> (load(dy, j) * (load(x, j) - m[j]))


cdef void _quad_row(int mode, const storage_t* x, const storage_t* dy, const float* m, double* out,
                    Py_ssize_t W, Py_ssize_t C) noexcept nogil:
    """The level-2 nodes of four consecutive rows ``(l0 + l1) + (l2 + l3)``, the leaves never stored."""
    cdef Py_ssize_t j
    if mode == LEAF_X:
        for j in range(W):
            out[j] = (_leaf(LEAF_X, x, m, j) + _leaf(LEAF_X, x + C, m, j)) + (
                _leaf(LEAF_X, x + 2 * C, m, j) + _leaf(LEAF_X, x + 3 * C, m, j))
    elif mode == LEAF_SQ:
        for j in range(W):
            out[j] = (_leaf(LEAF_SQ, x, m, j) + _leaf(LEAF_SQ, x + C, m, j)) + (
                _leaf(LEAF_SQ, x + 2 * C, m, j) + _leaf(LEAF_SQ, x + 3 * C, m, j))
    else:
        for j in range(W):
            out[j] = (<double> load(dy, j) + <double> load(dy + C, j)) + (
                <double> load(dy + 2 * C, j) + <double> load(dy + 3 * C, j))
            out[W + j] = (_product(x, dy, m, j) + _product(x + C, dy + C, m, j)) + (
                _product(x + 2 * C, dy + 2 * C, m, j) + _product(x + 3 * C, dy + 3 * C, m, j))


cdef inline void _add_into(double* left, const double* right, Py_ssize_t n) noexcept nogil:
    """``left += right``: the node's sum stored over its left child, as NumPy's ``add(l, r, out=l)``
    (so that of two NaNs the left one's sign and payload survive, as there)."""
    cdef Py_ssize_t j
    for j in range(n):
        left[j] = left[j] + right[j]


cdef inline void _push(double** level, Py_ssize_t base, Py_ssize_t t, const double* node, Py_ssize_t TW) noexcept nogil:
    """Push a node of level ``base`` that closes the pending nodes of levels ``base .. base + t - 1``
    (``t >= 1``): each is added on its left, and the sum becomes the pending node of ``base + t``."""
    cdef Py_ssize_t l
    _add_into(level[base], node, TW)
    for l in range(base + 1, base + t):
        _add_into(level[l], level[l - 1], TW)
    level[base + t], level[base + t - 1] = level[base + t - 1], level[base + t]


cdef void _tile(int mode, const storage_t* x, const storage_t* dy, const float* m, Py_ssize_t C,
                const Py_ssize_t* spans, Py_ssize_t nblocks, double* rows, Py_ssize_t levels, double* out,
                Py_ssize_t c0, Py_ssize_t W) noexcept nogil:
    """Every block's tree sum for channels ``[c0, c0 + W)``; ``rows``: ``levels + 1`` rows of workspace.

    ``level[l]`` is the row holding the pending node of level ``l`` (its left sibling-to-be).
    """
    cdef bint pair = mode == LEAF_GRAD
    cdef Py_ssize_t K = 2 * C if pair else C
    cdef Py_ssize_t TW = 2 * W if pair else W  # a row: [W leaves] or [W dy, W dy * (x - m)]
    cdef double* level[MAX_LEVELS]
    cdef double* scratch = rows + levels * TW
    cdef double* p
    cdef Py_ssize_t b, i, l, lo, n, t, r
    for l in range(levels):
        level[l] = rows + l * TW
    for b in range(nblocks):
        lo, n = spans[2 * b], spans[2 * b + 1]
        for i in range(0, n - 3, 4):  # whole groups of four rows: their level-2 nodes, pushed as such
            r = (lo + i) * C + c0
            t = _trailing_ones(i >> 2)
            if t == 0:
                _quad_row(mode, x + r, dy + r, m + c0, level[2], W, C)
                continue
            _quad_row(mode, x + r, dy + r, m + c0, scratch, W, C)
            _push(level, 2, t, scratch, TW)
        for i in range(n - n % 4, n):  # the last one to three rows of a clipped block: leaf by leaf
            r = (lo + i) * C + c0
            t = _trailing_ones(i)  # the pending nodes of levels 0..t-1 close with this leaf (t < 2 here)
            if t == 0:
                _leaf_row(mode, x + r, dy + r, m + c0, level[0], W)
                continue
            _leaf_row(mode, x + r, dy + r, m + c0, scratch, W)
            _push(level, 0, t, scratch, TW)
        # a clipped block: the pending nodes (the set bits of n) fold from the smallest up, left += acc
        p = NULL
        for l in range(levels):
            if (n >> l) & 1:
                if p != NULL:
                    _add_into(level[l], p, TW)
                p = level[l]
        memcpy(out + b * K + c0, p, W * sizeof(double))
        if pair:
            memcpy(out + b * K + C + c0, p + W, W * sizeof(double))


cdef void _run(int mode, const storage_t* x, const storage_t* dy, const float* m, Py_ssize_t C,
               const Py_ssize_t* spans, Py_ssize_t nblocks, double* rows, Py_ssize_t levels, double* out,
               Py_ssize_t tile, int nthreads) noexcept nogil:
    """The tiles shared among ``nthreads`` threads; ``rows``: one tile's workspace per thread."""
    cdef Py_ssize_t j, ntiles = (C + tile - 1) // tile
    cdef Py_ssize_t per_tile = (levels + 1) * (2 * tile if mode == LEAF_GRAD else tile)
    for j in prange(ntiles, schedule="static", num_threads=nthreads, use_threads_if=nthreads > 1):
        _tile(mode, x, dy, m, C, spans, nblocks, rows + omp_get_thread_num() * per_tile, levels, out, j * tile,
              min(tile, C - j * tile))


def block_sums(int mode, x, dy, center, spans, int num_threads=1, out=None):
    """``(len(spans), K)`` float64: the canonical tree's sum of each block of rows of ``x``.

    ``x`` (and ``dy``): C-contiguous ``(S, C)`` (or ``(S, C, 1)``) float32, float16 or bfloat16;
    ``center``: float32 ``(C,)`` (the sum of squares and the gradient); ``spans``: int64
    ``(nblocks, 2)`` of (first row, rows), each an aligned block of the tree (or its clipped end);
    ``out``: where to write them (C-contiguous float64 ``(nblocks, K)``), else a new array.
    """
    if mode < LEAF_X or mode > LEAF_GRAD:
        raise ValueError(f"unknown leaf mode {mode}")
    cdef cnp.ndarray xa = np.ascontiguousarray(x)
    cdef Py_ssize_t S = xa.shape[0]
    cdef Py_ssize_t C = xa.shape[1] if xa.ndim >= 2 else 0
    if xa.ndim not in (2, 3) or (xa.ndim == 3 and xa.shape[2] != 1):
        raise ValueError(f"x must be (S, C) or (S, C, 1), got shape {np.shape(x)}")
    cdef cnp.ndarray da = xa
    if mode == LEAF_GRAD:
        da = np.ascontiguousarray(dy)
        if da.shape[0] != S or da.dtype != xa.dtype or da.size != xa.size:
            raise ValueError("dy must have x's shape and dtype")
    cdef cnp.ndarray ma = np.zeros(C, np.float32) if mode == LEAF_X else np.ascontiguousarray(center, np.float32)
    if ma.ndim != 1 or ma.shape[0] != C:
        raise ValueError(f"center must be float32 ({C},)")
    cdef cnp.ndarray sa = np.ascontiguousarray(spans, np.intp).reshape(-1, 2)
    cdef Py_ssize_t nblocks = sa.shape[0], b, levels = 1
    cdef const Py_ssize_t* ps = <const Py_ssize_t*> cnp.PyArray_DATA(sa)
    for b in range(nblocks):
        if ps[2 * b] < 0 or ps[2 * b + 1] < 1 or ps[2 * b] + ps[2 * b + 1] > S:
            raise ValueError(f"block {b} (rows {ps[2 * b]}+{ps[2 * b + 1]}) is outside x's {S} rows")
        while (ps[2 * b + 1] >> levels) > 0:
            levels += 1
    cdef Py_ssize_t K = 2 * C if mode == LEAF_GRAD else C
    if out is None:
        out = np.empty((nblocks, K), np.float64)
    elif (not isinstance(out, np.ndarray) or out.dtype != np.float64 or not out.flags.c_contiguous
          or out.shape != (nblocks, K)):
        raise ValueError(f"out must be a C-contiguous float64 ({nblocks}, {K}) array")
    if nblocks == 0 or K == 0:
        return out
    cdef double* po = <double*> cnp.PyArray_DATA(out)
    # channels per tile: as many as fit TILE_DOUBLES, but enough tiles for every thread (8-aligned);
    # each channel's additions are the same whatever the tiling: the bits do not depend on it
    cdef Py_ssize_t tile = TILE_DOUBLES // 2 if mode == LEAF_GRAD else TILE_DOUBLES
    tile = max(8, min(tile, ((C + max(num_threads, 1) - 1) // max(num_threads, 1) + 7) // 8 * 8))
    cdef Py_ssize_t ntiles = (C + tile - 1) // tile
    cdef Py_ssize_t per_tile = (levels + 1) * (2 * tile if mode == LEAF_GRAD else tile)  # _tile's rows
    cdef int nthreads = max(1, min(num_threads, ntiles))
    cdef double* rows = <double*> malloc(nthreads * per_tile * sizeof(double))  # small: no fresh pages
    if rows == NULL:
        raise MemoryError()
    cdef void* px = cnp.PyArray_DATA(xa)
    cdef void* pd = cnp.PyArray_DATA(da)
    cdef const float* pm = <const float*> cnp.PyArray_DATA(ma)
    try:
        if xa.dtype == np.float32:
            with nogil:
                _run(mode, <const float*> px, <const float*> pd, pm, C, ps, nblocks, rows, levels, po, tile,
                     nthreads)
        elif xa.dtype == np.float16:
            with nogil:
                _run(mode, <const fb_half*> px, <const fb_half*> pd, pm, C, ps, nblocks, rows, levels, po, tile,
                     nthreads)
        elif xa.dtype.name == "bfloat16":
            with nogil:
                _run(mode, <const fb_bf16*> px, <const fb_bf16*> pd, pm, C, ps, nblocks, rows, levels, po, tile,
                     nthreads)
        else:
            raise ValueError(f"x must be float32, float16 or bfloat16, got {xa.dtype}")
    finally:
        free(rows)
    return out
