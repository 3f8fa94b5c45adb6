"""Thread count for the parallel kernels: one setting shared by every backend.

Default: the ``FBNOPS_NUM_THREADS`` environment variable if set, else the cores
this process may run on (its CPU affinity, so cgroup/taskset limits count).
"""

from __future__ import annotations

import os

__all__ = ["set_num_threads", "get_num_threads", "default_num_threads"]


def default_num_threads() -> int:
    env = os.environ.get("FBNOPS_NUM_THREADS")
    if env:
        try:
            n = int(env)
        except ValueError:
            raise ValueError(f"FBNOPS_NUM_THREADS must be a positive integer, got {env!r}") from None
        if n < 1:
            raise ValueError(f"FBNOPS_NUM_THREADS must be a positive integer, got {env!r}")
        return n
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


_num_threads = [None]


def set_num_threads(n: int) -> None:
    """Use ``n`` threads in every kernel from now on (``n >= 1``)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"num_threads must be a positive integer, got {n!r}")
    _num_threads[0] = n


def get_num_threads() -> int:
    if _num_threads[0] is None:
        _num_threads[0] = default_num_threads()
    return _num_threads[0]
