"""Registers the compiled Cython kernels as the ``cython`` backend."""

from __future__ import annotations

from ..framework.registry import register_kernel
from ..framework.threads import get_num_threads
from ._cython import batch_norm as _bn

OPENMP_ENABLED: bool = _bn.OPENMP_ENABLED

# Below this many elements one thread is faster than waking a team (~1-2 us per region).
SERIAL_BELOW = 1 << 15


def _threads(x) -> int:
    return 1 if x.size < SERIAL_BELOW else get_num_threads()


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
