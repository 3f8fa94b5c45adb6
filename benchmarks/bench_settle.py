"""How many calls a library needs to reach its steady time after something else ran.

``fbnops bench`` times the second of two calls in a row, after the other library's call. This
script shows what that second call measures: for each case, after a disturbance, it times
``--calls`` calls of one library in a row and prints the median time of each position. The
disturbances are nothing, one call of the other library, a 64 MB read (the caches flushed) and a
5 ms sleep (the worker threads park). Rounds rotate through the disturbances, so they share the
machine's conditions.

    python benchmarks/bench_settle.py [--rounds 30] [--calls 6] [--shapes N,H,W,C;...]
        [--dtypes float16] [--layouts NCHW] [--ops forward]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from fbnops.tools.bench.arguments import add_case_arguments
from fbnops.tools.bench.cases import make_cases, parse_shapes
from fbnops.tools.bench.peers import fbnops_call, has_module, torch_call


def settle_times(timed, other, rounds: int, calls: int) -> dict[str, list[float]]:
    """Per disturbance, the median seconds of the 1st, 2nd, ... call of ``timed`` after it."""
    flood = np.ones(64 << 20, np.uint8)
    disturbances = {
        "nothing": lambda: None,
        "other library": other,
        "64 MB read": flood.sum,
        "5 ms sleep": lambda: time.sleep(0.005),
    }
    times = {k: [[] for _ in range(calls)] for k in disturbances}
    timed(), other()
    for _ in range(rounds):
        for name, disturb in disturbances.items():
            disturb()
            for i in range(calls):
                t0 = time.perf_counter()
                timed()
                times[name][i].append(time.perf_counter() - t0)
    return {k: [statistics.median(v) for v in per_call] for k, per_call in times.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--calls", type=int, default=6)
    add_case_arguments(p, ops=("forward",), dtypes=("float16",), layouts=("NCHW",))
    p.set_defaults(shapes=parse_shapes("32,28,28,128"))
    args = p.parse_args()
    if not has_module("torch"):
        print("# PyTorch is not installed (pip install 'fbnops[oracle]'): nothing to compare")
        return 0
    print(f"# {args.rounds} rounds; median ms of the k-th call in a row after each disturbance")
    for case in make_cases(args.ops, args.dtypes, args.shapes, args.layouts):
        case.make()
        libraries = {"fbnops": fbnops_call(case), "torch": torch_call(case)}
        if libraries["torch"] is None:
            print(f"{case.label} PyTorch has no such call: skipped")
            continue
        for name, fn in libraries.items():
            other = next(f for k, f in libraries.items() if k != name)
            print(f"{case.label} {name}")
            for disturbance, medians in settle_times(fn, other, args.rounds, args.calls).items():
                print(f"  after {disturbance:14s}" + "".join(f"{m * 1e3:8.3f}" for m in medians))
        case.data.clear()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
