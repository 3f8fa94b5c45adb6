"""Numba's disk cache for the kernels: entries written by concurrent processes are all kept, each
under its own key (Numba itself writes its index and data files without a lock)."""

from __future__ import annotations

import multiprocessing
import threading

import pytest

from fbnops.testing import extras


@pytest.fixture
def cache_module():
    extras.require_backend("numba")
    from fbnops.kernels import _numba_cache

    if not _numba_cache.LOCKS:
        pytest.skip("no fcntl.flock on this platform: warm_up compiles in one process")
    return _numba_cache


def _cache_file(module, directory):
    return module._LockedCacheFile(cache_path=str(directory), filename_base="kernel", source_stamp=b"stamp")


def _save_many(directory, writer: int, count: int) -> None:
    from fbnops.kernels import _numba_cache

    cache_file = _cache_file(_numba_cache, directory)
    for i in range(count):
        cache_file.save(("key", writer, i), ("data", writer, i))


def test_concurrent_writers_keep_every_entry_under_its_own_key(cache_module, tmp_path):
    """Two processes each save 60 entries into one index at once. Unlocked, a writer reads the index,
    another writes its own, and the first overwrites it (entries lost) or picks the same data file
    for a different key (an entry that loads another's data)."""
    fork = multiprocessing.get_context("fork")
    writers = [fork.Process(target=_save_many, args=(tmp_path, w, 60)) for w in range(2)]
    for p in writers:
        p.start()
    for p in writers:
        p.join(120)
        assert p.exitcode == 0
    cache_file = _cache_file(cache_module, tmp_path)
    for w in range(2):
        for i in range(60):
            assert cache_file.load(("key", w, i)) == ("data", w, i)


def test_a_write_waits_for_a_reader_and_a_read_for_a_writer(cache_module, tmp_path):
    """save takes the directory's lock exclusively and load shares it (the lock a test holds here)."""
    import fcntl

    cache_file = _cache_file(cache_module, tmp_path)
    cache_file.save("a", 1)
    for held, call in ((fcntl.LOCK_SH, lambda: cache_file.save("b", 2)), (fcntl.LOCK_EX, lambda: cache_file.load("a"))):
        with open(tmp_path / "fbnops-kernels.lock", "a") as lock:
            fcntl.flock(lock, held)
            done = threading.Event()
            caller = threading.Thread(target=lambda call=call, done=done: (call(), done.set()))
            caller.start()
            assert not done.wait(0.3)  # blocked behind the held lock
            fcntl.flock(lock, fcntl.LOCK_UN)
        assert done.wait(30)
        caller.join()
    assert cache_file.load("a") == 1 and cache_file.load("b") == 2


def test_every_cached_kernel_writes_through_the_lock(cache_module):
    """Each dispatcher cached_njit makes (the loops' and stages' twins, the channel math) has the locked file."""
    import numba.core.dispatcher

    from fbnops.kernels import _numba_channels, _numba_loops, _numba_stages

    found = []
    for module in (_numba_loops, _numba_channels, _numba_stages):
        for value in vars(module).values():
            for d in value if isinstance(value, tuple) else (value,):
                if isinstance(d, numba.core.dispatcher.Dispatcher) and d._cache is not None:
                    found.append(d)
    assert len(found) >= 8
    cached = [d for d in found if type(d._cache).__name__ != "NullCache"]
    assert cached and all(isinstance(d._cache._cache_file, cache_module._LockedCacheFile) for d in cached)


def test_warm_up_reaches_the_parallel_twins_on_a_busy_machine(monkeypatch):
    """With every core busy elsewhere (a parallel warm-up's other process), the default thread count
    would be 1 and the large shapes would run only the serial twins, leaving the parallel ones to
    compile inside a user's first call (or a test's timeout)."""
    extras.require_backend("numba")
    import numba

    from fbnops.framework import threads
    from fbnops.kernels import _numba_loops as loops
    from fbnops.kernels import _numba_stages as stage_drivers
    from fbnops.kernels import numba_backend as nb

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("Numba has one thread here: the parallel twins never run")
    monkeypatch.setattr(threads, "_num_threads", [2])  # the adaptive default of 2 cores, whatever the environment sets
    monkeypatch.setattr(threads, "_from_cores", [True])
    monkeypatch.delenv("FBNOPS_ADAPTIVE_THREADS", raising=False)
    monkeypatch.setattr(threads, "idle_cores", lambda n: 1)  # the machine as a parallel warm-up leaves it
    assert threads.kernel_threads() == 1
    launched = []
    launch = nb._launch
    monkeypatch.setattr(nb, "_launch", lambda twins, n, *args: launched.append((twins, n)) or launch(twins, n, *args))
    nb.warm_up_part("float32")
    parallel = {id(twins) for twins, n in launched if n > 1}
    for region in (loops.drive, stage_drivers.reduce_samples, stage_drivers.reduce_totals, stage_drivers.apply):
        assert id(region) in parallel
    assert threads.kernel_threads() == 1  # the adaptive default is back after the warm-up
