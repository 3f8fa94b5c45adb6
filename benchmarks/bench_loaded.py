"""fbnops on a busy machine: its default thread count against its own 1-thread time and PyTorch.

Another process keeps one core busy for the whole run (a Python busy loop), as a browser or a
second user does on a laptop or a shared server. For each benchmark case, in interleaved
rounds (``fbnops.tools.bench.timing.interleaved``), it times:

* fbnops at its default thread count (all cores, of which the kernels take the idle ones);
* fbnops on one thread (``set_num_threads(1)``);
* PyTorch at its default thread count, under the same load.

and prints the medians of the per-round ratios: default/1-thread (goal <= 1.3) and
fbnops/torch (goal <= 1.0). Under load the median is not the whole story: a thread that shares
the busy core now and then waits out the other process's time slice (ten milliseconds and more),
which a median of rounds leaves out but a training loop pays. So the ratios of the *total* times
of the rounds (of the means) are printed too: that is what a loop of such calls takes. With
``--calls K`` a round times K calls in a row (a loop's worth), so that the waits land in the rounds
in proportion and the medians measure what a loop takes as well.

    python benchmarks/bench_loaded.py [--rounds 30] [--calls 1] [--ops grad,forward] [--no-hog]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import fbnops
from fbnops.framework import load, threads
from fbnops.tools.bench import machine_load
from fbnops.tools.bench.cases import LAYOUTS, SHAPES, make_cases
from fbnops.tools.bench.peers import fbnops_call, has_module, torch_call
from fbnops.tools.bench.timing import interleaved, paired_ratio


def with_threads(fn, n: int | None):
    """``fn`` run at ``n`` threads, or at the default (adaptive) count when ``n`` is None."""

    def call():
        if n is None:
            threads._num_threads[0] = None  # back to the default: the cores, adaptive to load
        else:
            fbnops.set_num_threads(n)
        return fn()

    return call


def in_a_row(fn, calls: int):
    """``fn`` called ``calls`` times in a row (one timed round)."""
    if calls == 1:
        return fn

    def call():
        for _ in range(calls):
            fn()

    return call


def _ratios(a, b, name: str, worst: dict[str, float]) -> str:
    """The median of a's per-round ratios to b (+- half IQR) and the ratio of their totals; the
    worst of each kept in ``worst``."""
    median, spread = paired_ratio(a, b)
    total = sum(a.times) / sum(b.times)
    worst[name] = max(worst[name], median)
    worst[f"{name} total"] = max(worst[f"{name} total"], total)
    return f" {median:6.2f}±{spread:.2f} {total:6.2f}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--calls", type=int, default=1, help="calls in a row per timed round (a loop's worth)")
    p.add_argument("--ops", default="grad,forward")
    p.add_argument("--no-hog", action="store_true", help="measure without the busy process (a quiet baseline)")
    args = p.parse_args()
    if args.calls < 1:
        p.error(f"--calls must be at least 1, got {args.calls}")
    hog = None if args.no_hog else subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(2 * load.WINDOW)
        load.busy_elsewhere()
        time.sleep(2 * load.WINDOW)
        clock = machine_load.clock_verdict(machine_load.watch(1.0, every=0.2))  # (what the host gives this VM now)
        print(f"# {os.cpu_count()} cores; busy process: {'no' if hog is None else 'yes'}; "
              f"cores busy elsewhere now: {load.busy_elsewhere():.2f}; load average {os.getloadavg()}; "
              f"{machine_load.clock_words(clock)}")  # fmt: skip
        print(f"# {args.rounds} interleaved rounds of {args.calls} call(s) in a row; ratios are medians of per-round "
              "ratios (+-half IQR)")  # fmt: skip
        print("# (median ms per call; ratio: median of per-round ratios; total: ratio of the rounds' total times)")
        print(f"{'case':34s} {'default ms':>10s} {'1-thread ms':>11s} {'default/1t':>11s} {'total':>6s} "
              f"{'torch ms':>9s} {'fbnops/torch':>13s} {'total':>6s}")  # fmt: skip
        worst = {"self": 0.0, "self total": 0.0, "torch": 0.0, "torch total": 0.0}
        for case in make_cases(args.ops.split(","), ["float32"], SHAPES, LAYOUTS):
            case.make()
            ours = fbnops_call(case)
            calls = {"default": with_threads(ours, None), "one": with_threads(ours, 1)}
            if has_module("torch"):
                fn = torch_call(case)
                if fn is not None:
                    calls["torch"] = fn
            s = interleaved({k: in_a_row(fn, args.calls) for k, fn in calls.items()}, args.rounds)
            per_call = {k: v.median * 1e3 / args.calls for k, v in s.items()}
            line = f"{case.label:34s} {per_call['default']:10.3f} {per_call['one']:11.3f}"
            line += _ratios(s["default"], s["one"], "self", worst)
            if "torch" in s:
                line += f" {per_call['torch']:9.3f}" + _ratios(s["default"], s["torch"], "torch", worst)
            print(line, flush=True)
            case.data.clear()
        print(f"# worst default/1-thread: median {worst['self']:.2f}, total {worst['self total']:.2f} (goal <= 1.3)")
        if worst["torch"]:
            print(f"# worst fbnops/torch: median {worst['torch']:.2f}, total {worst['torch total']:.2f} (goal <= 1.0)")
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
