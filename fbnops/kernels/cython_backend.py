"""Registers the compiled Cython kernels as the ``cython`` backend.

Two builds of one kernel source may be present: the portable baseline and an
x86-64-v3 build (AVX2, FMA, F16C).  The faster one this CPU can run is chosen at
import; ``FBNOPS_SIMD=baseline`` forces the portable one.
"""

from __future__ import annotations

import os

from ..framework.registry import register_kernel, register_stage
from ..framework.threads import note_parallel
from . import outputs as _outputs  # noqa: F401  (checks FBNOPS_OUTPUT_POOL_BYTES before the extension reads it)
from ._cython import batch_norm as _baseline
from ._plan import threads_for


def _select():
    if os.environ.get("FBNOPS_SIMD", "").lower() != "baseline" and _baseline.cpu_has_x86_64_v3():
        try:
            from ._cython import batch_norm_avx2

            return batch_norm_avx2
        except ImportError:  # not built on this machine
            pass
    return _baseline


_bn = _select()
OPENMP_ENABLED: bool = _bn.OPENMP_ENABLED
SIMD_VARIANT: str = _bn.SIMD_VARIANT


def _threads(x) -> int:
    n = threads_for(x.size)
    if n > 1:
        note_parallel()
    return n


@register_kernel("FusedBatchNormGradV3", "cython")
def batch_norm_grad(x, dy, scale, mean, variance, *, epsilon, is_training):
    return _bn.batch_norm_grad(
        x, dy, scale, mean, variance, epsilon=epsilon, is_training=is_training, num_threads=_threads(x)
    )


@register_kernel("FusedBatchNormV3", "cython")
def batch_norm(x, scale, offset, mean, variance, *, epsilon, is_training):
    return _bn.batch_norm(
        x, scale, offset, mean, variance, epsilon=epsilon, is_training=is_training, num_threads=_threads(x)
    )


# The stages (fbnops.kernels.stages): partials, finish, apply.


@register_stage("reduce_totals", "cython")
def reduce_totals(mode, x, dy, center, rows_per_sample):
    return _bn.reduce_totals(mode, x, dy, center, rows_per_sample or 0, _threads(x))


@register_stage("finish", "cython")
def finish(op, s0, s1, count, epsilon, scale, offset, variance, center):
    return _bn.finish(op, s0, s1, count, epsilon, scale, offset, variance, center)


@register_stage("apply", "cython")
def apply(amode, x, dy, A, B, K, center):
    return _bn.apply(amode, x, dy, A, B, K, center, _threads(x))
