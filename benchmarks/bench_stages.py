"""Kernel-level timings: the fused op against its stages, Numba against Cython, tiny calls.

Every figure is the median of per-round ratios of two calls timed back to back in
the same round (the order alternates between rounds), so that the machine's drift
(other tenants, frequency) cancels out; the spread is the 25-75% range of the ratios.

    python benchmarks/bench_stages.py [--rounds 15] [--threads 2]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import fbnops
from fbnops.kernels import cython_backend, stages

SHAPES = [  # canonical (outer, C, inner)
    ("tiny NHWC (2,4,4,8)", (32, 8, 1)),
    ("NHWC (32,28,28,128)", (32 * 28 * 28, 128, 1)),
    ("NCHW (32,128,28,28)", (32, 128, 28 * 28)),
    ("NHWC (16,112,112,64)", (16 * 112 * 112, 64, 1)),
]


def best_of(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def paired(a, b, rounds: int, repeat: int) -> tuple[float, float, float, float]:
    """(median time of a, median ratio b/a, q25, q75) over interleaved rounds."""
    ta, ratios = [], []
    for r in range(rounds):
        if r % 2:
            tb, t_a = best_of(b, repeat), best_of(a, repeat)
        else:
            t_a, tb = best_of(a, repeat), best_of(b, repeat)
        ta.append(t_a)
        ratios.append(tb / t_a)
    q25, q50, q75 = np.percentile(ratios, [25, 50, 75])
    return float(np.median(ta)), float(q50), float(q25), float(q75)


def grad_calls(view, dtype, backend_module):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(view).astype(dtype)
    dy = rng.standard_normal(view).astype(dtype)
    C = view[1]
    s, m, v = np.ones(C, np.float32), np.zeros(C, np.float32), np.ones(C, np.float32)
    n = view[0] * view[2]

    def fused():
        backend_module.batch_norm_grad(x, dy, s, m, v, epsilon=1e-3, is_training=True)

    def composed():
        sums = stages.sum_grad(x, dy, m)
        _, _, coeffs = stages.finish_grad(sums, n, s, m, v, 1e-3, True)
        stages.apply_grad(x, dy, coeffs)

    return fused, composed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    fbnops.set_num_threads(args.threads)
    have_numba = "numba" in fbnops.available_backends()
    if have_numba:
        from fbnops.kernels import numba_backend
    print(f"# threads {args.threads}, {args.rounds} rounds, Cython {cython_backend.SIMD_VARIANT} build")
    print(f"{'case':28} {'dtype':9} {'cython us':>10} {'stages/fused':>18} {'numba/cython':>18}")
    for name, view in SHAPES:
        for dtype in ("float32", "bfloat16"):
            dt = fbnops.framework.dtypes.bfloat16 if dtype == "bfloat16" else np.float32
            repeat = 200 if view[0] * view[1] * view[2] < 10**4 else 3
            fused, composed = grad_calls(view, dt, cython_backend)
            with fbnops.backend("cython"):
                t, r, lo, hi = paired(fused, composed, args.rounds, repeat)
            col = "-"
            if have_numba:
                nb_fused, _ = grad_calls(view, dt, numba_backend)
                nb_fused()  # compile / load outside the timing
                _, rn, nlo, nhi = paired(fused, nb_fused, args.rounds, repeat)
                col = f"{rn:.2f} [{nlo:.2f},{nhi:.2f}]"
            print(f"{name:28} {dtype:9} {t * 1e6:10.1f} {r:.2f} [{lo:.2f},{hi:.2f}]    {col}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
