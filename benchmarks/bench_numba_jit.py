"""Numba JIT cost: first-call compile time, and the cached load in a fresh process.

Each measurement runs in its own Python process with a private NUMBA_CACHE_DIR:
the first process compiles every specialization the backend uses (3 dtypes x
both layouts x all modes) and writes the cache; the second loads it.

    python benchmarks/bench_numba_jit.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

CHILD = """
import time
t0 = time.perf_counter()
import fbnops.kernels.numba_backend as nb
t1 = time.perf_counter()
nb.warm_up()
t2 = time.perf_counter()
print(f"{t1 - t0:.3f} {t2 - t1:.3f}")
"""


def run(cache_dir: str) -> tuple[float, float]:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
    imp, warm = out.stdout.split()
    return float(imp), float(warm)


def main() -> int:
    with tempfile.TemporaryDirectory() as cache:
        imp1, compile_s = run(cache)
        imp2, cached_s = run(cache)
    print(f"# numba backend: import {imp1:.2f} s; first call of every specialization (compile): {compile_s:.2f} s")
    print(f"# fresh process, cache present: import {imp2:.2f} s; same calls (cached load): {cached_s:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
