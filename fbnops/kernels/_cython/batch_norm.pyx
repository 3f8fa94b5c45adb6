# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Batch-norm forward and gradient kernels: Cython, ``nogil``, OpenMP ``prange``.

This module is the portable (baseline x86-64) build of ``_batch_norm_impl.pxi``;
``batch_norm_avx2`` is the same source compiled for x86-64-v3.

All four computations (training/frozen gradient, training/inference forward) are
the same program on the canonical view ``(outer, C, inner)``:

1. zero, one or two *reduction passes* that give per-channel totals
   ``s0 = sum(b)`` and ``s1 = sum((a - m) * b)`` (or ``sum((a - m)**2)``),
2. a tiny per-channel step that turns the totals into coefficients
   (``channel_done``: the only place the op's math lives), and
3. one *apply pass*: ``out = A*b + B*(a - m) + K`` per element.

How the passes are laid out (see docs/kernels.md; the call chain is mapped at the head
of ``_batch_norm_impl.pxi``):

* Every element is visited as part of a *row* of ``width`` lanes.  Channels-last
  data (inner == 1) is already rows of C channels; when C is small several rows
  are folded into one row of ``C*fold >= LANES`` lanes (``LANES`` of ``_plan.py``)
  so the lane loop vectorizes.  Channels-first data (inner > 1) is cut into rows of
  ``block`` whole small planes side by side (lane j: channel j // inner), or LANES-wide
  pieces of one large plane.  Either way the hot loops are ``for j in range(width)`` over
  contiguous memory with per-lane accumulators: they vectorize without any
  reassociation of floating-point sums.
* Lanes accumulate in float32 for at most ``BLOCK_ROWS`` rows, then flush into
  float64 partials; per-channel totals are float64.
* The work is cut into *items* whose number and bounds depend on the shape
  only: channels-last items are row ranges, channels-first items are
  (channel block, batch range) pairs.  Partials are combined in a fixed order, so the
  results are bitwise identical for any thread count.
* Channels-first items that hold a whole channel block run reduce -> coefficients
  -> apply back to back while the block is still in cache (one parallel region).
  Otherwise each pass is its own ``prange`` region: Cython's pranges inside one
  ``parallel()`` block have no barrier between them, separate regions do.
"""

SIMD_VARIANT = "baseline"

include "_batch_norm_impl.pxi"
