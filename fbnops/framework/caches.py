"""The CPU caches of this machine, as Linux reports them for cpu0 (sysfs), and the fields of
/proc/cpuinfo (its vendor, model, flags and clock).

The kernels' plan reads the last-level cache to decide how a forward's reductions walk the
input (``fbnops.kernels._host.STRIP_MAX_BYTES``) and, with the CPU's vendor, from what size a
channels-last apply streams its output (``STREAM_ROWS_MIN_BYTES``); the benchmarks print the
caches and size their in-cache cases by L2.  Elsewhere than Linux, or where sysfs says nothing,
the sizes are unknown (an empty dict) and callers use their own defaults.
"""

from __future__ import annotations

import functools
import glob
from pathlib import Path

__all__ = ["cache_sizes", "last_level_cache_bytes", "cpuinfo_field", "cpu_vendor"]

_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _bytes(text: str) -> int | None:
    """sysfs's size text ("48K", "32768K", "1M") in bytes, or None if it is something else."""
    digits, unit = (text[:-1], text[-1]) if text[-1:] in _UNITS else (text, "")
    return int(digits) * _UNITS.get(unit, 1) if digits.isdigit() else None


@functools.lru_cache(maxsize=1)
def cache_sizes() -> dict[str, int]:
    """cpu0's caches by name ("L1d", "L1i", "L2", "L3"), in bytes, innermost first."""
    found = []
    for index in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*"):
        try:
            level, kind, size = (Path(index, n).read_text().strip() for n in ("level", "type", "size"))
        except OSError:
            continue
        nbytes = _bytes(size)
        if nbytes and level.isdigit():
            suffix = {"Data": "d", "Instruction": "i"}.get(kind, "")
            found.append((int(level), suffix, nbytes))
    return {f"L{level}{suffix}": nbytes for level, suffix, nbytes in sorted(found)}


def last_level_cache_bytes() -> int | None:
    """The size of the outermost data (or unified) cache, or None where it is unknown."""
    data = [nbytes for name, nbytes in cache_sizes().items() if not name.endswith("i")]
    return data[-1] if data else None


def cpuinfo_field(name: str) -> str | None:
    """The first value of the field ``name`` in /proc/cpuinfo (the first CPU's), or None where
    there is none (or no /proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == name:
                    return value.strip()
    except OSError:
        pass
    return None


@functools.lru_cache(maxsize=1)
def cpu_vendor() -> str | None:
    """The CPU's vendor as /proc/cpuinfo names it ("AuthenticAMD", "GenuineIntel"), or None."""
    return cpuinfo_field("vendor_id") or None
