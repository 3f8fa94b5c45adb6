"""Reliability figures: hostile input by class (issue 15), and fuzzing, concurrency, memory, determinism (issue 8).

    python benchmarks/reliability.py                 # the attacks of issue 15, each in its own process
    python benchmarks/reliability.py --full          # and the issue-8 figures below (1,200 fuzz cases)
    python benchmarks/reliability.py --full --long   # with 20,000 fuzz cases

The attacks (the test functions of ``tests/attacks/``, collected from there) are counted per class:
tried, crashes, hangs, untyped errors and wrong results (all four must be 0); every failing attack is
listed with its outcome.
With ``--full`` it also prints: fuzz cases / accepted / rejected / crashes / hangs per surface; 8 Python threads x
200 mixed calls vs a serial run on every backend; the speed-up two Python threads get with
one kernel thread each (the GIL is released in the kernels); resident-memory growth over
10,000 calls; the tracemalloc peak of one float32 gradient call against its outputs; and
bitwise determinism across 1-4 kernel threads.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

import fbnops
from fbnops.framework import threads

# The attacks and the fuzz harness are test code (tests/attacks, tests/fuzzing): run from the tests directory.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from attacks.runner import all_attacks, run_attack  # noqa: E402
from fuzzing.harness import Runner, Tally, random_case  # noqa: E402

from fbnops.testing.reliability import (  # noqa: E402
    gil_release_speedup,
    peak_extra_memory,
    python_progress_during_kernels,
    rss_growth,
    threaded_equals_serial,
)
from fbnops.tools.bench.attack_report import VERDICTS, summary  # noqa: E402


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
    outs = []
    with threads.setting_kept(), fbnops.backend(backend):
        for n in (1, 2, 3, 4):
            fbnops.set_num_threads(n)
            outs.append(
                fbnops.raw_ops.FusedBatchNormGradV3(
                    y_backprop=x, x=x, scale=v, reserve_space_1=v * 0, reserve_space_2=v, reserve_space_3=v[:0]
                )
            )
    return all(all(np.array_equal(a, b) for a, b in zip(outs[0], o, strict=True)) for o in outs[1:])


def attacks(jobs: int, only: set[int] | None = None) -> dict:
    """Run every attack (``jobs`` processes at a time); the run as :func:`fbnops.tools.bench.attack_report.summary`."""
    chosen = [a for a in all_attacks() if only is None or a.cls in only]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(run_attack, chosen))
    return summary(
        [(a, verdict, outcome) for a, (verdict, outcome) in zip(chosen, results, strict=True)],
        time.perf_counter() - t0,
        jobs,
    )


def print_attacks(doc: dict) -> None:
    columns = ("tried", *VERDICTS)
    print(f"hostile input (issue 15): {len(doc['attacks'])} attacks in {doc['seconds']:.0f} s, each in its own process")
    print(f"  {'class':<34}" + "".join(f" {c:>10}" for c in columns))
    for number, row in doc["classes"].items():
        print(f"  {number + '. ' + row['name']:<34}" + "".join(f" {row[c]:>10}" for c in columns))
    print(f"  {'total':<34}" + "".join(f" {sum(r[c] for r in doc['classes'].values()):>10}" for c in columns))
    for e in doc["attacks"]:
        if e["verdict"] != "pass":
            print(f"  FAIL [{e['class']}] {e['name']}: {e['verdict']}: {e['outcome']}")


def issue8_figures(long: bool) -> bool:
    n = 20_000 if long else 1_200
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
    return not (t.crashes or t.hangs or t.failures)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--full", action="store_true", help="also the issue-8 figures (fuzzing, threads, memory)")
    p.add_argument("--long", action="store_true", help="with --full: 20,000 fuzz cases instead of 1,200")
    p.add_argument("--jobs", type=int, default=2, help="attacks run at the same time (default 2)")
    p.add_argument("--class", dest="classes", type=int, action="append", help="only this class (repeatable)")
    p.add_argument(
        "--json",
        help="also write the run (per-class counts, every attack's verdict) to this file; "
        "docs/assets/reliability.json is the docs page's source",
    )
    args = p.parse_args(argv)
    if args.json and args.classes:
        p.error("--json records a whole run: leave out --class")
    doc = attacks(max(1, args.jobs), set(args.classes) if args.classes else None)
    print_attacks(doc)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    ok = all(e["verdict"] == "pass" for e in doc["attacks"])
    if args.full:
        ok = issue8_figures(args.long) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
