"""Communication cost of synchronized batch norm: Allgather latency (alpha) and per-byte time (beta),
and the time of one synchronized training step per layer in the default and the reproducible mode.

    python benchmarks/bench_comm.py --ranks 1,2,3          # launches mpiexec once per rank count
    python benchmarks/bench_comm.py --ranks 2 --json out.json

Model (docs/distributed.md): one Allgather in which each rank receives ``bytes`` costs about
``alpha * ceil(log2 p) + beta * bytes``.  For each ``p`` the script times Allgathers of 1 to
131072 float64 per rank (the fastest of 7 batches of calls), takes ``alpha`` from the smallest
messages and ``beta`` from the slope over the largest, then times one layer's forward +
gradient (three ResNet-50-like layers, the batch split across the ranks) with ``reproducible=False``
and ``True``, against ``raw_ops`` on one rank's share (``--no-step``: Allgather only;
``--serial``: the step timings alone, in this process through ``SerialComm``, where the
default mode is ``raw_ops`` itself and only the reproducible mode runs the staged path;
``benchmarks/bench_sync_bn.py`` measures the staged path's overhead per collective).

Oversubscribed machines (more ranks than free cores) measure the scheduler more than the
network: compare like with like.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

SIZES = (1, 8, 64, 512, 4096, 32768, 131072)  # float64 per rank
# global NHWC batches of the step timing: ResNet-50 stage 3 and stage 1, and a 1x1 head (one row per sample)
LAYERS = ((32, 14, 14, 256), (32, 56, 56, 64), (256, 1, 1, 2048))


def _best_time(fn, world, calls: int, batches: int = 7) -> float:
    """Seconds per call of the fastest batch: load from other processes only ever adds time."""
    times = []
    for _ in range(batches):
        world.Barrier()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls)
    return float(min(times))


def measure(with_step: bool = True) -> dict:
    """Runs on every rank under mpiexec; rank 0 returns the figures."""
    from mpi4py import MPI

    from fbnops import distributed as fd
    from fbnops import raw_ops

    world = MPI.COMM_WORLD
    p, rank = world.Get_size(), world.Get_rank()
    out: dict = {"ranks": p, "allgather": []}
    for m in SIZES:
        a = np.full(m, float(rank))
        recv = np.empty(p * m)
        calls = max(3, min(300, 2_000_000 // (m * p * 8 + 20_000)))
        t = _best_time(lambda a=a, recv=recv: world.Allgather(a, recv), world, calls)
        out["allgather"].append({"floats": m, "bytes_received": 8 * m * (p - 1), "seconds": t})
    if p > 1:  # alpha from the smallest messages, beta from the slope over the largest
        small = [r["seconds"] for r in out["allgather"][:3]]
        big = out["allgather"][-3:]
        beta = np.polyfit([r["bytes_received"] for r in big], [r["seconds"] for r in big], 1)[0]
        out["alpha_seconds"] = float(np.median(small)) / math.ceil(math.log2(p))
        out["beta_seconds_per_byte"] = float(beta)
    if with_step:
        comm = fd.from_mpi4py(world)
        out["steps"] = [_step_times(world, comm, fd, raw_ops, layer) for layer in LAYERS]
    return out if rank == 0 else {}


def _step_times(world, comm, fd, raw_ops, layer) -> dict:
    rng = np.random.default_rng(0)
    n, h, w, c = layer
    p, rank = world.Get_size(), world.Get_rank()
    share = [n // p + (i < n % p) for i in range(p)]
    x = (rng.standard_normal((share[rank], h, w, c)) + 1).astype(np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    s, o, e = np.ones(c, np.float32), np.zeros(c, np.float32), np.zeros(0, np.float32)

    def step(reproducible):
        f = fd.FusedBatchNormV3(comm, x=x, scale=s, offset=o, mean=e, variance=e, reproducible=reproducible)
        fd.FusedBatchNormGradV3(comm, y_backprop=dy, x=x, scale=s, reserve_space_1=f.reserve_space_1,
                                reserve_space_2=f.reserve_space_2, reserve_space_3=f.reserve_space_3,
                                reproducible=reproducible)  # fmt: skip

    def plain():
        f = raw_ops.FusedBatchNormV3(x=x, scale=s, offset=o, mean=e, variance=e)
        raw_ops.FusedBatchNormGradV3(y_backprop=dy, x=x, scale=s, reserve_space_1=f.reserve_space_1,
                                     reserve_space_2=f.reserve_space_2, reserve_space_3=f.reserve_space_3)  # fmt: skip

    for fn in (plain, lambda: step(False), lambda: step(True)):
        fn()  # warm-up
    return {
        "global_batch": list(layer),
        "samples_on_rank0": share[0],
        "raw_ops_seconds": _best_time(plain, world, 5),
        "default_seconds": _best_time(lambda: step(False), world, 5),
        "reproducible_seconds": _best_time(lambda: step(True), world, 5),
    }


class _OneProcess:
    """Stands in for MPI.COMM_WORLD in ``--serial`` runs (the step timing only)."""

    def Get_size(self) -> int:
        return 1

    def Get_rank(self) -> int:
        return 0

    def Barrier(self) -> None:
        pass


def serial(rounds: int = 3) -> list[dict]:
    """The step timings on one process through SerialComm: the compute cost of each mode alone.

    The three variants are timed in turns, ``rounds`` times, keeping each one's best.
    """
    from fbnops import distributed as fd
    from fbnops import raw_ops

    best: list[dict] = []
    for _ in range(rounds):
        steps = [_step_times(_OneProcess(), fd.SerialComm(), fd, raw_ops, layer) for layer in LAYERS]
        best = steps if not best else [{k: min(a[k], b[k]) if k.endswith("seconds") else a[k] for k in a}
                                       for a, b in zip(best, steps, strict=True)]  # fmt: skip
    return [{"ranks": 1, "allgather": [], "steps": best}]


def launch(ranks: list[int], no_step: bool = False) -> list[dict]:
    from fbnops.distributed.demo import find_mpiexec

    mpiexec = find_mpiexec()
    if mpiexec is None:
        sys.exit("bench_comm: mpiexec not found (pip install 'fbnops[mpi]')")
    results = []
    for p in ranks:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "r.json")
            env = dict(os.environ, FBNOPS_NUM_THREADS=str(max(1, (os.cpu_count() or 1) // p)))
            cmd = [mpiexec, "-n", str(p), sys.executable, "-m", "mpi4py", __file__, "--inner", path]
            cmd += ["--no-step"] if no_step else []
            subprocess.run(cmd, check=True, timeout=600, env=env)
            with open(path) as f:
                results.append(json.load(f))
    return results


def report(results: list[dict]) -> None:
    if any(r["allgather"] for r in results):
        _report_allgather(results)
    _report_steps(results)


def _report_allgather(results: list[dict]) -> None:
    print("Allgather, seconds per call, fastest of 7 batches (float64 per rank):")
    print("  p " + "".join(f"{m:>11}" for m in SIZES))
    for r in results:
        print(f"{r['ranks']:>3} " + "".join(f"{a['seconds'] * 1e6:>9.1f}us" for a in r["allgather"]))
    for r in results:
        if "alpha_seconds" in r:
            print(f"p={r['ranks']}: alpha = {r['alpha_seconds'] * 1e6:.2f} us per log2 step, "
                  f"beta = {r['beta_seconds_per_byte'] * 1e9:.3f} ns per byte "
                  f"({1 / r['beta_seconds_per_byte'] / 1e9:.2f} GB/s)")  # fmt: skip


def _report_steps(results: list[dict]) -> None:
    print("\nOne layer, forward + gradient, NHWC float32, fastest of 7 (global batch split across the ranks):")
    for r in results:
        for s in r.get("steps", []):
            ms = {k: s[f"{k}_seconds"] * 1e3 for k in ("raw_ops", "default", "reproducible")}
            print(f"p={r['ranks']} {'x'.join(map(str, s['global_batch'])):>15}: raw_ops on rank 0's "
                  f"{s['samples_on_rank0']} samples {ms['raw_ops']:.2f} ms, synchronized {ms['default']:.2f} ms, "
                  f"reproducible {ms['reproducible']:.2f} ms (x{ms['reproducible'] / ms['default']:.2f})")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="1,2", help="comma-separated rank counts (default 1,2)")
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--no-step", action="store_true", help="Allgather figures only (skip the layer timing)")
    ap.add_argument("--serial", action="store_true", help="step timings only, in this process (SerialComm, no MPI)")
    ap.add_argument("--inner", help=argparse.SUPPRESS)  # set when running under mpiexec
    args = ap.parse_args()
    if args.inner:
        result = measure(with_step=not args.no_step)
        if result:
            with open(args.inner, "w") as f:
                json.dump(result, f)
        return
    if args.serial:
        results = serial()
    else:
        results = launch([int(p) for p in args.ranks.split(",")], args.no_step)
    report(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
