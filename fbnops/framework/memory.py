"""Can this machine hold it?  One check, used before any large allocation.

A zero-stride (broadcast) view or an ``__array_interface__`` can claim any shape
without owning the bytes; a contiguous copy, a constant or an output would need
them all.  Calls that would need more than half of the memory available now are
refused with ``ResourceExhaustedError`` (TensorFlow's "OOM when allocating")
instead of being killed by the kernel's OOM killer.
"""

from __future__ import annotations

import os

from .errors import ResourceExhaustedError

__all__ = ["check_fits", "fits", "available_bytes"]

SMALL = 256 << 20  # smaller needs cannot exhaust memory: skip reading /proc/meminfo


def _physical() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 40


PHYSICAL = _physical()


def available_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return PHYSICAL


def fits(nbytes: int) -> bool:
    return nbytes <= SMALL or nbytes <= available_bytes() // 2


def check_fits(nbytes: int, what: str, op: str | None = None) -> None:
    """Raise ResourceExhaustedError naming ``what`` if ``nbytes`` cannot be allocated now."""
    if not fits(nbytes):
        raise ResourceExhaustedError(
            f"OOM when allocating {what}: {nbytes} bytes needed, {available_bytes()} available", op
        )
