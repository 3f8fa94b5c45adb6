# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""The kernels of batch_norm.pyx compiled for x86-64-v4 with AVX512-BF16 (AMD Zen 4 and later,
Intel Cooper Lake and Sapphire Rapids and later).

The same program as the x86-64-v3 build, with one difference: bfloat16 outputs are narrowed by
the hardware (vcvtne2ps2bf16, 16 values an instruction) instead of integer vector code, with the
same bits (see _fp.h).  Selected at import by fbnops.kernels.cython_backend when the CPU has
those features; FBNOPS_SIMD=x86-64-v3 or baseline forces another build.
"""

SIMD_VARIANT = "x86-64-v4"

include "_batch_norm_impl.pxi"
