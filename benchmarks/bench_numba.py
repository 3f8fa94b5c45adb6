"""The Numba backend against the Cython one, case by case: medians of paired numba/cython ratios.

Both backends run the same call on the same arrays in interleaved rounds
(``fbnops.tools.bench.timing.interleaved``); the ratio of each round's two times is taken
and the median (+- half the interquartile range) printed, with the goal (<= 1.5) and the
cases over it.  The machine is shared: run it when it is quiet, or compare paired runs.

    python benchmarks/bench_numba.py [--rounds 7] [--ops grad,forward]
        [--dtypes float32,bfloat16,float16] [--layouts NHWC,NCHW] [--shapes "32,7,7,512;32,14,14,256"]
"""

from __future__ import annotations

import argparse
import os
import sys

from fbnops.kernels import numba_backend
from fbnops.tools.bench.arguments import add_case_arguments
from fbnops.tools.bench.cases import make_cases
from fbnops.tools.bench.peers import fbnops_call
from fbnops.tools.bench.timing import interleaved, paired_ratio

GOAL = 1.5


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    add_case_arguments(p)
    args = p.parse_args()
    numba_backend.warm_up()  # compiled or loaded from the disk cache before any timing
    print(f"# {os.cpu_count()} cores, load average {os.getloadavg()}; {args.rounds} interleaved rounds")
    print(f"{'case':44s} {'cython ms':>10s} {'numba ms':>10s} {'numba/cython':>14s}")
    over = []
    cases = make_cases(args.ops, args.dtypes, args.shapes, args.layouts)
    for case in cases:
        case.make()
        calls = {name: fbnops_call(case, name, block=True) for name in ("cython", "numba")}  # (both in a block)
        s = interleaved(calls, args.rounds)
        ratio, spread = paired_ratio(s["numba"], s["cython"])
        flag = "  OVER" if ratio > GOAL else ""
        print(f"{case.label:44s} {s['cython'].median * 1e3:10.3f} {s['numba'].median * 1e3:10.3f} "
              f"{ratio:8.2f}±{spread:.2f}{flag}", flush=True)  # fmt: skip
        if ratio > GOAL:
            over.append(case.label)
        case.data.clear()
    print(f"# {len(over)} of {len(cases)} cases over {GOAL}x" + "".join(f"\n#   {c}" for c in over))
    return 0


if __name__ == "__main__":
    sys.exit(main())
