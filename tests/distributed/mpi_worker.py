"""Run by tests/distributed/test_engines.py as ``mpiexec -n P python -m mpi4py mpi_worker.py OUT.npz SIZES``.

Each rank takes its share (SIZES, comma-separated samples per rank) of the same batches and
runs a training step per case; rank 0 saves the per-channel outputs, the rows of every rank
joined, and whether all ranks hold the same per-channel bits.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from dist_helpers import MPI_CASES, PER_CHANNEL, ROWS, batch, case_batch, split, step  # noqa: E402
from mpi4py import MPI  # noqa: E402

from fbnops import distributed as fd  # noqa: E402
from fbnops.distributed import _sync  # noqa: E402
from fbnops.errors import InvalidArgumentError  # noqa: E402


def main(out: str, sizes: list[int]) -> None:
    world = MPI.COMM_WORLD
    comm = fd.from_mpi4py(world)
    saved = {}
    allgather_up_to = _sync.REDUCE_SCATTER_FROM
    for name, case in MPI_CASES.items():
        b = case_batch(sum(sizes), **case)
        mine = dict(b, x=split(b["x"], sizes)[comm.rank], dy=split(b["dy"], sizes)[comm.rank])
        for mode in ("default", "reproducible", "reduce_scatter"):
            # reduce_scatter: the large-p path (MPI Alltoall + Allgather), forced at any p
            _sync.REDUCE_SCATTER_FROM = 2 if mode == "reduce_scatter" else allgather_up_to
            r = step(comm, mine, data_format=case["data_format"], reproducible=mode == "reproducible")
            per_channel = world.gather(b"".join(r[k].tobytes() for k in PER_CHANNEL), root=0)
            rows = world.gather({k: r[k] for k in ROWS}, root=0)
            if comm.rank == 0:
                for k in PER_CHANNEL:
                    saved[f"{name}/{mode}/{k}"] = r[k]
                for k in ROWS:
                    saved[f"{name}/{mode}/{k}"] = np.concatenate([p[k] for p in rows])
                saved[f"{name}/{mode}/same_on_all_ranks"] = np.array(len(set(per_channel)) == 1)
    # the last rank passes a 3-D x: every rank must raise the same InvalidArgumentError
    b = batch(n=sum(sizes))
    mine = dict(b, x=split(b["x"], sizes)[comm.rank], dy=split(b["dy"], sizes)[comm.rank])
    if comm.rank == comm.size - 1:
        mine["x"] = mine["x"][:, 0]
    try:
        step(comm, mine)
        message = "no error"
    except InvalidArgumentError as e:
        message = str(e)
    messages = world.gather(message, root=0)
    if comm.rank == 0:
        saved["error/messages"] = np.array(messages)
        np.savez(out, **saved)


if __name__ == "__main__":
    main(sys.argv[1], [int(s) for s in sys.argv[2].split(",")])
