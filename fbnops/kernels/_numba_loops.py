"""The Numba kernels' work items, parallel regions and the driver (the rows of lanes are in
``_numba_rows.py``, the per-channel math and the combines in ``_numba_channels.py``).

The same program as the Cython kernels (``_cython/_loops.pxi`` and
``_batch_norm_impl.pxi``), line for line where it matters for the bits: float32
lanes flushed to float64 every BLOCK_ROWS rows, per-channel sums folded in eight
running totals, one apply formula.  Every region exists twice: parallel (``prange``), and a
serial twin compiled from the same source, used on one thread (no thread pool
touched: small calls, and children forked after the parent ran parallel kernels).

16-bit data arrives as bits (``_numba_fp.py``: ``_load`` widens, ``_store`` rounds to
nearest even).  Only the row sweeps (``_numba_rows.py``) are compiled with ``fastmath``, and
it is contraction only (``_numba_rows.FASTMATH``): NaN and Inf propagate and every rounding is
the C code's.  The items and regions here have no fastmath at all, so the per-channel math
inlined into them (``_channels_done``) rounds as the C code does.
"""

from __future__ import annotations

from types import FunctionType

import numpy as np
from numba import njit, prange

from ._host import PREFETCH_BLOCK_MAX_BYTES, STRIP_MAX_BYTES
from ._numba_cache import cached_njit
from ._numba_channels import _channels_done, _combine, center_tile, finish_pass, make_params, partials, tile
from ._numba_fp import borrowed, lane_totals, pairs_of
from ._numba_rows import FASTMATH, _apply, _clear, _fill, _flush, _inputs, _pair_tiles_from, _reduce, _runs, _u
from ._plan import (
    BLOCK_ROWS,
    CACHED_MAX_BYTES,
    FOLD_WAYS,
    Op,
    Plan,
    Reduce,
    _adds_to,
    _prefetches,
    _reduce_inputs,
    _strips,
    apply_mode,
)

assert FOLD_WAYS == 8, "_fold_run is written out for eight running totals"
_prefetches = njit(inline="always")(_prefetches)  # (the rules the Cython kernels compile from _plan.py)
_strips = njit(inline="always")(_strips)
_reduce_inputs = njit(inline="always")(_reduce_inputs)
_adds_to = njit(inline="always")(_adds_to)

# ---------------------------------------------------------------------------------------
# Items.  Channels-last: a range of folded rows.  Channels-first: (channel block, batch range).
# ---------------------------------------------------------------------------------------


@njit(inline="always")
def _row_bounds(p, item):
    """Elements [e0, e1) of a channels-last item: a range of folded rows (the last may be short)."""
    total = p.outer * p.C
    return (p.rows * item // p.nitems) * p.width, min((p.rows * (item + 1) // p.nitems) * p.width, total)


@njit(inline="always")
def _block_bounds(p, item):
    """Channels [c0, c0 + nch) and batch range [n0, n1) of a channels-first item."""
    c0 = item // p.per_channel * p.block
    k = item % p.per_channel
    return c0, min(p.block, p.C - c0), p.outer * k // p.per_channel, p.outer * (k + 1) // p.per_channel


@njit(inline="always")
def _reduce_row_item(a, b, mode, p, item, m_tile, acc0, acc1, part):
    """Partials of one channels-last item into part[2][width] (lane j: channel j % C).  Rows in
    strips (_plan._strips): the full rows as spans of one row each, which the sweep adds a group
    of rows at a time, then a short last row alone; else the item as one span, row by row."""
    a, b, m_tile, part = borrowed(a), borrowed(b), borrowed(m_tile), borrowed(part)  # (_numba_fp.borrowed: each
    acc0, acc1 = borrowed(acc0), borrowed(acc1)  # view and call below counted them; 0.96x of 25 items' time)
    e0, e1 = _row_bounds(p, item)
    W = p.width
    _clear(acc0), _clear(acc1), _clear(part[0]), _clear(part[1])
    full, nrows = 0, 0
    # (True: these are channels-last rows, which strip under a lower share of the cache)
    if _strips(p.outer * p.C * p.inner, a.itemsize, _reduce_inputs(mode), CACHED_MAX_BYTES, STRIP_MAX_BYTES, True):
        full = (e1 - e0) // W
        nrows = _reduce(mode, a, b, e0, W, full, W, W, m_tile, acc0, acc1, part[0], part[1], 0)
    if e0 + full * W < e1:
        _reduce(mode, a, b, e0 + full * W, 0, 1, e1 - e0 - full * W, W, m_tile, acc0, acc1, part[0], part[1], nrows)
    _flush(acc0, acc1, part[0], part[1])


@njit(inline="always")
def _apply_row_item(a, b, out, amode, p, item, tiles, pairs, stream):
    """The element pass of one channels-last item, with the call's tiles (see apply_tiles)."""
    a, b, out, tiles, pairs = borrowed(a), borrowed(b), borrowed(out), borrowed(tiles), borrowed(pairs)
    e0, e1 = _row_bounds(p, item)
    _apply(amode, a, b, out, e0, 0, 1, e1 - e0, p.width, tiles[0], tiles[1], tiles[2], tiles[3], pairs, stream)


@njit(inline="always")
def _add_lanes(t, v, j, count):
    """The eight running totals t with lanes v[j:j + count] added (lane j + k to t[k]; count <= 8).
    A lane past count adds +0.0, which changes no total: a total starts at +0.0, so it is never
    -0.0.  Indices are unsigned (_u)."""
    return (
        t[0] + (v[_u(j)] if count > 0 else 0.0),
        t[1] + (v[_u(j + 1)] if count > 1 else 0.0),
        t[2] + (v[_u(j + 2)] if count > 2 else 0.0),
        t[3] + (v[_u(j + 3)] if count > 3 else 0.0),
        t[4] + (v[_u(j + 4)] if count > 4 else 0.0),
        t[5] + (v[_u(j + 5)] if count > 5 else 0.0),
        t[6] + (v[_u(j + 6)] if count > 6 else 0.0),
        t[7] + (v[_u(j + 7)] if count > 7 else 0.0),
    )


@njit(inline="always")
def _fold_run(v, start, n):
    """v[start:start + n] summed as the C kernels' fold_lanes does (no fastmath: as in C): lane j
    into running total j % 8, the eight joined pairwise."""
    t = lane_totals(v, start, n // FOLD_WAYS)  # (the same adds, as vectors)
    j = start + n - n % FOLD_WAYS
    t = _add_lanes(t, v, j, start + n - j)  # (the last lanes, fewer than eight)
    return ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]))


@njit
def _fold_lanes(mode, p0, p1, nch, R, sums):
    """The totals of channels [0, nch): channel c's of lanes [c*R, (c+1)*R); a total the pass
    does not add to stays 0.  One call per item (a call per channel took a tenth of a
    small-plane call, most of it reference counts of the arrays passed)."""
    for c in range(nch):
        sums[0, c] = _fold_run(p0, c * R, R) if _adds_to(mode, 0) else 0.0
        sums[1, c] = _fold_run(p1, c * R, R) if _adds_to(mode, 1) else 0.0


@njit(inline="always")
def _clear_used(mode, v0, v1):
    """Zero the lanes (float32) or partials (float64) of the totals the pass adds to."""
    if _adds_to(mode, 0):
        _clear(v0)
    if _adds_to(mode, 1):
        _clear(v1)


@njit(inline="always", fastmath=FASTMATH)
def _flush_used(mode, acc0, acc1, p0, p1):
    if _adds_to(mode, 0):
        for j in range(acc0.shape[0]):
            p0[j] += acc0[j]
    if _adds_to(mode, 1):
        for j in range(acc1.shape[0]):
            p1[j] += acc1[j]


@njit(inline="always")
def _reduce_plane_item(a, b, mode, p, item, center, m, acc0, acc1, p0, p1, sums):
    """Totals of one (channel block, batch range) item into sums[:, :nch] (lane j: channel c0 + j // run)."""
    a, b, center, m, sums = borrowed(a), borrowed(b), borrowed(center), borrowed(m), borrowed(sums)  # (as in
    acc0, acc1, p0, p1 = borrowed(acc0), borrowed(acc1), borrowed(p0), borrowed(p1)  # _reduce_row_item)
    c0, nch, n0, n1 = _block_bounds(p, item)
    R = p.run
    for c in range(nch):
        _fill(m, c * R, R, center[c0 + c])
    _clear_used(mode, acc0, acc1)
    # Fewer than BLOCK_ROWS rows never flush: their float32 lanes are folded straight, each
    # widened exactly as a flush would (the C kernels' reduce_plane_item does the same).
    flushes = (n1 - n0) * ((nch * p.inner + p.width - 1) // p.width) >= BLOCK_ROWS
    if flushes:
        _clear_used(mode, p0, p1)
    stride = p.C * p.inner
    _reduce(mode, a, b, (n0 * p.C + c0) * p.inner, stride, n1 - n0, nch * p.inner, p.width, m, acc0, acc1, p0, p1, 0)
    if flushes:
        _flush_used(mode, acc0, acc1, p0, p1)
        _fold_lanes(mode, p0, p1, nch, R, sums)
    else:
        _fold_lanes(mode, acc0, acc1, nch, R, sums)


@njit(inline="always")
def _apply_plane_item(a, b, out, amode, p, item, A, B, K, center, tiles, pairs, prefetch, stream):
    """The element pass of one item; with `prefetch`, each long plane of the next channel block
    (the thread's next item: fused_region) is requested as this block's is applied."""
    c0, nch, n0, n1 = _block_bounds(p, item)
    base, stride = (n0 * p.C + c0) * p.inner, p.C * p.inner
    if p.runs:  # long planes: a channel's runs, scalar coefficients (see _plan.Plan)
        ahead = nch * p.inner if prefetch and c0 + nch < p.C else 0
        for c in range(c0, c0 + nch):
            _runs(amode, a, b, out, base + (c - c0) * p.inner, stride, n1 - n0, p.inner, A[c], B[c], K[c], center[c],
                  ahead, stream)  # fmt: skip
        return
    R = p.run
    At, Bt, Kt, mt = tiles[0], tiles[1], tiles[2], tiles[3]
    for c in range(nch):
        _fill(At, c * R, R, A[c0 + c]), _fill(Bt, c * R, R, B[c0 + c])
        _fill(Kt, c * R, R, K[c0 + c]), _fill(mt, c * R, R, center[c0 + c])
    if pairs_of(a):
        _pair_tiles_from(tiles, pairs)
    _apply(amode, a, b, out, base, stride, n1 - n0, nch * p.inner, p.width, At, Bt, Kt, mt, pairs, stream)


# ---------------------------------------------------------------------------------------
# Regions: each one a parallel dispatcher and its serial twin (region[nthreads > 1])
# ---------------------------------------------------------------------------------------


def _region(fn):
    """(serial, parallel) dispatchers of one region.  The twin is a copy of the function under
    its own name, so that Numba's on-disk cache keeps the two compilations apart."""
    twin = FunctionType(fn.__code__, fn.__globals__, fn.__name__ + "_serial", fn.__defaults__, fn.__closure__)
    twin.__qualname__ = fn.__qualname__ + "_serial"
    twin.__module__ = fn.__module__
    return cached_njit()(twin), cached_njit(parallel=True)(fn)


@njit(inline="always")
def _chunk(t, n, nchunks):
    return n * t // nchunks, n * (t + 1) // nchunks


@njit(inline="always")
def _item(k, i0, i1, backward):
    """Item k of the chunk [i0, i1), last first in a `backward` pass (see the C for_items)."""
    return i0 + i1 - 1 - k if backward else k


@njit(inline="always")
def _pair_scratch(a, W):
    """Room for the pair tiles of W lanes if a is bfloat16 (see _pair_tiles_from), else a stub."""
    return np.empty((2, 8, W // 2 + 1 if pairs_of(a) else 1), np.float32)


@njit(inline="always")
def _tile_scratch(a, W):
    """Per-lane tiles (A, B, K, m) of W lanes, and room for their pair tiles."""
    return np.empty((4, W), np.float32), _pair_scratch(a, W)


@cached_njit()
def apply_tiles(a, p, A, B, K, center):
    """The channels-last tiles of a call (lane j: channel j % C) and, for bfloat16, their pair
    tiles, built once for all items; channels-first items build their own."""
    if not p.channels_last:
        return _tile_scratch(a, 1)
    tiles, pairs = tile(p, A, B, K, center), _pair_scratch(a, p.width)
    if pairs_of(a):
        _pair_tiles_from(tiles, pairs)
    return tiles, pairs


@njit(inline="always")
def _lane_scratch(W):
    """Centers, float32 lanes and float64 partials of one chunk's channels-first reductions."""
    f32 = np.float32
    return np.empty(W, f32), np.empty(W, f32), np.empty(W, f32), np.empty(W, np.float64), np.empty(W, np.float64)


@_region
def reduce_region(a, b, mode, p, nchunks, m_tile, center, part, backward):
    """Item partials of one pass: part[item] (channels-last [2][width], channels-first [2][block]);
    `backward`: each chunk's items last first (see _item)."""
    for t in prange(nchunks):
        m, acc0, acc1, p0, p1 = _lane_scratch(p.width)
        i0, i1 = _chunk(t, p.nitems, nchunks)
        for k in range(i0, i1):
            item = _item(k, i0, i1, backward)
            if p.channels_last:
                _reduce_row_item(a, b, mode, p, item, m_tile, acc0, acc1, part[item])
            else:
                _reduce_plane_item(a, b, mode, p, item, center, m, acc0, acc1, p0, p1, part[item])


@_region
def samples_region(a, b, mode, p, nsamples, nchunks, m_tile, center, out):
    """Totals per sample: sample k is the view p at element k * outer*C*inner, reduced by its
    own plan serially and combined into out[k] (its totals depend on its data only)."""
    elems = p.outer * p.C * p.inner
    for t in prange(nchunks):
        m, acc0, acc1, p0, p1 = _lane_scratch(p.width)
        part = partials(p)
        k0, k1 = _chunk(t, nsamples, nchunks)
        for k in range(k0, k1):
            sa = a[k * elems : (k + 1) * elems]
            sb = b[k * elems : (k + 1) * elems]
            for item in range(p.nitems):
                if p.channels_last:
                    _reduce_row_item(sa, sb, mode, p, item, m_tile, acc0, acc1, part[item])
                else:
                    _reduce_plane_item(sa, sb, mode, p, item, center, m, acc0, acc1, p0, p1, part[item])
            _combine(p, mode, part, out[k])


@_region
def apply_region(a, b, out, amode, p, nchunks, tiles, pairs, A, B, K, center, stream, backward):
    """The apply pass; channels-last rows use the call's tiles and pairs (see apply_tiles);
    stream: the output is written non-temporally (_plan._streams); backward: as reduce_region."""
    for t in prange(nchunks):
        plane_tiles, plane_pairs = _tile_scratch(a, p.width)
        i0, i1 = _chunk(t, p.nitems, nchunks)
        for k in range(i0, i1):
            item = _item(k, i0, i1, backward)
            if p.channels_last:
                _apply_row_item(a, b, out, amode, p, item, tiles, pairs, stream)
            else:
                _apply_plane_item(a, b, out, amode, p, item, A, B, K, center, plane_tiles, plane_pairs, False, stream)


# What an op runs (as plain ints: Numba types an IntEnum member apart from an int, and the
# stages pass ints, so the regions keep one specialization per mode type).


@njit(inline="always")
def _npasses(op):
    return 0 if op == Op.FWD_INFER else (2 if op == Op.FWD_TRAIN else 1)


@njit(inline="always")
def _reduce_mode(op, q):
    """Pass q's reduction: RED_GRAD, or in forward training RED_SUM (the mean) then RED_SQ."""
    if op != Op.FWD_TRAIN:
        return Reduce.RED_GRAD.value
    return Reduce.RED_SUM.value if q == 0 else Reduce.RED_SQ.value


_apply_mode = njit(inline="always")(apply_mode)


@_region
def fused_region(a, b, out, p, nchunks, params, stream):
    """Channels-first with one item per channel block: reduce, coefficients and apply back to back."""
    for t in prange(nchunks):
        i0, i1 = _chunk(t, p.nitems, nchunks)
        _fused_items(a, b, out, p, i0, i1, params, stream)


@njit
def _fused_items(a, b, out, p, i0, i1, params, stream):
    """Items [i0, i1) of fused_region, in a function of their own (not the prange body, which
    Numba transforms): its scratch is its own, and _channels_done is inlined here without
    fastmath (a call per channel copied params' 14 arrays: a fifth of a small-plane forward).
    x, dy and the output are borrowed (_numba_fp.borrowed): every thread passes them to two sweeps
    per item, and each call counted them up and down, atomically, on lines all threads share."""
    a, b, out = borrowed(a), borrowed(b), borrowed(out)
    op = params.op
    m, acc0, acc1, p0, p1 = _lane_scratch(p.width)
    sums = np.empty((2, p.block), np.float64)
    tiles, pairs = _tile_scratch(a, p.width)
    amode = _apply_mode(op)
    prefetch = _prefetches(p.outer, p.block, p.inner, a.itemsize, _inputs(amode), PREFETCH_BLOCK_MAX_BYTES)
    A, B, K = params.A, params.B, params.K
    for item in range(i0, i1):
        c0, nch, _, _ = _block_bounds(p, item)
        for q in range(_npasses(op)):
            _reduce_plane_item(a, b, _reduce_mode(op, q), p, item, params.center, m, acc0, acc1, p0, p1, sums)
            _channels_done(params, q, c0, nch, sums[0], sums[1])
        _apply_plane_item(a, b, out, amode, p, item, A, B, K, params.center, tiles, pairs, prefetch, stream)


# ---------------------------------------------------------------------------------------
# The op's driver, compiled twice: over the serial twins (one dispatch for a small call)
# and over the parallel regions
# ---------------------------------------------------------------------------------------


def _drive(a, b, out, plan_fields, nchunks, op, eps, n, scale, offset, variance, center, stream):
    """The whole op: each reduction pass with its finish, then the apply pass; channel blocks
    that hold whole channels run all three in one region (fused_region).  Returns the block of
    per-channel vectors (see make_params).  The plan comes as a plain tuple: Numba types a
    NamedTuple argument field by field on every call (~3 us)."""
    p = Plan(*plan_fields)
    params, vecs = make_params(op, eps, n, scale, offset, variance, center)
    if not p.channels_last and p.per_channel == 1 and op != Op.FWD_INFER:
        fused_region(a, b, out, p, nchunks, params, stream)
        return vecs
    s = np.zeros((2, p.C))
    part = partials(p)
    npasses = _npasses(op)
    for q in range(npasses):  # forward training: the mean, then squares centred on it
        m_tile = center_tile(p, params.center)
        reduce_region(a, b, _reduce_mode(op, q), p, nchunks, m_tile, params.center, part, q % 2 == 1)
        _combine(p, _reduce_mode(op, q), part, s)
        finish_pass(params, q, s[0], s[1])
    if npasses == 0:
        finish_pass(params, 0, s[0], s[1])
    A, B, K, center = params.A, params.B, params.K, params.center
    tiles, pairs = apply_tiles(a, p, A, B, K, center)
    apply_region(a, b, out, _apply_mode(op), p, nchunks, tiles, pairs, A, B, K, center, stream, npasses % 2 == 1)
    return vecs


def _over(fn, k: int, suffix: str):
    """fn compiled with the regions' serial (k=0) or parallel (k=1) dispatchers as its globals."""
    regions = (reduce_region, apply_region, fused_region, samples_region)  # (the parallel twin has the name)
    scope = dict(fn.__globals__, **{twins[1].py_func.__name__: twins[k] for twins in regions})
    twin = FunctionType(fn.__code__, scope, fn.__name__ + suffix, fn.__defaults__, fn.__closure__)
    twin.__qualname__ = fn.__qualname__ + suffix
    twin.__module__ = fn.__module__
    return cached_njit()(twin)


drive = (_over(_drive, 0, "_serial"), _over(_drive, 1, "_parallel"))
