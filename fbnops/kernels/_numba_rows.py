"""The Numba kernels' rows: the apply passes' innermost loops over rows of W lanes, and the sweeps
of an item's rows compiled once per mode (the twin of the row functions of ``_cython/_loops.pxi``).

A reduction sums rows into float32 lanes flushed into float64 partials every BLOCK_ROWS
rows (its loops: ``_numba_reduce.py``); an apply pass writes ``out`` from per-lane tiles (or a
large plane's scalar coefficients).  ``_numba_loops.py`` builds the work items and regions on them.
"""

from __future__ import annotations

from types import FunctionType

import numpy as np
from numba import njit

from ._numba_fp import (
    FASTMATH,
    _apply1,
    _bf16_pair,
    _bf16_round_high,
    _bits_from_f32,
    _f32_from_bits,
    _load,
    _store,
    borrowed,
    pairs_of,
    wide_vectors,
)
from ._numba_reduce import BLOCKS, _flush_block, _reduce_rows, _reduce_span, _rows_in_blocks, _u
from ._numba_stream import prefetch_lines, stream_fence
from ._numba_vrows import HARDWARE_BF16, hardware_bf16_row, streamed_row
from ._plan import BLOCK_ROWS, CACHED_MAX_BYTES, Apply, Reduce, _inputs

_inputs = njit(inline="always")(_inputs)  # (the rules the Cython kernels compile from _plan.py)

MODE = -1  # the mode a sweep is compiled for: each compiled twin binds its own (see _per_mode)


# ---------------------------------------------------------------------------------------
# Rows of W lanes applied with per-lane tiles (the reductions' rows: _numba_reduce)
# ---------------------------------------------------------------------------------------


@njit(inline="always")
def _two_rows(a):
    """Whether an APPLY_A pass takes two rows per load of the tiles, as the C kernels'
    fb_apply_*_rows: float16 outputs under CACHED_MAX_BYTES (measured 0.92x; slower for float32,
    and 1.6x slower for larger outputs, out of cache).  Its own measured threshold, from before
    Numba streamed: outputs that _plan._streams streams never get here (see _apply_sweep)."""
    return a.itemsize == 2 and not pairs_of(a) and a.size * 2 < CACHED_MAX_BYTES


@njit(inline="always", fastmath=FASTMATH)
def _apply_span(a, b, out, amode, start, stop, W, At, Bt, Kt, mt, two_rows):
    pos = start
    if amode == Apply.APPLY_A and two_rows:  # (see _two_rows)
        w = _u(W)
        while pos + 2 * W <= stop:
            r = _u(pos)
            unused = np.float32(0)  # (dy and A: APPLY_A reads neither; float32, so every branch types float32)
            for j in range(W):
                i, bj, kj, mj = r + _u(j), Bt[j], Kt[j], mt[j]
                _store(out, i, _apply1(amode, _load(a, i), unused, unused, bj, kj, mj))
                _store(out, i + w, _apply1(amode, _load(a, i + w), unused, unused, bj, kj, mj))
            pos += 2 * W
    while pos < stop:
        L = min(W, stop - pos)
        r = _u(pos)
        for j in range(L):
            i = r + _u(j)
            _store(out, i, _apply1(amode, _load(a, i), _load(b, i), At[j], Bt[j], Kt[j], mt[j]))
        pos += W


@njit(inline="always", fastmath=FASTMATH)
def _apply_word(amode, xa, xb, even, odd):
    """One 32-bit word of two bfloat16 results from the words xa (of x) and xb (of dy), as _fp.h's
    fb_apply_bf16_pairs: the even value shifted up and the odd one masked are float32s; each is
    computed by the same formula (coefficients even, odd: (A, B, K, m)) and rounded by the same
    bits, then the two go back into one word, the even value low (no widening or packing)."""
    high = np.uint32(0xFFFF0000)
    xe, xo = _f32_from_bits(np.uint32(xa << np.uint32(16))), _f32_from_bits(np.uint32(xa & high))
    ge, go = _f32_from_bits(np.uint32(xb << np.uint32(16))), _f32_from_bits(np.uint32(xb & high))
    ye = _apply1(amode, xe, ge, even[0], even[1], even[2], even[3])
    yo = _apply1(amode, xo, go, odd[0], odd[1], odd[2], odd[3])
    return _bf16_pair(_bf16_round_high(_bits_from_f32(ye)), _bf16_round_high(_bits_from_f32(yo)))


@njit(inline="always", fastmath=FASTMATH)
def _apply_run_pairs(wa, wb, wo, amode, start, n2, A, B, K, m):
    """bfloat16 runs of one channel two values to a word (wa, wb, wo: the arrays' words; start,
    n2: the run's first word and its length in words); see _apply_word."""
    ra, rb, ro = wa[start : start + n2], wb[start : start + n2], wo[start : start + n2]
    for i in range(n2):
        ro[i] = _apply_word(amode, ra[i], rb[i], (A, B, K, m), (A, B, K, m))


@njit(inline="always")
def _pair_tiles_from(tiles, pairs):
    """pairs[p] from the per-lane tiles (A, B, K, m): the tiles of lanes p + 2i (even) and
    p + 2i + 1 (odd), for bfloat16 pairs starting at lane parity p; pairs[p][t] is tile t of the
    even lanes, pairs[p][4 + t] of the odd ones."""
    W = tiles.shape[1]
    for p in range(2):
        for t in range(4):
            # (1-D views: written with 2-D indices, the same copy measured much slower)
            tile, even, odd = tiles[t], pairs[p, t], pairs[p, 4 + t]
            for i in range((W - p) // 2):  # (lane p + 2i + 1 < W for every i here)
                even[i] = tile[p + 2 * i]
                odd[i] = tile[p + 2 * i + 1]


@njit(inline="always", fastmath=FASTMATH)
def _apply_tile_pairs(wa, wb, wo, amode, start, n2, t):
    """_apply_run_pairs with per-lane tiles, already split into even and odd lanes (t: see _pair_tiles_from)."""
    ra, rb, ro = wa[start : start + n2], wb[start : start + n2], wo[start : start + n2]
    Ae, Be, Ke, me, Ao, Bo, Ko, mo = t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]
    for i in range(n2):
        ro[i] = _apply_word(amode, ra[i], rb[i], (Ae[i], Be[i], Ke[i], me[i]), (Ao[i], Bo[i], Ko[i], mo[i]))


@njit(inline="always", fastmath=FASTMATH)
def _apply_run_values(a, b, out, amode, start, L, A, B, K, m):
    ra = a[start : start + L]
    rb = b[start : start + L]
    ro = out[start : start + L]
    for j in range(L):
        _store(ro, j, _apply1(amode, _load(ra, j), _load(rb, j), A, B, K, m))


# its loops are alone in their LLVM function: with the mode tested at run time, or with the
# item's set-up loops around them, LLVM vectorized them worse (small channels-first planes ran
# at half the Cython speed).  Each borrows its arrays first (see _numba_fp.borrowed): its
# helpers are called per row or per plane, and every call counted each array up and down.
# Each also asks for 512-bit vectors where Numba compiles for AVX-512 (_numba_fp.wide_vectors).


def _reduce_sweep(a, b, base, stride, count, span, W, m, acc0, acc1, p0, p1, nrows):
    wide_vectors()
    a, b, m = borrowed(a), borrowed(b), borrowed(m)
    acc0, acc1, p0, p1 = borrowed(acc0), borrowed(acc1), borrowed(p0), borrowed(p1)
    if BLOCKS and MODE != Reduce.RED_GRAD:  # a forward's rows in register blocks (_numba_reduce)
        if span <= W:
            return _rows_in_blocks(a, MODE, base, stride, count, span, W, m, acc0, acc1, p0, p1, nrows)
        full = span // W  # (large planes: rows of W lanes, then a short one)
        for k in range(count):
            start = base + k * stride
            nrows = _rows_in_blocks(a, MODE, start, W, full, W, W, m, acc0, acc1, p0, p1, nrows)
            if full * W < span:
                nrows = _reduce_span(a, b, MODE, start + full * W, start + span, W, m, acc0, acc1, p0, p1, nrows)
        return nrows
    k = 0
    group = 4 if MODE == Reduce.RED_GRAD else 8  # (rows a call of _reduce_rows adds)
    while k < count:
        if span <= W and k + group <= count and nrows + group <= BLOCK_ROWS:  # one row per span: a group at once
            _reduce_rows(a, b, MODE, base + k * stride, stride, span, m, acc0, acc1)
            k += group
            nrows += group
            if nrows == BLOCK_ROWS:
                _flush_block(MODE, W, acc0, acc1, p0, p1)
                nrows = 0
        else:
            start = base + k * stride
            nrows = _reduce_span(a, b, MODE, start, start + span, W, m, acc0, acc1, p0, p1, nrows)
            k += 1
    return nrows


def _apply_sweep(a, b, out, base, stride, count, span, W, At, Bt, Kt, mt, pairs, stream):
    wide_vectors()
    a, b, out, pairs = borrowed(a), borrowed(b), borrowed(out), borrowed(pairs)
    At, Bt, Kt, mt = borrowed(At), borrowed(Bt), borrowed(Kt), borrowed(mt)
    if stream:  # the output past the caches, written non-temporally (_plan._streams), row by row
        for k in range(count):
            pos, stop = base + k * stride, base + k * stride + span
            while pos < stop:
                streamed_row(a, b, out, MODE, pos, min(W, stop - pos), At, Bt, Kt, mt)
                pos += W
        stream_fence()
        return
    if pairs_of(a) and HARDWARE_BF16:  # bfloat16 narrowed by the CPU, 16 values a step
        for k in range(count):
            pos, stop = base + k * stride, base + k * stride + span
            while pos < stop:
                hardware_bf16_row(a, b, out, MODE, pos, min(W, stop - pos), At, Bt, Kt, mt)
                pos += W
        return
    if pairs_of(a):  # bfloat16: two values to a word, as in _apply_runs, with the tiles split by lane parity (pairs)
        n = a.shape[0] - a.shape[0] % 2
        wa, wb, wo = a[:n].view(np.uint32), b[:n].view(np.uint32), out[:n].view(np.uint32)
        for k in range(count):
            pos, stop = base + k * stride, base + k * stride + span
            while pos < stop:  # a row of W lanes: a lone first value if it starts mid-word, pairs, a lone last
                L = min(W, stop - pos)
                j0 = pos % 2
                npairs = (L - j0) // 2
                if j0:
                    _apply_span(a, b, out, MODE, pos, pos + 1, 1, At, Bt, Kt, mt, False)
                _apply_tile_pairs(wa, wb, wo, MODE, (pos + j0) // 2, npairs, pairs[j0])
                last = j0 + 2 * npairs
                if last < L:
                    _apply_span(a, b, out, MODE, pos + last, pos + last + 1, 1,
                                At[last:], Bt[last:], Kt[last:], mt[last:], False)  # fmt: skip
                pos += W
        return
    two_rows = _two_rows(a)
    for k in range(count):
        start = base + k * stride
        _apply_span(a, b, out, MODE, start, start + span, W, At, Bt, Kt, mt, two_rows)


def _apply_runs(a, b, out, base, stride, count, L, A, B, K, m, ahead, stream):
    """`count` runs of L values `stride` apart from `base`; with ahead > 0, the run `ahead` values
    past each one (the next channel block's plane) is requested before the run is applied: x's,
    and dy's where the mode reads dy (see _plan._prefetches); with `stream`, written
    non-temporally (_plan._streams)."""
    a, b, out = borrowed(a), borrowed(b), borrowed(out)
    wide_vectors()
    if stream:
        for k in range(count):
            _prefetch_ahead(a, b, base + k * stride + ahead, L, ahead, _inputs(MODE) > 1)
            streamed_row(a, b, out, MODE, base + k * stride, L, A, B, K, m)
        stream_fence()
        return
    if pairs_of(a) and HARDWARE_BF16:  # bfloat16 narrowed by the CPU, 16 values a step
        for k in range(count):
            _prefetch_ahead(a, b, base + k * stride + ahead, L, ahead, _inputs(MODE) > 1)
            hardware_bf16_row(a, b, out, MODE, base + k * stride, L, A, B, K, m)
        return
    if pairs_of(a) and base % 2 == 0 and stride % 2 == 0:  # bfloat16 runs that start on a word
        n = a.shape[0] - a.shape[0] % 2
        wa, wb, wo = a[:n].view(np.uint32), b[:n].view(np.uint32), out[:n].view(np.uint32)
        for k in range(count):
            start = base + k * stride
            _prefetch_ahead(a, b, start + ahead, L, ahead, _inputs(MODE) > 1)
            _apply_run_pairs(wa, wb, wo, MODE, start // 2, L // 2, A, B, K, m)
            if L % 2:  # (an odd last value alone)
                _apply_run_values(a, b, out, MODE, start + L - 1, 1, A, B, K, m)
        return
    for k in range(count):
        _prefetch_ahead(a, b, base + k * stride + ahead, L, ahead, _inputs(MODE) > 1)
        _apply_run_values(a, b, out, MODE, base + k * stride, L, A, B, K, m)


@njit(inline="always")
def _prefetch_ahead(a, b, start, n, ahead, with_dy):
    if ahead > 0:
        prefetch_lines(a, start, n)
        if with_dy:
            prefetch_lines(b, start, n)


def _per_mode(fn, modes):
    """fn compiled once per mode, with the global MODE bound to it (a compile-time constant)."""
    twins = []
    for mode in modes:
        name = f"{fn.__name__}_{mode.name.lower()}"
        twin = FunctionType(fn.__code__, dict(fn.__globals__, MODE=mode.value), name, fn.__defaults__)
        twin.__qualname__ = name
        twins.append(njit(fastmath=FASTMATH)(twin))
    return tuple(twins)


_reduce_grad, _reduce_sum, _reduce_sq = _per_mode(_reduce_sweep, (Reduce.RED_GRAD, Reduce.RED_SUM, Reduce.RED_SQ))
_apply_full, _apply_b, _apply_a = _per_mode(_apply_sweep, (Apply.APPLY_FULL, Apply.APPLY_B, Apply.APPLY_A))
_runs_full, _runs_b, _runs_a = _per_mode(_apply_runs, (Apply.APPLY_FULL, Apply.APPLY_B, Apply.APPLY_A))


@njit(inline="always")
def _reduce(mode, a, b, base, stride, count, span, W, m, acc0, acc1, p0, p1, nrows):
    """The sweep of a reduction pass (mode: a Reduce value)."""
    if mode == Reduce.RED_GRAD:
        return _reduce_grad(a, b, base, stride, count, span, W, m, acc0, acc1, p0, p1, nrows)
    if mode == Reduce.RED_SUM:
        return _reduce_sum(a, b, base, stride, count, span, W, m, acc0, acc1, p0, p1, nrows)
    return _reduce_sq(a, b, base, stride, count, span, W, m, acc0, acc1, p0, p1, nrows)


@njit(inline="always")
def _apply(amode, a, b, out, base, stride, count, span, W, At, Bt, Kt, mt, pairs, stream):
    """The rows of an apply pass with per-lane tiles (amode: an Apply value; pairs: the tiles
    split by lane parity, read for bfloat16 only; stream: see _apply_sweep)."""
    if amode == Apply.APPLY_FULL:
        _apply_full(a, b, out, base, stride, count, span, W, At, Bt, Kt, mt, pairs, stream)
    elif amode == Apply.APPLY_B:
        _apply_b(a, b, out, base, stride, count, span, W, At, Bt, Kt, mt, pairs, stream)
    else:
        _apply_a(a, b, out, base, stride, count, span, W, At, Bt, Kt, mt, pairs, stream)


@njit(inline="always")
def _runs(amode, a, b, out, base, stride, count, L, A, B, K, m, ahead, stream):
    """The runs of one large channels-first plane with scalar coefficients (amode: an Apply value;
    ahead, stream: see _apply_runs)."""
    if amode == Apply.APPLY_FULL:
        _runs_full(a, b, out, base, stride, count, L, A, B, K, m, ahead, stream)
    elif amode == Apply.APPLY_B:
        _runs_b(a, b, out, base, stride, count, L, A, B, K, m, ahead, stream)
    else:
        _runs_a(a, b, out, base, stride, count, L, A, B, K, m, ahead, stream)


@njit(inline="always")
def _fill(x, start, n, v):
    """x[start:start + n] = v, with unsigned indices (_u): the loop vectorizes."""
    for j in range(n):
        x[_u(start + j)] = v


@njit(inline="always")
def _clear(x):
    """x[:] = 0 for a 1-D x: a memset (Numba's slice assignment cost more)."""
    _fill(x, 0, x.shape[0], 0)


@njit(inline="always", fastmath=FASTMATH)
def _flush(acc0, acc1, p0, p1):
    for j in range(acc0.shape[0]):
        p0[j] += acc0[j]
        p1[j] += acc1[j]
