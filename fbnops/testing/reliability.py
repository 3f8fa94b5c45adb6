"""Reliability measurements: threads vs serial, GIL release, resident-memory growth, peak memory.

Used by tests/test_reliability.py and benchmarks/reliability.py; each returns a number or a
verdict the caller asserts or prints.
"""

from __future__ import annotations

import threading
import time
import tracemalloc

import ml_dtypes
import numpy as np

from fbnops import raw_ops
from fbnops.framework import registry
from fbnops.framework.layouts import channel_axis
from fbnops.framework.threads import set_num_threads, setting_kept


def mixed_calls(n_calls: int = 200, seed: int = 0):
    """A fixed list of (op, kwargs) over layouts, dtypes and modes, on read-only shared inputs."""
    rng = np.random.default_rng(seed)
    shapes = [
        ((4, 5, 5, 3), "NHWC"),
        ((2, 6, 7, 7), "NCHW"),
        ((2, 3, 2, 4, 5), "NDHWC"),
        ((64, 9, 9, 16), "NHWC"),
        ((8, 16, 12, 12), "NCHW"),
    ]
    dts = [np.float32, np.float16, ml_dtypes.bfloat16]
    pool = []
    for shape, fmt in shapes:
        c = shape[channel_axis(fmt, len(shape))]
        for dt in dts:
            arrays = {
                "x": rng.standard_normal(shape).astype(dt),
                "dy": rng.standard_normal(shape).astype(dt),
                "s": (rng.random(c) + 0.5).astype(np.float32),
                "m": (rng.standard_normal(c) * 0.1).astype(np.float32),
                "v": (rng.random(c) + 0.5).astype(np.float32),
            }
            for a in arrays.values():
                a.flags.writeable = False
            pool.append((fmt, arrays))
    calls = []
    for _ in range(n_calls):
        fmt, a = pool[int(rng.integers(len(pool)))]
        training = bool(rng.integers(2))
        if rng.integers(2):
            calls.append(
                (
                    "FusedBatchNormGradV3",
                    dict(
                        y_backprop=a["dy"],
                        x=a["x"],
                        scale=a["s"],
                        reserve_space_1=a["m"],
                        reserve_space_2=a["v"],
                        reserve_space_3=np.zeros(0, np.float32),
                        data_format=fmt,
                        is_training=training,
                    ),
                )
            )
        else:
            calls.append(
                (
                    "FusedBatchNormV3",
                    dict(
                        x=a["x"],
                        scale=a["s"],
                        offset=a["m"],
                        mean=a["m"],
                        variance=a["v"],
                        data_format=fmt,
                        is_training=training,
                    ),
                )
            )
    return calls


def run_calls(calls, backend: str):
    with registry.backend(backend):
        return [tuple(np.asarray(o).tobytes() for o in getattr(raw_ops, op)(**kw)) for op, kw in calls]


def threaded_equals_serial(backend: str, n_threads: int = 8, n_calls: int = 200) -> tuple[bool, int]:
    """n_threads Python threads, each running the same n_calls mixed calls; all bitwise equal to serial."""
    calls = mixed_calls(n_calls)
    serial = run_calls(calls, backend)
    results: list = [None] * n_threads
    barrier = threading.Barrier(n_threads)

    def worker(k):
        barrier.wait()
        results[k] = run_calls(calls[k % 7 :] + calls[: k % 7], backend)  # different order per thread

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok = all(results[k] == serial[k % 7 :] + serial[: k % 7] for k in range(n_threads))
    return ok, n_threads * n_calls


def gil_release_speedup(
    backend: str = "cython", calls: int = 16, rounds: int = 5, shape: tuple = (32, 28, 28, 64)
) -> float:
    """Serial time / time of the same calls split over two Python threads, one kernel thread each.

    The two worker threads persist across rounds (a new thread's malloc arena is cold and its
    first output allocations page-fault, which would measure the allocator, not the GIL);
    rounds are interleaved and the medians compared.
    """
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(np.float32)
    v = np.ones(shape[-1], np.float32)
    kw = dict(y_backprop=x, x=x, scale=v, reserve_space_1=v, reserve_space_2=v, reserve_space_3=v[:0])

    def work(n):
        with registry.backend(backend):
            for _ in range(n):
                raw_ops.FusedBatchNormGradV3(**kw)

    serial, threaded = [], []
    with setting_kept():
        set_num_threads(1)
        with ThreadPoolExecutor(max_workers=2) as pool:
            work(calls)
            list(pool.map(work, [calls // 2] * 2))  # warm both workers
            for _ in range(rounds):
                t0 = time.perf_counter()
                work(calls)
                serial.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                list(pool.map(work, [calls // 2] * 2))
                threaded.append(time.perf_counter() - t0)
    return float(np.median(serial) / np.median(threaded))


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def rss_growth(n_calls: int = 10_000, backend: str = "cython") -> int:
    calls = mixed_calls(50, seed=3)
    with registry.backend(backend):
        for op, kw in calls * 20:  # warm up allocator pools and caches
            getattr(raw_ops, op)(**kw)
        start = rss_bytes()
        for i in range(n_calls):
            op, kw = calls[i % len(calls)]
            getattr(raw_ops, op)(**kw)
        return rss_bytes() - start


def peak_extra_memory(shape=(32, 28, 28, 64), backend: str = "cython") -> tuple[int, int]:
    """(tracemalloc peak during one float32 gradient call, bytes of its outputs)."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype(np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)
    c = shape[-1]
    v = np.ones(c, np.float32)
    with registry.backend(backend):
        raw_ops.FusedBatchNormGradV3(
            y_backprop=dy, x=x, scale=v, reserve_space_1=v, reserve_space_2=v, reserve_space_3=v[:0]
        )
        tracemalloc.start()
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        out = raw_ops.FusedBatchNormGradV3(
            y_backprop=dy, x=x, scale=v, reserve_space_1=v, reserve_space_2=v, reserve_space_3=v[:0]
        )
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
    return peak, sum(np.asarray(o).nbytes for o in out)


def python_progress_during_kernels(backend: str = "cython", seconds: float = 0.5) -> float:
    """Fraction of its solo pure-Python speed the main thread keeps while another thread runs
    kernels back to back: near 1 when the kernels release the GIL, near 0 when they hold it."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((16, 64, 56, 56)).astype(np.float32)
    v = np.ones(64, np.float32)
    kw = dict(
        y_backprop=x, x=x, scale=v, reserve_space_1=v, reserve_space_2=v, reserve_space_3=v[:0], data_format="NCHW"
    )
    stop = threading.Event()

    def kernels():
        with registry.backend(backend):
            while not stop.is_set():
                raw_ops.FusedBatchNormGradV3(**kw)

    def count() -> int:
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            n += 1
        return n

    with setting_kept():
        set_num_threads(1)
        with registry.backend(backend):
            raw_ops.FusedBatchNormGradV3(**kw)
        alone = count()
        t = threading.Thread(target=kernels)
        t.start()
        time.sleep(0.05)
        during = count()
        stop.set()
        t.join()
    return during / alone
