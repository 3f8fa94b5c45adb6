"""This host's thresholds for the kernels' plan, from its caches and CPU vendor (sysfs, /proc).

The rules that use them are the contract's (``_strips`` and ``_streams`` in :mod:`._plan`, with the
tunables they scale); the values are functions of the machine, never of the bits: strips and rows
make the same adds, and streamed stores write the same values.
"""

from __future__ import annotations

from ..framework.caches import cache_sizes, cpu_vendor, last_level_cache_bytes
from ._plan import PREFETCH_L2_SHARE, PREFETCH_MAX_BYTES, STREAM_LLC_QUARTERS, STREAM_MIN_BYTES, STRIP_MAX_SHARE

__all__ = [
    "strip_max_bytes", "stream_rows_min_bytes", "prefetch_block_max_bytes",
    "STRIP_MAX_BYTES", "STREAM_ROWS_MIN_BYTES", "PREFETCH_BLOCK_MAX_BYTES",
]  # fmt: skip


def strip_max_bytes(cache_bytes: int | None = None) -> int:
    """The largest input a forward's reductions add in strips (_strips): 1/STRIP_MAX_SHARE of the
    last-level cache, or of `cache_bytes`; where the cache is unknown, every input (as measured on
    hosts whose last-level cache held the inputs)."""
    if cache_bytes is None:
        cache_bytes = last_level_cache_bytes()
    return (1 << 62) if not cache_bytes else cache_bytes // STRIP_MAX_SHARE


def stream_rows_min_bytes(cache_bytes: int | None = None, vendor: str | None = None) -> int:
    """The bytes a channels-last apply pass moves from which it streams its output (_streams):
    on an AMD CPU STREAM_LLC_QUARTERS quarters of the last-level cache (or of `cache_bytes`), at
    least STREAM_MIN_BYTES; elsewhere STREAM_MIN_BYTES.  Measured on an AMD Zen 5 (32 MB L3), each
    call the second of a pair after PyTorch's or after a read of two other arrays, ordinary stores
    against streamed ones (float32, bfloat16, float16): forwards moving 6.4-13 MB took 0.72-0.89
    of the streamed time, gradients moving 4.8-9.6 MB 0.86-0.97, passes of 19 MB 0.92-0.98, 26 MB
    0.92-1.10, 38 MB and more 1.05-1.25.  Below the L3 the output's lines stay there from call to
    call, and non-temporal stores send them to memory every time.  On the Intel Sapphire Rapids
    host STREAM_MIN_BYTES was measured (passes of 4-8 MB: 0.75-0.93 streamed).  Channels-first
    passes keep STREAM_MIN_BYTES on both: on the Zen 5 their whole-plane runs streamed won from
    26 MB (1.05-1.29, the smallest benchmark pass that streams)."""
    if cache_bytes is None:
        cache_bytes = last_level_cache_bytes()
    return _on_amd(STREAM_MIN_BYTES, cache_bytes // 4 * STREAM_LLC_QUARTERS if cache_bytes else 0, vendor)


def prefetch_block_max_bytes(l2_bytes: int | None = None, vendor: str | None = None) -> int:
    """The largest fused channels-first block (its input bytes) that requests the next block's
    planes while it applies (_prefetches): on an AMD CPU 1/PREFETCH_L2_SHARE of its L2 (or of
    `l2_bytes`), at least PREFETCH_MAX_BYTES; elsewhere PREFETCH_MAX_BYTES.  On an AMD Zen 5 (1 MB
    of L2), two builds side by side (`benchmarks/ab_kernels.py --layouts NCHW`, 2 threads after
    PyTorch's calls and 1 thread), the blocks of 134-392 KB that this takes in took 0.80-0.92 of
    their time (the float32 (32,128,28,28) gradients, the 16-bit (32,64,56,56) ones, the
    (32,64,56,56) forwards), and blocks of 784 KB 1.13-1.28.  On an Intel Sapphire Rapids (2 MB of
    L2) blocks of 200-400 KB lost (gradients 1.07-1.20), so other vendors keep the 128 KB measured
    on a host with 512 KB of L2."""
    if l2_bytes is None:
        l2_bytes = cache_sizes().get("L2")
    return _on_amd(PREFETCH_MAX_BYTES, l2_bytes // PREFETCH_L2_SHARE if l2_bytes else 0, vendor)


def _on_amd(default: int, measured: int, vendor: str | None) -> int:
    """`measured` (0 where the cache it scales is unknown), at least `default`, on an AMD CPU: the
    rules above were measured on an AMD host; elsewhere `default`, as measured on Intel ones."""
    if vendor is None:
        vendor = cpu_vendor()
    return max(default, measured) if vendor == "AuthenticAMD" else default


# Read once.  The C kernels read them at import; Numba compiles STRIP_MAX_BYTES and
# PREFETCH_BLOCK_MAX_BYTES in, and its cache is keyed on them (_numba_cache); it decides streaming in Python.
STRIP_MAX_BYTES = strip_max_bytes()
STREAM_ROWS_MIN_BYTES = stream_rows_min_bytes()
PREFETCH_BLOCK_MAX_BYTES = prefetch_block_max_bytes()
