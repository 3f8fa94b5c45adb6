"""Where the kernels' large outputs come from: the pool of ``_cython/_outputs.pyx``.

A large output reuses the mapped pages of an output of the same size that is no
longer referenced, instead of faulting in fresh pages (see that module).  Both
compiled backends allocate through :func:`empty_like`; without the compiled
extension it is ``numpy.empty_like``.
"""

from __future__ import annotations

import os

import numpy as np

from ..framework.errors import InvalidArgumentError

_POOL_ENV = "FBNOPS_OUTPUT_POOL_BYTES"


def _check_pool_env() -> None:
    """The pool's size variable, checked before the extension reads it into a size_t: an error naming it."""
    text = os.environ.get(_POOL_ENV, "").strip()
    if not text:
        return
    try:
        n = int(text)
    except ValueError:
        raise InvalidArgumentError(f"{_POOL_ENV} must be a number of bytes, got {text!r}") from None
    if n >= 1 << 64:
        raise InvalidArgumentError(f"{_POOL_ENV}={text} does not fit a size_t (at most 2**64 - 1 bytes; 0: no pool)")


_check_pool_env()

try:
    from ._cython._outputs import empty, set_limit, stats
except ImportError:  # the compiled extensions are not built: no pool
    empty = np.empty

    def stats() -> dict:
        return dict(free_blocks=0, free_bytes=0, hits=0, misses=0, limit=0)

    def set_limit(nbytes: int) -> int:
        return 0


__all__ = ["empty", "empty_like", "stats", "set_limit"]


def empty_like(a: np.ndarray) -> np.ndarray:
    """An uninitialised C-contiguous array of ``a``'s shape and dtype."""
    return empty(a.shape, a.dtype)
