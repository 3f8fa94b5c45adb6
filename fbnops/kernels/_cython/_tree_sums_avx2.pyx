# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""The block sums of _tree_sums.pyx compiled for x86-64-v3 (AVX2, FMA, F16C): the same bits
(no product is added in its own type, so FMA contraction has nothing to fuse)."""

SIMD_VARIANT = "x86-64-v3"

include "_tree_sums_impl.pxi"
