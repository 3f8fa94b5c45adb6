"""Adapters from existing distributed engines to :class:`~fbnops.distributed.Communicator`.

Each imports its engine only when called, so fbnops itself needs neither.

* :func:`from_mpi4py` - MPI through mpi4py's buffer interface (``Allgather``,
  ``Allgatherv``, ``Alltoall`` on NumPy arrays: no pickling).  ``pip install fbnops[mpi]``.
* :func:`from_torch` - ``torch.distributed`` with a CPU backend (gloo).  gloo has no
  all-gather of unequal sizes, so ``allgatherv`` pads to the longest and trims.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..framework.errors import InternalError, InvalidArgumentError
from .comm import Communicator

__all__ = ["from_mpi4py", "from_torch"]


def _split(flat: np.ndarray, rows: Sequence[int], width: int) -> list[np.ndarray]:
    out, pos = [], 0
    for r in rows:
        out.append(flat[pos : pos + r * width].reshape(r, width))
        pos += r * width
    return out


class _MPIComm:
    def __init__(self, comm: Any):
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()

    def allgather(self, a: np.ndarray) -> np.ndarray:
        a = np.ascontiguousarray(a)
        out = np.empty((self.size, *a.shape), a.dtype)
        self._call(self.comm.Allgather, a, out)
        return out

    def _call(self, collective, *args) -> None:
        from mpi4py import MPI

        try:
            collective(*args)
        except MPI.Exception as e:  # a peer sent a longer message: it has more channels
            if e.Get_error_class() != MPI.ERR_TRUNCATE:
                raise
            raise InvalidArgumentError(
                "ranks sent messages of different lengths: they disagree on the number of channels"
            ) from None

    def allgatherv(self, a: np.ndarray, rows: Sequence[int]) -> list[np.ndarray]:
        a = np.ascontiguousarray(a, dtype=np.float64)
        width = a.shape[1]
        counts = [int(r) * width for r in rows]
        displs = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int).tolist()
        flat = np.empty(sum(counts), np.float64)
        self._call(self.comm.Allgatherv, a, [flat, (counts, displs)])
        return _split(flat, rows, width)

    def alltoall(self, a: np.ndarray) -> np.ndarray:
        a = np.ascontiguousarray(a)
        out = np.empty_like(a)
        self._call(self.comm.Alltoall, a, out)
        return out


def from_mpi4py(comm: Any = None) -> Communicator:
    """A communicator over an ``mpi4py.MPI.Comm`` (default ``MPI.COMM_WORLD``)."""
    if comm is None:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
    return _MPIComm(comm)


class _TorchComm:
    """The default (or a given) process group; holds no module objects, so a model that keeps it
    still deep-copies and pickles (``torch.save(model)``)."""

    def __init__(self, group: Any):
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("torch.distributed is not initialized: call torch.distributed.init_process_group first")
        self.group = group

    def __deepcopy__(self, memo: dict) -> _TorchComm:
        return self  # a handle on the job's process group, as nn.SyncBatchNorm's process_group

    @property
    def rank(self) -> int:
        import torch.distributed as dist

        return dist.get_rank(self.group)

    @property
    def size(self) -> int:
        import torch.distributed as dist

        return dist.get_world_size(self.group)

    def allgather(self, a: np.ndarray) -> np.ndarray:
        import torch
        import torch.distributed as dist

        t = torch.from_numpy(np.ascontiguousarray(a))
        parts = [torch.empty_like(t) for _ in range(self.size)]
        try:
            dist.all_gather(parts, t, group=self.group)
        except RuntimeError as e:  # gloo: a peer closed its connection, or its message had another size
            raise InternalError(f"torch.distributed all_gather failed on rank {self.rank}: {e}") from e
        return np.stack([p.numpy() for p in parts])

    def allgatherv(self, a: np.ndarray, rows: Sequence[int]) -> list[np.ndarray]:
        a = np.ascontiguousarray(a, dtype=np.float64)
        padded = np.zeros((max(max(rows), 1), a.shape[1]))
        padded[: a.shape[0]] = a
        gathered = self.allgather(padded)
        return [gathered[k, :r] for k, r in enumerate(rows)]


def from_torch(group: Any = None) -> Communicator:
    """A communicator over an initialized ``torch.distributed`` process group (CPU tensors, e.g. gloo)."""
    return _TorchComm(group)
