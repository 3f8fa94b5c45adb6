"""One synchronized op on one rank: guarded local stages, and collectives that carry every rank's status.

The first collective of each op carries a header next to the payload::

    [status, samples, count, channels, dtype, data_format, op,
     epsilon, exponential_avg_factor, is_training, reproducible, param_grads] + payload

so that a rank whose input failed validation, or whose attributes differ, still joins
the collective and every rank raises the same error.  The attributes travel as their
values (float64 holds every float32 attr exactly) and are compared bit for bit: no
digest that two different values could share.

Every later collective carries the rank's status word, and the op ends with a status
round: a local stage that fails on one rank (a kernel, a finish step, the running
statistics) makes that rank join the remaining collectives with zeros and its status
set, so every rank raises the same typed error, naming the failing rank, the stage
and the original error, instead of waiting for a peer that gave up.

The totals are the gathered float64 rows added in rank order, never an engine's
reduction.  Past :data:`REDUCE_SCATTER_FROM` ranks, a communicator with ``alltoall``
sums by reduce-scatter instead: rank ``j`` adds slice ``j`` of every rank's row (still
in rank order, so the bits are the same) and an allgather shares the slices.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ..framework import errors as _errors
from . import _tree
from ._failures import describe, error_for, kind_of
from .comm import Communicator, sum_in_rank_order

__all__ = ["Header", "Run", "REDUCE_SCATTER_FROM", "HEADER"]

REDUCE_SCATTER_FROM = 32  # ranks; below it one allgather (one latency) is cheaper
FIELDS = ("status", "samples", "count", "channels", "dtype", "data_format", "op")
ATTRS = ("epsilon", "exponential_avg_factor", "is_training", "reproducible", "param_grads")
HEADER = len(FIELDS) + len(ATTRS)
_ERROR_TEXT = 1024  # bytes of the failing rank's message, sent only when some rank failed
_CHOICES = {
    "dtype": ("float32", "float16", "bfloat16"),
    "data_format": ("NHWC", "NCHW", "NDHWC", "NCDHW"),
    "op": ("FusedBatchNormV3", "FusedBatchNormGradV3"),
    "param_grads": ("global", "local"),
}
_ABSENT = -1.0  # an attribute the op does not have (the gradient has no averaging factor)


def _index(field: str, value: Any) -> float:
    choices = _CHOICES[field]
    return float(choices.index(value)) if value in choices else _ABSENT


@functools.cache
def _dtype_index(dtype: np.dtype) -> float:
    return _index("dtype", np.dtype(dtype).name)  # the name lookup costs microseconds: once per dtype


class Header:
    """This rank's header: its status (and error), its shard and its attributes, as float64 values."""

    def __init__(self, op: str):
        self.op = op
        self.error: BaseException | None = None
        self.stage: str | None = None
        self.values = np.zeros(HEADER, np.float64)
        self.values[FIELDS.index("op")] = _index("op", op)

    def describe(self, *, samples: int, count: int, channels: int, dtype: np.dtype, data_format: str, attrs) -> None:
        values = [samples, count, channels, _dtype_index(dtype), _index("data_format", data_format)]
        values.append(self.values[FIELDS.index("op")])
        for name in ATTRS:
            value = attrs.get(name, _ABSENT)
            values.append(_index(name, value) if name in _CHOICES else float(value))
        self.values[1:] = values  # one store: the header is written on every call

    def fail(self, error: BaseException, channels_guess: int | None = None, stage: str | None = None) -> None:
        """Record the first failure; ``stage`` None means validation (the header's fields are then void)."""
        if self.error is not None:
            return
        self.error, self.stage = error, stage
        if stage is None:
            op = self.values[FIELDS.index("op")]
            self.values[:] = 0
            self.values[FIELDS.index("op")] = op
            self.values[3] = channels_guess or 0
        self.values[0] = kind_of(error)

    @property
    def channels(self) -> int:
        return int(self.values[3])


class _Engine:
    """A communicator whose own failures (an engine error, a broken connection) become a typed
    error naming this rank; ``fbnops.errors`` errors (a peer's failure seen by ThreadComm) pass."""

    def __init__(self, comm: Communicator, op: str):
        self.comm, self.op = comm, op
        self.rank, self.size = comm.rank, comm.size
        self.has_alltoall = hasattr(comm, "alltoall")

    def _call(self, name: str, *args: Any) -> Any:
        try:
            return getattr(self.comm, name)(*args)
        except _errors.OpError:
            raise
        except Exception as e:  # noqa: BLE001 - typed, with the engine's own words
            raise _errors.InternalError(
                f"{self.op} failed on rank {self.rank} in {name}: {describe(e)}", self.op
            ) from e

    def allgather(self, a: np.ndarray) -> np.ndarray:
        return self._call("allgather", a)

    def allgatherv(self, a: np.ndarray, rows: Any) -> list[np.ndarray]:
        return self._call("allgatherv", a, rows)

    def alltoall(self, a: np.ndarray) -> np.ndarray:
        return self._call("alltoall", a)


class Run:
    """One op on one rank: runs its local stages, joins its collectives, and raises what any rank raised."""

    def __init__(self, comm: Communicator, header: Header):
        self.comm, self.header = _Engine(comm, header.op), header
        self.headers: np.ndarray | None = None  # every rank's header, after the first collective

    def stage(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args)``, or None once this rank has failed (then the failure waits for the next collective)."""
        if self.header.error is not None:
            return None
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - every rank raises it at the next collective
            self.header.fail(e, stage=name)
            return None

    @property
    def failed(self) -> bool:
        return self.header.error is not None

    def total(self, payload: np.ndarray | None, width: int) -> np.ndarray:
        """The rank-order total of every rank's ``payload`` (zeros from a rank with none, or that failed)."""
        payload = _payload(payload, width, self.failed)
        first = self.headers is None
        head = self.header.values if first else self.header.values[:1]
        reduce_scatter = self.comm.size >= REDUCE_SCATTER_FROM and self.comm.has_alltoall
        if reduce_scatter:
            heads, total = _reduce_scatter(self.comm, head, payload, self._check if first else self._check_status)
        else:
            rows = self.comm.allgather(np.concatenate([head, payload]))
            heads = rows[:, : head.size]
            (self._check if first else self._check_status)(heads)
            total = sum_in_rank_order(rows[:, head.size :])
        if first:
            self.headers = heads
        return total

    def header_round(self, width: int) -> None:
        """The first collective without a total to compute: the header and a zero payload of ``width``.

        The payload is the length the default mode's first collective carries, so that a rank
        that disagrees on the mode sends a message of the same length (MPI would truncate or
        abort on different ones) and is caught by the header check, on every rank.
        """
        if self.comm.size >= REDUCE_SCATTER_FROM and self.comm.has_alltoall:  # the default mode's collective
            self.total(None, width)
            return
        message = np.zeros(HEADER + width)
        message[:HEADER] = self.header.values
        heads = self.comm.allgather(message)[:, :HEADER]
        self._check(heads)
        self.headers = heads

    @property
    def count(self) -> int:
        """Elements per channel over the global batch (after the first collective)."""
        return int(self.headers[:, 2].sum())

    def tree(self, stage: str, block_sums: Callable[..., np.ndarray] | None, width: int) -> np.ndarray:
        """The canonical-tree total of every rank's per-sample leaves (see :mod:`._tree`), after the
        header round: ``block_sums(start, total, out)`` writes this rank's aligned blocks' sums
        into ``out`` ``(nblocks, width)``, run as the stage ``stage`` (None: a rank without rows)."""
        counts = tuple(int(c) for c in self.headers[:, 1])
        start, split = sum(counts[: self.comm.rank]), _tree.plan(counts)
        nblocks, total = split.rows[self.comm.rank] - 1, split.total
        payload = np.empty((1 + nblocks, width))  # the head row (this rank's status), then the blocks
        if block_sums is None or self.stage(stage, block_sums, start, total, payload[1:]) is None or self.failed:
            payload[1:] = 0.0  # the status says why
        payload[0] = 0.0
        payload[0, 0] = self.header.values[0]
        heads, total_sums = _tree.tree_total(self.comm, payload, counts)
        self._check_status(heads)
        return total_sums

    def close(self) -> None:
        """The status round: a stage that failed after the last collective still reaches every rank."""
        if self.comm.size > 1 or self.failed:
            self._check_status(self.comm.allgather(self.header.values[:1]))

    def _check_status(self, heads: np.ndarray) -> None:
        status = heads[:, 0]
        if not status.any():
            return
        # Only now (all ranks know it) the failing ranks' messages travel, in fixed-size buffers.
        text = np.zeros(_ERROR_TEXT, np.uint8)
        if self.header.error is not None:
            raw = describe(self.header.error, self.header.stage).encode()[:_ERROR_TEXT]
            text[: len(raw)] = np.frombuffer(raw, np.uint8)
        texts = self.comm.allgather(text)
        bad = [int(r) for r in np.flatnonzero(status)]
        first = bad[0]
        message = bytes(texts[first]).rstrip(b"\0").decode(errors="replace")
        others = f" (and on rank(s) {', '.join(map(str, bad[1:]))})" if len(bad) > 1 else ""
        text = f"{self.header.op} failed on rank {first}: {message}{others}"
        raise error_for(int(status[first]), text, self.header.op) from self.header.error

    def _check(self, headers: np.ndarray) -> None:
        """Raise the same error on every rank if any rank failed, or the ranks disagree."""
        self._check_status(headers)
        if len(headers) == 1:  # one rank agrees with itself
            return
        bits = np.ascontiguousarray(headers).view(np.uint64)  # bits: -0.0 is not 0.0
        differs = (bits != bits[0]).any(axis=0)
        differs[:3] = False  # status, samples and count may differ
        if not differs.any():
            return
        i = int(np.flatnonzero(differs)[0])
        field = (FIELDS + ATTRS)[i]
        differ = [int(r) for r in np.flatnonzero(bits[:, i] != bits[0, i])]
        shown = ", ".join(f"{_show(field, headers[r, i])} on rank {r}" for r in [0, *differ])
        raise _errors.InvalidArgumentError(
            f"ranks disagree on {field}: {shown}; rank(s) {', '.join(map(str, differ))} differ from "
            f"rank 0. Every rank must pass the same channels, dtype, data_format and attributes",
            self.header.op,
        )


def _payload(payload: np.ndarray | None, width: int, failed: bool) -> np.ndarray:
    if payload is None or failed:
        return np.zeros(width)
    return np.ascontiguousarray(payload, dtype=np.float64).ravel()


def _reduce_scatter(comm, head: np.ndarray, payload: np.ndarray, check: Callable[[np.ndarray], None]):
    p, k = comm.size, payload.size
    m = -(-k // p)  # slice length (the last slices are padded with zeros)
    padded = np.zeros(p * m)
    padded[:k] = payload
    sends = np.concatenate([np.broadcast_to(head, (p, head.size)), padded.reshape(p, m)], axis=1)
    got = comm.alltoall(sends)  # row i: rank i's header and its slice number `comm.rank`
    heads = got[:, : head.size]
    check(heads)
    mine = sum_in_rank_order(got[:, head.size :])
    return heads, comm.allgather(mine).ravel()[:k]


def _show(field: str, value: float) -> str:
    if field in _CHOICES:
        choices = _CHOICES[field]
        return choices[int(value)] if 0 <= value < len(choices) else "none"
    if field in ("is_training", "reproducible"):
        return str(bool(value))
    if field in ATTRS:
        return np.format_float_positional(np.float32(value), trim="-")  # as the attr is stored
    return str(int(value))
