"""Numba's disk cache for the kernels, keyed on the hash of every source the kernels compile in.

Numba keys a cached function on the text of its own file only. The loops in
``_numba_loops.py`` and ``_numba_stages.py`` inline functions from ``_numba_rows.py``,
``_numba_reduce.py``, ``_numba_fp.py``, ``_numba_stream.py`` and ``_numba_channels.py`` and read
constants from ``_plan.py``, so a change
there would leave stale machine code in the cache
(it happened: float16 conversions changed and cached kernels kept the old ones). The locator
here stamps each cached kernel with the SHA-256 of all those files together, so any change
to any of them recompiles, with nothing to bump by hand. The stamp also holds the values the kernels
compile in from the host, ``_host.STRIP_MAX_BYTES`` and ``PREFETCH_BLOCK_MAX_BYTES`` (from its caches).

Numba's cache files are written without a lock. Two processes that compile at once (MPI ranks on
a first call, or a parallel ``warm_up``) can pick the same data file for different entries, and a
reader between a writer's index and data writes can load a stale file under the new key. Each
kernel's cache file here takes a lock on its directory: shared to read, exclusive to write.
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path

import numba
from numba.core import caching

from ._host import PREFETCH_BLOCK_MAX_BYTES, STRIP_MAX_BYTES

try:
    import fcntl
except ImportError:  # Windows: no flock; one compiling process at a time (warm_up runs one job)
    fcntl = None

LOCKS = fcntl is not None  # whether concurrent compilers are safe here

_HERE = Path(__file__).resolve().parent
SOURCES = (
    "_numba_loops.py", "_numba_rows.py", "_numba_reduce.py", "_numba_channels.py", "_numba_fp.py", "_numba_stream.py",
    "_numba_vrows.py", "_numba_cache.py",
    "_numba_stages.py", "_plan.py",
)  # fmt: skip
# ... and on this host's thresholds, which the kernels compile in (_host.STRIP_MAX_BYTES and
# PREFETCH_BLOCK_MAX_BYTES: from its caches), so that a cache copied from a machine with other caches is not loaded.
SOURCES_HASH = hashlib.sha256(
    b"".join((_HERE / name).read_bytes() for name in SOURCES)
    + b"STRIP_MAX_BYTES=%d PREFETCH_BLOCK_MAX_BYTES=%d" % (STRIP_MAX_BYTES, PREFETCH_BLOCK_MAX_BYTES)
).digest()


class _KernelSources:
    """Mixin: a kernel module's functions are as fresh as the kernel sources taken together."""

    @classmethod
    def from_function(cls, py_func, py_file):
        path = Path(py_file).resolve()
        if path.name not in SOURCES or path.parent != _HERE:
            return None  # any other function: Numba's own locators
        return super().from_function(py_func, py_file)

    def get_source_stamp(self):
        return SOURCES_HASH


def _register() -> None:
    """Put a kernel-sources twin before each of Numba's file-backed locators (once per process).
    This reaches into numba.core.caching's locator list, which Numba keeps private (checked
    with Numba 0.68)."""
    locators = caching.CacheImpl._locator_classes
    if any(issubclass(c, _KernelSources) for c in locators):
        return
    for base in list(locators):  # each of Numba's locators gets its twin, tried just before it
        if issubclass(base, caching._SourceFileBackedLocatorMixin):
            twin = type(f"KernelSources{base.__name__}", (_KernelSources, base), {})
            locators.insert(locators.index(base), twin)


LOCK_SH, LOCK_EX = (fcntl.LOCK_SH, fcntl.LOCK_EX) if LOCKS else (0, 0)


class _LockedCacheFile(caching.IndexDataCacheFile):
    """Numba's index-and-data cache file, read under a shared lock and written under an exclusive
    one (on ``fbnops-kernels.lock`` in the cache directory), so concurrent compilers never mix
    their entries."""

    @contextlib.contextmanager
    def _locked(self, mode: int):
        if not LOCKS:
            yield
            return
        with open(Path(self._cache_path) / "fbnops-kernels.lock", "a") as lock:
            fcntl.flock(lock, mode)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def save(self, key, data):
        with self._locked(LOCK_EX):
            super().save(key, data)

    def load(self, key):
        with self._locked(LOCK_SH):
            return super().load(key)


def cached_njit(**options):
    """``numba.njit(cache=True, nogil=True, **options)`` with the kernel-sources stamp and the
    locked cache file.  Every entry point releases the GIL, as the Cython kernels do: a serial
    twin runs a whole call in one go."""
    _register()
    jit = numba.njit(cache=True, nogil=True, **options)

    def compile_cached(func):
        dispatcher = jit(func)
        dispatcher._cache._cache_file.__class__ = _LockedCacheFile  # Numba builds it; we add the lock
        return dispatcher

    return compile_cached
