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

import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..framework import registry
from ..framework.errors import InternalError, InvalidArgumentError, ResourceExhaustedError
from ._failures import describe, error_for, kind_of

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

    def allgather(self, a: np.ndarray) -> np.ndarray:
        """Every rank's ``a`` (same shape on all ranks), stacked in rank order: shape ``(size, *a.shape)``."""
        ...

    def allgatherv(self, a: np.ndarray, rows: Sequence[int]) -> list[np.ndarray]:
        """Every rank's ``a``, ``rows[r]`` rows from rank ``r``, as a list in rank order."""
        ...


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
        """``a`` as a group of one: shape ``(1, *a.shape)``."""
        return np.array(a, copy=True)[None]

    def allgatherv(self, a: np.ndarray, rows: Sequence[int]) -> list[np.ndarray]:
        """``[a]``: the only rank's rows."""
        return [np.array(a, copy=True)]

    def alltoall(self, a: np.ndarray) -> np.ndarray:
        """A copy of ``a``: in a group of one every block goes to this rank."""
        return np.array(a, copy=True)


class _ThreadRank:
    """One rank of a :class:`ThreadComm`: its collectives are numbered, its peers' are matched by number."""

    def __init__(self, group: ThreadComm, rank: int):
        self._group = group
        self.rank = rank
        self.size = group.size
        self._calls = 0

    def _exchange(self, item: Any) -> list[Any]:
        g, k = self._group, self._calls
        self._calls += 1
        deadline = time.monotonic() + g._timeout  # one deadline: a peer's notification does not re-arm it
        with g._cond:
            items, arrived = g._rounds.setdefault(k, ([None] * self.size, [False] * self.size))
            items[self.rank], arrived[self.rank] = item, True
            g._cond.notify_all()
            while not all(arrived):
                gone = [r for r in range(self.size) if r in g._ended and not arrived[r]]
                if gone:
                    raise g._peer_error(gone[0], k)
                left = deadline - time.monotonic()
                if left <= 0 or not g._cond.wait(left):
                    missing = [r for r in range(self.size) if not arrived[r]]
                    raise InternalError(
                        f"collective {k} timed out after {g._timeout} s waiting for rank(s) "
                        f"{', '.join(map(str, missing))} (ThreadComm timeout)"
                    )
            g._reads[k] = g._reads.get(k, 0) + 1
            if g._reads[k] == self.size:  # everyone has read it
                del g._rounds[k], g._reads[k]
            return list(items)

    def allgather(self, a: np.ndarray) -> np.ndarray:
        return np.stack(_same_shapes(self._exchange(np.array(a, copy=True))))

    def allgatherv(self, a: np.ndarray, rows: Sequence[int]) -> list[np.ndarray]:
        return self._exchange(np.array(a, copy=True))

    def alltoall(self, a: np.ndarray) -> np.ndarray:
        got = _same_shapes(self._exchange(np.array(a, copy=True)))
        return np.stack([g[self.rank] for g in got])


def _same_shapes(got: list[np.ndarray]) -> list[np.ndarray]:
    """MPI would truncate or abort on messages of different lengths; threads can say why, on every rank."""
    shapes = [g.shape for g in got]
    if len(set(shapes)) > 1:
        raise InvalidArgumentError(
            f"ranks sent messages of different shapes {shapes}: they disagree on the number of channels"
        )
    return got


class ThreadComm:
    """``size`` ranks as threads of this process.

    ``ThreadComm(3).run(fn)`` calls ``fn(comm)`` once per rank, each in its own thread
    with its own rank communicator and the caller's backend, and returns the results in
    rank order.  A rank that ends (returns or raises) while a peer waits for it in a
    collective makes that peer raise a typed ``fbnops.errors`` error naming the rank and
    what it raised, instead of waiting; a collective that waits longer than ``timeout``
    seconds in all raises ``InternalError``.  If not every thread can be started, the
    started ranks fail at once with ``ResourceExhaustedError``.  The first error is
    re-raised, or with ``return_exceptions=True`` every rank's result or exception is returned.
    """

    def __init__(self, size: int, *, timeout: float = 60.0):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be a positive integer, got {size!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
            raise ValueError(f"timeout must be a positive finite number of seconds, got {timeout!r}")
        self.size = size
        self._timeout = float(timeout)

    def _peer_error(self, rank: int, collective: int) -> BaseException:
        error = self._ended[rank]
        if error is None:
            return InternalError(
                f"rank {rank} returned before joining collective {collective}: the ranks called different "
                f"sequences of collectives (do they all train, with the same is_training?)"
            )
        return error_for(kind_of(error), f"rank {rank} failed before collective {collective}: {describe(error)}")

    def run(self, fn: Callable[[Any], Any], *, return_exceptions: bool = False) -> list[Any]:
        """Run ``fn(comm)`` on every rank, each in its own thread; the per-rank results in rank order."""
        self._cond = threading.Condition()
        self._rounds: dict[int, tuple[list, list]] = {}
        self._reads: dict[int, int] = {}
        self._ended: dict[int, BaseException | None] = {}  # rank -> what it raised (None: it returned)
        results: list[Any] = [None] * self.size
        failures: list[int] = []  # ranks in the order they failed: the root cause first
        caller_backend = registry.get_backend()  # a `with fbnops.backend(...)` block is per thread

        def end(rank: int, error: BaseException | None) -> None:
            with self._cond:  # peers waiting for this rank's next collective stop waiting
                self._ended[rank] = error
                if error is not None:
                    results[rank] = error
                    failures.append(rank)
                self._cond.notify_all()

        def body(rank: int) -> None:
            error = None
            try:
                with registry.backend(caller_backend):
                    results[rank] = fn(_ThreadRank(self, rank))
            except BaseException as e:  # noqa: BLE001 - handed back to the caller
                error = e
            finally:
                end(rank, error)

        threads = [threading.Thread(target=body, args=(r,), name=f"fbnops-rank-{r}") for r in range(self.size)]
        started = []
        for rank, t in enumerate(threads):
            try:
                t.start()
            except Exception as e:  # noqa: BLE001 - e.g. RuntimeError: can't start new thread
                error = ResourceExhaustedError(
                    f"ThreadComm could not start the thread of rank {rank} of {self.size}: {type(e).__name__}: {e}"
                )
                for r in range(rank, self.size):
                    end(r, error)
                break
            started.append(t)
        for t in started:
            t.join()
        if failures and not return_exceptions:
            raise results[failures[0]]
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
        """Zero the counters."""
        self.collectives = 0
        self.bytes_sent = 0
        self.bytes_received = 0

    def allgather(self, a: np.ndarray) -> np.ndarray:
        """The wrapped communicator's ``allgather``, counted."""
        out = self.comm.allgather(a)
        self._count(a.nbytes, out.nbytes - a.nbytes)
        return out

    def allgatherv(self, a: np.ndarray, rows: Sequence[int]) -> list[np.ndarray]:
        """The wrapped communicator's ``allgatherv``, counted."""
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
