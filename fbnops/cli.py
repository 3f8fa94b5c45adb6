"""The ``fbnops`` command line.

    fbnops demo [--ranks N]          FusedBatchNormV3 and its gradient with the builders, run, checked
    fbnops run FILE [-o out.npz]     scripted builder calls (JSON/YAML) or a GraphDef .pbtxt
    fbnops export --target T -o DIR  the same graph as a project on the real library (TF, oneDNN, DirectML)
    fbnops bench [--peers ...]       the benchmark against PyTorch, TensorFlow, oneDNN and the floor
    fbnops check [--shape ...]       finite-difference gradient checks and backend agreement
    fbnops explain [--shape ...]     every intermediate of the forward and the gradient, with numbers
    fbnops exercise list|start|check exercises that grade themselves (NumPy and the builders)
    fbnops info                      version, backends, OpenMP, threads, SIMD build
    fbnops docs [--build-only]       build this documentation site and serve it on 127.0.0.1

Exit codes: 0 success, 1 a check failed (or a benchmark regression), 2 bad usage or bad
input (one line ``fbnops: error: ...`` on stderr, never a traceback), 130 interrupted,
141 the reader of stdout went away (``fbnops check | head``: quiet).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

import numpy as np

import fbnops
from fbnops.framework import dtypes, registry
from fbnops.framework.layouts import DATA_FORMATS, format_rank
from fbnops.framework.threads import setting_kept

EXIT_OK, EXIT_CHECK_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 0, 1, 2, 130, 141
BACKENDS = registry.known_backends()
FORMATS = DATA_FORMATS
DTYPES = ("float32", "float16", "bfloat16")


class UsageError(Exception):
    """A user mistake found by a command (exit 2, one line)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, like the command's own errors; argparse exits 2
        self.exit(EXIT_BAD_INPUT, f"fbnops: error: {message} (see '{self.prog} --help')\n")


def _print_json(doc) -> None:
    json.dump(doc, sys.stdout, indent=1)
    print()


def cmd_demo(args) -> int:
    """FusedBatchNormV3 and its gradient built with the graph builders, run, and checked."""
    if args.ranks is not None:
        return _distributed_demo(args.ranks)
    from fbnops.tools import demo

    return EXIT_OK if demo.run(args.backend) else EXIT_CHECK_FAILED


def _distributed_demo(ranks: int) -> int:
    try:
        from fbnops.distributed.demo import main as distributed_main
    except ImportError as e:
        raise UsageError(f"--ranks needs the synchronized batch norm (fbnops.distributed.demo): {e}") from None
    return distributed_main(ranks)


def cmd_run(args) -> int:
    from fbnops.tools import runfile
    from fbnops.tools.demo import summary

    path = Path(args.file)
    out = Path(args.output) if args.output else path.with_suffix(".out.npz")
    runfile.check_writable(out)  # before any work
    feeds = _graphdef_feeds(args, path)
    if path.suffix == ".pbtxt":
        results = runfile.run_pbtxt(path, feeds, args.fetch or [], args.backend)
    else:
        results = runfile.run_file(path, args.backend)
    runfile.save_npz(results, out)
    if args.json:
        _print_json({"output": str(out), "arrays": {k: {"shape": list(v.shape), "dtype": dtypes.tf_name(v.dtype)}
                                                     for k, v in results.items()}})  # fmt: skip
        return EXIT_OK
    for name, v in results.items():
        print(summary(name, v))
    widened = [k for k, v in results.items() if v.dtype == dtypes.bfloat16]
    print(f"saved {len(results)} arrays to {out}")
    if widened:
        print(f"note: bfloat16 arrays {widened} are stored as float32 (exact); runfile.load_npz restores them")
    return EXIT_OK


def _graphdef_feeds(args, path: Path) -> dict[str, str]:
    """``--feed NAME=FILE.npy`` as {name: file}; --feed/--fetch are for GraphDef (.pbtxt) sources only."""
    if path.suffix != ".pbtxt":
        if args.feed or args.fetch:
            raise UsageError(
                "--feed/--fetch are for GraphDef (.pbtxt) files; a run file lists its own inputs and fetch"
            )
        return {}
    feeds = {}
    for f in args.feed or []:
        name, sep, file = f.partition("=")
        if not sep or not name or not file:
            raise UsageError(f"--feed expects NAME=FILE.npy, got {f!r}")
        feeds[name] = file
    return feeds


def cmd_export(args) -> int:
    from fbnops.tools.export._cli import export_command

    path = Path(args.source)
    out, plan = export_command(path, args.target, Path(args.output), _graphdef_feeds(args, path), args.fetch or [],
                               args.force)  # fmt: skip
    print(f"exported {len(plan.ops)} ops, {len(plan.fetches)} fetches ({args.target}) to {out}")
    print(f"run it: {out / 'run.sh'}   (writes {', '.join(plan.output_files().values())})")
    return EXIT_OK


def cmd_bench(args) -> int:
    from fbnops.tools.bench.__main__ import run
    from fbnops.tools.bench.arguments import BenchUsageError

    try:
        return run(args, threads=args.threads)
    except BenchUsageError as e:
        raise UsageError(str(e)) from None


def _parse_shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(d) for d in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape must be comma-separated integers, got {text!r}") from None
    if len(shape) not in (4, 5) or any(d < 1 or d > 4096 for d in shape) or np.prod(shape) > 1 << 16:
        raise argparse.ArgumentTypeError(
            f"shape must have 4 or 5 dims of 1..4096 and at most 2**16 elements, got {text!r}"
        )
    return shape


def _layout(shape: tuple[int, ...], data_format: str) -> str:
    """NHWC/NCHW name 4-D shapes; a 5-D shape takes the 3-D name of the same family."""
    if len(shape) == 5 and data_format in ("NHWC", "NCHW"):
        return {"NHWC": "NDHWC", "NCHW": "NCDHW"}[data_format]
    if len(shape) != format_rank(data_format):
        raise UsageError(f"--data-format {data_format} needs a {format_rank(data_format)}-D --shape")
    return data_format


def cmd_check(args) -> int:
    from fbnops.tools._progress import progress
    from fbnops.tools.check import run_checks

    fmt = _layout(args.shape, args.data_format)
    backends = args.backends or fbnops.available_backends()
    missing = [b for b in backends if b not in fbnops.available_backends()]
    if missing:
        raise UsageError(f"backend(s) {missing} not available here; available: {fbnops.available_backends()}")
    if not args.json:
        print(f"fbnops check: shape {list(args.shape)} {fmt} {args.dtype}", flush=True)
    with progress(2 * len(backends), "gradient checks") as bar:
        results = run_checks(args.shape, fmt, args.dtype, backends, args.points, args.seed, bar.advance)
    failed = not all(r.ok for r in results)
    if args.json:
        _print_json({"shape": list(args.shape), "data_format": fmt, "dtype": args.dtype, "ok": not failed,
                     "results": [{**r.__dict__, "ok": r.ok} for r in results]})  # fmt: skip
    else:
        print("\n".join(r.line() for r in results))
    return EXIT_CHECK_FAILED if failed else EXIT_OK


def cmd_explain(args) -> int:
    from fbnops.tools.explain import example_inputs, explain

    fmt = _layout(args.shape, args.data_format)
    dt = dtypes.from_user_name(args.dtype)
    inp = example_inputs(args.shape, fmt, args.seed, dt)
    e = explain(inp["x"], inp["dy"], inp["scale"], inp["offset"], mean=inp["mean"], variance=inp["variance"],
                epsilon=args.epsilon, data_format=fmt, is_training=not args.frozen)  # fmt: skip
    if args.json:
        _print_json(e.to_dict())
    else:
        sys.stdout.write(e.to_markdown() if args.markdown else e.to_text())
    return EXIT_OK if e.ok else EXIT_CHECK_FAILED


def cmd_exercise(args) -> int:
    from fbnops.tools import exercise

    if args.action != "list" and not args.target:
        raise UsageError(f"exercise {args.action} needs {'a NAME' if args.action == 'start' else 'a FILE'}"
                         " (see 'fbnops exercise list')")  # fmt: skip
    try:
        if args.action == "list":
            for name, ex in exercise.EXERCISES.items():
                print(f"{name:18s} {ex.summary}")
            return EXIT_OK
        if args.action == "start":
            path = exercise.start(args.target)
            print(f"wrote {path}: fill in its functions, then run 'fbnops exercise check {path}'")
            return EXIT_OK
        report = exercise.check(Path(args.target))
    except exercise.ExerciseError as e:
        raise UsageError(str(e)) from None
    print(report)
    return EXIT_OK if report.ok else EXIT_CHECK_FAILED


def cmd_info(args) -> int:
    try:
        from fbnops.kernels import cython_backend

        openmp = "on" if cython_backend.OPENMP_ENABLED else "off (single-threaded build)"
        simd = cython_backend.SIMD_VARIANT
    except ImportError:
        openmp, simd = "n/a (Cython kernels not built)", "n/a"
    backends = registry.backend_states()
    if args.json:
        _print_json({"version": fbnops.__version__, "python": platform.python_version(), "numpy": np.__version__,
                     "backends": backends, "default_backend": fbnops.get_backend(), "openmp": openmp,
                     "threads": fbnops.get_num_threads(), "simd": simd})  # fmt: skip
        return EXIT_OK
    print(f"fbnops {fbnops.__version__}  (Python {platform.python_version()}, NumPy {np.__version__})")
    for name, state in backends.items():
        print(f"  backend {name:9s} {state}{'  [default]' if name == fbnops.get_backend() else ''}")
    print(f"  OpenMP    {openmp}")
    print(f"  threads   {fbnops.get_num_threads()}  (fbnops.set_num_threads / FBNOPS_NUM_THREADS)")
    print(f"  SIMD      {simd} build of the Cython kernels  (FBNOPS_SIMD=baseline or x86-64-v3 forces another)")
    return EXIT_OK


def cmd_docs(args) -> int:
    """Build the site into the cache (``$XDG_CACHE_HOME/fbnops/site``) and serve it until Ctrl-C."""
    from fbnops.tools.docs import run

    return run(build_only=args.build_only, port=args.port, open_browser=args.open)


def _shape_arguments(p, default: str, backend_choice: bool = True) -> None:
    p.add_argument(
        "--shape", type=_parse_shape, default=_parse_shape(default), help=f"comma-separated (default {default})"
    )
    p.add_argument("--data-format", default="NHWC", choices=FORMATS)
    p.add_argument("--dtype", default="float32", choices=DTYPES)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")


MAX_POINTS = 100_000  # two forward passes per point: more would run for hours, not check more
MAX_RANKS = 1024  # MPI processes on one machine: beyond this mpiexec misreads the count or the machine stalls


def _at_most(limit: int, unit: str):
    """An argparse type: a positive integer up to ``limit`` (a huge count is a run without end, not a request)."""

    def parse(text: str) -> int:
        from fbnops.tools.bench.arguments import positive_int

        n = positive_int(text)
        if n > limit:
            raise argparse.ArgumentTypeError(f"at most {limit} {unit}, got {text[:20]!r}")
        return n

    return parse


def build_parser() -> argparse.ArgumentParser:
    from fbnops.tools.bench.arguments import add_arguments as bench_arguments

    p = _Parser(prog="fbnops", description="The batch-norm gradient operator, seen through five APIs.")
    p.add_argument("--version", action="version", version=f"fbnops {fbnops.__version__}")
    p.add_argument("--threads", type=int, help="kernel threads (default: the cores this process may use)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    d = sub.add_parser("demo", help="build and run FusedBatchNormV3 + its gradient, with a finite-difference check")
    d.add_argument("--backend", choices=BACKENDS, help="kernel backend (default: the fastest available)")
    d.add_argument(
        "--ranks",
        type=_at_most(MAX_RANKS, "ranks"),
        metavar="N",
        help="the synchronized batch norm over N MPI ranks instead",
    )
    d.set_defaults(fn=cmd_demo)

    r = sub.add_parser("run", help="run scripted builder calls (JSON/YAML) or a GraphDef .pbtxt; save an .npz")
    r.add_argument(
        "file",
        help="run file (.json, .yaml; format: the site's Run-file reference, see 'fbnops docs') or GraphDef (.pbtxt)",
    )
    r.add_argument("-o", "--output", help="output .npz (default: FILE.out.npz); bfloat16 is stored as float32")
    r.add_argument("--backend", choices=BACKENDS, help="kernel backend for every op")
    r.add_argument("--feed", action="append", metavar="NAME=FILE.npy", help="(.pbtxt) feed a placeholder")
    r.add_argument("--fetch", action="append", metavar="NAME", help="(.pbtxt) op or op:index to fetch (op = op:0)")
    r.add_argument("--json", action="store_true", help="list the saved arrays as JSON on stdout")
    r.set_defaults(fn=cmd_run)

    x = sub.add_parser("export", help="write a graph as a source project on the real library, with run.sh")
    x.add_argument("source", help="run file (.json, .yaml) or GraphDef (.pbtxt), read as 'fbnops run' reads it")
    x.add_argument("--target", required=True, help="tf-python, tf-cc, tf-java, onednn-graph or directml")
    x.add_argument("-o", "--output", required=True, metavar="DIR", help="the directory to write (must not exist)")
    x.add_argument("--feed", action="append", metavar="NAME=FILE.npy", help="(.pbtxt) feed a placeholder")
    x.add_argument("--fetch", action="append", metavar="NAME", help="(.pbtxt) op or op:index to fetch (op = op:0)")
    x.add_argument("--force", action="store_true", help="replace DIR if it exists")
    x.set_defaults(fn=cmd_export)

    b = sub.add_parser("bench", help="benchmark against PyTorch, TensorFlow, oneDNN (those installed) and the floor")
    bench_arguments(b, threads=False)
    b.set_defaults(fn=cmd_bench)

    c = sub.add_parser("check", help="gradient checks and backend agreement on a chosen shape")
    _shape_arguments(c, "4,5,5,3")
    c.add_argument("--backends", nargs="+", choices=BACKENDS, help="default: every available backend")
    points = _at_most(MAX_POINTS, "points")
    c.add_argument("--points", type=points, default=6, help=f"x entries to check (1..{MAX_POINTS})")
    c.set_defaults(fn=cmd_check)

    e = sub.add_parser("explain", help="every intermediate of the forward and the gradient for a small input")
    _shape_arguments(e, "2,2,2,3")
    e.add_argument("--epsilon", type=float, default=1e-3)
    e.add_argument("--frozen", action="store_true", help="is_training=False: the running statistics are given")
    e.add_argument("--markdown", action="store_true", help="Markdown with LaTeX formulas (the docs' format)")
    e.set_defaults(fn=cmd_explain)

    x = sub.add_parser("exercise", help="exercises that grade themselves: list | start NAME | check FILE")
    x.add_argument("action", choices=("list", "start", "check"), help="list the exercises, start one, or check a file")
    x.add_argument("target", nargs="?", help="start: the exercise's name; check: your file (NAME.py)")
    x.set_defaults(fn=cmd_exercise)

    i = sub.add_parser("info", help="version, backends, OpenMP, thread count, SIMD build")
    i.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    i.set_defaults(fn=cmd_info)

    o = sub.add_parser("docs", help="build the documentation site (docs extra) and serve it on 127.0.0.1")
    o.add_argument("--build-only", action="store_true", help="build into the cache, print its path, do not serve")
    o.add_argument("--port", type=int, default=8000, help="port on 127.0.0.1 (default 8000; 0: any free port)")
    o.add_argument("--open", action="store_true", help="also open the site in a web browser")
    o.set_defaults(fn=cmd_docs)
    return p


def _user_error(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return f"{e.strerror}: {e.filename}" if e.filename else e.strerror
    return str(e) or type(e).__name__


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "fn", None):
            parser.print_help(sys.stderr)
            return EXIT_BAD_INPUT
        with setting_kept():  # (--threads is this command's: an in-process caller keeps its own setting)
            if args.threads is not None:
                fbnops.set_num_threads(args.threads)
            code = args.fn(args)
        sys.stdout.flush()  # a reader that went away (| head) is met here, not in Python's exit flush
        return code
    except (UsageError, fbnops.errors.OpError, ValueError, MemoryError, OSError) as e:
        if isinstance(e, BrokenPipeError):
            return _quiet_broken_pipe()
        print(f"fbnops: error: {_user_error(e)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("fbnops: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _quiet_broken_pipe() -> int:
    """The reader went away (``| head``): no message, and no second error when Python flushes stdout."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
