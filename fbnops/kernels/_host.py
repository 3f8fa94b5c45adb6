"""This host's thresholds for the kernels' plan, from its caches and CPU vendor (sysfs, /proc).

The rules that use them are the contract's (``_strips`` and ``_streams`` in :mod:`._plan`, with the
tunables they scale); the values are functions of the machine, never of the bits: strips and rows
make the same adds, and streamed stores write the same values.
"""

from __future__ import annotations

from ..framework.caches import cpu_vendor, last_level_cache_bytes
from ._plan import STREAM_LLC_QUARTERS, STREAM_MIN_BYTES, STRIP_MAX_SHARE

__all__ = ["strip_max_bytes", "stream_rows_min_bytes", "STRIP_MAX_BYTES", "STREAM_ROWS_MIN_BYTES"]


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
    if vendor is None:
        vendor = cpu_vendor()
    if vendor != "AuthenticAMD" or not cache_bytes:
        return STREAM_MIN_BYTES
    return max(STREAM_MIN_BYTES, cache_bytes // 4 * STREAM_LLC_QUARTERS)


# Read once.  The C kernels read them at import; Numba compiles STRIP_MAX_BYTES in, and its cache
# is keyed on it (_numba_cache); it decides streaming in Python.
STRIP_MAX_BYTES = strip_max_bytes()
STREAM_ROWS_MIN_BYTES = stream_rows_min_bytes()
