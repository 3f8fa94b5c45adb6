"""One rank of ``fbnops demo --ranks N`` (``mpiexec -n N python -m mpi4py -m fbnops.distributed.demo_worker OUT``).

Every rank builds the same global batch, keeps its (uneven) share of the samples, and runs
a synchronized training step (forward and gradient) in the default and the reproducible
mode.  Rank 0 gathers the rows, compares them with the single-process op on the whole
batch, and writes the figures to ``OUT`` as JSON.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

from .. import raw_ops
from . import CountingComm, FusedBatchNormGradV3, FusedBatchNormV3, SerialComm, from_mpi4py

N, H, W, C = 10, 6, 6, 32  # the global batch (NHWC)
STATS = ("batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2")
GRADS = ("scale_backprop", "offset_backprop")


def global_batch() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(2024)
    return {
        "x": (rng.standard_normal((N, H, W, C)) * 2 + 3).astype(np.float32),
        "dy": rng.standard_normal((N, H, W, C)).astype(np.float32),
        "scale": (rng.random(C) + 0.5).astype(np.float32),
        "offset": rng.standard_normal(C).astype(np.float32),
    }


def shard_sizes(ranks: int) -> list[int]:
    """Uneven on purpose: rank 0 takes one sample more when it can, the last rank the rest."""
    base = [N // ranks] * ranks
    for i in range(N % ranks):
        base[i] += 1
    return base


def training_step(comm, b: dict, x: np.ndarray, dy: np.ndarray, reproducible: bool) -> dict[str, np.ndarray]:
    empty = np.zeros(0, np.float32)
    f = FusedBatchNormV3(
        comm, x=x, scale=b["scale"], offset=b["offset"], mean=empty, variance=empty, reproducible=reproducible
    )
    g = FusedBatchNormGradV3(
        comm, y_backprop=dy, x=x, scale=b["scale"], reserve_space_1=f.reserve_space_1,
        reserve_space_2=f.reserve_space_2, reserve_space_3=f.reserve_space_3, reproducible=reproducible,
    )  # fmt: skip
    return {**f._asdict(), "x_backprop": g.x_backprop, "scale_backprop": g.scale_backprop,
            "offset_backprop": g.offset_backprop}  # fmt: skip


def reference(b: dict) -> dict[str, np.ndarray]:
    empty = np.zeros(0, np.float32)
    f = raw_ops.FusedBatchNormV3(x=b["x"], scale=b["scale"], offset=b["offset"], mean=empty, variance=empty)
    g = raw_ops.FusedBatchNormGradV3(
        y_backprop=b["dy"], x=b["x"], scale=b["scale"], reserve_space_1=f.reserve_space_1,
        reserve_space_2=f.reserve_space_2, reserve_space_3=f.reserve_space_3,
    )  # fmt: skip
    return {**f._asdict(), "x_backprop": g.x_backprop, "scale_backprop": g.scale_backprop,
            "offset_backprop": g.offset_backprop}  # fmt: skip


def _max_rel(got: np.ndarray, want: np.ndarray) -> float:
    got, want = got.astype(np.float64), want.astype(np.float64)
    scale = float(np.abs(want).max()) or 1.0
    return float(np.abs(got - want).max() / scale)


def main(out_path: str) -> None:
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    comm = CountingComm(from_mpi4py(world))
    b = global_batch()
    sizes = shard_sizes(comm.size)
    lo = sum(sizes[: comm.rank])
    x, dy = b["x"][lo : lo + sizes[comm.rank]], b["dy"][lo : lo + sizes[comm.rank]]
    report: dict = {"ranks": comm.size, "shards": sizes, "shape": [N, H, W, C]}
    for mode in ("default", "reproducible"):
        reproducible = mode == "reproducible"
        training_step(comm, b, x, dy, reproducible)  # warm-up (imports, first calls)
        comm.reset()
        world.Barrier()
        t0 = time.perf_counter()
        out = training_step(comm, b, x, dy, reproducible)
        elapsed = time.perf_counter() - t0
        counts = {"collectives": comm.collectives, "bytes_sent": comm.bytes_sent, "seconds": elapsed}
        per_channel = world.gather({k: out[k].tobytes() for k in STATS + GRADS}, root=0)
        rows = world.gather({k: out[k] for k in ("y", "x_backprop")}, root=0)
        if comm.rank == 0:
            want = reference(b)
            joined = {k: np.concatenate([r[k] for r in rows]) for k in ("y", "x_backprop")}
            got = {**joined, **{k: out[k] for k in STATS + GRADS}}
            entry = {
                "max_rel_diff": {k: _max_rel(got[k], want[k]) for k in ("y", "x_backprop", *STATS, *GRADS)},
                "identical_on_all_ranks": all(p == per_channel[0] for p in per_channel),
                "bitwise_vs_single_process": all(got[k].tobytes() == want[k].tobytes() for k in got),
                **counts,
            }
            if reproducible:  # the same call on one rank, whole batch
                one = training_step(SerialComm(), b, b["x"], b["dy"], True)
                entry["bitwise_vs_one_rank"] = all(got[k].tobytes() == one[k].tobytes() for k in got)
            report[mode] = entry
    if comm.rank == 0:
        with open(out_path, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
