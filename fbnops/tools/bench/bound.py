"""The in-cache compute bound of the kernels, stated and measured.

``python -m fbnops.tools.bench.bound`` counts, per element of each pass, the vector
loads, stores, floating-point operations and 16-bit conversions the kernels issue
(the loops of ``fbnops/kernels/_cython/_loops.pxi``), turns them into cycles with an
AVX2 core's issue limits (2 loads, 1 store, 2 FP ops per cycle; 8 float32 lanes), and
compares with the measured cost on one thread for data in L2.  The measured cost is the
slope of time against size over L2-resident sizes (as many as this CPU's L2 holds, timed in
interleaved rounds), so the fixed cost of a call (validation, scratch, thread start) is not
counted in it; that cost is reported apart.  A fit that does not explain the times (a slope of
zero or less, or an r^2 under MIN_R2: a machine too noisy for it) is marked, not printed as a
ratio.
"""

from __future__ import annotations

import statistics
import time
from typing import NamedTuple

import numpy as np

from ...framework import dtypes
from ...framework.caches import cache_sizes, cpuinfo_field
from .machine_load import clock_ghz

VECTOR_FLOATS = 8  # float32 values in one AVX2 register (not the kernels' LANES, their row block)
ISSUE = {"load": 2, "store": 1, "fp": 2}  # per cycle, per core (Zen 2/3 and Skylake alike)
L2_UNKNOWN = 512 << 10  # assumed where sysfs does not say
MAX_SIZES = 6  # sizes in the fit
ROUNDS = 10  # interleaved rounds over the sizes
MIN_R2 = 0.9  # a fit explaining less of the times' variance is marked unreliable
CLOCK_SAMPLES = 3  # clock samples per case; the fastest is taken
FIT_C, FIT_PLANE = 16, 784  # the fit's channels and (NCHW) plane: sizes are whole blocks of both


class PassCost(NamedTuple):
    """Vector instructions per 8 elements of one pass."""

    load: float
    store: float
    fp: float

    def cycles_per_element(self) -> float:
        return max(self.load / ISSUE["load"], self.store / ISSUE["store"], self.fp / ISSUE["fp"]) / VECTOR_FLOATS


# Conversions per 8 elements: bfloat16 widens with integer shifts (not FP ports) and rounds to
# nearest even with ~6 integer ops; float16 uses one vcvtph2ps / vcvtps2ph (FP port) each way.
WIDEN = {"float32": 0, "bfloat16": 0, "float16": 1}
NARROW = {"float32": 0, "bfloat16": 0, "float16": 1}


def pass_costs(layout: str, dtype: str, rows_unrolled: int = 1) -> dict[str, PassCost]:
    """Per 8 elements: the reduction (RED_GRAD) and the apply (APPLY_FULL) of the training gradient.

    Reduce: x and dy loaded, the centre tile loaded, the two float32 lane accumulators
    loaded and stored once per ``rows_unrolled`` rows; add, sub, FMA.  Apply: x and dy
    loaded, then the A, B, K, m tiles per lane (channels-last) or scalars in registers
    (channels-first planes); add, sub, FMA, mul; one store.
    """
    w, n = WIDEN[dtype], NARROW[dtype]
    r = rows_unrolled
    reduce = PassCost(load=2 + (1 + 2) / r, store=2 / r, fp=3 + 2 * w)
    tiles = 4 if layout == "NHWC" else 0
    apply = PassCost(load=2 + tiles, store=1, fp=4 + 2 * w + n)
    return {"reduce": reduce, "apply": apply}


def cpu_mhz() -> float | None:
    """The clock /proc/cpuinfo reports (a VM reports its nominal clock); None if unknown."""
    try:
        return float(cpuinfo_field("cpu MHz") or "")
    except ValueError:
        return None


def median_seconds(fn, repeats: int) -> float:
    """Median time of ``repeats`` calls of ``fn``, after one untimed call."""
    fn()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def l2_bytes() -> int:
    """The L2 size of cpu0 (sysfs), or L2_UNKNOWN."""
    return cache_sizes().get("L2", L2_UNKNOWN)


def sizes_in_l2(block: int, l2: int) -> list[int]:
    """Element counts, whole multiples of ``block``, whose gradient (x, dy and dx in float32, the
    widest) fills up to half of an L2 of ``l2`` bytes: at most MAX_SIZES of them evenly spread, and
    at least 1, 2 and 3 blocks (which fill an L2 of 512 KB)."""
    most = max(3, l2 // 2 // (3 * 4 * block))
    return sorted({block * round(1 + i * (most - 1) / (MAX_SIZES - 1)) for i in range(MAX_SIZES)})


class Slope(NamedTuple):
    ns: float  # per element
    fixed_ns: float  # per call
    r2: float  # how much of the times' variance the line explains

    @property
    def reliable(self) -> bool:
        return self.ns > 0 and self.r2 >= MIN_R2


def _slope_ns(fn_for_size, sizes: list[int], repeats: int) -> Slope:
    """Least squares of time over size.  The sizes take turns within each of ROUNDS rounds (a
    machine's drift then moves them alike) and each size's time is the median of all its calls."""
    calls = [fn_for_size(n) for n in sizes]
    times: list[list[float]] = [[] for _ in sizes]
    for fn in calls:
        fn()
    per_round = max(1, repeats // ROUNDS)
    for _ in range(ROUNDS):
        for fn, samples in zip(calls, times, strict=True):
            for _ in range(per_round):
                t0 = time.perf_counter()
                fn()
                samples.append((time.perf_counter() - t0) * 1e9)
    x, y = np.array(sizes, float), np.array([statistics.median(t) for t in times])
    slope, intercept = np.polyfit(x, y, 1)
    residual, spread = float(np.sum((y - (slope * x + intercept)) ** 2)), float(np.sum((y - y.mean()) ** 2))
    return Slope(float(slope), float(intercept), 1.0 - residual / spread if spread > 0 else 0.0)


def measure(layout: str, dtype: str, repeats: int = 200) -> dict[str, Slope]:
    """Measured ns/element (and fixed ns per call, and the fit's r^2) of reduce, apply and the
    whole gradient, 1 thread."""
    from ...kernels.cython_backend import _bn

    C = FIT_C
    dt = dtypes.from_user_name(dtype)
    rng = np.random.default_rng(0)
    vec = np.ones(C, np.float32)

    def arrays(n: int):
        x = rng.standard_normal(n, dtype=np.float32).astype(dt)
        dy = rng.standard_normal(n, dtype=np.float32).astype(dt)
        shape = (n // C, C, 1) if layout == "NHWC" else (n // (C * FIT_PLANE), C, FIT_PLANE)
        return x.reshape(shape), dy.reshape(shape)

    def reduce_for(n):
        x, dy = arrays(n)
        return lambda: _bn.reduce_totals(0, x, dy, vec, 0, 1)

    def apply_for(n):
        x, dy = arrays(n)
        return lambda: _bn.apply(0, x, dy, vec, vec, vec, vec, 1)

    def grad_for(n):
        x, dy = arrays(n)
        return lambda: _bn.batch_norm_grad(x, dy, vec, vec, vec, epsilon=1e-3, is_training=True, num_threads=1)

    sizes = sizes_in_l2(C * FIT_PLANE, l2_bytes())  # (NCHW: whole planes of the C channels)
    return {name: _slope_ns(fn, sizes, repeats) for name, fn in (("reduce", reduce_for), ("apply", apply_for),
                                                                  ("gradient", grad_for))}  # fmt: skip


def case_clock_ghz() -> tuple[float, str]:
    """The clock to turn cycles into time for the next case, and where it came from: the clock
    this thread gets now (a chain of dependent adds), which a turbo raises and a busy host lowers,
    the fastest of CLOCK_SAMPLES samples (a chain never runs faster than the clock; a sample taken
    while the host ran other guests read 0.23 GHz, which made the bound ten times too slow);
    else /proc/cpuinfo's (a VM's nominal clock); else an assumed 3 GHz."""
    samples = [clock_ghz() for _ in range(CLOCK_SAMPLES)]
    if None not in samples:
        return max(samples), "measured"
    mhz = cpu_mhz()
    return (mhz / 1000, "/proc/cpuinfo") if mhz else (3.0, "assumed")


def report(layouts=("NHWC", "NCHW"), dtypes_=("float32", "bfloat16", "float16"), rows_unrolled: int = 1) -> str:
    mhz, l2 = cpu_mhz(), l2_bytes()
    unreliable = False
    lines = [
        f"# clock per case: a chain of dependent adds timed just before it (/proc/cpuinfo says "
        f"{f'{mhz / 1000:.2f} GHz' if mhz else 'nothing'}); issue per cycle: "
        f"{ISSUE['load']} loads, {ISSUE['store']} store, {ISSUE['fp']} FP ops of {VECTOR_FLOATS} floats; "
        f"1 thread, data in L2 ({l2 >> 10} KB: {len(sizes_in_l2(FIT_C * FIT_PLANE, l2))} sizes)",
        f"{'case':16s} {'pass':9s} {'loads/8':>8s} {'stores/8':>8s} {'fp/8':>6s} {'GHz':>5s} {'bound ns/el':>12s} "
        f"{'measured':>9s} {'ratio':>6s} {'fixed us':>9s} {'r^2':>5s}",
    ]
    for layout in layouts:
        for dtype in dtypes_:
            costs = pass_costs(layout, dtype, rows_unrolled)
            costs["gradient"] = PassCost(*(a + b for a, b in zip(costs["reduce"], costs["apply"], strict=True)))
            ghz, source = case_clock_ghz()
            measured = measure(layout, dtype)
            for name, cost in costs.items():
                if name == "gradient":
                    bound = sum(c.cycles_per_element() for k, c in costs.items() if k != "gradient") / ghz
                else:
                    bound = cost.cycles_per_element() / ghz
                fit = measured[name]
                clock = f"{ghz:5.2f}" + ("" if source == "measured" else "*")
                ratio = f"{fit.ns / bound:6.2f}" if fit.reliable else f"{'?':>6s}"
                unreliable |= not fit.reliable
                lines.append(
                    f"{layout + ' ' + dtype:16s} {name:9s} {cost.load:8.2f} {cost.store:8.2f} {cost.fp:6.1f} "
                    f"{clock} {bound:12.3f} {fit.ns:9.3f} {ratio} {fit.fixed_ns / 1000:9.2f} {fit.r2:5.2f}"
                )
    if "*" in "".join(lines[2:]):
        lines.append(f"# * not measured here: {source}")
    if unreliable:
        lines.append(f"# ?: the times did not fit a line (a slope of 0 or less, or r^2 under {MIN_R2}): too noisy")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report())
