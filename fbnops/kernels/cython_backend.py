"""Registers the compiled Cython kernels as the ``cython`` backend.

Up to three builds of one kernel source may be present: the portable baseline, an x86-64-v3
build (AVX2, FMA, F16C) and an x86-64-v4 build with AVX512-BF16 (the same program; bfloat16
narrowed by the hardware, the same bits).  The fastest one this CPU can run is chosen at import;
``FBNOPS_SIMD=baseline`` or ``FBNOPS_SIMD=x86-64-v3`` forces a lesser one.
"""

from __future__ import annotations

import importlib
import os

from ..framework.registry import register_kernel, register_stage
from ..framework.threads import note_parallel
from . import outputs as _outputs  # noqa: F401  (checks FBNOPS_OUTPUT_POOL_BYTES before the extension reads it)
from ._cython import batch_norm as _baseline
from ._plan import threads_for

# The builds past the baseline, fastest first: the module, and whether this CPU runs it.
_BUILDS = (("batch_norm_avx512", _baseline.cpu_has_avx512_bf16), ("batch_norm_avx2", _baseline.cpu_has_x86_64_v3))


def runnable_build_names() -> list[str]:
    """The module names of the builds past the baseline that this CPU runs, fastest first (built or not:
    ``benchmarks/ab_kernels.py`` looks for them in other checkouts)."""
    return [name for name, runs_here in _BUILDS if runs_here()]


def available_builds() -> list:
    """Every build of the kernels this CPU runs and this install has, fastest first (baseline last)."""
    found = []
    for name in runnable_build_names():
        try:
            found.append(importlib.import_module(f"{__package__}._cython.{name}"))
        except ImportError:  # not built on this machine
            pass
    return [*found, _baseline]


def _select():
    """The fastest build, or the one FBNOPS_SIMD names by its SIMD_VARIANT (if this CPU runs it)."""
    builds = available_builds()
    wanted = [b for b in builds if b.SIMD_VARIANT == os.environ.get("FBNOPS_SIMD", "").strip().lower()]
    return (wanted or builds)[0]


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
