"""In-cache per-element cost of the kernels' inner loops: one reduction pass and one apply pass,
single-threaded, in ns per element (median of many calls).

    python benchmarks/loop_throughput.py                       # the x86-64-v3 Cython build
    python benchmarks/loop_throughput.py --baseline /tmp/base  # and an older copy of its .so, alternately
    python benchmarks/loop_throughput.py --numba               # and the Numba twin

``--baseline DIR`` loads ``DIR/batch_norm_avx2*.so`` (a copy of an earlier build) beside the
current one; the two are timed in alternating rounds, as the machine's load drifts.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util

import numpy as np

from fbnops.framework import dtypes
from fbnops.kernels._plan import Apply, Reduce
from fbnops.tools.bench.bound import median_seconds

# (layout, (outer, C, inner)): large planes, small planes (channel blocks), channels-last
SHAPES = (("NCHW", (16, 16, 784)), ("NCHW7x7", (16, 256, 49)), ("NHWC", (12544, 16, 1)))
DTYPES = {"f32": dtypes.float32, "f16": dtypes.float16, "bf16": dtypes.bfloat16}


def load_build(path: str):
    """The kernels module of a copied .so, under its own package (for its relative imports)."""
    name = "fbnops.kernels._cython.batch_norm_avx2"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ns_per_element(fn, nelems: int, calls: int) -> float:
    return median_seconds(fn, calls) * 1e9 / nelems


def passes(kernels, x, dy, m, ones):
    """name -> zero-argument call of one pass over (x, dy)."""
    return {
        "reduce": lambda: kernels.reduce_totals(Reduce.RED_GRAD, x, dy, m, num_threads=1),
        "apply": lambda: kernels.apply(Apply.APPLY_FULL, x, dy, ones, ones, ones, m, num_threads=1),
    }


class NumbaKernels:
    """The Numba stages with the Cython entry points' signatures (one thread: these sizes)."""

    def __init__(self):
        from fbnops.kernels import numba_backend

        self.nb = numba_backend

    def reduce_totals(self, mode, x, dy, m, num_threads=1):
        return self.nb.reduce_totals(mode, x, dy, m, 0)

    def apply(self, amode, x, dy, A, B, K, m, num_threads=1):
        return self.nb.apply(amode, x, dy, A, B, K, m)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", help="directory holding an earlier batch_norm_avx2*.so")
    parser.add_argument("--numba", action="store_true", help="time the Numba twin as well")
    parser.add_argument("--dtypes", default="f32,f16,bf16")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()

    from fbnops.kernels._cython import batch_norm_avx2

    builds = {"new": batch_norm_avx2}
    if args.baseline:
        builds["old"] = load_build(glob.glob(f"{args.baseline}/batch_norm_avx2*.so")[0])
    if args.numba:
        builds["numba"] = NumbaKernels()
    rng = np.random.default_rng(0)
    results: dict[tuple, list[float]] = {}
    for _ in range(args.rounds):
        for layout, shape in SHAPES:
            C = shape[1]
            for dname in args.dtypes.split(","):
                x = rng.standard_normal(shape).astype(DTYPES[dname])
                dy = rng.standard_normal(shape).astype(DTYPES[dname])
                m = x.astype(np.float32).mean((0, 2)).astype(np.float32)
                ones = np.ones(C, np.float32)
                for build, kernels in builds.items():
                    for pass_name, fn in passes(kernels, x, dy, m, ones).items():
                        key = (layout, dname, pass_name, build)
                        results.setdefault(key, []).append(ns_per_element(fn, x.size, args.calls))
    print(f"{'layout':8} {'dtype':5} {'pass':7} " + " ".join(f"{b:>14}" for b in builds))
    for layout, _ in SHAPES:
        for dname in args.dtypes.split(","):
            for pass_name in ("reduce", "apply"):
                cells = []
                for build in builds:
                    runs = results[(layout, dname, pass_name, build)]
                    cells.append(f"{min(runs):6.3f}/{np.median(runs):6.3f}")
                print(f"{layout:8} {dname:5} {pass_name:7} " + " ".join(f"{c:>14}" for c in cells))
    print("ns/element, best/median of the rounds' medians")


if __name__ == "__main__":
    main()
