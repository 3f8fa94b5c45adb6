"""The benchmark's report: the machine, the table, the summary, JSON, comparison, plot, Markdown."""

from __future__ import annotations

import os
import platform
import statistics

import numpy as np

from fbnops._version import __version__
from fbnops.framework.caches import cache_sizes, cpuinfo_field

SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_bf16", "amx_bf16")
CASE_WIDTH = 48


def machine_info(threads: int, peers: list[str]) -> dict:
    """CPU model, SIMD flags, cache sizes, cores, threads and library versions."""
    model = cpuinfo_field("model name") or platform.processor() or platform.machine()
    flags = [fl for fl in SIMD_FLAGS if fl in (cpuinfo_field("flags") or "").split()]
    caches = {name: f"{nbytes >> 10}K" for name, nbytes in cache_sizes().items()}
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    versions = {"fbnops": __version__, "python": platform.python_version(), "numpy": np.__version__}
    try:
        from fbnops.kernels import cython_backend

        versions["fbnops kernels"] = f"{cython_backend.SIMD_VARIANT} build, OpenMP {cython_backend.OPENMP_ENABLED}"
    except (ImportError, AttributeError):
        pass
    for peer, module in (("torch", "torch"), ("tf", "tensorflow")):
        if peer in peers:
            versions[module] = __import__(module).__version__
    if "onednn" in peers or "onednn_b8" in peers:
        from .onednn import version

        versions["oneDNN"] = version()
    if "numba" in peers:
        versions["numba"] = __import__("numba").__version__
    return {"cpu": model, "flags": flags, "caches": caches, "cores": cores, "threads": threads, "versions": versions}


FLOOR = "out = a + b streamed over x's bytes (2 reads, 1 write)"
TWO_PASS = "a read of both, then the floor (a gradient reads x and dy for its sums first)"


def header_lines(info: dict, rounds: int, peers: list[str], two_pass: bool = False) -> list[str]:
    """The machine, the rounds and what each yardstick is (``two_pass``: the gradients' 2-pass floor too)."""
    caches = ", ".join(f"{k} {v}" for k, v in info["caches"].items()) or "unknown"
    versions = ", ".join(f"{k} {v}" for k, v in info["versions"].items())
    return [
        f"# CPU: {info['cpu']}; SIMD: {' '.join(info['flags']) or 'none detected'}; caches (cpu0): {caches}",
        f"# {info['cores']} cores available, {info['threads']} threads used; {versions}",
        f"# {rounds} interleaved rounds; times are medians ±half the interquartile range; "
        "fbnops/X is the median of the per-round ratios (< 1: fbnops is faster)",
        f"# peers: {', '.join(peers) or 'none'}; floor: {FLOOR}" + (f"; 2-pass: {TWO_PASS}" if two_pass else ""),
    ]


def _ms(ms: float | None, spread: float | None = None) -> str:
    if ms is None:
        return "-"
    return f"{ms:.3f}" + (f" ±{100 * spread:.0f}%" if spread is not None else "")


def _ratio(r: float | None, spread: float | None = None) -> str:
    return "-" if r is None else f"{r:.2f}" + (f"±{spread:.2f}" if spread is not None else "")


def table_columns(peers: list[str]) -> list[tuple[str, int]]:
    cols = [("case", CASE_WIDTH), ("fbnops [ms]", 13)]
    for p in peers:
        cols += [(f"{p} [ms]", max(len(p) + 5, 9)), (f"fbnops/{p}", max(len(p) + 7, 10))]
    return cols + [("floor [ms]", 10), ("fbnops/floor", 12), ("fbnops/2-pass", 13), ("fbnops [GB/s]", 13)]


def table_header(peers: list[str]) -> str:
    return " ".join(name.ljust(w) if i == 0 else name.rjust(w) for i, (name, w) in enumerate(table_columns(peers)))


def table_row(row: dict, peers: list[str]) -> str:
    cells = [row["case"], _ms(row["fbnops_ms"], row["fbnops_spread"])]
    for p in peers:
        cells += [_ms(row.get(f"{p}_ms")), _ratio(row.get(f"ratio_{p}"), row.get(f"ratio_{p}_spread"))]
    cells += [_ms(row["floor_ms"]), _ratio(row["ratio_floor"], row["ratio_floor_spread"])]
    cells += [_ratio(row.get("ratio_two_pass"), row.get("ratio_two_pass_spread")), f"{row['gbs']:.1f}"]
    widths = [w for _, w in table_columns(peers)]
    return " ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))


def summary_lines(rows: list[dict], peers: list[str], backend_peers: tuple[str, ...]) -> list[str]:
    out = []
    for name in peers:
        groups: dict[str, list[float]] = {}
        for r in rows:
            if f"ratio_{name}" in r:
                groups.setdefault(f"{r['op']} {r['dtype']}", []).append(r[f"ratio_{name}"])
        for key, v in groups.items():
            behind = sum(x > 1.0 for x in v)
            out.append(
                f"# fbnops/{name:9s} {key:17s} median {statistics.median(v):.2f}  worst {max(v):.2f}  "
                f"(slower on {behind} of {len(v)})"
            )
    floor = [r["ratio_floor"] for r in rows]
    if floor:
        out.append(f"# fbnops/floor: median {statistics.median(floor):.2f}, worst {max(floor):.2f}")
    two_pass = [r["ratio_two_pass"] for r in rows if "ratio_two_pass" in r]
    if two_pass:
        out.append(
            f"# fbnops/2-pass floor (gradients: x and dy read once, then the floor): "
            f"median {statistics.median(two_pass):.2f}, worst {max(two_pass):.2f}"
        )
    for name in backend_peers:
        slower = [1 / r[f"ratio_{name}"] for r in rows if f"ratio_{name}" in r]
        if slower:
            out.append(
                f"# {name}/cython time: worst {max(slower):.2f}  median {statistics.median(slower):.2f}"
                f"  (<= 1.5 on {sum(v <= 1.5 for v in slower)} of {len(slower)} cases)"
            )
    return out


def _case_key(row: dict) -> str:
    return row.get("key") or " ".join(row["case"].split())


def compare(rows: list[dict], old: dict, threshold: float, machine: dict | None = None) -> tuple[list[str], int]:
    """Lines comparing this run's fbnops times with an earlier JSON report, and the regression count.

    A case regresses when it is slower by more than ``threshold`` (0.10: 10 %) and by more
    than the two runs' spreads together (noise is not a regression).
    """
    before = {_case_key(r): r for r in old.get("rows", [])}
    lines = [
        f"{'case':{CASE_WIDTH}s} {'old [ms]':>10s} {'new [ms]':>10s} {'new/old':>8s} {'floor ratio old->new':>21s}"
    ]
    regressions = 0
    for r in rows:
        o = before.get(_case_key(r))
        if o is None:
            continue
        change = r["fbnops_ms"] / o["fbnops_ms"]
        noise = r.get("fbnops_spread", 0) + o.get("fbnops_spread", 0)
        slower = change - 1 > max(threshold, noise)
        regressions += slower
        floors = f"{o['ratio_floor']:.2f} -> {r['ratio_floor']:.2f}" if "ratio_floor" in o else "-"
        verdict = "  REGRESSION" if slower else "  faster" if 1 - change > max(threshold, noise) else ""
        times = f"{o['fbnops_ms']:10.3f} {r['fbnops_ms']:10.3f} {change:8.2f}"
        lines.append(f"{r['case']:{CASE_WIDTH}s} {times} {floors:>21s}{verdict}")
    matched = len(lines) - 1
    before_machine = old.get("machine", {})
    if (
        machine
        and before_machine
        and (before_machine.get("cpu"), before_machine.get("threads"))
        != (
            machine["cpu"],
            machine["threads"],
        )
    ):
        lines.append(
            f"# note: the old run is from {before_machine.get('cpu')} with {before_machine.get('threads')} threads: "
            "its times are not comparable; the fbnops/floor ratios are"
        )
    lines.append(f"# compared {matched} cases: {regressions} regression(s) beyond {100 * threshold:.0f}% and the noise")
    return lines, regressions


# The plot is shown at the docs' text width (about 750 CSS px at a 1280 px window): PLOT_WIDTH_IN inches
# at PLOT_DPI keep PLOT_FONT_PT text at 12 px or more there (tests/test_docs.py measures it).
PLOT_WIDTH_IN, PLOT_DPI, PLOT_FONT_PT = 8.0, 110, 10


def plot(doc: dict, path: str) -> None:
    """Times per case (log scale) for fbnops, each peer and the floor; the legend sits outside the bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = doc["rows"]
    peers = [p for p in doc["peers"] if any(f"{p}_ms" in r for r in rows)]
    names = ["fbnops", *peers, "floor"]
    y = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(PLOT_WIDTH_IN, 0.4 * len(rows) + 2.6), layout="constrained")
    height = 0.8 / len(names)
    for k, name in enumerate(names):
        label = "floor (stream 2 arrays in, 1 out)" if name == "floor" else name
        values = [r.get(f"{name}_ms", np.nan) for r in rows]
        ax.barh(y + k * height, values, height, label=label, color="0.6" if name == "floor" else None)
    ax.set_yticks(y + 0.4 - height / 2, [" ".join(r["case"].split()) for r in rows], fontsize=PLOT_FONT_PT)
    ax.tick_params(axis="x", labelsize=PLOT_FONT_PT, top=True, labeltop=True)  # a tall plot: the scale on both ends
    ax.set_ylim(len(rows) - 0.1, -0.2)  # top to bottom, in the table's order, without empty margins
    ax.set_xscale("log")
    ax.grid(axis="x", which="major", color="0.85", lw=0.6)
    ax.set_axisbelow(True)
    ax.set_xlabel("milliseconds per call (median of interleaved rounds, log scale)", fontsize=PLOT_FONT_PT + 1)
    info = doc["machine"]
    title = f"fbnops {__version__}: batch norm on {info['cpu']}, {info['threads']} threads"
    fig.suptitle(title, fontsize=PLOT_FONT_PT + 1, wrap=True)
    fig.legend(fontsize=PLOT_FONT_PT, ncols=min(len(names), 4), loc="outside lower center", frameon=False)
    fig.savefig(path, dpi=PLOT_DPI)
    plt.close(fig)


KNOWN_PEERS = ("torch", "tf", "onednn", "onednn_b8", "ref", "numba")


def tiny_lines(tiny: dict) -> list[str]:
    """The per-call cost of tiny (2,4,4,8) calls, against each peer timed on the same tensor."""
    lines = []
    for op, t in tiny.items():
        peers = "".join(f", {k[:-3]} {v:.1f} us" for k, v in t.items() if k.endswith("_us") and k != "fbnops_us")
        ratios = "".join(f", fbnops/{k[6:]} {v:.2f}" for k, v in t.items() if k.startswith("ratio_"))
        lines.append(f"# tiny (2,4,4,8) {op} call: fbnops raw_ops {t['fbnops_us']:.1f} us{peers}{ratios} "
                     "(medians of alternating runs of 1000 calls)")  # fmt: skip
    return lines


def markdown(doc: dict) -> str:
    """The docs' performance tables: ratio columns headed by what they divide (reads older JSON too)."""
    rows = doc["rows"]
    peers = [p for p in doc.get("peers", KNOWN_PEERS) if any(f"{p}_ms" in r for r in rows)]
    head = ["case", "fbnops ms"] + [h for p in peers for h in (f"{p} ms", f"fbnops / {p}")]
    two_pass = any("ratio_two_pass" in r for r in rows)  # (reports before it have no 2-pass floor)
    head += ["floor ms", "fbnops / floor", *(["fbnops / 2-pass"] if two_pass else []), "fbnops GB/s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [f"`{' '.join(r['case'].split())}`", _ms(r["fbnops_ms"])]
        for p in peers:
            cells += [_ms(r.get(f"{p}_ms")), _ratio(r.get(f"ratio_{p}"))]
        floor_ratio = r.get("ratio_floor", r["fbnops_ms"] / r["floor_ms"])
        cells += [_ms(r["floor_ms"]), _ratio(floor_ratio), *([_ratio(r.get("ratio_two_pass"))] if two_pass else [])]
        cells.append(f"{r['gbs']:.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    if "machine" in doc:
        lines += [
            "",
            *(line.removeprefix("# ") + "  " for line in header_lines(doc["machine"], doc["rounds"], peers, two_pass)),
        ]
    if "tiny" in doc:
        lines += ["", "Tiny calls, a `(2, 4, 4, 8)` NHWC tensor, end to end (fbnops: the whole `raw_ops` call):", ""]
        lines += [line.removeprefix("# ") + "  " for line in tiny_lines(doc["tiny"])]
    elif "tiny_us" in doc:
        lines += ["", f"A `raw_ops` gradient call on a `(2, 4, 4, 8)` tensor: **{doc['tiny_us']:.1f} µs** end to end."]
    if doc.get("accuracy"):
        lines += ["", "Accuracy, `x + 1e4`, `N·H·W = 2^20`, relative error against float64:", "",
                  "| implementation | scale_backprop | offset_backprop |", "|---|---|---|"]  # fmt: skip
        lines += [f"| {name} | {ds:.1e} | {do:.1e} |" for name, (ds, do) in doc["accuracy"].items()]
    return "\n".join(lines) + "\n"
