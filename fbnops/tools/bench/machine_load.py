"""Is the machine loaded while the benchmark runs? Said in the report, not only seen in the spread.

Four witnesses: the cores other processes keep busy (:mod:`fbnops.framework.load`, sampled
between cases), the load average, the clock this process actually gets (a chain of dependent
adds, one per cycle, timed between cases), and the timings themselves (the median spread).
The clock sees what the others cannot: a virtual machine whose host gives its cores to other
guests (or lowers their clock) runs slower with nothing busy in /proc/stat.  A loaded run's
ratios are not comparable with a quiet run's, so the report says so.
"""

from __future__ import annotations

import os
import statistics
import time

from ...framework import load

BUSY = 0.3  # cores busy elsewhere above which the run is called loaded
SPREAD = 0.25  # median relative spread (half the IQR over the median) above which timings are noisy
SLOW = 0.8  # the clock's median reading below this share of its fastest: the CPU ran slow
CHAIN_ADDS = 1 << 20  # one clock reading: about 0.4 ms at 2.5 GHz
CHAIN_READINGS = 5  # readings per sample; the sample is their median


def clock_ghz() -> float | None:
    """The clock the calling thread gets now, in GHz: the median of a few short chains of
    dependent adds (one cycle each); None without the compiled tools or off x86-64."""
    try:
        from ...kernels._cython._tools import add_chain_seconds
    except ImportError:
        return None
    readings = [add_chain_seconds(CHAIN_ADDS) for _ in range(CHAIN_READINGS)]
    if None in readings:
        return None
    return CHAIN_ADDS / statistics.median(readings) / 1e9


def clock_verdict(readings: list[float]) -> dict | None:
    """The clock readings' median and fastest, and whether the CPU ran slow: a median below SLOW
    of the fastest reading (None without readings)."""
    if not readings:
        return None
    median, fastest = statistics.median(readings), max(readings)
    return {"median_ghz": round(median, 2), "fastest_ghz": round(fastest, 2), "readings": len(readings),
            "slow": median < SLOW * fastest}  # fmt: skip


class LoadMonitor:
    """Collects readings between cases; :meth:`summary` gives the report's verdict and its figures."""

    def __init__(self) -> None:
        self.busy: list[float] = []
        self.clock: list[float] = []
        self.sample()

    def sample(self) -> None:
        self.busy.append(load.busy_elsewhere())
        ghz = clock_ghz()
        if ghz is not None:
            self.clock.append(ghz)

    def summary(self, rows: list[dict], threads_used: int) -> dict:
        self.sample()
        spreads = [r["fbnops_spread"] for r in rows if r.get("fbnops_spread") is not None]
        doc = {
            "busy_elsewhere": round(max(self.busy), 2),
            "loadavg": [round(v, 2) for v in os.getloadavg()] if hasattr(os, "getloadavg") else None,
            "median_spread": round(statistics.median(spreads), 3) if spreads else None,
            "clock": clock_verdict(self.clock),
            "threads_used": threads_used,
        }
        slow = bool(doc["clock"] and doc["clock"]["slow"])
        doc["loaded"] = doc["busy_elsewhere"] >= BUSY or (doc["median_spread"] or 0) > SPREAD or slow
        return doc


def clock_words(clock: dict | None) -> str:
    if not clock:
        return "clock not measured (no compiled tools, or not x86-64)"
    return (f"a chain of dependent adds ran at {clock['median_ghz']:.2f} GHz, fastest {clock['fastest_ghz']:.2f} "
            f"({clock['readings']} readings)")  # fmt: skip


def lines(doc: dict, cores: int) -> list[str]:
    spread = 100 * (doc["median_spread"] or 0)
    clock = doc.get("clock")
    figures = (
        f"other processes kept up to {doc['busy_elsewhere']:.1f} of {cores} cores busy; "
        f"load average {doc['loadavg']}; {clock_words(clock)}; median spread of fbnops' times ±{spread:.0f}%"
    )
    if not doc["loaded"]:
        return [f"# machine: quiet ({figures})"]
    out = [
        f"# WARNING: loaded machine ({figures}).",
        "#   Ratios measured now are not comparable with a quiet run's; fbnops' default thread count took the idle",
        f"#   cores ({doc['threads_used']} thread(s) in the last kernel). Run again on a quiet machine to compare.",
    ]
    if clock and clock["slow"]:
        out += [
            f"#   The CPU itself ran slow: half the clock readings or more were under {SLOW:.0%} of the fastest.",
            "#   A virtual machine's host gives cycles to other guests, or lowers the clock, unseen in /proc/stat.",
        ]
    return out


def watch(seconds: float, every: float = 0.5) -> list[float]:
    """Clock readings every ``every`` seconds for ``seconds``: how steady the host keeps this VM."""
    readings, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        ghz = clock_ghz()
        if ghz is None:
            break
        readings.append(ghz)
        time.sleep(every)
    return readings


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="The clock this process gets, read every half second.")
    parser.add_argument("--seconds", type=float, default=30.0)
    readings = watch(parser.parse_args().seconds)
    if not readings:
        raise SystemExit("no clock probe here: it needs the compiled tools on x86-64")
    verdict = clock_verdict(readings)
    print(" ".join(f"{r:.2f}" for r in readings))
    print(f"# {clock_words(verdict)}; {'slow' if verdict['slow'] else 'steady'} (slow: the median under {SLOW:.0%} "
          "of the fastest)")  # fmt: skip
