"""One synchronized sum: a header that every rank checks, and float64 totals in rank order.

The first collective of each op carries a small header next to the payload::

    [status, samples, count, channels, dtype, data_format, digest] + payload

so that a rank whose input failed validation, or whose attributes differ, still joins
the collective, and every rank then raises the same error (no rank waits forever
for a peer that gave up).  The totals are the gathered float64 rows added in rank
order, never an MPI reduction, whose order belongs to the library.

Past :data:`REDUCE_SCATTER_FROM` ranks, a communicator with ``alltoall`` sums by
reduce-scatter instead: rank ``j`` adds slice ``j`` of every rank's row (still in rank
order, so the bits are the same) and an allgather shares the slices.  Each rank then
receives about twice the payload instead of ``size`` times it.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

from ..framework import errors as _errors
from .comm import Communicator, sum_in_rank_order

__all__ = ["Header", "exchange", "REDUCE_SCATTER_FROM"]

REDUCE_SCATTER_FROM = 32  # ranks; below it one allgather (one latency) is cheaper
HEADER = 7
FIELDS = ("status", "samples", "count", "channels", "dtype", "data_format", "digest")
_ERRORS = (
    None,
    _errors.InvalidArgumentError,
    _errors.ResourceExhaustedError,
    _errors.UnimplementedError,
    _errors.InternalError,
)
_ERROR_TEXT = 1024  # bytes of the failing rank's message, sent only when some rank failed
_FORMATS = ("NHWC", "NCHW", "NDHWC", "NCDHW")


def _code(name: str) -> float:
    return float(zlib.crc32(name.encode()))  # < 2**32: exact in float64


class Header:
    """This rank's header: its status (and error), its shard and a digest of its attributes."""

    def __init__(self, op: str):
        self.op = op
        self.error: BaseException | None = None
        self.values = np.zeros(HEADER, np.float64)

    def describe(self, *, samples: int, count: int, channels: int, dtype: np.dtype, data_format: str, attrs) -> None:
        fmt = _FORMATS.index(data_format) if data_format in _FORMATS else -1
        digest = _code(repr(sorted((k, repr(v)) for k, v in attrs.items())))
        self.values[1:] = (samples, count, channels, _code(np.dtype(dtype).name), fmt, digest)

    def fail(self, error: BaseException, channels_guess: int) -> None:
        self.error = error
        kind = next((i for i, t in enumerate(_ERRORS) if t is not None and type(error) is t), 1)
        if not isinstance(error, _errors.OpError):
            kind = _ERRORS.index(_errors.InternalError)
        self.values[:] = 0
        self.values[0] = kind
        self.values[3] = channels_guess


def exchange(
    comm: Communicator, payload: np.ndarray, header: Header | None = None, *, reduce_scatter: bool | None = None
) -> tuple[np.ndarray | None, np.ndarray]:
    """Gather ``header`` (if any) with ``payload``; return all headers ``(size, 7)`` and the rank-order total.

    Raises on every rank, with the same message, if any rank failed or disagreed.
    """
    payload = np.ascontiguousarray(payload, dtype=np.float64).ravel()
    h = header.values if header is not None else np.zeros(0)
    if reduce_scatter is None:
        reduce_scatter = comm.size >= REDUCE_SCATTER_FROM and hasattr(comm, "alltoall")
    if reduce_scatter and comm.size > 1:
        headers, total = _reduce_scatter(comm, h, payload, header)
    else:
        rows = comm.allgather(np.concatenate([h, payload]))
        headers = rows[:, : h.size] if header is not None else None
        if header is not None:
            check(comm, headers, header)
        total = sum_in_rank_order(rows[:, h.size :])
    return headers, total


def _reduce_scatter(comm, h: np.ndarray, payload: np.ndarray, header: Header | None):
    p, k = comm.size, payload.size
    m = -(-k // p)  # slice length (the last slices are padded with zeros)
    padded = np.zeros(p * m)
    padded[:k] = payload
    sends = np.concatenate([np.broadcast_to(h, (p, h.size)), padded.reshape(p, m)], axis=1)
    got = comm.alltoall(sends)  # row i: rank i's header and its slice number `comm.rank`
    headers = got[:, : h.size] if header is not None else None
    if header is not None:
        check(comm, headers, header)
    mine = sum_in_rank_order(got[:, h.size :])
    return headers, comm.allgather(mine).ravel()[:k]


def check(comm: Communicator, headers: np.ndarray, header: Header) -> None:
    """Raise the same error on every rank if any rank failed, or the ranks disagree."""
    status = headers[:, 0]
    if status.any():
        # Only now (all ranks know it) the failing ranks' messages travel, in fixed-size buffers.
        text = np.zeros(_ERROR_TEXT, np.uint8)
        if header.error is not None:
            raw = getattr(header.error, "message", None) or f"{type(header.error).__name__}: {header.error}"
            raw = raw.encode()[:_ERROR_TEXT]
            text[: len(raw)] = np.frombuffer(raw, np.uint8)
        texts = comm.allgather(text)
        bad = [int(r) for r in np.flatnonzero(status)]
        first = bad[0]
        message = bytes(texts[first]).rstrip(b"\0").decode(errors="replace")
        others = f" (and on rank(s) {', '.join(map(str, bad[1:]))})" if len(bad) > 1 else ""
        raise _ERRORS[int(status[first])](f"{header.op} failed on rank {first}: {message}{others}", header.op)
    for i, field in enumerate(FIELDS[3:], start=3):
        column = headers[:, i]
        if (column != column[0]).any():
            what = "the attributes (epsilon, exponential_avg_factor, is_training or the mode)"
            if field != "digest":
                what = f"{field}: " + ", ".join(f"{_show(field, v)} on rank {r}" for r, v in enumerate(column))
            raise _errors.InvalidArgumentError(
                f"ranks disagree on {what}; rank(s) {_differing(column)} differ from rank 0. Every rank must pass "
                f"the same channels, dtype, data_format and attributes",
                header.op,
            )


def _show(field: str, value: float) -> str:
    if field == "data_format":
        return _FORMATS[int(value)] if 0 <= value < len(_FORMATS) else "?"
    if field == "dtype":
        return next((n for n in ("float32", "float16", "bfloat16", "float64") if _code(n) == value), "?")
    return str(int(value))


def _differing(column: Sequence[float]) -> str:
    return ", ".join(str(r) for r, v in enumerate(column) if v != column[0])
