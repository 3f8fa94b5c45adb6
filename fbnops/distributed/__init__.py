"""Synchronized batch norm: FusedBatchNormV3 / FusedBatchNormGradV3 over a batch split across processes.

::

    from mpi4py import MPI
    from fbnops import distributed as fd

    comm = fd.from_mpi4py(MPI.COMM_WORLD)          # or fd.from_torch(), fd.SerialComm()
    fwd = fd.FusedBatchNormV3(comm, x=x_shard, scale=s, offset=o, mean=rm, variance=rv)
    g = fd.FusedBatchNormGradV3(comm, y_backprop=dy_shard, x=x_shard, scale=s,
            reserve_space_1=fwd.reserve_space_1, reserve_space_2=fwd.reserve_space_2,
            reserve_space_3=fwd.reserve_space_3)

The results are ``fbnops.raw_ops``' namedtuples.  ``SyncBatchNorm`` (a ``torch.nn.Module``,
imported on first use) brings the same to PyTorch on CPU.  See ``docs/distributed.md``.
"""

from .adapters import from_mpi4py, from_torch
from .comm import Communicator, CountingComm, SerialComm, ThreadComm
from .ops import FusedBatchNormGradV3, FusedBatchNormV3

__all__ = [
    "Communicator",
    "from_mpi4py",
    "from_torch",
    "SerialComm",
    "ThreadComm",
    "CountingComm",
    "FusedBatchNormV3",
    "FusedBatchNormGradV3",
    "SyncBatchNorm",
]


def __getattr__(name: str):
    if name == "SyncBatchNorm":  # needs torch: imported on first use only
        try:
            from .torch_sync_bn import SyncBatchNorm
        except ModuleNotFoundError as e:  # one line naming the extra, not torch's bare error
            if e.name != "torch":
                raise
            raise ImportError(f"{__name__}.SyncBatchNorm needs PyTorch: pip install 'fbnops[oracle]'") from None

        return SyncBatchNorm
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
