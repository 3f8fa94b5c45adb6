"""The Numba backend: ``@njit`` kernels, a bitwise twin of the Cython ones.

The same program as the Cython kernels (see ``_cython/_batch_norm_impl.pxi``): the
canonical ``(outer, C, inner)`` view, reduction passes into float32 lanes flushed to
float64 partials, per-channel coefficients, one apply pass
``out = A*((b + K) + B*(a - m))``, and the work plan of ``_plan.py`` (which depends
on the shape only, combined in a fixed order), so that results are identical for
any thread count and equal to Cython's, byte for byte.  The loops and regions live
in ``_numba_loops.py``; this module plans, drives and registers.

Importing it changes no global state: Numba's thread count is set around each
parallel call and restored afterwards.
"""

from __future__ import annotations

import contextlib

import numba
import numpy as np

from ..framework import dtypes
from ..framework.registry import register_kernel
from ..framework.threads import note_parallel
from . import _numba_loops as loops
from ._numba_loops import (
    APPLY_A,
    APPLY_B,
    APPLY_FULL,
    FWD_INFER,
    FWD_TRAIN,
    GRAD_FROZEN,
    GRAD_TRAIN,
    RED_GRAD,
    RED_SQ,
    RED_SUM,
)
from ._plan import fused, plan, threads_for

MAX_CHUNKS = 64  # chunks of items per region (each allocates its scratch once)
PASSES = {GRAD_TRAIN: (RED_GRAD,), GRAD_FROZEN: (RED_GRAD,), FWD_TRAIN: (RED_SUM, RED_SQ), FWD_INFER: ()}
APPLY_OF = {GRAD_TRAIN: APPLY_FULL, GRAD_FROZEN: APPLY_B, FWD_TRAIN: APPLY_A, FWD_INFER: APPLY_A}


def _storage(x: np.ndarray) -> np.ndarray:
    """Flat storage: float32 as is, float16 bits as uint16, bfloat16 bits as int16."""
    if x.dtype == np.float32:
        return x.reshape(-1)
    return x.reshape(-1).view(np.uint16 if x.dtype == dtypes.float16 else np.int16)


@contextlib.contextmanager
def _threads(nelems: int):
    """The thread count for a call (1: the serial twins, no thread pool at all); Numba's own
    setting is restored afterwards."""
    n = min(threads_for(nelems), numba.config.NUMBA_NUM_THREADS)
    if n == 1:
        yield 1
        return
    note_parallel()
    before = numba.get_num_threads()
    numba.set_num_threads(n)
    try:
        yield n
    finally:
        numba.set_num_threads(before)


def _zeros(C: int) -> np.ndarray:
    return np.zeros(C, np.float32)


def _reduce(a, b, mode, p, center, nthreads) -> np.ndarray:
    """Totals (2, C) of one pass over the whole view."""
    part = np.empty((p.nitems, 2, p.width if p.channels_last else p.block))
    m_tile = loops.tile(p, center, center, center, center)[3] if p.channels_last else center
    loops.reduce_region[nthreads > 1](a, b, mode, p, min(p.nitems, MAX_CHUNKS), m_tile, center, part)
    s = np.empty((2, p.C))
    loops._combine(p, part, s)
    return s


def _apply(a, b, out, amode, p, A, B, K, center, nthreads) -> None:
    tiles = loops.tile(p, A, B, K, center) if p.channels_last else np.empty((4, 1), np.float32)
    loops.apply_region[nthreads > 1](a, b, out, amode, p, min(p.nitems, MAX_CHUNKS), tiles, A, B, K, center)


def _run(op: int, x, dy, scale, offset, mean, variance, epsilon: float):
    outer, C, inner = x.shape
    a = _storage(x)
    b = _storage(dy) if dy is not None else a
    out_arr = np.empty_like(x)
    out = _storage(out_arr)
    p = plan(outer, C, inner, x.dtype.itemsize)
    n = float(outer) * float(inner)
    eps = np.float32(epsilon)
    res0, res1, A, B, K = (_zeros(C) for _ in range(5))
    offset = offset if offset is not None else _zeros(C)
    variance = variance if variance is not None else _zeros(C)
    center = (_zeros(C) if op == FWD_TRAIN else mean).copy()
    passes = PASSES[op]
    with _threads(x.size) as nthreads:
        if fused(p) and passes:
            loops.fused_region[nthreads > 1](
                a, b, out, op, p, min(p.nitems, MAX_CHUNKS), n, eps, scale, offset, variance, center,
                res0, res1, A, B, K,
            )  # fmt: skip
            return out_arr, res0, res1
        s = np.zeros((2, C))
        for q, mode in enumerate(passes):  # forward training: the mean, then squares centred on it
            s = _reduce(a, b, mode, p, center, nthreads)
            loops.finish_pass(op, q, s[0], s[1], n, eps, scale, offset, variance, center, res0, res1, A, B, K)
        if not passes:
            loops.finish_pass(op, 0, s[0], s[1], n, eps, scale, offset, variance, center, res0, res1, A, B, K)
        _apply(a, b, out, APPLY_OF[op], p, A, B, K, center, nthreads)
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


# ---------------------------------------------------------------------------------------
# The stages (fbnops.kernels.stages): partials, finish, apply
# ---------------------------------------------------------------------------------------


def reduce_totals(mode, x, dy, center, rows_per_sample):
    outer, C, inner = x.shape
    a = _storage(x)
    b = _storage(dy) if dy is not None else a
    center = center if center is not None else _zeros(C)
    with _threads(x.size) as nthreads:
        if not rows_per_sample:
            return _reduce(a, b, mode, plan(outer, C, inner, x.dtype.itemsize), center, nthreads)
        p = plan(rows_per_sample, C, inner, x.dtype.itemsize)
        nsamples = outer // rows_per_sample
        out = np.empty((nsamples, 2, C))
        m_tile = loops.tile(p, center, center, center, center)[3] if p.channels_last else center
        nchunks = min(nsamples, MAX_CHUNKS)
        loops.samples_region[nthreads > 1](a, b, mode, p, nsamples, nchunks, m_tile, center, out)
        return out


def finish(op, s0, s1, count, epsilon, scale, offset, variance, center):
    C = scale.shape[0]
    res0, res1, A, B, K = (_zeros(C) for _ in range(5))
    offset = offset if offset is not None else _zeros(C)
    variance = variance if variance is not None else _zeros(C)
    center = _zeros(C) if op == FWD_TRAIN else center.copy()
    eps = np.float32(epsilon)
    for q in range(2 if op == FWD_TRAIN else 1):
        loops.finish_pass(op, q, s0, s1, float(count), eps, scale, offset, variance, center, res0, res1, A, B, K)
    return res0, res1, A, B, K


def apply(amode, x, dy, A, B, K, center):
    outer, C, inner = x.shape
    a = _storage(x)
    b = _storage(dy) if dy is not None else a
    out_arr = np.empty_like(x)
    with _threads(x.size) as nthreads:
        _apply(a, b, _storage(out_arr), amode, plan(outer, C, inner, x.dtype.itemsize), A, B, K, center, nthreads)
    return out_arr


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
