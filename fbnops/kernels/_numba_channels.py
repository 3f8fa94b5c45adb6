"""The Numba kernels' per-channel math and fixed-order combines (no fastmath).

The twin of the Cython ``channel_done`` and ``combine_rows``/``combine_blocks``
(``_cython/_batch_norm_impl.pxi``): totals into each channel's results and coefficients
``A, B, K``, item partials into totals in the plan's fixed order, and the per-lane tiles
of channels-last rows.  The loops and regions that use them are in ``_numba_loops.py``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

RED_GRAD, RED_SUM, RED_SQ = 0, 1, 2
APPLY_FULL, APPLY_B, APPLY_A = 0, 1, 2
GRAD_TRAIN, GRAD_FROZEN, FWD_TRAIN, FWD_INFER = 0, 1, 2, 3


@njit
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


@njit
def _combine(p, part, s):
    """Item partials into totals s[2][C], in the fixed order of the C combine_rows/combine_blocks:
    row items [item][2][fold * C]; block items [item][2][block], batch ranges side by side."""
    s[:] = 0
    C = p.C
    for item in range(p.nitems):
        if p.channels_last:
            for q in range(p.fold):
                for c in range(C):
                    s[0, c] += part[item, 0, q * C + c]
                    s[1, c] += part[item, 1, q * C + c]
        else:
            c0 = item // p.per_channel * p.block
            for j in range(min(p.block, C - c0)):
                s[0, c0 + j] += part[item, 0, j]
                s[1, c0 + j] += part[item, 1, j]


@njit(cache=True)
def finish_pass(op, pass_index, s0, s1, n, eps, scale, offset, var_in, center, res0, res1, A, B, K):
    for c in range(scale.shape[0]):
        _channel_done(op, pass_index, c, s0[c], s1[c], n, eps, scale, offset, var_in, center, res0, res1, A, B, K)


@njit(cache=True)
def tile(p, A, B, K, center):
    """Channels-last per-lane tiles: lane j holds channel j % C."""
    tiles = np.empty((4, p.width), np.float32)
    for j in range(p.width):
        c = j % p.C
        tiles[0, j] = A[c]
        tiles[1, j] = B[c]
        tiles[2, j] = K[c]
        tiles[3, j] = center[c]
    return tiles


@njit(cache=True)
def center_tile(p, center):
    """What a reduction centres lane j on: channels-last tiles, channels-first the vector."""
    if p.channels_last:
        return tile(p, center, center, center, center)[3].copy()
    return center.copy()
