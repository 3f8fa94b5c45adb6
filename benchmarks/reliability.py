"""Reliability figures (issue 8): fuzzing, concurrency, memory, determinism.

    python benchmarks/reliability.py            # 1,200 fuzz cases (as in CI)
    python benchmarks/reliability.py --long     # 20,000 fuzz cases

Prints: fuzz cases / accepted / rejected / crashes / hangs per surface; 8 Python threads x
200 mixed calls vs a serial run on every backend; the speed-up two Python threads get with
one kernel thread each (the GIL is released in the kernels); resident-memory growth over
10,000 calls; the tracemalloc peak of one float32 gradient call against its outputs; and
bitwise determinism across 1-4 kernel threads.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import fbnops
from fbnops.testing.fuzz import Runner, Tally, random_case
from fbnops.testing.reliability import (
    gil_release_speedup,
    peak_extra_memory,
    python_progress_during_kernels,
    rss_growth,
    threaded_equals_serial,
)


def fuzz(n: int, seed: int = 0) -> Tally:
    rng = np.random.default_rng(seed)
    tally, runner = Tally(), Runner(timeout=120)
    try:
        for _ in range(n):
            case = random_case(rng)
            tally.add(case, runner.run(case))
    finally:
        runner.close()
    return tally


def determinism(backend: str) -> bool:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((16, 20, 20, 24)).astype(np.float32)
    v = np.ones(24, np.float32)
    before = fbnops.get_num_threads()
    outs = []
    try:
        with fbnops.backend(backend):
            for n in (1, 2, 3, 4):
                fbnops.set_num_threads(n)
                outs.append(
                    fbnops.raw_ops.FusedBatchNormGradV3(
                        y_backprop=x, x=x, scale=v, reserve_space_1=v * 0, reserve_space_2=v, reserve_space_3=v[:0]
                    )
                )
    finally:
        fbnops.set_num_threads(before)
    return all(all(np.array_equal(a, b) for a, b in zip(outs[0], o, strict=True)) for o in outs[1:])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--long", action="store_true", help="20,000 fuzz cases instead of 1,200")
    args = p.parse_args(argv)
    n = 20_000 if args.long else 1_200
    t0 = time.perf_counter()
    t = fuzz(n)
    print(
        f"fuzz: {t.cases} cases in {time.perf_counter() - t0:.0f} s: {t.accepted} accepted (match float64), "
        f"{t.rejected} rejected (documented error naming the argument), {len(t.crashes)} crashes, "
        f"{len(t.hangs)} hangs, {len(t.failures)} other failures"
    )
    print(f"      per surface: {dict(sorted(t.by_surface.items()))}")
    for case, outcome in t.failures[:5]:
        print(f"      FAILURE {outcome[:200]} {case}")
    for backend in fbnops.available_backends():
        ok, calls = threaded_equals_serial(backend, 8, 200)
        print(f"concurrency [{backend}]: 8 threads x 200 mixed calls ({calls}) bitwise equal to serial: {ok}")
    for backend in [b for b in fbnops.available_backends() if b != "reference"]:
        kept = python_progress_during_kernels(backend, seconds=1.0)
        print(
            f"GIL released [{backend}]: the main thread keeps {100 * kept:.0f}% of its Python speed while "
            f"another thread runs kernels"
        )
        for shape, note in (((8, 16, 16, 64), "cache-resident"), ((32, 28, 28, 64), "memory-bound")):
            speedup = gil_release_speedup(backend, calls=64 if shape[0] == 8 else 16, shape=shape)
            print(
                f"  2 Python threads x 1 kernel thread vs serial, {shape} float32 gradient ({note}): "
                f"throughput x{speedup:.2f}"
            )
    print(f"memory: resident growth over 10,000 calls: {rss_growth(10_000) / 1024:.0f} KiB")
    peak, outputs = peak_extra_memory((32, 28, 28, 64))
    print(
        f"memory: one float32 gradient call (32,28,28,64): tracemalloc peak {peak} B, outputs {outputs} B, "
        f"extra {peak - outputs} B"
    )
    for backend in fbnops.available_backends():
        print(f"determinism [{backend}]: bitwise identical for 1, 2, 3, 4 kernel threads: {determinism(backend)}")
    return 0 if not (t.crashes or t.hangs or t.failures) else 1


if __name__ == "__main__":
    sys.exit(main())
