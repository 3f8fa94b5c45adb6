"""The synchronized path against the plain one (issue 28, part 2): paired, interleaved timings.

    python benchmarks/bench_sync_bn.py                       # every section
    python benchmarks/bench_sync_bn.py --sections op,repro --rounds 21
    python benchmarks/bench_sync_bn.py --sections collective --ranks 2,3   # runs mpiexec

Sections (each figure is the median over ``--rounds`` of the paired ratio ``candidate / baseline``,
the two timed back to back in alternating order within each round, so that load from other
processes hits both alike; the medians of each side are printed too):

* ``op``: the synchronized op at one rank (``SerialComm``) against ``raw_ops`` on the same
  tensors, forward + gradient and forward alone (goal: <= 1.2).
* ``repro``: ``reproducible=True`` on a 1x1 layer, 256x1x1x2048, against ``raw_ops`` (goal: <= 2).
* ``module``: one training step (forward, loss, backward, SGD) of a small CNN on scikit-learn's
  ``load_digits`` with ``fbnops.distributed.SyncBatchNorm`` against the same model with
  ``torch.nn.BatchNorm2d``, at 1 and 2 threads (goal: <= 1.5).
* ``collective``: under ``mpiexec -n P``, the per-collective overhead of the synchronized op:
  (its time over MPI - its time on the same shard with the peer mirrored in-process, which runs
  every stage and check but communicates nothing) / collectives per step, next to a bare MPI
  Allgather of the header's size.

The machine is usually shared: the script prints the load average with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

OP_LAYERS = (  # (shape, data_format): the digits CNN's two BN layers, a ResNet stage-3 layer, a 1x1 head
    ((64, 16, 8, 8), "NCHW"),
    ((64, 32, 4, 4), "NCHW"),
    ((32, 14, 14, 256), "NHWC"),
    ((256, 1, 1, 2048), "NHWC"),
)
REPRO_LAYER = ((256, 1, 1, 2048), "NHWC")
COLLECTIVES_PER_STEP = 5  # forward 2 + status, gradient 1 + status (docs/distributed.md)


def _time(fn: Callable[[], object], calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def paired(baseline: Callable[[], object], candidate: Callable[[], object], rounds: int, calls: int) -> dict:
    """Median of per-round ratios candidate/baseline, the order alternating between rounds."""
    baseline(), candidate()  # warm-up
    base, cand, ratios = [], [], []
    for r in range(rounds):
        if r % 2:
            c = _time(candidate, calls)
            b = _time(baseline, calls)
        else:
            b = _time(baseline, calls)
            c = _time(candidate, calls)
        base.append(b)
        cand.append(c)
        ratios.append(c / b)
    return {
        "baseline_us": 1e6 * statistics.median(base),
        "candidate_us": 1e6 * statistics.median(cand),
        "ratio": statistics.median(ratios),
        "ratio_q1_q3": [float(np.percentile(ratios, 25)), float(np.percentile(ratios, 75))],
    }


def _inputs(shape, data_format, seed=0):
    rng = np.random.default_rng(seed)
    c = shape[1] if data_format.startswith("NC") else shape[-1]
    x = (rng.standard_normal(shape) + 1).astype(np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)
    return x, dy, np.ones(c, np.float32), np.zeros(c, np.float32), np.zeros(0, np.float32)


def _steps(comm, shape, data_format, reproducible=False):
    """(plain forward+gradient, synchronized forward+gradient, plain forward, synchronized forward)."""
    from fbnops import distributed as fd
    from fbnops import raw_ops

    x, dy, s, o, e = _inputs(shape, data_format)
    fmt = {"data_format": data_format}

    def grad(mod, fwd, *lead, **extra):
        return mod.FusedBatchNormGradV3(*lead, y_backprop=dy, x=x, scale=s, reserve_space_1=fwd.reserve_space_1,
                                        reserve_space_2=fwd.reserve_space_2, reserve_space_3=fwd.reserve_space_3,
                                        **fmt, **extra)  # fmt: skip

    def plain_fwd():
        return raw_ops.FusedBatchNormV3(x=x, scale=s, offset=o, mean=e, variance=e, **fmt)

    def sync_fwd():
        return fd.FusedBatchNormV3(comm, x=x, scale=s, offset=o, mean=e, variance=e, reproducible=reproducible, **fmt)

    return (
        lambda: grad(raw_ops, plain_fwd()),
        lambda: grad(fd, sync_fwd(), comm, reproducible=reproducible),
        plain_fwd,
        sync_fwd,
    )


def _calls(shape) -> int:
    return max(1, min(50, int(2e6 // int(np.prod(shape)))))


def section_op(rounds: int) -> list[dict]:
    from fbnops import distributed as fd

    rows = []
    for shape, fmt in OP_LAYERS:
        plain, sync, plain_f, sync_f = _steps(fd.SerialComm(), shape, fmt)
        rows.append({"layer": f"{'x'.join(map(str, shape))} {fmt}", "what": "forward+gradient",
                     **paired(plain, sync, rounds, _calls(shape))})  # fmt: skip
        rows.append({"layer": f"{'x'.join(map(str, shape))} {fmt}", "what": "forward",
                     **paired(plain_f, sync_f, rounds, _calls(shape))})  # fmt: skip
    return rows


def section_repro(rounds: int) -> list[dict]:
    from fbnops import distributed as fd

    shape, fmt = REPRO_LAYER
    plain, sync, _, _ = _steps(fd.SerialComm(), shape, fmt, reproducible=True)
    return [{"layer": f"{'x'.join(map(str, shape))} {fmt}", "what": "reproducible forward+gradient",
             **paired(plain, sync, rounds, _calls(shape))}]  # fmt: skip


def _digits_model(norm):
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), norm(16), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, padding=1), norm(32), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 4 * 4, 10),
    )  # fmt: skip


def section_module(rounds: int, threads=(1, 2), batch: int = 64) -> list[dict]:
    import torch
    from sklearn.datasets import load_digits

    import fbnops
    from fbnops import distributed as fd

    digits = load_digits()
    images = torch.from_numpy((digits.images / 16.0).astype(np.float32)).unsqueeze(1)
    labels = torch.from_numpy(digits.target.astype(np.int64))
    rows = []
    for n in threads:
        torch.set_num_threads(n)
        fbnops.set_num_threads(n)
        models = {}
        for name, norm in (("torch", torch.nn.BatchNorm2d), ("fbnops", lambda c: fd.SyncBatchNorm(c))):
            model = _digits_model(norm)
            opt = torch.optim.SGD(model.parameters(), lr=0.05)
            position = [0]

            def step(model=model, opt=opt, position=position):
                i = position[0] % (len(images) - batch)
                position[0] += batch
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(images[i : i + batch]), labels[i : i + batch])
                loss.backward()
                opt.step()

            models[name] = step
        rows.append({"layer": f"digits CNN, batch {batch}", "what": f"training step, {n} thread(s)",
                     **paired(models["torch"], models["fbnops"], rounds, 20)})  # fmt: skip
    return rows


class _Mirror:
    """Two ranks with no communication: the peer sends what this rank sends.  The synchronized
    op then runs its staged path (every stage, every check) at the cost of a copy per collective."""

    rank, size = 0, 2

    def allgather(self, a):
        return np.stack([a, a])

    def allgatherv(self, a, rows):
        return [a, a.copy()]


def _collective_inner(rounds: int) -> dict:
    """Under mpiexec: the per-collective overhead of the synchronized op on this rank count."""
    from mpi4py import MPI

    from fbnops import distributed as fd

    world = MPI.COMM_WORLD
    shape, fmt = (16, 16, 8, 8), "NCHW"  # every rank the same shard: the work per rank does not change
    _, over_mpi, _, _ = _steps(fd.from_mpi4py(world), shape, fmt)
    _, local, _, _ = _steps(_Mirror(), shape, fmt)
    header = np.zeros(12 + 16)

    def allgather():
        world.Allgather(header, np.empty((world.Get_size(), header.size)))

    over_mpi(), local()
    mpi_t, local_t, gather_t = [], [], []
    for _ in range(rounds):
        world.Barrier()
        mpi_t.append(_time(over_mpi, 20))
        world.Barrier()
        local_t.append(_time(local, 20))
        world.Barrier()
        gather_t.append(_time(allgather, 200))
    mpi_us, local_us = 1e6 * statistics.median(mpi_t), 1e6 * statistics.median(local_t)
    return {
        "ranks": world.Get_size(),
        "step_mpi_us": mpi_us,
        "step_serial_us": local_us,
        "per_collective_us": (mpi_us - local_us) / COLLECTIVES_PER_STEP,
        "bare_allgather_us": 1e6 * statistics.median(gather_t),
    }


def section_collective(rounds: int, ranks: list[int]) -> list[dict]:
    from fbnops.distributed.demo import find_mpiexec, run_mpiexec

    mpiexec = find_mpiexec()
    if mpiexec is None:
        raise SystemExit("the collective section needs mpiexec: pip install 'fbnops[mpi]'")
    rows = []
    for p in ranks:
        cmd = [mpiexec, "-n", str(p), sys.executable, "-m", "mpi4py", __file__, "--inner-collective", str(rounds)]
        run = run_mpiexec(cmd, 600)
        if run.returncode != 0:
            raise SystemExit(run.stderr[-2000:])
        rows.append(json.loads(run.stdout.strip().splitlines()[-1]))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sections", default="op,repro,module,collective")
    ap.add_argument("--rounds", type=int, default=15, help="paired rounds per figure (default 15)")
    ap.add_argument("--ranks", default="2,3", help="rank counts of the collective section (default 2,3)")
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--inner-collective", type=int, help=argparse.SUPPRESS)  # set under mpiexec
    args = ap.parse_args()
    if args.inner_collective:
        figures = _collective_inner(args.inner_collective)
        from mpi4py import MPI

        if MPI.COMM_WORLD.Get_rank() == 0:
            print(json.dumps(figures), flush=True)
        return
    out = {"load_average": os.getloadavg(), "cpus": os.cpu_count()}
    print(f"load average {out['load_average'][0]:.1f} on {out['cpus']} CPUs (a busy machine inflates every figure)")
    wanted = args.sections.split(",")
    for name, fn in (("op", section_op), ("repro", section_repro), ("module", section_module)):
        if name in wanted:
            out[name] = fn(args.rounds)
            print(f"\n{name}: candidate / baseline, median of {args.rounds} paired rounds [quartiles]")
            for r in out[name]:
                print(f"  {r['layer']:<24} {r['what']:<32} {r['baseline_us']:>10.1f} us {r['candidate_us']:>10.1f} us"
                      f"  ratio {r['ratio']:.2f} [{r['ratio_q1_q3'][0]:.2f}-{r['ratio_q1_q3'][1]:.2f}]")  # fmt: skip
    if "collective" in wanted:
        out["collective"] = section_collective(args.rounds, [int(p) for p in args.ranks.split(",")])
        print("\ncollective: the synchronized step's overhead per collective (MPI vs in-process mirror, same shard)")
        for r in out["collective"]:
            print(f"  p={r['ranks']}: step {r['step_mpi_us']:.0f} us vs {r['step_serial_us']:.0f} us mirrored -> "
                  f"{r['per_collective_us']:.1f} us per collective "
                  f"(bare Allgather {r['bare_allgather_us']:.1f} us)")  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
