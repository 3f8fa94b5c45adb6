"""Kernels: the NumPy reference, the Cython/OpenMP kernels, the Numba kernels.

Each backend module registers its functions with ``fbnops.framework.registry``;
all take the canonical ``(outer, C, inner)`` view and contiguous arrays.
``_plan`` decides the work partition and thread count for both compiled backends;
``stages`` exposes the op cut into partial sums, finish and apply (for
synchronized batch norm), on whichever backend is current.
"""
