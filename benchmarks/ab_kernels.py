"""Two builds of the Cython kernels in one process: this checkout's against another's, call by call.

Across processes, a shared machine's noise is larger than a kernel change of 10%.  Here both
kernel modules are loaded side by side (the other checkout's ``batch_norm_avx2`` under its own
file), each case is called alternately in short bursts, and the report is the median of the
per-round time ratios this/base.  It also checks that both builds give the same output bytes.

    git worktree add /tmp/base <commit> && (cd /tmp/base && python setup.py build_ext --inplace)
    python benchmarks/ab_kernels.py --base /tmp/base [--threads 2] [--rounds 15]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

import ml_dtypes
import numpy as np

import fbnops  # noqa: F401  (this checkout's package: its kernels are the candidate)
from fbnops.kernels._cython import batch_norm as _portable

HERE = Path(__file__).resolve().parent.parent
# (op, shape as given in its layout, layout, dtype): the 16-bit cases this comparison was made for
CASES = [
    (op, shape, layout, dtype)
    for dtype in ("bfloat16", "float16")
    for op in ("forward", "grad")
    for shape, layout in (
        ((32, 64, 56, 56), "NCHW"),
        ((32, 128, 28, 28), "NCHW"),
        ((32, 256, 14, 14), "NCHW"),
        ((32, 512, 7, 7), "NCHW"),
        ((16, 64, 112, 112), "NCHW"),
        ((32, 28, 28, 128), "NHWC"),
        ((32, 14, 14, 256), "NHWC"),
        ((32, 7, 7, 512), "NHWC"),
    )
]


def kernel_module(checkout: Path):
    """The x86-64-v3 kernel module built in ``checkout``, loaded as a module of its own."""
    built = sorted((checkout / "fbnops" / "kernels" / "_cython").glob("batch_norm_avx2.*.so"))
    if not built:
        sys.exit(f"no built batch_norm_avx2 in {checkout} (python setup.py build_ext --inplace)")
    spec = importlib.util.spec_from_file_location("fbnops.kernels._cython.batch_norm_avx2", built[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def case_call(module, op, shape, layout, dtype, threads):
    rng = np.random.default_rng(0)
    if layout == "NCHW":
        N, C, H, W = shape
        view = (N, C, H * W)
    else:
        N, H, W, C = shape
        view = (N * H * W, C, 1)
    storage = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    x = rng.standard_normal(view).astype(np.float32).astype(storage)
    dy = rng.standard_normal(view).astype(np.float32).astype(storage)
    scale, offset = np.ones(C, np.float32), np.zeros(C, np.float32)
    mean, var = np.zeros(C, np.float32), np.ones(C, np.float32)
    kw = dict(epsilon=1e-3, is_training=True, num_threads=threads)
    if op == "forward":
        return lambda: module.batch_norm(x, scale, offset, None, None, **kw)
    return lambda: module.batch_norm_grad(x, dy, scale, mean, var, **kw)


def burst_time(fn, seconds: float, clock) -> float:
    fn()
    t0, n = clock(), 0
    while clock() - t0 < seconds:
        fn()
        n += 1
    return (clock() - t0) / n


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", required=True, type=Path, help="the other checkout, with its kernels built")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=15)
    args = p.parse_args()
    if not _portable.cpu_has_x86_64_v3():
        print("this CPU cannot run the x86-64-v3 build")
        return 1
    builds = {"base": kernel_module(args.base.resolve()), "this": kernel_module(HERE)}
    clock = time.thread_time if args.threads == 1 else time.perf_counter  # (1 thread: the calling thread's CPU time)
    print(f"# this checkout ({HERE}) against {args.base}; {args.threads} thread(s); {args.rounds} alternating rounds")
    print(f"{'case':48} {'base ms':>8} {'this ms':>8}  this/base  same bits")
    ratios = []
    for op, shape, layout, dtype in CASES:
        calls = {k: case_call(m, op, shape, layout, dtype, args.threads) for k, m in builds.items()}
        outs = {k: fn() for k, fn in calls.items()}
        pairs = zip(outs["base"], outs["this"], strict=True)
        same = all(np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8)) for a, b in pairs)
        times: dict[str, list[float]] = {k: [] for k in calls}
        for r in range(args.rounds):
            for k in ("base", "this") if r % 2 else ("this", "base"):
                times[k].append(burst_time(calls[k], 0.03, clock))
        ratio = statistics.median(t / b for t, b in zip(times["this"], times["base"], strict=True))
        ratios.append(ratio)
        name = f"{op:7} {str(shape):18} {layout} {dtype}"
        base_ms, this_ms = (statistics.median(times[k]) * 1e3 for k in ("base", "this"))
        print(f"{name:48} {base_ms:8.3f} {this_ms:8.3f}  {ratio:9.3f}  {same}")
    print(f"# this/base: median {statistics.median(ratios):.3f}, best {min(ratios):.3f}, worst {max(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
