"""One bounds proof for strided buffers, shared by every surface that takes raw strides.

A strided tensor is ``shape`` (elements per axis), ``strides`` (in **elements**, any
sign, 0 for broadcast), the ``itemsize`` of one element and a ``base offset`` in
**bytes** into a buffer of ``buffer_size`` bytes.  Element ``i`` lives at byte
``offset + itemsize * sum(i[k] * strides[k])`` and occupies ``itemsize`` bytes.

:func:`byte_span` gives the lowest byte any index touches and one past the highest,
for any signs of the strides; :func:`check_in_bounds` raises unless that whole span
lies inside ``[0, buffer_size)``; :func:`check_no_overlap` raises if two different
indices of an *output* would write the same byte (inputs may broadcast with 0
strides).  All arithmetic is on Python ints, so hostile values cannot wrap; any
address at or beyond ``2**63`` is refused (no C pointer offset could hold it).
The DirectML and oneDNN Graph mirrors call these before any kernel runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["StridedBoundsError", "byte_span", "check_in_bounds", "check_no_overlap", "ADDRESS_LIMIT"]

ADDRESS_LIMIT = 2**63
# Up to this many elements an overlap that the quick ordering test cannot rule out is decided exactly.
_EXACT_OVERLAP_ELEMENTS = 1 << 20

ErrorFactory = Callable[[str], Exception]


class StridedBoundsError(ValueError):
    """A strided layout that reaches outside its buffer or writes one byte twice."""


def _ints(values: Sequence[int], what: str, error: ErrorFactory) -> list[int]:
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise error(f"{what} must be integers, got {v!r}")
        out.append(int(v))
    return out


def byte_span(
    shape: Sequence[int],
    strides: Sequence[int],
    itemsize: int,
    offset: int = 0,
    *,
    error: ErrorFactory = StridedBoundsError,
) -> tuple[int, int]:
    """``(lowest, end)``: the lowest byte any index touches and one past the highest.

    An empty tensor (a zero in ``shape``) touches nothing: ``(offset, offset)``.
    """
    shape = _ints(shape, "sizes", error)
    strides = _ints(strides, "strides", error)
    if len(shape) != len(strides):
        raise error(f"{len(shape)} sizes but {len(strides)} strides")
    if any(s < 0 for s in shape):
        raise error(f"sizes {shape} must not be negative")
    if isinstance(itemsize, bool) or not isinstance(itemsize, (int, np.integer)) or itemsize <= 0:
        raise error(f"element size {itemsize!r} must be a positive integer")
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or offset < 0:
        raise error(f"offset {offset!r} must be a non-negative integer")
    if 0 in shape:
        return offset, offset
    low = high = 0  # in elements, relative to the base
    for size, stride in zip(shape, strides, strict=True):
        reach = (size - 1) * stride
        if reach < 0:
            low += reach
        else:
            high += reach
    return offset + low * itemsize, offset + (high + 1) * itemsize


def check_in_bounds(
    shape: Sequence[int],
    strides: Sequence[int],
    itemsize: int,
    offset: int,
    buffer_size: int,
    *,
    what: str = "tensor",
    error: ErrorFactory = StridedBoundsError,
) -> tuple[int, int]:
    """Raise ``error(message)`` unless every byte the layout can touch lies in ``[0, buffer_size)``.

    Returns the span ``(lowest, end)`` it proved.
    """
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or offset < 0:
        raise error(f"{what}: offset {offset!r} must be a non-negative integer")
    if isinstance(buffer_size, bool) or not isinstance(buffer_size, (int, np.integer)) or buffer_size < 0:
        raise error(f"{what}: buffer size {buffer_size!r} must be a non-negative integer")
    if offset >= ADDRESS_LIMIT or buffer_size >= ADDRESS_LIMIT:
        raise error(f"{what}: offset {offset} or buffer size {buffer_size} is beyond 2**63")
    low, end = byte_span(shape, strides, itemsize, int(offset), error=lambda m: error(f"{what}: {m}"))
    if low == end:
        return low, end
    if low < 0 or end > buffer_size or end > ADDRESS_LIMIT:
        raise error(
            f"{what}: sizes {list(shape)} with strides {list(strides)} (elements of {itemsize} bytes) at byte "
            f"offset {offset} touch bytes [{low}, {end}), outside the {buffer_size}-byte buffer"
        )
    return low, end


def _may_overlap_quick(shape: list[int], strides: list[int]) -> bool:
    """False when the axes, ordered by |stride|, each step over everything the smaller ones cover."""
    axes = sorted((abs(t), s) for s, t in zip(shape, strides, strict=True) if s > 1)
    covered = 1  # elements spanned by the axes seen so far
    for stride, size in axes:
        if stride < covered:
            return True
        covered = stride * (size - 1) + covered
    return False


def check_no_overlap(
    shape: Sequence[int],
    strides: Sequence[int],
    itemsize: int,
    *,
    what: str = "output",
    error: ErrorFactory = StridedBoundsError,
) -> None:
    """Raise unless the layout maps every index to its own ``itemsize`` bytes (outputs must not alias)."""
    shape = _ints(shape, "sizes", error)
    strides = _ints(strides, "strides", error)
    low, end = byte_span(shape, strides, itemsize, error=lambda m: error(f"{what}: {m}"))
    if end - low >= ADDRESS_LIMIT:  # before any int64 arithmetic below
        raise error(f"{what}: sizes {shape} with strides {strides} span more than 2**63 bytes")
    if 0 in shape or not _may_overlap_quick(shape, strides):
        return
    count = math.prod(shape)
    if count > _EXACT_OVERLAP_ELEMENTS:
        raise error(
            f"{what}: cannot prove that sizes {shape} with strides {strides} never write one element twice "
            f"(the exact check stops at {_EXACT_OVERLAP_ELEMENTS} elements); use a dense or a simpler layout"
        )
    offsets = np.zeros(1, np.int64)  # every element's offset: exact below the element limit
    for size, stride in zip(shape, strides, strict=True):
        offsets = (offsets[:, None] + np.arange(size, dtype=np.int64) * stride).reshape(-1)
    if np.unique(offsets).size == count:
        return
    raise error(
        f"{what}: sizes {shape} with strides {strides} make two indices write the same element "
        f"(an output layout must not overlap itself)"
    )


def dense_strides(shape: Sequence[int]) -> list[int]:
    """Row-major strides in elements (size-0 and size-1 axes count as 1)."""
    strides, acc = [], 1
    for d in reversed(list(shape)):
        strides.insert(0, acc)
        acc *= max(int(d), 1)
    return strides
