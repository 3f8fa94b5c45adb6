"""How many cores other processes keep busy: by default the kernels use only the idle ones.

An OpenMP team joins at the end of every parallel region, so a call is as slow as its slowest
thread. A thread that shares its core with another busy process gets that core one time
slice at a time (milliseconds), so on a 2-core machine with one core busy a (32,7,7,512)
gradient took 60 ms at 2 threads and 1 ms at 1. Giving the kernels only the cores that are
idle removes the wait; the results do not change (the work partition never depends on the
thread count, so the bits are the same).

The estimate is the machine's busy time minus this process's own CPU time, over the last
:data:`WINDOW` seconds, from ``/proc/stat`` and ``getrusage`` (about 50 us, once a window).
It applies to the default thread count only: an explicit ``set_num_threads(n)``,
``FBNOPS_NUM_THREADS`` or ``OMP_NUM_THREADS`` is used as given, and
``FBNOPS_ADAPTIVE_THREADS=0`` turns it off. Where ``/proc/stat`` is missing, nothing changes.
"""

from __future__ import annotations

import math
import os
import resource
import threading
import time

__all__ = ["busy_elsewhere", "idle_cores", "FREE_BELOW", "WINDOW"]

WINDOW = 0.25  # seconds between two readings: long enough to average out one busy burst
_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _machine_busy_seconds() -> float | None:
    """Seconds every core of the machine has spent busy since boot (the ``cpu`` line of /proc/stat)."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != b"cpu":
        return None
    ticks = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
    return (sum(ticks) - ticks[3] - ticks[4]) / _HZ


def _own_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # every thread of this process, spinning ones too
    return usage.ru_utime + usage.ru_stime


class _Probe:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last: tuple[float, float, float] | None = None  # (wall, machine busy, own)
        self.busy = 0.0

    def read(self) -> float:
        now = time.monotonic()
        last = self.last
        if last is not None and now - last[0] < WINDOW:
            return self.busy
        with self.lock:
            machine = _machine_busy_seconds()
            if machine is None:
                return 0.0
            sample = (now, machine, _own_seconds())
            if self.last is not None and now > self.last[0]:
                wall = now - self.last[0]
                other = (machine - self.last[1]) - (sample[2] - self.last[2])
                self.busy = max(0.0, other / wall)
            self.last = sample
            return self.busy


_probe = _Probe()


def busy_elsewhere() -> float:
    """Cores kept busy by other processes over the last window (0.0 when unknown)."""
    return _probe.read()


# A core counts as free only if other processes use at most this much of it.  A team thread on
# a core shared with a busy process waits whole time slices, and the team with it.  What a
# busy process gets is also not what it wants: while this process runs a 2-thread team (or
# another library's), a process that would keep one core busy is measured at about half a
# core, and rounding 2 - 0.5 up gave it that core back (a (32,28,28,128) gradient under load:
# 6.5 ms by default against 3.0 ms on one thread, benchmarks/bench_loaded.py).
FREE_BELOW = 0.3


def idle_cores(cores: int) -> int:
    """Of ``cores``, how many other processes leave free (at least 1): a core is free when the
    others use at most FREE_BELOW of it."""
    return max(1, min(cores, math.floor(cores - busy_elsewhere() + FREE_BELOW)))
