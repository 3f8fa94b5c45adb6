"""Communicators: the few collectives the synchronized ops need, and three ready-made ones.

A communicator is any object with ``rank``, ``size``, ``allgather`` and ``allgatherv``
(duck typing, :class:`Communicator` spells the contract out).  ``alltoall`` is optional:
with it, large groups switch to a reduce-scatter (see :mod:`fbnops.distributed._sync`).

* :class:`SerialComm` - one rank; the synchronized ops then equal the plain ones.
* :class:`ThreadComm` - several ranks as threads of one process (the kernels release
  the GIL), for tests, docs and trying things out without MPI.
* :class:`CountingComm` - wraps any communicator and counts collectives and bytes.

The MPI and torch.distributed adapters live in :mod:`fbnops.distributed.adapters`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..framework.errors import InvalidArgumentError

__all__ = ["Communicator", "SerialComm", "ThreadComm", "CountingComm", "sum_in_rank_order"]


@runtime_checkable
class Communicator(Protocol):
    """What ``fbnops.distributed`` needs from a group of ``size`` processes.

    ``allgather(a)`` returns every rank's ``a`` stacked in rank order, shape
    ``(size, *a.shape)``; every rank passes the same shape and dtype.
    ``allgatherv(a, rows)`` gathers 2-D arrays whose row counts differ per rank:
    ``rows[k]`` is rank ``k``'s count, known to every rank (as MPI requires); it
    returns one array per rank.
    """

    rank: int
    size: int

    def allgather(self, a: np.ndarray) -> np.ndarray: ...

    def allgatherv(self, a: np.ndarray, rows: Sequence[int]) -> list[np.ndarray]: ...


def sum_in_rank_order(rows: Sequence[np.ndarray]) -> np.ndarray:
    """``rows[0] + rows[1] + ...`` left to right: the same bits on every rank, whatever the engine."""
    total = np.array(rows[0], dtype=np.float64, copy=True)
    for r in rows[1:]:
        total += r
    return total


class SerialComm:
    """A group of one: the synchronized ops become the single-process ops."""

    rank = 0
    size = 1

    def allgather(self, a: np.ndarray) -> np.ndarray:
        return np.array(a, copy=True)[None]

    def allgatherv(self, a: np.ndarray, rows: Sequence[int]) -> list[np.ndarray]:
        return [np.array(a, copy=True)]

    def alltoall(self, a: np.ndarray) -> np.ndarray:
        return np.array(a, copy=True)


class _ThreadRank:
    """One rank of a :class:`ThreadComm`: shares a slot table and a barrier with its peers."""

    def __init__(self, group: ThreadComm, rank: int):
        self._group = group
        self.rank = rank
        self.size = group.size

    def _exchange(self, item: Any) -> list[Any]:
        g = self._group
        g._slots[self.rank] = item
        g._barrier.wait()
        got = list(g._slots)
        g._barrier.wait()  # nobody overwrites a slot before everyone has read it
        return got

    def allgather(self, a: np.ndarray) -> np.ndarray:
        got = self._exchange(np.array(a, copy=True))
        shapes = [g.shape for g in got]
        if len(set(shapes)) > 1:  # MPI would truncate or abort here; threads can say why
            raise InvalidArgumentError(
                f"ranks sent messages of different shapes {shapes}: they disagree on the number of channels"
            )
        return np.stack(got)

    def allgatherv(self, a: np.ndarray, rows: Sequence[int]) -> list[np.ndarray]:
        return self._exchange(np.array(a, copy=True))

    def alltoall(self, a: np.ndarray) -> np.ndarray:
        got = self._exchange(np.array(a, copy=True))
        return np.stack([g[self.rank] for g in got])


class ThreadComm:
    """``size`` ranks as threads of this process.

    ``ThreadComm(3).run(fn)`` calls ``fn(comm)`` once per rank, each in its own thread
    with its own rank communicator, and returns the results in rank order.  If a rank
    raises, the barrier is broken so that no peer waits forever, and the first error (in
    rank order) is re-raised; ``return_exceptions=True`` returns every rank's exception
    instead.
    """

    def __init__(self, size: int, *, timeout: float = 60.0):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be a positive integer, got {size!r}")
        self.size = size
        self._timeout = timeout
        self._slots: list[Any] = [None] * size
        self._barrier = threading.Barrier(size, timeout=timeout)

    def run(self, fn: Callable[[Any], Any], *, return_exceptions: bool = False) -> list[Any]:
        self._barrier.reset()
        results: list[Any] = [None] * self.size
        failed = [False] * self.size

        def body(rank: int) -> None:
            try:
                results[rank] = fn(_ThreadRank(self, rank))
            except BaseException as e:  # noqa: BLE001 - handed back to the caller
                results[rank], failed[rank] = e, True
                self._barrier.abort()

        threads = [threading.Thread(target=body, args=(r,), name=f"fbnops-rank-{r}") for r in range(self.size)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if not return_exceptions:
            for r in range(self.size):
                if failed[r] and not isinstance(results[r], threading.BrokenBarrierError):
                    raise results[r]
            for r in range(self.size):
                if failed[r]:
                    raise results[r]
        return results


class CountingComm:
    """Wraps a communicator; counts collectives and the bytes this rank sends and receives."""

    def __init__(self, comm: Communicator):
        self.comm = comm
        self.rank = comm.rank
        self.size = comm.size
        self.reset()
        if hasattr(comm, "alltoall"):
            self.alltoall = self._alltoall

    def reset(self) -> None:
        self.collectives = 0
        self.bytes_sent = 0
        self.bytes_received = 0

    def allgather(self, a: np.ndarray) -> np.ndarray:
        out = self.comm.allgather(a)
        self._count(a.nbytes, out.nbytes - a.nbytes)
        return out

    def allgatherv(self, a: np.ndarray, rows: Sequence[int]) -> list[np.ndarray]:
        out = self.comm.allgatherv(a, rows)
        self._count(a.nbytes, sum(o.nbytes for o in out) - a.nbytes)
        return out

    def _alltoall(self, a: np.ndarray) -> np.ndarray:
        out = self.comm.alltoall(a)
        own = a.nbytes // max(self.size, 1)
        self._count(a.nbytes - own, out.nbytes - own)
        return out

    def _count(self, sent: int, received: int) -> None:
        self.collectives += 1
        self.bytes_sent += sent
        self.bytes_received += received
