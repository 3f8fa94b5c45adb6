"""Run by tests/distributed/test_engines.py as ``mpiexec -n P python -m mpi4py mpi_fail_worker.py OUT.json SIZES``.

For each mode and each stage of a training step, rank 1 raises inside that stage (see
``failures.py``); every rank records what it raised, and rank 0 writes them all to OUT.json.
A rank that waited forever would make mpiexec time out in the test.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from dist_helpers import batch, split, step  # noqa: E402
from failures import STAGES, inject, outcome  # noqa: E402
from mpi4py import MPI  # noqa: E402

from fbnops import distributed as fd  # noqa: E402
from fbnops.distributed import _sync  # noqa: E402

FAILING_RANK = 1


def main(out: str, sizes: list[int]) -> None:
    world = MPI.COMM_WORLD
    comm = fd.from_mpi4py(world)
    b = batch(n=sum(sizes))
    mine = dict(b, x=split(b["x"], sizes)[comm.rank], dy=split(b["dy"], sizes)[comm.rank])
    allgather_up_to = _sync.REDUCE_SCATTER_FROM
    report = {}
    for mode in ("default", "reproducible", "reduce_scatter"):
        _sync.REDUCE_SCATTER_FROM = 2 if mode == "reduce_scatter" else allgather_up_to
        for stage in STAGES:
            with inject(stage, lambda: comm.rank == FAILING_RANK):
                got = outcome(lambda m=mode: step(comm, mine, reproducible=m == "reproducible"))
            report[f"{mode}/{stage}"] = world.gather(got, root=0)
    if comm.rank == 0:
        Path(out).write_text(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1], [int(s) for s in sys.argv[2].split(",")])
