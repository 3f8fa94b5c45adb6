"""Two builds of the Cython kernels in one process: this checkout's against another's, call by call.

Across processes, a shared machine's noise is larger than a kernel change of 10%.  Here both
kernel modules are loaded side by side (each checkout's fastest build this CPU runs, the other one
under its own file), each case is called alternately in short bursts, and the report is the median of the
per-round time ratios this/base.  It also checks that both builds give the same output bytes.

    git worktree add /tmp/base <commit> && (cd /tmp/base && python setup.py build_ext --inplace)
    python benchmarks/ab_kernels.py --base /tmp/base [--threads 2] [--rounds 15] [--ops ...] [--dtypes ...]

With ``--after torch`` each timed call is instead the second of a pair run right after a pair of
PyTorch's calls on the same case, as ``fbnops bench`` times it: the caches then hold the other
library's data, not the kernel's own (what decides, for example, whether streaming the output pays).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from fbnops.kernels._cython import batch_norm as _portable
from fbnops.kernels.cython_backend import runnable_build_names
from fbnops.tools.bench.arguments import add_case_arguments
from fbnops.tools.bench.cases import make_cases
from fbnops.tools.bench.peers import torch_call

HERE = Path(__file__).resolve().parent.parent


def kernel_module(checkout: Path):
    """The fastest kernel build this CPU runs (cython_backend.runnable_build_names) built in ``checkout``,
    loaded as a module of its own."""
    for name in runnable_build_names():
        built = sorted((checkout / "fbnops" / "kernels" / "_cython").glob(f"{name}.*.so"))
        if built:
            spec = importlib.util.spec_from_file_location(f"fbnops.kernels._cython.{name}", built[0])
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    sys.exit(f"no built {' or '.join(runnable_build_names())} in {checkout} (python setup.py build_ext --inplace)")


def case_call(module, case, threads: int):
    """One kernel call of the case on its canonical ``(outer, C, inner)`` view."""
    d, n, c = case.data, case.shape[0], case.shape[3]
    view = (-1, c, 1) if case.channels_last else (n, c, -1)
    x, dy = (d[k].reshape(view) for k in ("x", "dy"))
    kw = dict(epsilon=1e-3, is_training=True, num_threads=threads)
    if case.op == "forward":
        return lambda: module.batch_norm(x, d["scale"], d["offset"], None, None, **kw)
    return lambda: module.batch_norm_grad(x, dy, d["scale"], d["mean"], d["var"], **kw)


def after_time(fn, peer, clock) -> float:
    """The second of two calls of fn, right after two calls of the peer."""
    peer(), peer(), fn()
    t0 = clock()
    fn()
    return clock() - t0


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
    p.add_argument("--after", choices=("torch",), help="time each call right after the peer's calls (see above)")
    add_case_arguments(p, dtypes=("bfloat16", "float16"))
    args = p.parse_args()
    if not _portable.cpu_has_x86_64_v3():
        print("this CPU cannot run the x86-64-v3 build")
        return 1
    builds = {"base": kernel_module(args.base.resolve()), "this": kernel_module(HERE)}
    clock = time.thread_time if args.threads == 1 else time.perf_counter  # (1 thread: the calling thread's CPU time)
    if args.after:
        import torch

        torch.set_num_threads(args.threads)
    after = ", each call after PyTorch's" if args.after else ""
    variants = "/".join(builds[k].SIMD_VARIANT for k in ("this", "base"))
    print(f"# this checkout ({HERE}) against {args.base} ({variants} builds); {args.threads} thread(s); "
          f"{args.rounds} rounds{after}")  # fmt: skip
    print(f"{'case':48} {'base ms':>8} {'this ms':>8}  this/base  same bits")
    ratios = []
    for case in make_cases(args.ops, args.dtypes, args.shapes, args.layouts):
        case.make()
        calls = {k: case_call(m, case, args.threads) for k, m in builds.items()}
        outs = {k: fn() for k, fn in calls.items()}
        pairs = zip(outs["base"], outs["this"], strict=True)
        same = all(np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8)) for a, b in pairs)
        times: dict[str, list[float]] = {k: [] for k in calls}
        peer = torch_call(case) if args.after else None
        for r in range(args.rounds):
            for k in ("base", "this") if r % 2 else ("this", "base"):
                times[k].append(after_time(calls[k], peer, clock) if peer else burst_time(calls[k], 0.03, clock))
        ratio = statistics.median(t / b for t, b in zip(times["this"], times["base"], strict=True))
        ratios.append(ratio)
        base_ms, this_ms = (statistics.median(times[k]) * 1e3 for k in ("base", "this"))
        print(f"{case.label:48} {base_ms:8.3f} {this_ms:8.3f}  {ratio:9.3f}  {same}")
    print(f"# this/base: median {statistics.median(ratios):.3f}, best {min(ratios):.3f}, worst {max(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
