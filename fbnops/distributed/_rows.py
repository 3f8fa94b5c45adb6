"""Per-sample partial sums when every sample is one row of ``C`` values (N x 1 x 1 x C layers).

The reproducible mode needs one float64 partial per sample.  When a sample is a single row,
its "sum" is one element per channel: the kernels' per-sample reduction then costs a call
per sample for no addition at all.  These are the same numbers (bit for bit, on every
backend: ``tests/distributed/test_sync_ops.py`` checks it) from one vectorized pass:
the element widened to float32, centred and multiplied in float32 as the kernels do, then
widened to float64.
"""

from __future__ import annotations

import numpy as np

__all__ = ["sum_x", "sum_sq", "sum_grad"]


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
