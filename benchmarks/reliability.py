"""Reliability figures: hostile input by class (issue 15), and fuzzing, concurrency, memory, determinism (issue 8).

    python benchmarks/reliability.py                 # the attacks of issue 15, each in its own process
    python benchmarks/reliability.py --full          # and the issue-8 figures below (1,200 fuzz cases)
    python benchmarks/reliability.py --full --long   # with 20,000 fuzz cases

The attacks (``fbnops.testing.attacks``) are counted per class: tried, crashes, hangs, untyped
errors and wrong results (all four must be 0); every failing attack is listed with its outcome.
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

import numpy as np

import fbnops
from fbnops.testing.attacks import ATTACKS, CLASSES, run_attack
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


VERDICTS = ("crash", "hang", "untyped", "wrong")


def attacks(jobs: int, only: set[int] | None = None) -> tuple[dict, list]:
    """Run every attack (``jobs`` processes at a time); per-class counts and the failures."""
    chosen = [a for a in ATTACKS if only is None or a.cls in only]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(run_attack, chosen))
    table = {c: dict.fromkeys(("tried", "pass", *VERDICTS), 0) for c in sorted({a.cls for a in chosen})}
    failures = []
    for attack, (verdict, outcome) in zip(chosen, results, strict=True):
        table[attack.cls]["tried"] += 1
        table[attack.cls][verdict] += 1
        if verdict != "pass":
            failures.append((attack.cls, attack.name, verdict, str(outcome).replace("\n", " ")[:300]))
    return table, failures


def _row(name: str, r: dict) -> str:
    return f"  {name:<34} {r['tried']:>5} {r['crash']:>7} {r['hang']:>5} {r['untyped']:>7} {r['wrong']:>5}"


def print_attacks(table: dict, failures: list, seconds: float) -> None:
    tried = sum(r["tried"] for r in table.values())
    print(f"hostile input (issue 15): {tried} attacks in {seconds:.0f} s, each in its own process")
    print(f"  {'class':<34} {'tried':>5} {'crashes':>7} {'hangs':>5} {'untyped':>7} {'wrong':>5}")
    for c, r in table.items():
        print(_row(f"{c}. {CLASSES[c]}", r))
    print(_row("total", {k: sum(r[k] for r in table.values()) for k in ("tried", *VERDICTS)}))
    for c, name, verdict, outcome in failures:
        print(f"  FAIL [{c}] {name}: {verdict}: {outcome}")


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
    p.add_argument("--json", help="also write the per-class table and the failures to this file")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    table, failures = attacks(max(1, args.jobs), set(args.classes) if args.classes else None)
    print_attacks(table, failures, time.perf_counter() - t0)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"classes": {CLASSES[c]: r for c, r in table.items()}, "failures": failures}, f, indent=1)
    ok = not failures
    if args.full:
        ok = issue8_figures(args.long) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
