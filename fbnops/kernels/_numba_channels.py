"""The Numba kernels' per-channel math and fixed-order combines (no fastmath).

The twin of the Cython ``channel_done`` and ``combine_rows``/``combine_blocks``
(``_cython/_batch_norm_impl.pxi``): totals into each channel's results and coefficients
``A, B, K``, item partials into totals in the plan's fixed order, and the per-lane tiles
of channels-last rows.  :class:`Params` groups one call's per-channel inputs and outputs
as the Cython ``Params`` struct does.  The loops and regions that use them are in
``_numba_loops.py``; the modes are ``_plan.py``'s.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from ._numba_cache import cached_njit
from ._numba_reduce import _adds_to, _u
from ._plan import Op


class Params(NamedTuple):
    """One call's per-channel inputs and outputs (the op decides which outputs it writes)."""

    op: int  # an Op
    eps: np.float32
    n: float  # elements per channel: outer * inner
    scale: np.ndarray
    offset: np.ndarray  # forward only
    var_in: np.ndarray  # the given variance (not FWD_TRAIN)
    center: np.ndarray  # what x is centred on: the given mean, or the batch mean in FWD_TRAIN
    A: np.ndarray  # the element pass's coefficients (see _plan.Apply)
    B: np.ndarray
    K: np.ndarray
    scale_backprop: np.ndarray  # gradient outputs
    offset_backprop: np.ndarray
    batch_mean: np.ndarray  # FWD_TRAIN outputs (biased variance)
    batch_var: np.ndarray


@njit(inline="always")
def _channels_done(params, pass_index, c0, nch, s0, s1):
    """Channels [c0, c0 + nch) done from their totals s0[i], s1[i].  params' arrays are taken out
    once, before the channel loop: read per channel inside its branches, each left Numba
    reference-count calls in the loop (~65 ns a channel and pass, 7x the math)."""
    op, n, eps = params.op, params.n, params.eps
    scale, offset, var_in, center = params.scale, params.offset, params.var_in, params.center
    A, B, K = params.A, params.B, params.K
    sbp, obp, bmean, bvar = params.scale_backprop, params.offset_backprop, params.batch_mean, params.batch_var
    for i in range(nch):
        c = c0 + i
        t0 = s0[i]
        t1 = s1[i]
        gamma = np.float64(scale[c])
        if op == Op.FWD_TRAIN and pass_index == 0:
            bmean[c] = np.float32(t0 / n)
            center[c] = bmean[c]  # the next pass centres on it
            continue
        if op == Op.FWD_TRAIN:
            bvar[c] = np.float32(t1 / n)  # biased variance
            var = np.float64(bvar[c])
        else:
            var = np.float64(var_in[c])
        r = 1.0 / np.sqrt(np.float64(np.float32(var) + eps))
        if op == Op.GRAD_TRAIN or op == Op.GRAD_FROZEN:
            sbp[c] = np.float32(t1 * r)  # sum(dy * (x - mean)) * r
            obp[c] = np.float32(t0)  # sum(dy)
            A[c] = np.float32(gamma * r)
            if op == Op.GRAD_TRAIN:  # dx = gamma*r * ((dy - s0/n) - (x - mean) * r*r*s1/n), as TF groups it
                B[c] = np.float32(-r * r * t1 / n)
                K[c] = np.float32(-t0 / n)
            else:
                B[c] = 0
                K[c] = 0
        else:  # forward: y = (x - mean) * (scale * r) + offset
            A[c] = 0
            B[c] = np.float32(gamma * r)
            K[c] = offset[c]


@njit(inline="always")
def partials(p):
    """The items' float64 partials of one pass, which _combine adds up: [item][2][width] for row
    items, [item][2][block] for channel blocks."""
    return np.empty((p.nitems, 2, p.width if p.channels_last else p.block))


@njit
def _combine(p, mode, part, s):
    """Item partials into totals s[2][C], in the fixed order of the C combine_rows/combine_blocks:
    row items [item][2][fold * C], only the totals the pass adds to (mode: the other stays 0, as
    the items left it); block items [item][2][block], batch ranges side by side.  Row items are
    added through flat views with unsigned indices (_u), so the channel loop vectorizes (indexed
    two-dimensionally it took 5.5 us a pass for 25 items of 512 channels)."""
    s[:] = 0
    C = p.C
    if p.channels_last:
        lanes, totals = part.reshape(-1), s.reshape(-1)
        for item in range(p.nitems):
            for h in range(2):
                if not _adds_to(mode, h):
                    continue
                base = (2 * item + h) * p.width
                for q in range(p.fold):
                    for c in range(C):
                        totals[_u(h * C + c)] += lanes[_u(base + q * C + c)]
        return
    for item in range(p.nitems):
        c0 = item // p.per_channel * p.block
        for j in range(min(p.block, C - c0)):
            s[0, c0 + j] += part[item, 0, j]
            s[1, c0 + j] += part[item, 1, j]


@njit(inline="always")
def make_params(op, eps, n, scale, offset, variance, center):
    """The Params of a call, and the (8, C) zeroed block whose rows are its eight vectors: the
    first (scale_backprop or batch_mean) and second (offset_backprop or batch_var) outputs, A, B,
    K, the centre (a copy: FWD_TRAIN writes it), and zeros for an absent offset or variance
    (passed as empty arrays: one compiled specialization for every op).  Built here, not in
    Python, where the record cost ~10 us a call and its typing at the call ~5 us more."""
    vecs = np.zeros((8, scale.shape[0]), np.float32)
    v0, v1, A, B, K, own_center = vecs[0], vecs[1], vecs[2], vecs[3], vecs[4], vecs[5]
    if op != Op.FWD_TRAIN:
        own_center[:] = center
    offset = offset if offset.shape[0] else vecs[6]
    variance = variance if variance.shape[0] else vecs[7]
    return Params(op, np.float32(eps), n, scale, offset, variance, own_center, A, B, K, v0, v1, v0, v1), vecs


@cached_njit()
def finish_pass(params, pass_index, s0, s1):
    _channels_done(params, pass_index, 0, params.scale.shape[0], s0, s1)


@cached_njit()
def finish(op, eps, n, scale, offset, variance, center, s0, s1):
    """The finish stage: the (8, C) block of make_params after each reduction pass's channels are done."""
    params, vecs = make_params(op, eps, n, scale, offset, variance, center)
    for q in range(2 if op == Op.FWD_TRAIN else 1):
        finish_pass(params, q, s0, s1)
    return vecs


@njit(inline="always")
def _tile_channels(p, v, tile):
    """Lane j of a folded row is channel j % C: `fold` copies of the C channels."""
    for q in range(p.fold):
        for c in range(p.C):
            tile[q * p.C + c] = v[c]


@cached_njit()
def tile(p, A, B, K, center):
    """Channels-last per-lane tiles: lane j holds channel j % C."""
    tiles = np.empty((4, p.width), np.float32)
    _tile_channels(p, A, tiles[0])
    _tile_channels(p, B, tiles[1])
    _tile_channels(p, K, tiles[2])
    _tile_channels(p, center, tiles[3])
    return tiles


@cached_njit()
def center_tile(p, center):
    """What a reduction centres lane j on: channels-last tiles, channels-first the vector."""
    if p.channels_last:
        centers = np.empty(p.width, np.float32)
        _tile_channels(p, center, centers)
        return centers
    return center.copy()
