"""The Numba backend: ``@njit(parallel=True, cache=True)`` kernels beside the Cython ones.

The same program as the Cython kernels (see ``_cython/_batch_norm_impl.pxi``): the
canonical ``(outer, C, inner)`` view, reduction passes into float32 lanes flushed
to float64 partials, per-channel coefficients, one apply pass
``out = A*((b + K) + B*(a - m))``, and a work partition that depends on the shape
only, combined in a fixed order - so results are identical for any thread count.

Numba has no float16/bfloat16 on the CPU: 16-bit data is read as ``uint16`` and
converted with integer bit manipulation plus a bitcast intrinsic (llvmlite), and
rounded back to nearest even on store.  ``fastmath`` allows reassociation and
contraction but not ``nnan``/``ninf``, so NaN and Inf propagate.
"""

from __future__ import annotations

import math
import warnings

import numba
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic, overload

from ..framework import dtypes
from ..framework.registry import register_kernel
from ..framework.threads import get_num_threads

# Numba's own pedantic SSA check warns about the inlined store overloads; the IR is fine.
warnings.filterwarnings("ignore", category=numba.core.errors.NumbaIRAssumptionWarning)

FASTMATH = {"nsz", "arcp", "contract", "reassoc"}  # no nnan / ninf
LANES = 512
BLOCK_ROWS = 128
ROW_ITEM_ELEMS = 32768
MAX_ROW_ITEMS = 64
PLANE_ITEM_BYTES = 4 << 20
MIN_ITEMS = 16
SERIAL_BELOW = 1 << 15

RED_GRAD, RED_SUM, RED_SQ = 0, 1, 2
APPLY_FULL, APPLY_B, APPLY_A = 0, 1, 2
GRAD_TRAIN, GRAD_FROZEN, FWD_TRAIN, FWD_INFER = 0, 1, 2, 3
MAX_CHUNKS = 64  # channels-first: chunks of items per region (each allocates its scratch once)


# ---------------------------------------------------------------------------------------
# 16-bit storage: bit casts and conversions
# ---------------------------------------------------------------------------------------


@intrinsic
def _f32_from_bits(typingctx, u):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.uint32), codegen


@intrinsic
def _bits_from_f32(typingctx, f):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.uint32(types.float32), codegen


@njit(inline="always")
def _half_to_f32(h):
    em = np.uint32(h & 0x7FFF) << np.uint32(13)
    u = _bits_from_f32(_f32_from_bits(em) * np.float32(5.192296858534828e33))  # * 2**112
    if em >= np.uint32(0x7C00 << 13):
        u |= np.uint32(0x7F800000)
    u |= np.uint32(h & 0x8000) << np.uint32(16)
    return _f32_from_bits(u)


@njit(inline="always")
def _f32_to_half(f):
    u = _bits_from_f32(f)
    sign = (u >> np.uint32(16)) & np.uint32(0x8000)
    a = u & np.uint32(0x7FFFFFFF)
    if a >= np.uint32(0x47800000):
        out = np.uint32(0x7E00) if a > np.uint32(0x7F800000) else np.uint32(0x7C00)
    elif a < np.uint32(0x38800000):
        out = _bits_from_f32(_f32_from_bits(a) + np.float32(0.5)) - np.uint32(0x3F000000)
    else:
        out = (a + np.uint32(0xC8000FFF) + ((a >> np.uint32(13)) & np.uint32(1))) >> np.uint32(13)
    return np.uint16(out | sign)


@njit(inline="always")
def _bf16_to_f32(h):
    return _f32_from_bits(np.uint32(h) << np.uint32(16))


@njit(inline="always")
def _f32_to_bf16(f):
    u = _bits_from_f32(f)
    if (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000):
        return np.uint16((u >> np.uint32(16)) | np.uint32(0x40))
    return np.uint16((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))


def _load(a, i):
    """Element i of a storage array as float32 (specialized per dtype at compile time)."""


def _store(out, i, v):
    """Round v to the storage type of out and store it at i."""


# Storage dtypes: float32 as is; float16 bits as uint16; bfloat16 bits as int16 (a distinct
# type, so the choice is made when Numba types the call - no branch in the loops).
@overload(_load, inline="always")
def _load_impl(a, i):
    if a.dtype == types.float32:
        return lambda a, i: a[i]
    if a.dtype == types.uint16:
        return lambda a, i: _half_to_f32(np.uint32(a[i]))
    if a.dtype == types.int16:
        return lambda a, i: _bf16_to_f32(np.uint32(np.uint16(a[i])))
    return None


@overload(_store, inline="always")
def _store_impl(out, i, v):
    if out.dtype == types.float32:

        def store_f32(out, i, v):
            out[i] = v

        return store_f32
    if out.dtype == types.uint16:

        def store_f16(out, i, v):
            out[i] = _f32_to_half(v)

        return store_f16
    if out.dtype == types.int16:

        def store_bf16(out, i, v):
            out[i] = np.int16(_f32_to_bf16(v))

        return store_bf16
    return None


# ---------------------------------------------------------------------------------------
# Rows of W lanes: reduce into float32 lanes, flush to float64; apply with per-lane tiles
# ---------------------------------------------------------------------------------------


@njit(inline="always", fastmath=FASTMATH)
def _reduce_span(a, b, mode, start, stop, W, m, acc0, acc1, p0, p1, nrows):
    pos = start
    while pos < stop:
        L = min(W, stop - pos)
        ra = a[pos : pos + L]  # row slices: non-negative indices, no wraparound checks in the loop
        rb = b[pos : pos + L]
        if mode == RED_GRAD:
            for j in range(L):
                g = _load(rb, j)
                acc0[j] += g
                acc1[j] += (_load(ra, j) - m[j]) * g
        elif mode == RED_SUM:
            for j in range(L):
                acc0[j] += _load(ra, j)
        else:
            for j in range(L):
                d = _load(ra, j) - m[j]
                acc1[j] += d * d
        pos += W
        nrows += 1
        if nrows == BLOCK_ROWS:
            for j in range(W):
                p0[j] += acc0[j]
                p1[j] += acc1[j]
                acc0[j] = 0
                acc1[j] = 0
            nrows = 0
    return nrows


@njit(inline="always", fastmath=FASTMATH)
def _apply_span(a, b, out, amode, start, stop, W, At, Bt, Kt, mt):
    pos = start
    while pos < stop:
        L = min(W, stop - pos)
        ra = a[pos : pos + L]
        rb = b[pos : pos + L]
        ro = out[pos : pos + L]
        if amode == APPLY_FULL:
            for j in range(L):
                _store(ro, j, At[j] * ((_load(rb, j) + Kt[j]) + Bt[j] * (_load(ra, j) - mt[j])))
        elif amode == APPLY_B:
            for j in range(L):
                _store(ro, j, At[j] * _load(rb, j))
        else:
            for j in range(L):
                _store(ro, j, Bt[j] * (_load(ra, j) - mt[j]) + Kt[j])
        pos += W


@njit(inline="always", fastmath=FASTMATH)
def _apply_run(a, b, out, amode, start, L, A, B, K, m):
    ra = a[start : start + L]
    rb = b[start : start + L]
    ro = out[start : start + L]
    if amode == APPLY_FULL:
        for j in range(L):
            _store(ro, j, A * ((_load(rb, j) + K) + B * (_load(ra, j) - m)))
    elif amode == APPLY_B:
        for j in range(L):
            _store(ro, j, A * _load(rb, j))
    else:
        for j in range(L):
            _store(ro, j, B * (_load(ra, j) - m) + K)


@njit(inline="always")
def _row_bounds(rows, nitems, item, W, total):
    return (rows * item // nitems) * W, min((rows * (item + 1) // nitems) * W, total)


@njit(inline="always")
def _block_bounds(item, outer, C, block, per_channel):
    """Channels [c0, c0 + nch) and batch range [n0, n1) of a channels-first item."""
    blk = item // per_channel
    k = item % per_channel
    c0 = blk * block
    return c0, min(block, C - c0), outer * k // per_channel, outer * (k + 1) // per_channel


@njit(inline="always", fastmath=FASTMATH)
def _reduce_plane_item(
    a, b, mode, item, outer, C, inner, W, R, block, per_channel, center, m, acc0, acc1, p0, p1, sums
):
    """Totals of one (channel block, batch range) item into sums[:, :nch] (lane j: channel c0 + j // R)."""
    c0, nch, n0, n1 = _block_bounds(item, outer, C, block, per_channel)
    for c in range(nch):
        for j in range(c * R, (c + 1) * R):
            m[j] = center[c0 + c]
    acc0[:] = 0
    acc1[:] = 0
    p0[:] = 0
    p1[:] = 0
    nrows = 0
    span = nch * inner
    for n in range(n0, n1):
        base = (n * C + c0) * inner
        nrows = _reduce_span(a, b, mode, base, base + span, W, m, acc0, acc1, p0, p1, nrows)
    for c in range(nch):
        t0 = 0.0
        t1 = 0.0
        for j in range(c * R, (c + 1) * R):
            t0 += p0[j] + acc0[j]
            t1 += p1[j] + acc1[j]
        sums[0, c] = t0
        sums[1, c] = t1


@njit(inline="always", fastmath=FASTMATH)
def _apply_plane_item(a, b, out, amode, item, outer, C, inner, W, R, block, per_channel, A, B, K, center, tiles):
    c0, nch, n0, n1 = _block_bounds(item, outer, C, block, per_channel)
    if block == 1:  # large planes: one channel, scalar coefficients
        for n in range(n0, n1):
            base = (n * C + c0) * inner
            _apply_run(a, b, out, amode, base, inner, A[c0], B[c0], K[c0], center[c0])
        return
    for c in range(nch):
        for j in range(c * R, (c + 1) * R):
            tiles[0, j] = A[c0 + c]
            tiles[1, j] = B[c0 + c]
            tiles[2, j] = K[c0 + c]
            tiles[3, j] = center[c0 + c]
    span = nch * inner
    for n in range(n0, n1):
        base = (n * C + c0) * inner
        _apply_span(a, b, out, amode, base, base + span, W, tiles[0], tiles[1], tiles[2], tiles[3])


# ---------------------------------------------------------------------------------------
# Parallel regions (each prange is its own region: a barrier between passes)
# ---------------------------------------------------------------------------------------


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _reduce_rows_region(a, b, mode, m_tile, W, rows, nitems, total, part):
    for item in prange(nitems):
        e0, e1 = _row_bounds(rows, nitems, item, W, total)
        acc0 = np.zeros(W, np.float32)
        acc1 = np.zeros(W, np.float32)
        p0 = part[item, 0]
        p1 = part[item, 1]
        p0[:] = 0
        p1[:] = 0
        _reduce_span(a, b, mode, e0, e1, W, m_tile, acc0, acc1, p0, p1, 0)
        for j in range(W):
            p0[j] += acc0[j]
            p1[j] += acc1[j]


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _apply_rows_region(a, b, out, amode, tiles, W, rows, nitems, total):
    for item in prange(nitems):
        e0, e1 = _row_bounds(rows, nitems, item, W, total)
        _apply_span(a, b, out, amode, e0, e1, W, tiles[0], tiles[1], tiles[2], tiles[3])


@njit(inline="always")
def _chunk(t, nitems, nchunks):
    return nitems * t // nchunks, nitems * (t + 1) // nchunks


@njit(inline="always")
def _lane_scratch(W):
    """Centers, float32 lanes and float64 partials of one chunk's channels-first reductions."""
    f32 = np.float32
    return np.empty(W, f32), np.empty(W, f32), np.empty(W, f32), np.empty(W, np.float64), np.empty(W, np.float64)


# Channels-first regions run over chunks of items, so that the scratch buffers are allocated
# once per chunk, not once per item (Numba allocations are not free); the results of an item
# do not depend on its chunk.
@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _reduce_planes_region(a, b, mode, outer, C, inner, W, R, block, per_channel, nchunks, center, part):
    nitems = part.shape[0]
    for t in prange(nchunks):
        m, acc0, acc1, p0, p1 = _lane_scratch(W)
        i0, i1 = _chunk(t, nitems, nchunks)
        for item in range(i0, i1):
            _reduce_plane_item(
                a, b, mode, item, outer, C, inner, W, R, block, per_channel, center, m, acc0, acc1, p0, p1, part[item]
            )


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _apply_planes_region(a, b, out, amode, outer, C, inner, W, R, block, per_channel, nitems, nchunks, A, B, K, center):
    for t in prange(nchunks):
        tiles = np.empty((4, W), np.float32)
        i0, i1 = _chunk(t, nitems, nchunks)
        for item in range(i0, i1):
            _apply_plane_item(a, b, out, amode, item, outer, C, inner, W, R, block, per_channel, A, B, K, center, tiles)


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _fused_planes_region(
    a, b, out, op, outer, C, inner, W, R, block, nitems, nchunks, n, eps, scale, offset, var_in, center,
    res0, res1, A, B, K,
):  # fmt: skip
    """Channels-first with one item per channel block: reduce, coefficients and apply back to back."""
    for t in prange(nchunks):
        m, acc0, acc1, p0, p1 = _lane_scratch(W)
        sums = np.empty((2, block), np.float64)
        tiles = np.empty((4, W), np.float32)
        i0, i1 = _chunk(t, nitems, nchunks)
        for item in range(i0, i1):
            c0, nch, _, _ = _block_bounds(item, outer, C, block, 1)
            npasses = 2 if op == FWD_TRAIN else 1  # forward training: the mean, then centered squares
            for p in range(npasses):
                mode = RED_GRAD if op != FWD_TRAIN else (RED_SUM if p == 0 else RED_SQ)
                _reduce_plane_item(
                    a, b, mode, item, outer, C, inner, W, R, block, 1, center, m, acc0, acc1, p0, p1, sums
                )
                for c in range(nch):
                    s0, s1 = sums[0, c], sums[1, c]
                    _channel_done(op, p, c0 + c, s0, s1, n, eps, scale, offset, var_in, center, res0, res1, A, B, K)
            amode = APPLY_A if op == FWD_TRAIN else (APPLY_FULL if op == GRAD_TRAIN else APPLY_B)
            _apply_plane_item(a, b, out, amode, item, outer, C, inner, W, R, block, 1, A, B, K, center, tiles)


# ---------------------------------------------------------------------------------------
# Per-channel math (the same as the Cython channel_done) and the serial combines
# ---------------------------------------------------------------------------------------


@njit(inline="always")
def _channel_done(op, pass_index, c, s0, s1, n, eps, scale, offset, var_in, center, res0, res1, A, B, K):
    gamma = np.float64(scale[c])
    if op == FWD_TRAIN and pass_index == 0:
        res0[c] = np.float32(s0 / n)
        center[c] = res0[c]
        return
    if op == FWD_TRAIN:
        res1[c] = np.float32(s1 / n)
        var = np.float64(res1[c])
    else:
        var = np.float64(var_in[c])
    r = 1.0 / np.sqrt(np.float64(np.float32(var) + eps))
    if op == GRAD_TRAIN or op == GRAD_FROZEN:
        res0[c] = np.float32(s1 * r)
        res1[c] = np.float32(s0)
        A[c] = np.float32(gamma * r)
        if op == GRAD_TRAIN:  # dx = gamma*r * ((dy - s0/n) - (x - mean) * r*r*s1/n), as TF groups it
            B[c] = np.float32(-r * r * s1 / n)
            K[c] = np.float32(-s0 / n)
        else:
            B[c] = 0
            K[c] = 0
    else:
        A[c] = 0
        B[c] = np.float32(gamma * r)
        K[c] = offset[c]


@njit(cache=True)
def _finish_pass(
    op, pass_index, part, cl, fold, C, block, per_channel, n, eps, scale, offset, var_in, center, res0, res1, A, B, K
):
    s0 = np.zeros(C)
    s1 = np.zeros(C)
    if cl:  # row items: [item][2][fold * C]
        for item in range(part.shape[0]):
            for q in range(fold):
                for c in range(C):
                    s0[c] += part[item, 0, q * C + c]
                    s1[c] += part[item, 1, q * C + c]
    else:  # block items: [item][2][block], batch ranges of a block side by side
        for item in range(part.shape[0]):
            c0 = item // per_channel * block
            for j in range(min(block, C - c0)):
                s0[c0 + j] += part[item, 0, j]
                s1[c0 + j] += part[item, 1, j]
    for c in range(C):
        _channel_done(op, pass_index, c, s0[c], s1[c], n, eps, scale, offset, var_in, center, res0, res1, A, B, K)


@njit(cache=True)
def _tile(W, C, A, B, K, center):
    tiles = np.empty((4, W), np.float32)
    for j in range(W):
        c = j % C
        tiles[0, j] = A[c]
        tiles[1, j] = B[c]
        tiles[2, j] = K[c]
        tiles[3, j] = center[c]
    return tiles


# ---------------------------------------------------------------------------------------
# The driver (Python): plan, passes, coefficients, apply
# ---------------------------------------------------------------------------------------


def _plan(outer: int, C: int, inner: int, itemsize: int):
    """The Cython make_plan, line for line: a function of the shape only.

    Returns (channels_last, width, fold, rows, nitems, block, run, per_channel).
    """
    if inner == 1:
        fold = 1
        if C < LANES:
            fold = 16 // math.gcd(C, 16)
            while fold * C < LANES and fold < outer:
                fold *= 2
        W = C * fold
        rows = -(-outer // fold)
        nitems = max(1, min(-(-(outer * C) // ROW_ITEM_ELEMS), MAX_ROW_ITEMS, rows))
        return True, W, fold, rows, nitems, 0, 0, 0
    if inner < LANES:  # small planes: a row is `block` whole planes
        block = min(C, -(-LANES // inner))
        run = inner
        W = block * inner
    else:  # large planes: rows of LANES lanes of one channel
        block, run, W = 1, LANES, LANES
    nblocks = -(-C // block)
    k = -(-(outer * block * inner * 2 * itemsize) // PLANE_ITEM_BYTES)
    k = max(k, -(-MIN_ITEMS // nblocks))
    per_channel = max(1, min(k, outer))
    return False, W, 1, 0, nblocks * per_channel, block, run, per_channel


def _storage(x: np.ndarray) -> np.ndarray:
    """Flat storage: float32 as is, float16 bits as uint16, bfloat16 bits as int16."""
    if x.dtype == np.float32:
        return x.reshape(-1)
    return x.reshape(-1).view(np.uint16 if x.dtype == dtypes.float16 else np.int16)


def _run(op: int, x, dy, scale, offset, mean, variance, epsilon: float):
    outer, C, inner = x.shape
    a = _storage(x)
    b = _storage(dy) if dy is not None else a
    out_arr = np.empty_like(x)
    out = _storage(out_arr)
    nthreads = 1 if x.size < SERIAL_BELOW else min(get_num_threads(), numba.config.NUMBA_NUM_THREADS)
    numba.set_num_threads(nthreads)
    cl, W, fold, rows, nitems, block, R, per_channel = _plan(outer, C, inner, x.dtype.itemsize)
    nchunks = min(nitems, MAX_CHUNKS)
    n = float(outer) * float(inner)
    eps = np.float32(epsilon)
    res0 = np.zeros(C, np.float32)
    res1 = np.zeros(C, np.float32)
    A, B, K = np.zeros(C, np.float32), np.zeros(C, np.float32), np.zeros(C, np.float32)
    offset = offset if offset is not None else np.zeros(C, np.float32)
    variance = variance if variance is not None else np.zeros(C, np.float32)
    center = (np.zeros(C, np.float32) if op == FWD_TRAIN else mean).copy()
    passes = {GRAD_TRAIN: (RED_GRAD,), GRAD_FROZEN: (RED_GRAD,), FWD_TRAIN: (RED_SUM, RED_SQ), FWD_INFER: ()}[op]
    amode = {GRAD_TRAIN: APPLY_FULL, GRAD_FROZEN: APPLY_B}.get(op, APPLY_A)
    total = outer * C
    if not cl and per_channel == 1 and passes:
        _fused_planes_region(
            a, b, out, op, outer, C, inner, W, R, block, nitems, nchunks, n, eps, scale, offset, variance, center,
            res0, res1, A, B, K,
        )  # fmt: skip
        return out_arr, res0, res1
    for p, mode in enumerate(passes):
        if cl:
            part = np.empty((nitems, 2, W))
            _reduce_rows_region(a, b, mode, _tile(W, C, A, B, K, center)[3], W, rows, nitems, total, part)
        else:
            part = np.empty((nitems, 2, block))
            _reduce_planes_region(a, b, mode, outer, C, inner, W, R, block, per_channel, nchunks, center, part)
        _finish_pass(
            op, p, part, cl, fold, C, block, per_channel, n, eps, scale, offset, variance, center, res0, res1, A, B, K
        )
    if not passes:
        _finish_pass(
            op, 0, np.zeros((0, 2, 1)), False, 1, C, 1, 1, n, eps, scale, offset, variance, center, res0, res1, A, B, K
        )
    if cl:
        _apply_rows_region(a, b, out, amode, _tile(W, C, A, B, K, center), W, rows, nitems, total)
    else:
        _apply_planes_region(
            a, b, out, amode, outer, C, inner, W, R, block, per_channel, nitems, nchunks, A, B, K, center
        )
    return out_arr, res0, res1


@register_kernel("FusedBatchNormGradV3", "numba")
def batch_norm_grad(x, dy, scale, mean, variance, *, epsilon, is_training):
    return _run(GRAD_TRAIN if is_training else GRAD_FROZEN, x, dy, scale, None, mean, variance, epsilon)


@register_kernel("FusedBatchNormV3", "numba")
def batch_norm(x, scale, offset, mean, variance, *, epsilon, is_training):
    if is_training:
        return _run(FWD_TRAIN, x, None, scale, offset, None, None, epsilon)
    y, _, _ = _run(FWD_INFER, x, None, scale, offset, mean, variance, epsilon)
    return y, mean, variance


def warm_up() -> None:
    """Compile (or load from the cache) every specialization: both layouts, all dtypes, all modes."""
    rng = np.random.default_rng(0)
    for dt in (dtypes.float32, dtypes.float16, dtypes.bfloat16):
        for shape in ((64, 8, 1), (4, 8, 16), (2, 8, 4)):
            x = rng.standard_normal(shape).astype(dt)
            v = np.ones(shape[1], np.float32)
            for training in (True, False):
                batch_norm_grad(x, x, v, v, v, epsilon=1e-3, is_training=training)
                batch_norm(x, v, v, v, v, epsilon=1e-3, is_training=training)
