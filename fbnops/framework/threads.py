"""Thread count for the parallel kernels: one setting shared by every backend.

The default, read once on first use (importing fbnops changes nothing):

1. ``FBNOPS_NUM_THREADS``, if set: a positive integer, else InvalidArgumentError;
2. else ``OMP_NUM_THREADS`` (its first entry, as OpenMP reads ``"4,2"``), if it is a
   positive integer; anything else there is ignored with a warning, as libgomp does;
3. else the cores this process may run on (its CPU affinity: taskset/cgroup limits count);
   each kernel then uses only those that other processes leave idle (:mod:`.load`).

Counts above :data:`MAX_THREADS` (``max(64, 4 x cores)``) are clamped to it with a
warning: the kernels are memory bound, and thousands of OS threads would only thrash.

fork: OpenMP (libgomp) and Numba's thread pools do not survive ``fork()``.  A child
forked after the parent ran a parallel kernel runs every kernel on one thread
(:func:`serial_after_fork`); the results are the same bits, since the work partition
never depends on the thread count.
"""

from __future__ import annotations

import contextlib
import operator
import os
import threading
import warnings
from collections.abc import Iterator

from .errors import InvalidArgumentError
from .load import idle_cores

__all__ = [
    "set_num_threads",
    "get_num_threads",
    "kernel_threads",
    "default_num_threads",
    "configured_count",
    "setting_kept",
    "MAX_THREADS",
]


def _available_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


MAX_THREADS: int = max(64, 4 * _available_cores())


def _checked(n: object, name: str) -> int:
    """``n`` as a thread count: a positive integer, clamped to MAX_THREADS with a warning."""
    if isinstance(n, bool):
        raise InvalidArgumentError(f"{name} must be a positive integer, got {n!r}")
    try:
        value = operator.index(n)
    except TypeError:
        raise InvalidArgumentError(f"{name} must be a positive integer, got {n!r}") from None
    if value < 1:
        raise InvalidArgumentError(f"{name} must be a positive integer, got {n!r}")
    if value > MAX_THREADS:
        warnings.warn(f"{name}={value} clamped to {MAX_THREADS} threads", RuntimeWarning, stacklevel=3)
        return MAX_THREADS
    return value


def _parse(text: str, name: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise InvalidArgumentError(f"{name} must be a positive integer, got {text!r}") from None
    return _checked(value, name)


def _default() -> tuple[int, bool]:
    """The default count, and whether it is the cores (which kernels then adapt to the load)."""
    env = os.environ.get("FBNOPS_NUM_THREADS", "").strip()
    if env:
        return _parse(env, "FBNOPS_NUM_THREADS"), False
    omp = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if omp:
        try:
            return _parse(omp, "OMP_NUM_THREADS"), False
        except InvalidArgumentError as e:
            warnings.warn(f"{e}; ignored", RuntimeWarning, stacklevel=3)
    return _available_cores(), True


def default_num_threads() -> int:
    """The count kernels use until set_num_threads is called (the environment's, else the cores)."""
    return _default()[0]


_num_threads: list[int | None] = [None]
_from_cores = [False]  # the count is the default (the cores), not one the user chose


class _ThisThread(threading.local):
    configured = False  # inside configured_count() on this thread (a class attribute: no lookup error)


_this_thread = _ThisThread()


def set_num_threads(n: int) -> None:
    """Use ``n`` threads in every kernel from now on (``1 <= n``; above MAX_THREADS, clamped)."""
    _num_threads[0] = _checked(n, "num_threads")
    _from_cores[0] = False


def get_num_threads() -> int:
    """The number of threads every kernel uses (see :func:`set_num_threads`)."""
    if _num_threads[0] is None:
        _num_threads[0], _from_cores[0] = _default()
    return _num_threads[0]


# os.environ's own mapping, of bytes on POSIX (os.environ writes to it, as monkeypatch.setenv
# does): one dict lookup where os.environ.get takes four Python calls, which every kernel call
# paid, and paid most right after a large pass had left the interpreter's memory out of cache
# (15 us against 2.6 after a 20 MB one).
_ENVIRON_BYTES = getattr(os.environ, "_data", None) if os.name == "posix" else None
if not isinstance(_ENVIRON_BYTES, dict):  # (not CPython's os.environ: read it the usual way)
    _ENVIRON_BYTES = None


def _adaptive_turned_off() -> bool:
    """Whether FBNOPS_ADAPTIVE_THREADS is 0 (read at every call, so a change applies at once)."""
    if _ENVIRON_BYTES is not None:
        value = _ENVIRON_BYTES.get(b"FBNOPS_ADAPTIVE_THREADS")
        return value is not None and value.strip() == b"0"
    return os.environ.get("FBNOPS_ADAPTIVE_THREADS", "1").strip() == "0"


def kernel_threads() -> int:
    """Threads for the next parallel kernel: the configured count, or, when that is the default
    (the cores), the cores other processes leave idle (:mod:`fbnops.framework.load`)."""
    n = get_num_threads()
    if n > 1 and _from_cores[0] and not _this_thread.configured and not _adaptive_turned_off():
        return idle_cores(n)
    return n


@contextlib.contextmanager
def configured_count() -> Iterator[None]:
    """Within the block, the kernels this thread starts use the configured count even where it is
    the default, not the cores other processes leave idle; other threads still adapt.  (A warm-up
    has to reach the parallel kernels on a machine that its own processes keep busy.)"""
    before = _this_thread.configured
    _this_thread.configured = True
    try:
        yield
    finally:
        _this_thread.configured = before


@contextlib.contextmanager
def setting_kept() -> Iterator[None]:
    """On leaving the block the setting is the one on entering it, the default (adaptive) included:
    a set_num_threads inside the block is undone (the CLI's --threads, a benchmark's, a test's)."""
    saved = (_num_threads[0], _from_cores[0])
    try:
        yield
    finally:
        _num_threads[0], _from_cores[0] = saved


# --------------------------------------------------------------------------- fork
_fork = {"parallel_ran": False, "serial": False, "hooked": False}
_fork_lock = threading.Lock()


def _after_fork_in_child() -> None:
    if _fork["parallel_ran"]:
        _fork["serial"] = True


def note_parallel() -> None:
    """Called by a backend before it starts a parallel region (cheap after the first call)."""
    if not _fork["parallel_ran"]:
        with _fork_lock:
            if not _fork["hooked"] and hasattr(os, "register_at_fork"):
                os.register_at_fork(after_in_child=_after_fork_in_child)
                _fork["hooked"] = True
            _fork["parallel_ran"] = True


def serial_after_fork() -> bool:
    """True in a process forked after its parent ran a parallel kernel: its thread pools are gone."""
    return _fork["serial"]
