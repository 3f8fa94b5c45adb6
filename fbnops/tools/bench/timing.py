"""Timing: interleaved paired rounds, the streaming floor, the per-call cost of a tiny call.

Every round calls each peer twice in a row and times the second call.  The first lets the
previous library's worker threads, still spinning on the cores, go idle, and brings this
peer's data into cache, as in a loop of one library's ops.  The order of the pairs changes
from round to round (a seeded shuffle, see :func:`round_orders`), so that no peer always
follows the same one: what a call leaves in the caches and the memory queues slows the next
one by up to a third, and a fixed neighbour would tilt every round the same way.  All peers of
a case run in the same rounds, so a ratio is taken per round (a pair measured seconds apart
under the same machine conditions) and reported as the median of the per-round ratios with
its interquartile spread.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fbnops import raw_ops


@dataclass(frozen=True)
class Sample:
    """Per-round times of one call, in seconds."""

    times: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def spread(self) -> float:
        """Half the interquartile range, relative to the median (0.03: +-3 %)."""
        return _half_iqr(self.times) / self.median if self.median > 0 else 0.0


def _half_iqr(values) -> float:
    if len(values) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return (q3 - q1) / 2


def paired_ratio(a: Sample, b: Sample) -> tuple[float, float]:
    """Median and half-IQR of the per-round ratios a/b (rounds paired by index)."""
    ratios = [x / y for x, y in zip(a.times, b.times, strict=True) if y > 0]
    return statistics.median(ratios), _half_iqr(ratios)


def round_orders(names: list[str], rounds: int) -> list[list[str]]:
    """The order of the calls in each round: a shuffle seeded by the round's number, so the same
    in every run.  (Rotating one order would keep every call's predecessor the same.)"""
    orders = []
    for r in range(rounds):
        order = list(names)
        random.Random(r).shuffle(order)
        orders.append(order)
    return orders


def interleaved(calls: dict[str, Callable], rounds: int) -> dict[str, Sample]:
    """Per-round times of every call; in each round every call runs twice in a row, the second timed."""
    for fn in calls.values():  # warm-up (JIT, allocator, caches, a oneDNN primitive's first run)
        fn()
    times: dict[str, list[float]] = {k: [] for k in calls}
    for order in round_orders(list(calls), rounds):
        for k in order:
            calls[k]()
            t0 = time.perf_counter()
            calls[k]()
            times[k].append(time.perf_counter() - t0)
    return {k: Sample(tuple(v)) for k, v in times.items()}


def _tools():
    try:
        from fbnops.kernels._cython import _tools
    except ImportError:
        raise ImportError(
            "the streaming floor needs the compiled benchmark helpers (python setup.py build_ext --inplace)"
        ) from None
    return _tools


def stream_add():
    """The compiled ``out = a + b`` (same threads and partition as the kernels); ImportError if not built."""
    return _tools().stream_add


def floor_calls(nbytes: int, threads: int, read_pass: bool = False) -> dict[str, Callable]:
    """Read two arrays of ``nbytes``, write one: ``out = a + b`` with ordinary and with
    non-temporal stores (the data that any batch-norm gradient must move).  With ``read_pass``
    also ``read``, the two arrays summed (read once, nothing written): a gradient first reads x
    and dy for its sums, so ``read`` then the floor is the least that a two-pass gradient moves."""
    tools = _tools()
    n = max(nbytes // 4, 1)
    a, b, out = np.ones(n, np.float32), np.ones(n, np.float32), np.empty(n, np.float32)
    calls = {
        "floor": lambda: tools.stream_add(a, b, out, threads),
        "floor_nt": lambda: tools.stream_add(a, b, out, threads, True),
    }
    if read_pass:
        calls["read"] = lambda: tools.stream_sum(a, b, threads)
    return calls


def _tiny_calls(peers) -> dict[str, dict[str, callable]]:
    """Per op, the zero-argument tiny (2,4,4,8) NHWC calls of fbnops (raw_ops) and of the peers that have one."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 4, 8)).astype(np.float32)
    dy = rng.standard_normal((2, 4, 4, 8)).astype(np.float32)
    v = np.ones(8, np.float32)
    r3 = np.zeros((), np.float32)
    empty = np.zeros(0, np.float32)
    calls = {
        "grad": {"fbnops": lambda: raw_ops.FusedBatchNormGradV3(
            y_backprop=dy, x=x, scale=v, reserve_space_1=v, reserve_space_2=v, reserve_space_3=r3)},
        "forward": {"fbnops": lambda: raw_ops.FusedBatchNormV3(
            x=x, scale=v, offset=v, mean=empty, variance=empty)},
    }  # fmt: skip
    if "torch" in peers:
        import torch

        tx, tdy = (torch.from_numpy(a).permute(0, 3, 1, 2) for a in (x, dy))  # channels_last memory, as NHWC
        w, m, s = torch.ones(8), torch.zeros(8), torch.ones(8)
        calls["grad"]["torch"] = lambda: torch.ops.aten.native_batch_norm_backward(
            tdy, tx, w, None, None, m, s, True, 1e-4, [True, True, True]
        )
        calls["forward"]["torch"] = lambda: torch.ops.aten.native_batch_norm(tx, w, m, None, None, True, 0.1, 1e-4)
    return calls


def tiny_call_costs(peers=(), repeats: int = 15, calls: int = 1000) -> dict[str, dict[str, float]]:
    """Per op (``grad``, ``forward``): median microseconds per call of fbnops and each peer on a
    (2,4,4,8) tensor, and ``ratio_<peer>``, the median of the per-run ratios (runs of ``calls``
    calls, fbnops and the peer alternating, the order rotating)."""
    result = {}
    for op, fns in _tiny_calls(peers).items():
        names = list(fns)
        for fn in fns.values():
            for _ in range(min(200, calls)):
                fn()
        per_call: dict[str, list[float]] = {k: [] for k in names}
        for r in range(repeats):
            for k in names[r % len(names) :] + names[: r % len(names)]:
                t0 = time.perf_counter()
                for _ in range(calls):
                    fns[k]()
                per_call[k].append((time.perf_counter() - t0) / calls * 1e6)
        out = {f"{k}_us": statistics.median(v) for k, v in per_call.items()}
        for k in names[1:]:
            out[f"ratio_{k}"] = statistics.median(a / b for a, b in zip(per_call["fbnops"], per_call[k], strict=True))
        result[op] = out
    return result


def tiny_call_cost(repeats: int = 15, calls: int = 1000) -> float:
    """Median microseconds of one raw_ops gradient call on a (2,4,4,8) tensor."""
    return tiny_call_costs((), repeats, calls)["grad"]["fbnops_us"]
