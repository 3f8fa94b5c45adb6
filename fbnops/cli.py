"""The ``fbnops`` command line.

    fbnops demo                      build FusedBatchNormV3 and its gradient with the builders, run, check
    fbnops run FILE [-o out.npz]     scripted builder calls (JSON/YAML) or a GraphDef .pbtxt
    fbnops bench [--plot FILE.png]   the benchmark against PyTorch / TensorFlow / NumPy
    fbnops check [--shape ...]       finite-difference gradient checks and backend agreement
    fbnops info                      version, backends, OpenMP, threads, SIMD build

Exit codes: 0 success, 1 a check failed, 2 bad usage or bad input.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

import fbnops
from fbnops.framework import dtypes

EXIT_OK, EXIT_CHECK_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def _summary(name: str, a: np.ndarray) -> str:
    a = np.asarray(a)
    head = f"  {name:20s} {str(list(a.shape)):14s} {dtypes.tf_name(a.dtype):8s}"
    if a.size == 0:
        return head + " (empty)"
    if a.ndim <= 1:
        return head + " " + np.array2string(np.asarray(a, np.float32).reshape(-1), precision=5)
    f = a.astype(np.float64)
    return head + f" mean {f.mean():+.5f}  std {f.std():.5f}  min {f.min():+.4f}  max {f.max():+.4f}"


def _loss_and_grad_check(x, w, scale, offset, eps, data_format, is_training, mean, var, grads, n_points, rng):
    """Max relative error of the op's gradients against central differences of the float64 forward."""
    from fbnops.kernels import reference
    from fbnops.ops.batch_norm import canonical_view

    view = canonical_view(x.shape, data_format)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)

    def loss(xv, sv, ov):
        y, _, _ = reference.batch_norm(
            xv.reshape(view), sv, ov, mean, var, epsilon=eps, is_training=is_training, compute=np.float64
        )
        return float(np.sum(y.reshape(x.shape) * w64))

    h, worst = 1e-4, 0.0
    dx, dscale, doffset = grads
    for _ in range(n_points):
        idx = tuple(int(rng.integers(d)) for d in x.shape)
        xp, xm = x64.copy(), x64.copy()
        xp[idx] += h
        xm[idx] -= h
        num = (loss(xp, scale, offset) - loss(xm, scale, offset)) / (2 * h)
        worst = max(worst, abs(num - float(dx[idx])) / max(1e-2, abs(num)))
    for k in range(scale.shape[0]):
        e = np.zeros(scale.shape[0])
        e[k] = h
        for which, got in (("scale", dscale[k]), ("offset", doffset[k])):
            plus = (x64, scale + e, offset) if which == "scale" else (x64, scale, offset + e)
            minus = (x64, scale - e, offset) if which == "scale" else (x64, scale, offset - e)
            num = (loss(*plus) - loss(*minus)) / (2 * h)
            worst = max(worst, abs(num - float(got)) / max(1e-2, abs(num)))
    return worst


def cmd_demo(args) -> int:
    """FusedBatchNormV3 and its gradient built with the graph builders, run, and checked."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(0)
    shape = (4, 5, 5, 3)  # NHWC: a small batch with a visible per-channel offset and spread
    x = (rng.standard_normal(shape) * [1.0, 2.0, 0.5] + [0.0, 3.0, -1.0]).astype(np.float32)
    w = rng.standard_normal(shape).astype(np.float32)  # the upstream gradient dL/dy
    scale = np.array([1.0, 0.5, 2.0], np.float32)
    offset = np.array([0.0, 0.1, -0.2], np.float32)

    scope = fbnops.Scope(fbnops.Graph())
    if args.backend:
        scope = scope.with_kernel_label(args.backend)
    xp = scope.placeholder(np.float32, shape, name="x")
    empty = scope.constant(np.zeros(0, np.float32), name="empty")
    bn = scope.with_op_name("bn").add_op(
        "FusedBatchNormV3",
        [xp, scope.constant(scale, name="scale"), scope.constant(offset, name="offset"), empty, empty],
        {"epsilon": 1e-3},
    )
    params = [bn.inputs[1], bn.inputs[2]]
    dx, dscale, doffset = fbnops.gradients(bn.outputs[0], [xp, *params], grad_ys=[scope.constant(w, name="dy")])
    grad_op = dx.op
    values = fbnops.Session(scope.graph).run([*bn.outputs, *grad_op.outputs], {xp: x})

    print(
        f"fbnops {fbnops.__version__} demo   backend: {args.backend or fbnops.get_backend()}   "
        f"threads: {fbnops.get_num_threads()}"
    )
    print(f"graph: {len(scope.graph)} ops, e.g. {bn.name} ({bn.type}) -> {grad_op.name} ({grad_op.type})")
    print(f"FusedBatchNormV3  x {list(shape)} float NHWC, is_training=True, epsilon=0.001")
    for out, v in zip(bn.outputs, values[:6], strict=True):
        print(
            _summary(
                out.name.split(":")[0]
                + "."
                + ("y batch_mean batch_variance reserve_space_1 reserve_space_2 reserve_space_3".split()[out.index]),
                v,
            )
        )
    print("FusedBatchNormGradV3  (added by fbnops.gradients; fed the forward's reserve spaces)")
    names = "x_backprop scale_backprop offset_backprop reserve_space_4 reserve_space_5".split()
    for name, v in zip(names, values[6:], strict=True):
        print(_summary(name, v))
    worst = _loss_and_grad_check(x, w, scale, offset, 1e-3, "NHWC", True, None, None, values[6:9], 8, rng)
    ok = worst < 1e-3
    print(
        f"finite-difference check of d(sum(y*dy)) / d(x, scale, offset): max rel err {worst:.1e}  "
        f"{'OK' if ok else 'FAILED'}"
    )
    print(f"done in {time.perf_counter() - t0:.2f} s")
    return EXIT_OK if ok else EXIT_CHECK_FAILED


def cmd_run(args) -> int:
    from fbnops import runfile

    path = Path(args.file)
    try:
        if path.suffix == ".pbtxt":
            feeds = {}
            for f in args.feed or []:
                name, sep, file = f.partition("=")
                if not sep:
                    raise runfile.RunFileError("--feed", f"expected NAME=FILE.npy, got {f!r}")
                feeds[name] = file
            results = runfile.run_pbtxt(path, feeds, args.fetch or [], args.backend)
        else:
            if args.feed or args.fetch:
                raise runfile.RunFileError("--feed/--fetch", "only for GraphDef (.pbtxt) files")
            results = runfile.run_file(path, args.backend)
        out = Path(args.output) if args.output else path.with_suffix(".out.npz")
        runfile.save_atomically(results, out)
    except runfile.RunFileError as e:
        print(f"fbnops run: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for name, v in results.items():
        print(_summary(name, v))
    print(f"saved {len(results)} arrays to {out}")
    return EXIT_OK


def cmd_bench(args) -> int:
    from fbnops import bench

    argv = ["--progress"] + (["--quick"] if args.quick else []) + (["--plot", args.plot] if args.plot else [])
    argv += ["--peers", args.peers, "--rounds", str(args.rounds)] + (["--json", args.json] if args.json else [])
    return bench.main(argv)


def _parse_shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(d) for d in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape must be comma-separated integers, got {text!r}") from None
    if len(shape) not in (4, 5) or any(d < 1 or d > 4096 for d in shape) or np.prod(shape) > 1 << 22:
        raise argparse.ArgumentTypeError("shape must have 4 or 5 dims of 1..4096 and at most 2**22 elements")
    return shape


def cmd_check(args) -> int:
    """For each backend: finite-difference gradient check; then agreement between backends."""
    rng = np.random.default_rng(args.seed)
    fmt = args.data_format
    if len(args.shape) == 5 and fmt in ("NHWC", "NCHW"):
        fmt = {"NHWC": "NDHWC", "NCHW": "NCDHW"}[fmt]
    if len(args.shape) != (5 if fmt in ("NDHWC", "NCDHW") else 4):
        print(
            f"fbnops check: error: data_format {fmt} needs a {5 if fmt in ('NDHWC', 'NCDHW') else 4}-D shape",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    c = args.shape[1] if fmt.startswith("NC") else args.shape[-1]
    dt = dtypes.from_tf_name({"float32": "float", "float16": "half", "bfloat16": "bfloat16"}[args.dtype])
    x = rng.standard_normal(args.shape).astype(dt)
    w = rng.standard_normal(args.shape).astype(dt)
    scale = (rng.random(c) + 0.5).astype(np.float32)
    offset = rng.standard_normal(c).astype(np.float32)
    mean, var = (rng.standard_normal(c) * 0.1).astype(np.float32), (rng.random(c) + 0.5).astype(np.float32)
    tol = {"float32": 1e-3, "float16": 2e-2, "bfloat16": 1e-1}[args.dtype]
    failed = False
    results = {}
    print(f"fbnops check: shape {list(args.shape)} {fmt} {args.dtype}, tolerance {tol:g}")
    for backend in args.backends or fbnops.available_backends():
        with fbnops.backend(backend):
            for training in (True, False):
                fwd = fbnops.raw_ops.FusedBatchNormV3(
                    x=x,
                    scale=scale,
                    offset=offset,
                    mean=mean,
                    variance=var,
                    data_format=fmt,
                    is_training=training,
                    epsilon=1e-3,
                )
                g = fbnops.raw_ops.FusedBatchNormGradV3(
                    y_backprop=w,
                    x=x,
                    scale=scale,
                    reserve_space_1=fwd.reserve_space_1,
                    reserve_space_2=fwd.reserve_space_2,
                    reserve_space_3=fwd.reserve_space_3,
                    epsilon=1e-3,
                    data_format=fmt,
                    is_training=training,
                )
                results[(backend, training)] = g
                err = _loss_and_grad_check(
                    x.astype(np.float64),
                    w.astype(np.float64),
                    scale,
                    offset,
                    1e-3,
                    fmt,
                    training,
                    mean,
                    var,
                    g[:3],
                    args.points,
                    rng,
                )
                ok = err < tol
                failed |= not ok
                print(
                    f"  {backend:9s} {'training' if training else 'frozen  '}  gradient vs finite differences: "
                    f"max rel err {err:.1e}  {'OK' if ok else 'FAILED'}"
                )
    for training in (True, False):
        base = results[("reference", training)] if ("reference", training) in results else None
        for (backend, t), g in results.items():
            if t != training or base is None or backend == "reference":
                continue
            ref = base.x_backprop.astype(np.float64)
            err = float(np.max(np.abs(g.x_backprop.astype(np.float64) - ref)) / max(np.max(np.abs(ref)), 1e-30))
            ok = err < tol
            failed |= not ok
            print(
                f"  {backend:9s} {'training' if training else 'frozen  '}  agreement with reference: "
                f"max rel err {err:.1e}  {'OK' if ok else 'FAILED'}"
            )
    return EXIT_CHECK_FAILED if failed else EXIT_OK


def cmd_info(args) -> int:
    from fbnops.framework.registry import _BACKEND_MODULES, _LOAD_ERRORS

    print(f"fbnops {fbnops.__version__}  (Python {platform.python_version()}, NumPy {np.__version__})")
    backends = fbnops.available_backends()
    for name in _BACKEND_MODULES:
        state = "available" if name in backends else f"missing ({_LOAD_ERRORS.get(name, '?')})"
        print(f"  backend {name:9s} {state}{'  [default]' if name == fbnops.get_backend() else ''}")
    try:
        from fbnops.kernels import cython_backend

        openmp = "on" if cython_backend.OPENMP_ENABLED else "off (single-threaded build)"
        simd = cython_backend.SIMD_VARIANT
    except ImportError:
        openmp, simd = "n/a (Cython kernels not built)", "n/a"
    print(f"  OpenMP    {openmp}")
    print(f"  threads   {fbnops.get_num_threads()}  (fbnops.set_num_threads / FBNOPS_NUM_THREADS)")
    print(f"  SIMD      {simd} build of the Cython kernels  (FBNOPS_SIMD=baseline forces the portable one)")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fbnops", description="The batch-norm gradient operator, seen through five APIs.")
    p.add_argument("--version", action="version", version=f"fbnops {fbnops.__version__}")
    p.add_argument("--threads", type=int, help="kernel threads (default: the cores this process may use)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    backends = ["cython", "numba", "reference"]

    d = sub.add_parser("demo", help="build and run FusedBatchNormV3 + its gradient, with a finite-difference check")
    d.add_argument("--backend", choices=backends, help="kernel backend (default: the fastest available)")
    d.set_defaults(fn=cmd_demo)

    r = sub.add_parser("run", help="run scripted builder calls (JSON/YAML) or a GraphDef .pbtxt; save an .npz")
    r.add_argument("file", help="run file (.json, .yaml) or GraphDef (.pbtxt)")
    r.add_argument("-o", "--output", help="output .npz (default: FILE.out.npz)")
    r.add_argument("--backend", choices=backends, help="kernel backend for every op")
    r.add_argument("--feed", action="append", metavar="NAME=FILE.npy", help="(.pbtxt) feed a placeholder")
    r.add_argument("--fetch", action="append", metavar="OP:INDEX", help="(.pbtxt) output to fetch")
    r.set_defaults(fn=cmd_run)

    b = sub.add_parser("bench", help="benchmark against PyTorch, TensorFlow and NumPy (peers that are installed)")
    b.add_argument("--quick", action="store_true", help="3 rounds, float32 gradient only")
    b.add_argument("--peers", default="torch,tf,ref,numba", help="comma-separated peers")
    b.add_argument("--rounds", type=int, default=9)
    b.add_argument("--plot", metavar="FILE.png", help="also plot the times against the streaming floor")
    b.add_argument("--json", metavar="FILE", help="write the results as JSON")
    b.set_defaults(fn=cmd_bench)

    c = sub.add_parser("check", help="gradient checks and backend agreement on a chosen shape")
    c.add_argument("--shape", type=_parse_shape, default=(4, 5, 5, 3), help="comma-separated, e.g. 4,5,5,3")
    c.add_argument("--data-format", default="NHWC", choices=["NHWC", "NCHW", "NDHWC", "NCDHW"])
    c.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    c.add_argument("--backends", nargs="+", choices=backends)
    c.add_argument("--points", type=int, default=6, help="x entries to check by finite differences")
    c.add_argument("--seed", type=int, default=0)
    c.set_defaults(fn=cmd_check)

    i = sub.add_parser("info", help="version, backends, OpenMP, thread count, SIMD build")
    i.set_defaults(fn=cmd_info)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "fn", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        if args.threads is not None:
            fbnops.set_num_threads(args.threads)
        return args.fn(args)
    except (fbnops.errors.OpError, ValueError) as e:
        print(f"fbnops: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
