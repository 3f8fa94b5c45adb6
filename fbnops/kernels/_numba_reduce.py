"""The Numba kernels' reductions of rows into float32 lane totals (the twin of the reduction
loops of ``_cython/_loops.pxi`` and ``_cython/_rows16.h``): a row at a time (:func:`_reduce_span`),
eight rows a group (:func:`_reduce_rows`), and a forward's rows in register blocks
(:func:`_rows_in_blocks`, the twin of ``fb_blocks_NAME`` in ``_cython/_wide512.h``).  The lanes flush
into float64 partials every BLOCK_ROWS rows (:func:`_flush_block`).

Blocks: rows of one piece, ``stride`` apart, are summed 256 lanes at a time (16 vectors of 16
float32 totals, kept in registers) down all the rows of a float64 block, then the next 256 lanes:
one load and store of each lane total per block instead of one per group of rows.  Each lane adds
its rows in order with the same operations as the row loops (``s0 + x``; ``fma(x - m, x - m, s1)``),
so the bits do not change.  Only where Numba compiles for AVX-512 (32 vector registers: 16 totals,
the row's values and the centres fit), and not for the gradient's pass (two totals a lane), as in
the C kernels; elsewhere the rows go as before.  The gradient's rows one at a time take 16 lanes a
vector there instead (:func:`grad_lanes`), their totals loaded and stored once a row as before.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from ._numba_fp import FASTMATH, WIDE_VECTORS, _load
from ._numba_stream import _V16, _at, _fma16, _widened
from ._plan import BLOCK_ROWS, Reduce, _adds_to

_adds_to = njit(inline="always")(_adds_to)  # (the rule the Cython kernels compile from _plan.py)

BLOCKS = WIDE_VECTORS  # (AVX-512's 32 vector registers hold a block's totals)
VECTORS = 16  # totals a block keeps in registers, 16 lanes each
BLOCK_LANES = 16 * VECTORS


def _blocks_of(square: bool):
    """The intrinsic summing a block's rows (square: the sums of squares about m, else the sums)."""

    @intrinsic
    def blocks(typingctx, a, start, stride, nrows, lanes, m, acc):
        def codegen(context, builder, signature, args):
            aty, mty, accty = signature.args[0], signature.args[5], signature.args[6]
            va, vstart, vstride, vnrows, vlanes, vm, vacc = args
            intp = context.get_value_type(types.intp)
            fma = _fma16(builder)
            totals = [cgutils.alloca_once(builder, _V16) for _ in range(VECTORS)]  # (registers, once promoted)
            nstrips = builder.sdiv(vlanes, intp(BLOCK_LANES))
            with cgutils.for_range(builder, nstrips) as strip:
                j0 = builder.mul(strip.index, intp(BLOCK_LANES))
                lane = [builder.add(j0, intp(16 * k)) for k in range(VECTORS)]
                for k in range(VECTORS):
                    builder.store(builder.load(_at(context, builder, accty, vacc, lane[k], _V16), align=4), totals[k])
                with cgutils.for_range(builder, vnrows) as row:
                    at = builder.add(vstart, builder.mul(row.index, vstride))
                    for k in range(VECTORS):
                        x = _widened(builder, context, aty, va, builder.add(at, lane[k]), 16)
                        t = builder.load(totals[k])
                        if square:
                            d = builder.fsub(x, builder.load(_at(context, builder, mty, vm, lane[k], _V16), align=4))
                            t = builder.call(fma, [d, d, t])
                        else:
                            t = builder.fadd(t, x)
                        builder.store(t, totals[k])
                for k in range(VECTORS):
                    builder.store(builder.load(totals[k]), _at(context, builder, accty, vacc, lane[k], _V16), align=4)
            return builder.mul(nstrips, intp(BLOCK_LANES))

        return types.intp(a, types.intp, types.intp, types.intp, types.intp, m, acc), codegen

    return blocks


_sum_blocks = _blocks_of(square=False)
_sq_blocks = _blocks_of(square=True)


@njit(inline="always")
def block_lanes(a, mode, start, stride, nrows, L, m, acc):
    """Lanes [0, j) of `nrows` rows of L lanes, `stride` apart from `start`, added into `acc`
    (RED_SUM's or RED_SQ's float32 totals) in blocks; returns j, a multiple of BLOCK_LANES (the
    lanes from j on are the caller's)."""
    if mode == Reduce.RED_SUM:
        return _sum_blocks(a, start, stride, nrows, L, m, acc)
    return _sq_blocks(a, start, stride, nrows, L, m, acc)


@intrinsic
def _grad_vectors(typingctx, a, b, start, L, m, acc0, acc1):
    """grad_lanes' vectors (the arrays checked by its overload: contiguous, 1-D)."""

    def codegen(context, builder, signature, args):
        ta, tb, _, _, tm, t0, t1 = signature.args
        va, vb, vstart, vL, vm, v0, v1 = args
        intp = context.get_value_type(types.intp)
        fma = _fma16(builder)
        steps = builder.sdiv(vL, intp(16))
        with cgutils.for_range(builder, steps) as step:
            j = builder.mul(step.index, intp(16))
            i = builder.add(vstart, j)
            dy = _widened(builder, context, tb, vb, i, 16)
            x = _widened(builder, context, ta, va, i, 16)
            centre = builder.load(_at(context, builder, tm, vm, j, _V16), align=4)
            s0, s1 = _at(context, builder, t0, v0, j, _V16), _at(context, builder, t1, v1, j, _V16)
            builder.store(builder.fadd(builder.load(s0, align=4), dy), s0, align=4)
            builder.store(builder.call(fma, [builder.fsub(x, centre), dy, builder.load(s1, align=4)]), s1, align=4)
        return builder.mul(steps, intp(16))

    return types.intp(a, b, types.intp, types.intp, m, acc0, acc1), codegen


def grad_lanes(a, b, start, L, m, acc0, acc1):
    """Lanes [0, j) of one row of the gradient's pass from `start`, j = L rounded down to 16:
    acc0 += dy and acc1 = fma(x - m, dy, acc1), 16 lanes a vector (the C kernels'
    fb_reduce_NAME_row; the same operations per lane, so the same bits).  Returns j; 0 where Numba
    does not compile for AVX-512 (where it was measured) or an array is not contiguous.  As
    vectors because LLVM's own vectorized loop checked, once a row, that the totals overlap none
    of the inputs: about 50 instructions against 16 vector steps for a 512-lane row."""


@overload(grad_lanes, inline="always")
def _grad_lanes_impl(a, b, start, L, m, acc0, acc1):
    arrays = (a, b, m, acc0, acc1)
    contiguous = all(isinstance(t, types.Array) and t.ndim == 1 and t.layout == "C" for t in arrays)
    if (BLOCKS and contiguous and a.dtype in (types.float32, types.uint16, types.int16) and b.dtype == a.dtype
            and all(t.dtype == types.float32 for t in (m, acc0, acc1))):  # fmt: skip
        return lambda a, b, start, L, m, acc0, acc1: _grad_vectors(a, b, start, L, m, acc0, acc1)
    return lambda a, b, start, L, m, acc0, acc1: 0


@njit(inline="always")
def _u(i):
    """i as an unsigned index: Numba emits no wraparound code for it (with a signed index _fill
    stored one lane at a time, and the lane fold ran twice as long).  The row loops index their
    arrays with it, not with row slices: every slice made a view whose reference count was a call,
    counted up and down (a sixteenth of a channels-last forward)."""
    return np.uint64(i)


@njit(inline="always", fastmath=FASTMATH)
def _reduce_span(a, b, mode, start, stop, W, m, acc0, acc1, p0, p1, nrows):
    pos = start
    while pos < stop:
        L = min(W, stop - pos)
        r = _u(pos)
        if mode == Reduce.RED_GRAD:
            j0 = grad_lanes(a, b, pos, L, m, acc0, acc1)  # (lanes [0, j0) as vectors)
            for j in range(j0, L):
                dy = _load(b, r + _u(j))
                acc0[j] += dy
                acc1[j] += (_load(a, r + _u(j)) - m[j]) * dy
        elif mode == Reduce.RED_SUM:
            for j in range(L):
                acc0[j] += _load(a, r + _u(j))
        else:
            for j in range(L):
                d = _load(a, r + _u(j)) - m[j]
                acc1[j] += d * d
        pos += W
        nrows += 1
        if nrows == BLOCK_ROWS:
            _flush_block(mode, W, acc0, acc1, p0, p1)
            nrows = 0
    return nrows


@njit(inline="always", fastmath=FASTMATH)
def _flush_block(mode, W, acc0, acc1, p0, p1):
    """The float32 lanes of a block of rows into the float64 partials (only the totals the mode adds to)."""
    if _adds_to(mode, 0):
        for j in range(W):
            p0[j] += acc0[j]
            acc0[j] = 0
    if _adds_to(mode, 1):
        for j in range(W):
            p1[j] += acc1[j]
            acc1[j] = 0


@njit(inline="always", fastmath=FASTMATH)
def _reduce_rows(a, b, mode, start, stride, L, m, acc0, acc1):
    """Rows of L lanes, `stride` apart (four for the gradient's two totals, else eight), added in
    row order with one load and store of each lane total (the C kernels' strips keep them in
    registers): the same adds as that many _reduce_span rows, so the same bits."""
    s1 = _u(stride)
    s2 = s1 + s1
    s3, s4 = s2 + s1, s2 + s2
    r0 = _u(start)
    if mode == Reduce.RED_GRAD:
        for j in range(L):
            i, mj = r0 + _u(j), m[j]
            d0, d1, d2, d3 = _load(b, i), _load(b, i + s1), _load(b, i + s2), _load(b, i + s3)
            acc0[j] = (((acc0[j] + d0) + d1) + d2) + d3
            t = acc1[j] + (_load(a, i) - mj) * d0
            t = t + (_load(a, i + s1) - mj) * d1
            t = t + (_load(a, i + s2) - mj) * d2
            acc1[j] = t + (_load(a, i + s3) - mj) * d3
    elif mode == Reduce.RED_SUM:
        for j in range(L):
            i = r0 + _u(j)
            k = i + s4
            t = (((acc0[j] + _load(a, i)) + _load(a, i + s1)) + _load(a, i + s2)) + _load(a, i + s3)
            acc0[j] = (((t + _load(a, k)) + _load(a, k + s1)) + _load(a, k + s2)) + _load(a, k + s3)
    else:
        for j in range(L):
            i, mj = r0 + _u(j), m[j]
            k = i + s4
            d0, d1 = _load(a, i) - mj, _load(a, i + s1) - mj
            d2, d3 = _load(a, i + s2) - mj, _load(a, i + s3) - mj
            t = (((acc1[j] + d0 * d0) + d1 * d1) + d2 * d2) + d3 * d3
            d0, d1 = _load(a, k) - mj, _load(a, k + s1) - mj
            d2, d3 = _load(a, k + s2) - mj, _load(a, k + s3) - mj
            acc1[j] = (((t + d0 * d0) + d1 * d1) + d2 * d2) + d3 * d3


@njit(inline="always", fastmath=FASTMATH)
def _rows_in_blocks(a, mode, start, stride, count, L, W, m, acc0, acc1, p0, p1, nrows):
    """A forward's `count` rows of L <= W lanes, `stride` apart: lanes [0, j) in register blocks
    (block_lanes) that end where the lanes flush, the lanes from j on as the sweep adds them
    (eight rows a group, then one by one).  Returns the rows since the last flush."""
    k = 0
    while k < count:
        n = min(count - k, BLOCK_ROWS - nrows)
        at = start + k * stride
        j = block_lanes(a, mode, at, stride, n, L, m, acc1 if mode == Reduce.RED_SQ else acc0)
        if j < L:
            mj, s0, s1 = m[j:], acc0[j:], acc1[j:]
            r = 0
            while r + 8 <= n:
                _reduce_rows(a, a, mode, at + r * stride + j, stride, L - j, mj, s0, s1)
                r += 8
            while r < n:  # (one short row each: no flush inside)
                _reduce_span(a, a, mode, at + r * stride + j, at + r * stride + L, W, mj, s0, s1, p0, p1, 0)
                r += 1
        k += n
        nrows += n
        if nrows == BLOCK_ROWS:
            _flush_block(mode, W, acc0, acc1, p0, p1)
            nrows = 0
    return nrows


# The sweeps: an item's rows, `count` spans of `span` elements `stride` apart from `base`.  Each
