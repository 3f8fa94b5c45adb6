"""The ``fbnops`` command line: ``fbnops demo | info``.

Exit codes: 0 success, 1 a check failed, 2 bad usage or bad input.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time

import numpy as np

import fbnops


def _demo_inputs(seed: int = 0):
    """The embedded default input: a small NHWC batch with a visible per-channel offset."""
    rng = np.random.default_rng(seed)
    shape = (4, 5, 5, 3)
    x = (rng.standard_normal(shape) * np.array([1.0, 2.0, 0.5]) + np.array([0.0, 3.0, -1.0])).astype(np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)
    scale = np.array([1.0, 0.5, 2.0], np.float32)
    offset = np.array([0.0, 0.1, -0.2], np.float32)
    return x, dy, scale, offset


def _summary(name: str, a: np.ndarray) -> str:
    a = np.asarray(a)
    if a.size == 0 or a.ndim == 0:
        return f"  {name:16s} shape={list(a.shape)} {a.dtype} {a.tolist() if a.ndim == 0 else ''}"
    if a.ndim == 1:
        return f"  {name:16s} shape={list(a.shape)} {a.dtype} {np.array2string(a, precision=5)}"
    return (
        f"  {name:16s} shape={list(a.shape)} {a.dtype} mean={a.mean():+.5f} std={a.std():.5f} "
        f"min={a.min():+.4f} max={a.max():+.4f}"
    )


def cmd_demo(args) -> int:
    """Forward + gradient on the embedded input, then a finite-difference check."""
    from fbnops.kernels import reference

    t0 = time.perf_counter()
    x, dy, scale, offset = _demo_inputs()
    empty = np.zeros(0, np.float32)
    with fbnops.backend(args.backend) if args.backend else _null():
        fwd = fbnops.raw_ops.FusedBatchNormV3(x=x, scale=scale, offset=offset, mean=empty, variance=empty)
        grad = fbnops.raw_ops.FusedBatchNormGradV3(
            y_backprop=dy,
            x=x,
            scale=scale,
            reserve_space_1=fwd.reserve_space_1,
            reserve_space_2=fwd.reserve_space_2,
            reserve_space_3=fwd.reserve_space_3,
        )
    print(f"fbnops {fbnops.__version__} demo  (backend: {args.backend or fbnops.get_backend()})")
    print(f"FusedBatchNormV3(x: {list(x.shape)} float32 NHWC, is_training=True)")
    for name, a in fwd._asdict().items():
        print(_summary(name, a))
    print("FusedBatchNormGradV3(y_backprop, x, scale, reserve_space_1..3)")
    for name, a in grad._asdict().items():
        print(_summary(name, a))

    # Finite differences of L = sum(y * dy) on the float64 forward.
    view = (x.shape[0] * x.shape[1] * x.shape[2], x.shape[3], 1)
    x64 = x.astype(np.float64)

    def loss(xv, sv, ov):
        y, _, _ = reference.batch_norm(
            xv.reshape(view), sv, ov, None, None, epsilon=1e-4, is_training=True, compute=np.float64
        )
        return float(np.sum(y.reshape(x.shape) * dy))

    h, worst = 1e-4, 0.0
    rng = np.random.default_rng(1)
    for _ in range(8):
        idx = tuple(int(rng.integers(d)) for d in x.shape)
        xp, xm = x64.copy(), x64.copy()
        xp[idx] += h
        xm[idx] -= h
        num = (loss(xp, scale, offset) - loss(xm, scale, offset)) / (2 * h)
        worst = max(worst, abs(num - grad.x_backprop[idx]) / max(1e-3, abs(num)))
    for k in range(3):
        for which in ("scale", "offset"):
            e = np.zeros(3)
            e[k] = h
            args_p = (x64, scale + e, offset) if which == "scale" else (x64, scale, offset + e)
            args_m = (x64, scale - e, offset) if which == "scale" else (x64, scale, offset - e)
            num = (loss(*args_p) - loss(*args_m)) / (2 * h)
            got = getattr(grad, f"{which}_backprop")[k]
            worst = max(worst, abs(num - got) / max(1e-3, abs(num)))
    ok = worst < 1e-3
    print(
        f"finite-difference check (8 x entries, all scale/offset): max rel err {worst:.2e} {'OK' if ok else 'FAILED'}"
    )
    print(f"done in {time.perf_counter() - t0:.3f} s")
    return 0 if ok else 1


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def cmd_info(args) -> int:
    from fbnops.framework.registry import _BACKEND_MODULES, _LOAD_ERRORS

    print(f"fbnops {fbnops.__version__}  (Python {platform.python_version()}, NumPy {np.__version__})")
    backends = fbnops.available_backends()
    for name in _BACKEND_MODULES:
        state = "available" if name in backends else f"missing ({_LOAD_ERRORS.get(name, '?')})"
        print(f"  backend {name:9s} {state}{'  [default]' if name == fbnops.get_backend() else ''}")
    try:
        from fbnops.kernels import cython_backend

        openmp = "on" if cython_backend.OPENMP_ENABLED else "off"
    except ImportError:
        openmp = "n/a (Cython kernels not built)"
    print(f"  OpenMP    {openmp}")
    print(f"  threads   {fbnops.get_num_threads()}")
    print("  SIMD      baseline build (x86-64 SSE2 vectors; no ISA-specific variants)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fbnops", description="The batch-norm gradient operator, five APIs.")
    p.add_argument("--version", action="version", version=f"fbnops {fbnops.__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    d = sub.add_parser("demo", help="run FusedBatchNormV3 and its gradient on a built-in input, with a check")
    d.add_argument("--backend", choices=["cython", "numba", "reference"], help="kernel backend")
    d.set_defaults(fn=cmd_demo)
    i = sub.add_parser("info", help="version, backends, OpenMP, threads")
    i.set_defaults(fn=cmd_info)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "fn", None):
        parser.print_help()
        return 2
    try:
        return args.fn(args)
    except fbnops.errors.OpError as e:
        print(f"fbnops: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
