"""The kernels' work plan: one source for both compiled backends.

The tunables (row width, float32 block length, item sizes), the partition of the
work into *items* and the thread policy are decided here.  The Numba backend calls
:func:`plan` and :func:`threads_for`; the Cython kernels get the same constants
from ``_cython/_plan_constants.pxi``, which :func:`render_pxi` generates from this
module (``python -m fbnops.kernels._plan`` rewrites it; a test keeps it in step),
and their C ``make_plan`` (``_cython/_plan.pxd``) is tested equal to :func:`plan`.

The partition depends on the shape (and the element size) only, never on the
thread count, and partials are combined in a fixed order: that is why the results
are bitwise identical for any number of threads.
"""

from __future__ import annotations

import math
import sys
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from ..framework.errors import InvalidArgumentError
from ..framework.threads import kernel_threads, serial_after_fork

# The tunables, in one place.
LANES = 512  # minimum row width: folded channels-last rows, channel blocks of small planes
MAX_W = 2 * LANES  # widest channels-first row: a block of ceil(LANES / inner) planes
BLOCK_ROWS = 128  # rows summed in float32 lanes before flushing into float64
ROW_ITEM_ELEMS = 32768  # channels-last: target elements per item
MAX_ROW_ITEMS = 64
PLANE_ITEM_BYTES = 4 << 20  # channels-first: bytes of (x, dy) per item: about one L2
MIN_ITEMS = 16  # channels-first: split channels so that few channels still share out
STREAM_MIN_BYTES = 8 << 20  # outputs this large are written with non-temporal stores (past the ~8 MB of L3 one gets)
SERIAL_BELOW = 1 << 15  # below this many elements one thread beats waking a team (~1-2 us per region)

# Emitted into the Cython build as compile-time constants (array bounds need them).
PXI_CONSTANTS = (
    "LANES", "MAX_W", "BLOCK_ROWS", "ROW_ITEM_ELEMS", "MAX_ROW_ITEMS", "PLANE_ITEM_BYTES", "MIN_ITEMS",
    "STREAM_MIN_BYTES",
)  # fmt: skip
PXI_FILE = Path(__file__).parent / "_cython" / "_plan_constants.pxi"


class Plan(NamedTuple):
    """The work partition of one ``(outer, C, inner)`` shape.

    Every element is visited as part of a *row* of ``width`` lanes, lane ``j``
    always holding the same channel.  Channels-last (inner == 1): rows of C
    channels, ``fold`` input rows folded into one when C is small; items are
    ranges of the ``rows`` folded rows.  Channels-first: rows of ``block`` whole
    small planes side by side (``run`` = inner lanes per channel), or LANES-wide
    pieces of one large plane (block 1); items are (channel block, batch range)
    pairs, ``per_channel`` batch ranges per block.
    """

    channels_last: bool
    outer: int
    C: int
    inner: int
    width: int
    fold: int
    rows: int
    nitems: int
    block: int
    run: int
    per_channel: int


def check_plan_args(outer: int, C: int, inner: int, itemsize: int) -> None:
    """Refuse sizes no kernel is ever called with (empty inputs never reach a kernel): the
    plan divides by them."""
    for name, value in (("outer", outer), ("C", C), ("inner", inner), ("itemsize", itemsize)):
        if isinstance(value, bool) or not hasattr(value, "__index__") or value < 1:
            raise InvalidArgumentError(f"plan: {name} must be a positive integer, got {value!r}")


@lru_cache(maxsize=4096)
def plan(outer: int, C: int, inner: int, itemsize: int = 4) -> Plan:
    """The partition for a shape: a function of the shape and element size only."""
    check_plan_args(outer, C, inner, itemsize)
    if inner == 1:
        fold = 1
        if C < LANES:  # fold rows until the row is a multiple of 16 lanes and >= LANES
            fold = 16 // math.gcd(C, 16)
            while fold * C < LANES and fold < outer:
                fold *= 2
        rows = -(-outer // fold)
        nitems = max(1, min(-(-(outer * C) // ROW_ITEM_ELEMS), MAX_ROW_ITEMS, rows))
        return Plan(True, outer, C, inner, C * fold, fold, rows, nitems, 0, 0, 0)
    if inner < LANES:  # small planes: a row is `block` whole planes (contiguous in memory)
        block = min(C, -(-LANES // inner))
        run, width = inner, block * inner
    else:  # large planes: rows of LANES lanes, all of one channel
        block, run, width = 1, LANES, LANES
    nblocks = -(-C // block)
    k = -(-(outer * block * inner * 2 * itemsize) // PLANE_ITEM_BYTES)
    k = max(k, -(-MIN_ITEMS // nblocks))
    per_channel = max(1, min(k, outer))
    return Plan(False, outer, C, inner, width, 1, 0, nblocks * per_channel, block, run, per_channel)


def fused(p: Plan) -> bool:
    """Channels-first items that hold a whole channel block run reduce -> coefficients -> apply
    back to back while the block is in cache (one parallel region instead of three)."""
    return not p.channels_last and p.per_channel == 1


def threads_for(nelems: int) -> int:
    """Threads for a kernel over ``nelems`` elements: one below SERIAL_BELOW (and in a
    child forked after the parent ran a parallel kernel), else the configured count (the
    idle cores, when it is the default)."""
    if nelems < SERIAL_BELOW or serial_after_fork():
        return 1
    return kernel_threads()


def render_pxi() -> str:
    lines = [
        "# GENERATED from fbnops/kernels/_plan.py by `python -m fbnops.kernels._plan`: do not edit.",
        "cdef enum:",
    ]
    lines += [f"    {name} = {globals()[name]}" for name in PXI_CONSTANTS]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    PXI_FILE.write_text(render_pxi())
    print(f"wrote {PXI_FILE}", file=sys.stderr)
