"""Batch-norm gradient (and forward) benchmark: fbnops side by side with its peers.

Peers, each skipped when not installed:
  torch   PyTorch CPU, torch.ops.aten.native_batch_norm_backward (channels_last memory
          format for NHWC), torch.ops.aten.native_batch_norm for the forward
  tf      TensorFlow CPU, tf.raw_ops.FusedBatchNormGradV3 / FusedBatchNormV3 (eager)
  ref     the fbnops NumPy reference kernel
  numba   the fbnops Numba backend (when installed)

All peers run in one process, interleaved: every round calls each peer twice in a row
(the order rotating from round to round) and times the second call; the first lets the
previous library's worker threads, still spinning on the two cores, go idle, and brings
this peer's data into cache, as in a loop of one library's ops.  The medians of the rounds
are reported.  The Numba backend is timed against the Cython one in rounds of their own.
Ratios are fbnops time / peer time (< 1: fbnops is faster).

The floor.  Whatever the algorithm, a batch-norm gradient reads x and dy and writes dx;
the reductions must finish before dx can be written.  So no implementation can be faster
than streaming two arrays of nbytes(x) in and one out, which is timed in the same rounds
(out = a + b on the same threads, with ordinary and with non-temporal stores; the faster
counts).  "floor" is that time; "torch/floor" below 2 means that fbnops / torch <= 0.5 is
out of reach for any implementation on this machine.  GB/s is the effective bandwidth of
the two-pass gradient (5 x nbytes(x): read x, dy twice, write dx; the forward 4 x nbytes)
and "stream" the floor's bandwidth (3 x nbytes / floor).

    fbnops bench                       # everything (= python benchmarks/bench_bn_grad.py)
    fbnops bench --quick               # fewer rounds, float32 gradient only
    fbnops bench --peers torch         # only some peers
    fbnops bench --plot perf.png       # also draw times against the streaming floor
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

import fbnops
from fbnops.kernels import reference
from fbnops.kernels._cython import batch_norm as cy

SHAPES = [(32, 56, 56, 64), (32, 28, 28, 128), (32, 14, 14, 256), (32, 7, 7, 512), (16, 112, 112, 64)]
EPS = 1e-4


@dataclass
class Case:
    shape: tuple[int, int, int, int]  # (N, H, W, C)
    layout: str  # NHWC | NCHW
    dtype: str  # float32 | bfloat16
    op: str  # grad | forward
    data: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.op:7s} {str(self.shape):18s} {self.layout} {self.dtype:8s}"

    def make(self, seed: int = 0) -> None:
        n, h, w, c = self.shape
        rng = np.random.default_rng(seed)
        dims = (n, h, w, c) if self.layout == "NHWC" else (n, c, h, w)
        dt = np.float32 if self.dtype == "float32" else ml_dtypes.bfloat16
        x = rng.standard_normal(dims, dtype=np.float32)
        self.data = dict(
            x=x.astype(dt),
            dy=rng.standard_normal(dims, dtype=np.float32).astype(dt),
            scale=(rng.random(c) + 0.5).astype(np.float32),
            offset=rng.standard_normal(c).astype(np.float32),
            mean=x.mean(axis=(0, 1, 2) if self.layout == "NHWC" else (0, 2, 3)).astype(np.float32),
            var=x.var(axis=(0, 1, 2) if self.layout == "NHWC" else (0, 2, 3)).astype(np.float32),
        )


# ---------------------------------------------------------------------------------------
# Peers: each returns a zero-argument callable for a case (or None if unsupported).
# ---------------------------------------------------------------------------------------


def fbnops_call(case: Case, backend: str = "cython"):
    d = case.data
    empty = np.zeros(0, np.float32)
    if case.op == "grad":

        def run():
            with fbnops.backend(backend):
                return fbnops.raw_ops.FusedBatchNormGradV3(
                    y_backprop=d["dy"],
                    x=d["x"],
                    scale=d["scale"],
                    reserve_space_1=d["mean"],
                    reserve_space_2=d["var"],
                    reserve_space_3=empty,
                    epsilon=EPS,
                    data_format=case.layout,
                )
    else:

        def run():
            with fbnops.backend(backend):
                return fbnops.raw_ops.FusedBatchNormV3(
                    x=d["x"],
                    scale=d["scale"],
                    offset=d["offset"],
                    mean=empty,
                    variance=empty,
                    epsilon=EPS,
                    data_format=case.layout,
                )

    return run


def ref_call(case: Case):
    return fbnops_call(case, "reference")


def numba_call(case: Case):
    if "numba" not in fbnops.available_backends():
        return None
    return fbnops_call(case, "numba")


def torch_call(case: Case):
    import torch

    d = case.data
    tdt = torch.float32 if case.dtype == "float32" else torch.bfloat16

    def tensor(a):
        t = torch.from_numpy(np.asarray(a.astype(np.float32) if a.dtype != np.float32 else a)).to(tdt)
        if case.layout == "NHWC":  # same memory, NCHW logical order, channels_last format
            t = t.permute(0, 3, 1, 2)
            assert t.is_contiguous(memory_format=torch.channels_last)
        return t

    x, dy = tensor(d["x"]), tensor(d["dy"])
    w, b = torch.from_numpy(d["scale"]), torch.from_numpy(d["offset"])
    mean = torch.from_numpy(d["mean"])
    invstd = torch.from_numpy((1 / np.sqrt(d["var"] + EPS)).astype(np.float32))
    if case.op == "grad":
        return lambda: torch.ops.aten.native_batch_norm_backward(
            dy, x, w, None, None, mean, invstd, True, EPS, [True, True, True]
        )
    return lambda: torch.ops.aten.native_batch_norm(x, w, b, None, None, True, 0.1, EPS)


def _tf_grad(tf, dy, x, scale, mean, var, data_format: str):
    """TensorFlow's training gradient, as every TF measurement here calls it."""
    return tf.raw_ops.FusedBatchNormGradV3(
        y_backprop=dy,
        x=x,
        scale=scale,
        reserve_space_1=mean,
        reserve_space_2=var,
        reserve_space_3=tf.constant(0.0),
        epsilon=EPS,
        data_format=data_format,
        is_training=True,
    )


def tf_call(case: Case):
    import tensorflow as tf

    d = case.data
    tdt = tf.float32 if case.dtype == "float32" else tf.bfloat16
    x = tf.constant(d["x"].astype(np.float32), dtype=tf.float32)
    dy = tf.constant(d["dy"].astype(np.float32), dtype=tf.float32)
    x, dy = tf.cast(x, tdt), tf.cast(dy, tdt)
    scale, offset = tf.constant(d["scale"]), tf.constant(d["offset"])
    mean, var, empty = tf.constant(d["mean"]), tf.constant(d["var"]), tf.constant(np.zeros(0, np.float32))
    if case.op == "grad":

        def run():
            return _tf_grad(tf, dy, x, scale, mean, var, case.layout)[0].numpy()  # host memory, like fbnops
    else:

        def run():
            out = tf.raw_ops.FusedBatchNormV3(
                x=x,
                scale=scale,
                offset=offset,
                mean=empty,
                variance=empty,
                epsilon=EPS,
                data_format=case.layout,
                is_training=True,
            )
            return out[0].numpy()

    return run


PEERS = {"ref": ref_call, "numba": numba_call, "torch": torch_call, "tf": tf_call}


BACKEND_PEERS = ("numba",)  # other fbnops backends, timed against the Cython one in their own rounds


def load_peers(names: list[str], threads: int) -> dict:
    peers = {}
    for name in names:
        try:
            if name == "torch":
                import torch

                torch.set_num_threads(threads)
            elif name == "tf":
                os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
                import tensorflow as tf

                tf.config.threading.set_intra_op_parallelism_threads(threads)
                tf.config.threading.set_inter_op_parallelism_threads(1)
        except ImportError:
            print(f"# peer {name}: not installed, skipped")
            continue
        peers[name] = PEERS[name]
    return peers


def timeit_interleaved(calls: dict, rounds: int) -> dict:
    """Median time of each call over `rounds` rounds; in each round every call runs twice
    in a row and the second run is timed.

    The order rotates every round.  After a call, a library's worker threads keep spinning
    for a while (Eigen's pool in TensorFlow, each OpenMP runtime) and on a 2-core machine
    steal cycles from whatever runs next; the untimed first call absorbs that, so each peer
    is timed in its own steady state, as in a training loop of that library's ops.
    """
    for fn in calls.values():  # warm-up (JIT, allocator, caches)
        fn()
    names = list(calls)
    times = {k: [] for k in calls}
    for r in range(rounds):
        for k in names[r % len(names) :] + names[: r % len(names)]:
            calls[k]()
            t0 = time.perf_counter()
            calls[k]()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def floor_calls(nbytes: int, threads: int) -> dict:
    """Read two arrays of `nbytes`, write one: out = a + b with ordinary and with
    non-temporal stores (the data that any batch-norm gradient must move)."""
    n = max(nbytes // 4, 1)
    a, b, out = np.ones(n, np.float32), np.ones(n, np.float32), np.empty(n, np.float32)
    return {
        "stream": lambda: cy.stream_add(a, b, out, threads),
        "stream_nt": lambda: cy.stream_add(a, b, out, threads, True),
    }


def tiny_call_cost() -> float:
    """Median microseconds of one raw_ops gradient call on a (2,4,4,8) tensor."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 4, 8)).astype(np.float32)
    dy = rng.standard_normal((2, 4, 4, 8)).astype(np.float32)
    v = np.ones(8, np.float32)
    r3 = np.zeros((), np.float32)

    def call():
        fbnops.raw_ops.FusedBatchNormGradV3(
            y_backprop=dy, x=x, scale=v, reserve_space_1=v, reserve_space_2=v, reserve_space_3=r3
        )

    for _ in range(200):
        call()
    runs = []
    for _ in range(15):
        t0 = time.perf_counter()
        for _ in range(1000):
            call()
        runs.append((time.perf_counter() - t0) / 1000 * 1e6)
    return statistics.median(runs)


def accuracy(peers: dict) -> dict:
    """x offset by 1e4, N*H*W = 2**20: relative error of scale/offset_backprop vs float64."""
    rng = np.random.default_rng(7)
    shape = (16, 256, 256, 4)  # N*H*W = 2**20, NHWC
    x = (rng.standard_normal(shape) + 1e4).astype(np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)
    mean = x.astype(np.float64).mean(axis=(0, 1, 2)).astype(np.float32)
    var = x.astype(np.float64).var(axis=(0, 1, 2)).astype(np.float32)
    scale = np.ones(4, np.float32)
    view = (2**20, 4, 1)
    _, ds64, do64 = reference.batch_norm_grad(
        x.reshape(view), dy.reshape(view), scale, mean, var, epsilon=EPS, is_training=True, compute=np.float64
    )

    def rel(a, b):
        return float(np.max(np.abs(np.asarray(a, np.float64) - b)) / np.max(np.abs(b)))

    out = fbnops.raw_ops.FusedBatchNormGradV3(
        y_backprop=dy,
        x=x,
        scale=scale,
        reserve_space_1=mean,
        reserve_space_2=var,
        reserve_space_3=np.zeros((), np.float32),
        epsilon=EPS,
    )
    result = {"fbnops": (rel(out.scale_backprop, ds64), rel(out.offset_backprop, do64))}
    if "tf" in peers:
        import tensorflow as tf

        t = _tf_grad(tf, dy, x, scale, mean, var, "NHWC")
        result["tf"] = (rel(t[1].numpy(), ds64), rel(t[2].numpy(), do64))
    if "torch" in peers:
        import torch

        tx = torch.from_numpy(x).permute(0, 3, 1, 2)
        tdy = torch.from_numpy(dy).permute(0, 3, 1, 2)
        invstd = torch.from_numpy((1 / np.sqrt(var.astype(np.float64) + EPS)).astype(np.float32))
        _, dw, db = torch.ops.aten.native_batch_norm_backward(
            tdy,
            tx,
            torch.from_numpy(scale),
            None,
            None,
            torch.from_numpy(mean),
            invstd,
            True,
            EPS,
            [True, True, True],
        )
        result["torch"] = (rel(dw.numpy(), ds64), rel(db.numpy(), do64))
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--peers", default="torch,tf,ref,numba", help="comma-separated: torch,tf,ref,numba")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--quick", action="store_true", help="3 rounds, float32 gradient only")
    p.add_argument("--threads", type=int, default=fbnops.get_num_threads())
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--ops", default="grad,forward")
    p.add_argument("--json", help="write the results to this file")
    p.add_argument("--progress", action="store_true", help="show a progress bar on stderr")
    p.add_argument("--plot", metavar="FILE.png", help="plot the times and the streaming floor (needs matplotlib)")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.dtypes, args.ops = 3, "float32", "grad"
    fbnops.set_num_threads(args.threads)
    peers = load_peers([s for s in args.peers.split(",") if s], args.threads)

    cases = [
        Case(shape, layout, dtype, op)
        for op in args.ops.split(",")
        for dtype in args.dtypes.split(",")
        for shape in SHAPES
        for layout in ("NHWC", "NCHW")
    ]
    print(f"# fbnops {fbnops.__version__}, {args.threads} threads, {args.rounds} interleaved rounds, medians")
    print(f"# peers: {', '.join(peers) or 'none'}; ratio = fbnops time / peer time")
    rows = []
    header = f"{'case':48s} {'fbnops':>9s}"
    for name in peers:
        header += f" {name:>9s} {'ratio':>6s}"
    print(header + f" {'GB/s':>6s} {'stream':>6s} {'%':>4s} {'floor':>9s} {'t/fl':>5s}")
    for i, case in enumerate(cases):
        if args.progress:
            done = int(30 * i / len(cases))
            print(f"\r[{'#' * done}{'.' * (30 - done)}] {i}/{len(cases)}", end="", file=sys.stderr, flush=True)
        case.make()
        calls = {"fbnops": fbnops_call(case)}
        for name, factory in peers.items():
            fn = factory(case)
            if fn is not None:
                calls[name] = fn
        backends = {name: calls.pop(name) for name in BACKEND_PEERS if name in calls}
        nbytes = case.data["x"].nbytes
        floors = floor_calls(nbytes, args.threads)
        times = timeit_interleaved({**calls, **floors}, args.rounds)
        floor = min(times.pop(name) for name in floors)
        if backends:  # fbnops backends against each other, without the frameworks in between
            pair = timeit_interleaved({"fbnops": calls["fbnops"], **backends}, args.rounds)
            for name in backends:
                times[name] = pair[name] * times["fbnops"] / pair["fbnops"]  # the pair's ratio
        # grad: read x, dy twice, write dx; forward: read x three times (sum, centered squares, y), write y
        moved = (5 if case.op == "grad" else 4) * nbytes
        gbs = moved / times["fbnops"] / 1e9
        stream = 3 * nbytes / floor / 1e9
        line = f"{case.label:48s} {times['fbnops'] * 1e3:8.3f}m"
        row = {
            "case": case.label,
            "fbnops_ms": times["fbnops"] * 1e3,
            "gbs": gbs,
            "stream_gbs": stream,
            "floor_ms": floor * 1e3,
        }
        if case.op == "grad" and "torch" in times:
            row["torch_floor"] = times["torch"] / floor
        for name in peers:
            if name in times:
                ratio = times["fbnops"] / times[name]
                line += f" {times[name] * 1e3:8.3f}m {ratio:6.2f}"
                row[f"{name}_ms"], row[f"ratio_{name}"] = times[name] * 1e3, ratio
            else:
                line += f" {'-':>9s} {'-':>6s}"
        line += f" {gbs:6.1f} {stream:6.1f} {100 * gbs / stream:4.0f} {floor * 1e3:8.3f}m"
        line += f" {row['torch_floor']:5.2f}" if "torch_floor" in row else f" {'-':>5s}"
        print(line, flush=True)
        rows.append(row)
        case.data.clear()
    if args.progress:
        print(f"\r[{'#' * 30}] {len(cases)}/{len(cases)}", file=sys.stderr)

    print()
    for name in peers:
        ratios = {}
        for r in rows:
            if f"ratio_{name}" in r:
                key = r["case"].split()[0] + " " + r["case"].split()[-1]
                ratios.setdefault(key, []).append(r[f"ratio_{name}"])
        for key, v in ratios.items():
            print(f"# vs {name:5s} {key:18s} worst ratio {max(v):.2f}  median {statistics.median(v):.2f}")
    grads = [r for r in rows if "torch_floor" in r]
    if grads:
        unreachable = [" ".join(r["case"].split()[1:]) for r in grads if r["torch_floor"] < 2]
        print(f"# torch within 2x of the floor (fbnops/torch <= 0.5 out of reach): {len(unreachable)} of {len(grads)}")
        for label in unreachable:
            print(f"#   {label}")
        within = sum(r["ratio_torch"] <= 0.5 for r in grads)
        print(f"# fbnops/torch <= 0.5 on {within} of {len(grads)} gradient cases")
    for name in BACKEND_PEERS:
        slower = [1 / r[f"ratio_{name}"] for r in rows if f"ratio_{name}" in r]
        if slower:
            within = sum(v <= 1.5 for v in slower)
            print(
                f"# {name} / cython time: worst {max(slower):.2f}  median {statistics.median(slower):.2f}"
                f"  (<= 1.5 on {within} of {len(slower)} cases)"
            )
    tiny = tiny_call_cost()
    print(f"# raw_ops call on a (2,4,4,8) tensor: {tiny:.1f} us (median of 15 x 1000 calls)")
    acc = accuracy(peers)
    for name, (ds, do) in acc.items():
        print(f"# accuracy x+1e4, N*H*W=2^20, vs float64: {name:6s} scale_backprop {ds:.2e}  offset_backprop {do:.2e}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "tiny_us": tiny, "accuracy": acc}, f, indent=1)
    if args.plot:
        plot(rows, list(peers), args.plot)
        print(f"# plot written to {args.plot}")
    return 0


def plot(rows: list[dict], peers: list[str], path: str) -> None:
    """Times per case (log scale) for fbnops and each peer, with the streaming floor."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [r["case"].replace("  ", " ") for r in rows]
    y = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(10, 0.32 * len(rows) + 1.5))
    names = ["fbnops"] + [p for p in peers if any(f"{p}_ms" in r for r in rows)]
    height = 0.8 / (len(names) + 1)
    for k, name in enumerate(names):
        key = "fbnops_ms" if name == "fbnops" else f"{name}_ms"
        ax.barh(y + k * height, [r.get(key, np.nan) for r in rows], height, label=name)
    floor = [r["floor_ms"] for r in rows]  # read x and dy, write dx, at streaming speed
    ax.barh(y + len(names) * height, floor, height, label="floor (stream 2 in, 1 out)", color="0.6")
    ax.set_yticks(y + 0.4, labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("milliseconds per call (median, log scale)")
    ax.legend(fontsize=8)
    ax.set_title(f"fbnops {fbnops.__version__}: batch-norm kernels, {fbnops.get_num_threads()} threads")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
