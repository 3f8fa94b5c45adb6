"""Is the machine loaded while the benchmark runs? Said in the report, not only seen in the spread.

Two witnesses: the cores other processes keep busy (:mod:`fbnops.framework.load`, sampled
between cases) and the load average; a third is the timings themselves (the median spread).
A loaded run's ratios are not comparable with a quiet run's, so the report says so.
"""

from __future__ import annotations

import os
import statistics

from ...framework import load

BUSY = 0.3  # cores busy elsewhere above which the run is called loaded
SPREAD = 0.25  # median relative spread (half the IQR over the median) above which timings are noisy


class LoadMonitor:
    """Collects readings between cases; :meth:`summary` gives the report's verdict and its figures."""

    def __init__(self) -> None:
        self.busy: list[float] = []
        self.sample()

    def sample(self) -> None:
        self.busy.append(load.busy_elsewhere())

    def summary(self, rows: list[dict], threads_used: int) -> dict:
        self.sample()
        spreads = [r["fbnops_spread"] for r in rows if r.get("fbnops_spread") is not None]
        doc = {
            "busy_elsewhere": round(max(self.busy), 2),
            "loadavg": [round(v, 2) for v in os.getloadavg()] if hasattr(os, "getloadavg") else None,
            "median_spread": round(statistics.median(spreads), 3) if spreads else None,
            "threads_used": threads_used,
        }
        doc["loaded"] = doc["busy_elsewhere"] >= BUSY or (doc["median_spread"] or 0) > SPREAD
        return doc


def lines(doc: dict, cores: int) -> list[str]:
    spread = 100 * (doc["median_spread"] or 0)
    figures = (
        f"other processes kept up to {doc['busy_elsewhere']:.1f} of {cores} cores busy; "
        f"load average {doc['loadavg']}; median spread of fbnops' times ±{spread:.0f}%"
    )
    if not doc["loaded"]:
        return [f"# machine: quiet ({figures})"]
    return [
        f"# WARNING: loaded machine ({figures}).",
        "#   Ratios measured now are not comparable with a quiet run's; fbnops' default thread count took the idle",
        f"#   cores ({doc['threads_used']} thread(s) in the last kernel). Run again on a quiet machine to compare.",
    ]
