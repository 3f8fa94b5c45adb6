"""The reproducible tree's block sums when every sample is one row of ``C`` values (N x 1 x 1 x C layers).

The reproducible mode adds one float64 leaf per sample up a fixed tree (:mod:`._tree`).  When
a sample is a single row, its leaf is one element per channel: the element widened to
float32, centred and multiplied in float32 as the kernels do, then widened to float64
(``sum_x``, ``sum_sq``, ``sum_grad`` below state it; ``tests/distributed/test_sync_ops.py``
checks they are the kernels' per-sample sums, bit for bit, on every backend).

:func:`block_sums` gives each of this rank's aligned blocks its tree sum.  The compiled
kernel (``fbnops/kernels/_cython/_tree_sums.pyx``) does it in one streaming pass without
the leaf array; without it (not built here, or ``use_kernel(False)``) the leaves below are
summed by :func:`._tree.subtree`.  Both make the same additions in the same order: the
same bits (tested).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from ..framework.threads import note_parallel
from ..kernels._plan import threads_for
from . import _tree

__all__ = ["sum_x", "sum_sq", "sum_grad", "block_sums", "use_kernel", "Partials"]

SUM_X, SUM_SQ, SUM_GRAD = 0, 1, 2  # the leaf modes, numbered as the compiled kernel's

_use_kernel = True  # use_kernel(False): the NumPy leaves and tree (tests, benchmarks)


@functools.cache
def _compiled():
    """The compiled block sums: the x86-64-v3 build where the kernels use an x86-64-v3 or -v4 build, else the
    portable one."""
    try:
        from ..kernels import cython_backend
        from ..kernels._cython import _tree_sums
    except ImportError:  # not built on this machine: the NumPy leaves and tree, the same bits
        return None
    if cython_backend.SIMD_VARIANT != "baseline":
        try:
            from ..kernels._cython import _tree_sums_avx2

            return _tree_sums_avx2
        except ImportError:  # the portable build only
            pass
    return _tree_sums


def use_kernel(on: bool) -> bool:
    """Use the compiled block sums (where built) or the NumPy ones; returns the previous setting (tests, benchmarks)."""
    global _use_kernel
    before, _use_kernel = _use_kernel, bool(on)
    return before


def _rows(a: np.ndarray) -> np.ndarray:
    return a.reshape(a.shape[0], a.shape[1]).astype(np.float32, copy=False)


def sum_x(x: np.ndarray) -> np.ndarray:
    """``(S, C)``: each sample's x (``0.0 + x``, as an accumulator starting at zero)."""
    rows = _rows(x)
    out = np.empty(rows.shape)
    np.add(rows, np.float32(0.0), out=out)  # -0.0 becomes 0.0, as in an accumulator; exact otherwise
    return out


def sum_sq(x: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """``(S, C)``: each sample's ``(x - mean)**2`` (float32 difference and square)."""
    d = _rows(x) - mean
    out = np.empty(d.shape)
    np.multiply(d, d, out=out, dtype=np.float32)  # the float32 square, widened on the store
    return out


def sum_grad(x: np.ndarray, dy: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """``(S, 2, C)``: each sample's ``[dy, dy * (x - mean)]``."""
    g = _rows(dy)
    out = np.empty((g.shape[0], 2, g.shape[1]))
    out[:, 0] = g
    d = _rows(x) - mean
    np.multiply(g, d, out=out[:, 1], dtype=np.float32)  # the float32 product, widened on the store
    return out


def _leaves(mode: int, x: np.ndarray, dy: np.ndarray | None, mean: np.ndarray | None) -> np.ndarray:
    if mode == SUM_X:
        return sum_x(x)
    if mode == SUM_SQ:
        return sum_sq(x, mean)
    return sum_grad(x, dy, mean).reshape(x.shape[0], 2 * x.shape[1])


def block_sums(
    mode: int,
    x: np.ndarray,
    dy: np.ndarray | None,
    mean: np.ndarray | None,
    spans: Sequence[tuple[int, int]],
    out: np.ndarray | None = None,
) -> np.ndarray:
    """``(len(spans), K)`` (into ``out`` if given): the tree sum of each block ``(first row, rows)`` of
    this rank's one-row samples.

    ``x``, ``dy``: ``(S, C, 1)`` rows; ``K`` is ``C`` (``SUM_X``, ``SUM_SQ``) or ``2 * C``
    (``SUM_GRAD``: ``[dy, dy * (x - mean)]`` side by side, as the kernels' per-sample sums).
    """
    kernel = _compiled() if _use_kernel else None
    if kernel is not None:
        threads = threads_for(x.size)
        if threads > 1:
            note_parallel()
        return kernel.block_sums(mode, x, dy, mean, np.asarray(spans, np.intp).reshape(-1, 2), threads, out)
    leaves = _leaves(mode, x, dy, mean)
    out = np.empty((len(spans), leaves.shape[1])) if out is None else out
    for j, (lo, n) in enumerate(spans):
        out[j] = _tree.subtree(leaves[lo : lo + n], overwrite=True)
    return out


@functools.lru_cache(maxsize=64)
def _spans(start: int, samples: int, total: int) -> np.ndarray:
    """:func:`._tree.spans` as the kernel takes them, ``(nblocks, 2)`` intp, read-only (cached: the
    split is usually the same every step)."""
    spans = np.asarray(_tree.spans(start, samples, total), np.intp).reshape(-1, 2)
    spans.flags.writeable = False
    return spans


class Partials:
    """One rank's per-channel float64 sums of one reduction: whole (the default mode) or as the
    reproducible tree's block sums (from the kernels' per-sample sums, or in one pass over
    one-row samples: the same bits).

    ``kernel(rows_per_sample)`` is the stage (``None``: the whole sums, else per sample);
    ``mode`` and ``arrays`` (``x``, ``dy``, ``mean`` as :func:`block_sums` takes them) serve
    the one-row path.
    """

    def __init__(self, kernel, mode: int, arrays: tuple, samples: int, rows_per_sample: int, single_rows: bool):
        self.kernel, self.mode, self.arrays = kernel, mode, arrays
        self.samples, self.rows_per_sample, self.single_rows = samples, rows_per_sample, single_rows

    def whole(self) -> np.ndarray:
        return self.kernel(None)

    def blocks(self, start: int, total: int, out: np.ndarray | None = None) -> np.ndarray:
        """``(nblocks, K)`` (into ``out`` if given): this rank's aligned blocks' tree sums (its first
        sample is global ``start``)."""
        if self.single_rows:
            return block_sums(self.mode, *self.arrays, _spans(start, self.samples, total), out)
        leaves = np.ascontiguousarray(self.kernel(self.rows_per_sample), np.float64).reshape(self.samples, -1)
        return _tree.local_nodes(leaves, start, total, overwrite=True, out=out)  # the stage's array: a workspace
