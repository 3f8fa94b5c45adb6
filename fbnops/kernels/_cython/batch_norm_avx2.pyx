# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""The kernels of batch_norm.pyx compiled for x86-64-v3 (AVX2, FMA, F16C).

Selected at import by fbnops.kernels.cython_backend when the CPU has those
features; FBNOPS_SIMD=baseline forces the portable build.
"""

SIMD_VARIANT = "x86-64-v3"

include "_batch_norm_impl.pxi"
