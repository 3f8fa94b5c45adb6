"""16-bit (bfloat16, float16) cases on one thread, timed in CPU time: fbnops against PyTorch.

On a shared machine the wall-clock times of ``fbnops bench`` move by tens of per cent with the
other processes' load (a descheduled call counts their time).  One-thread calls run in the
calling thread, so their thread CPU time (``time.thread_time``) leaves out the time the
thread waited for a core; what is left still moves with the cache and memory traffic of the
other processes, hence interleaved rounds and medians of per-round ratios, as in the bench.
Both libraries run on one thread: this compares kernels, not the thread pools.

    python benchmarks/bench_16bit_cpu.py [--rounds 9] [--ops forward,grad] [--layouts NCHW,NHWC] [--shapes N,H,W,C;...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import fbnops
from fbnops.tools.bench.arguments import add_case_arguments
from fbnops.tools.bench.cases import make_cases
from fbnops.tools.bench.peers import fbnops_call, has_module, torch_call

REPEATS = 3  # calls per timed sample (the thread clock ticks coarsely on some kernels)


def cpu_time(fn) -> float:
    """Thread CPU seconds of one call of ``fn`` (the mean of REPEATS calls)."""
    t0 = time.thread_time()
    for _ in range(REPEATS):
        fn()
    return (time.thread_time() - t0) / REPEATS


def paired(calls: dict, rounds: int) -> dict[str, list[float]]:
    """Per-round CPU times of every call, the order rotating between rounds (after a warm-up)."""
    for fn in calls.values():
        fn()
    names = list(calls)
    times: dict[str, list[float]] = {k: [] for k in names}
    for r in range(rounds):
        for k in names[r % len(names) :] + names[: r % len(names)]:
            times[k].append(cpu_time(calls[k]))
    return times


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=9)
    add_case_arguments(p, ops=("forward", "grad"), dtypes=("bfloat16", "float16"))
    args = p.parse_args()
    if not has_module("torch"):
        print("PyTorch is not installed: nothing to compare with")
        return 1
    import torch

    torch.set_num_threads(1)
    fbnops.set_num_threads(1)
    print(f"# 1 thread each; thread CPU time; {args.rounds} interleaved rounds; load average {os.getloadavg()}")
    print(f"# {'case':44s} {'fbnops ms':>9s} {'torch ms':>9s} {'fbnops/torch':>12s}")
    ratios = []
    cases = make_cases(args.ops, args.dtypes, args.shapes, args.layouts)
    for case in cases:
        case.make()
        fn = torch_call(case)
        if fn is None:
            continue
        t = paired({"fbnops": fbnops_call(case), "torch": fn}, args.rounds)
        per_round = [a / b for a, b in zip(t["fbnops"], t["torch"], strict=True) if b > 0]
        ratio = statistics.median(per_round)
        ratios.append(ratio)
        print(f"{case.label:46s} {statistics.median(t['fbnops']) * 1e3:9.3f} "
              f"{statistics.median(t['torch']) * 1e3:9.3f} {ratio:12.2f}", flush=True)  # fmt: skip
        case.data.clear()
    slower = sum(r > 1.0 for r in ratios)
    print(f"# fbnops/torch: median {statistics.median(ratios):.2f}, worst {max(ratios):.2f}, "
          f"slower on {slower} of {len(ratios)} (goal <= 1.0)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
