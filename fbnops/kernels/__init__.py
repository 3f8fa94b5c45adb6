"""Kernels: the NumPy reference, the Cython/OpenMP kernels, the Numba kernels.

Each backend module registers its functions with ``fbnops.framework.registry``;
all take the canonical ``(outer, C, inner)`` view and contiguous arrays.
"""
