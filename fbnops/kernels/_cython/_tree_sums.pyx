# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Reproducible-tree block sums over one-row samples, in one streaming pass.

The reproducible synchronized batch norm adds per-sample float64 leaves up a fixed
binary tree over the global sample index (``fbnops/distributed/_tree.py``).  When each
sample is a single row of ``C`` values, its leaf is one element per channel (widened to
float32, centred and multiplied in float32, widened to float64: ``_rows.py`` states it
in NumPy).  Building the ``(S, K)`` leaf array and summing it level by level takes
several passes over it; here each aligned block's tree sum comes out of one sweep over
the rows, with a binary-counter stack of float64 partials per channel: sample ``i``'s
leaf is pushed, and while ``i``'s low bit is set the top two nodes are replaced by
their sum (left + right).  A block of ``2**L`` rows ends with its node at level ``L``;
a clipped last block folds the stack from the smallest node up (``left + acc``), which
is the tree's rule "an odd node moves up as is".  Rows come four at a time: their level-2
node ``(l0 + l1) + (l2 + l3)`` is made in registers and pushed as such, so no leaf is ever
stored (a clipped block's last one to three rows go leaf by leaf).  The same additions in
the same order as the NumPy definition: the same bits (NaNs aside: which of two NaNs a sum
keeps is the compiler's choice, here as in NumPy's own loops).

Channels are independent, so the work is split into tiles of up to 1,024 partials per level
(the stack stays in L2 while the rows stream past), shared among the threads.
``_tree_sums_avx2`` is the same source built for x86-64-v3.
"""

SIMD_VARIANT = "baseline"

include "_tree_sums_impl.pxi"
