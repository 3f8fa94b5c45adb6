"""``fbnops bench`` / ``python -m fbnops.tools.bench``: fbnops side by side with its peers.

    fbnops bench                          # every installed peer, every case
    fbnops bench --quick                  # 3 rounds, float32 gradient only
    fbnops bench --peers torch,onednn     # only some peers (each must be installed)
    fbnops bench --json new.json --compare old.json   # exit 1 on a regression
    fbnops bench --plot perf.png          # also draw the times against the streaming floor

Every argument is checked before the first case runs: unknown or missing peers, a plot
without matplotlib, output directories that cannot be written, a comparison file that
cannot be read.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
from pathlib import Path

from fbnops.framework.threads import get_num_threads, set_num_threads, setting_kept

from ...kernels._plan import threads_for
from .._arrays import ArrayFileError, check_writable
from .._progress import progress
from . import machine_load, report
from .accuracy import accuracy
from .arguments import DEFAULT_ROUNDS, BenchUsageError, add_arguments
from .cases import Case, make_cases
from .machine_load import LoadMonitor
from .peers import PEERS, fbnops_call, has_module
from .timing import Sample, floor_calls, interleaved, paired_ratio, stream_add, tiny_call_costs


def _peers(text: str) -> list[str]:
    if text == "auto":
        return [name for name, peer in PEERS.items() if peer.missing() is None]
    names = [s for s in text.split(",") if s]
    unknown = [n for n in names if n not in PEERS]
    if unknown or not names:
        raise BenchUsageError(f"unknown peer(s) {unknown or text!r}; known: {', '.join(PEERS)}")
    for name in names:
        reason = PEERS[name].missing()
        if reason:
            raise BenchUsageError(f"peer {name!r} cannot run: {reason}")
    return names


def _check_output(path: str | None, option: str) -> None:
    if path:
        try:
            check_writable(Path(path))
        except ArrayFileError as e:
            raise BenchUsageError(f"{option}: {e}") from None


def _read_old(path: str | None) -> dict | None:
    if path is None:
        return None
    try:
        old = json.loads(Path(path).read_text())
    except OSError as e:
        raise BenchUsageError(f"--compare: cannot read {path}: {e.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BenchUsageError(f"--compare: {path} is not a benchmark JSON file ({e})") from None
    if not isinstance(old, dict) or not isinstance(old.get("rows"), list):
        raise BenchUsageError(f"--compare: {path} has no 'rows'; write one with --json")
    for i, row in enumerate(old["rows"]):  # every field the comparison reads, checked before anything runs
        if not _comparable_row(row):
            raise BenchUsageError(
                f"--compare: {path}: rows[{i}] is not a benchmark row (needs 'case' or 'key' text, a positive "
                "'fbnops_ms' and numeric 'fbnops_spread'/'ratio_floor' when present)"
            )
    return old


def _comparable_row(row) -> bool:
    def number(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) < float("inf")

    return (
        isinstance(row, dict)
        and isinstance(row.get("key") or row.get("case"), str)
        and isinstance(row.get("case", ""), str)
        and number(row.get("fbnops_ms"))
        and row["fbnops_ms"] > 0
        and all(number(row[k]) for k in ("fbnops_spread", "ratio_floor") if k in row)
    )


def validate(args) -> tuple[list[str], list[Case], dict | None]:
    """Everything that can be wrong with the arguments, before anything runs."""
    peers = _peers(args.peers)
    try:
        stream_add()
    except ImportError as e:
        raise BenchUsageError(str(e)) from None
    if args.plot and not has_module("matplotlib"):
        raise BenchUsageError("--plot needs matplotlib: pip install 'fbnops[bench]'")
    _check_output(args.json, "--json")
    _check_output(args.plot, "--plot")
    old = _read_old(args.compare)
    ops, dtypes_ = (["grad"], ["float32"]) if args.quick else (args.ops, args.dtypes)
    return peers, make_cases(ops, dtypes_, args.shapes, args.layouts), old


def measure(case: Case, peers: list[str], rounds: int, threads: int) -> dict:
    """One table row: every peer and the floor in the same interleaved rounds."""
    calls = {"fbnops": fbnops_call(case)}
    backends = {}
    for name in peers:
        fn = PEERS[name].factory(case)
        if fn is not None:
            (backends if PEERS[name].backend else calls)[name] = fn
    floors = floor_calls(case.data["x"].nbytes, threads, read_pass=case.op == "grad")
    samples = interleaved({**calls, **floors}, rounds)
    floor = Sample(tuple(map(min, samples.pop("floor").times, samples.pop("floor_nt").times)))
    read = samples.pop("read", None)
    ours = samples["fbnops"]
    row = {"key": case.key, "case": case.label, "op": case.op, "shape": list(case.shape), "layout": case.layout,
           "dtype": case.dtype, "fbnops_ms": ours.median * 1e3, "fbnops_spread": ours.spread}  # fmt: skip
    for name, s in samples.items():
        if name != "fbnops":
            row[f"{name}_ms"], row[f"{name}_spread"] = s.median * 1e3, s.spread
            row[f"ratio_{name}"], row[f"ratio_{name}_spread"] = paired_ratio(ours, s)
    if backends:  # fbnops backends against the Cython one, without the frameworks in between
        pair = interleaved({"fbnops": fbnops_call(case, block=True), **backends}, rounds)
        for name in backends:
            row[f"{name}_ms"] = pair[name].median / pair["fbnops"].median * ours.median * 1e3
            row[f"{name}_spread"] = pair[name].spread
            row[f"ratio_{name}"], row[f"ratio_{name}_spread"] = paired_ratio(pair["fbnops"], pair[name])
    row["floor_ms"] = floor.median * 1e3
    row["ratio_floor"], row["ratio_floor_spread"] = paired_ratio(ours, floor)
    if read is not None:  # a gradient: its sums read x and dy before the pass the floor stands for
        two_pass = Sample(tuple(r + f for r, f in zip(read.times, floor.times, strict=True)))
        row["read_ms"], row["two_pass_ms"] = read.median * 1e3, two_pass.median * 1e3
        row["ratio_two_pass"], row["ratio_two_pass_spread"] = paired_ratio(ours, two_pass)
    nbytes = case.data["x"].nbytes  # grad: read x, dy twice, write dx; forward: read x 3 times, write y
    row["gbs"] = (5 if case.op == "grad" else 4) * nbytes / ours.median / 1e9
    row["stream_gbs"] = 3 * nbytes / floor.median / 1e9
    if "ratio_torch" in row:
        row["torch_floor"] = row["torch_ms"] / row["floor_ms"]
    return row


def _write_json(doc: dict, path: str) -> None:
    out = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent if str(out.parent) else ".")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _command(args, rounds: int, peers: list[str]) -> str:
    """The ``fbnops bench`` command that measures these cases again (recorded in the JSON file)."""
    shapes = ";".join(",".join(map(str, s)) for s in args.shapes)
    words = ["fbnops", "bench", "--rounds", str(rounds), "--peers", ",".join(peers)]
    words += ["--ops", ",".join(["grad"] if args.quick else args.ops)]
    words += ["--dtypes", ",".join(["float32"] if args.quick else args.dtypes), "--layouts", ",".join(args.layouts)]
    return shlex.join([*words, "--shapes", shapes])


def run(args, threads: int | None = None) -> int:
    """Benchmark the cases of `args` and report; a thread count given is this run's alone."""
    with setting_kept():
        return _run(args, threads)


def _run(args, threads: int | None) -> int:
    peers, cases, old = validate(args)
    rounds = 3 if args.quick else args.rounds or DEFAULT_ROUNDS
    chosen = threads or getattr(args, "threads", None)
    threads = chosen or get_num_threads()
    if chosen:  # otherwise the default stays adaptive (idle cores only), as users run it
        set_num_threads(threads)
    monitor = LoadMonitor()
    for name in peers:
        if PEERS[name].setup:
            PEERS[name].setup(threads)
    info = report.machine_info(threads, peers)
    print("\n".join(report.header_lines(info, rounds, peers, two_pass=any(c.op == "grad" for c in cases))))
    print(report.table_header(peers), flush=True)
    rows = []
    with progress(len(cases), "benchmark") as bar:
        for case in cases:
            case.make()
            rows.append(measure(case, peers, rounds, threads))
            case.data.clear()
            print(report.table_row(rows[-1], peers), flush=True)
            monitor.sample()
            bar.advance()
    print("\n".join(["", *report.summary_lines(rows, peers, tuple(n for n in peers if PEERS[n].backend))]))
    doc = {"machine": info, "rounds": rounds, "peers": peers, "rows": rows, "command": _command(args, rounds, peers)}
    doc["load"] = monitor.summary(rows, threads_for(1 << 30))
    print("\n".join(machine_load.lines(doc["load"], info["cores"])))
    doc["tiny"] = tiny_call_costs(peers, repeats=5 if args.quick else 15)
    doc["tiny_us"] = doc["tiny"]["grad"]["fbnops_us"]
    print("\n".join(report.tiny_lines(doc["tiny"])))
    if not args.quick:
        doc["accuracy"] = accuracy(peers)
        for name, (ds, do) in doc["accuracy"].items():
            print(
                f"# accuracy x+1e4, N*H*W=2^20, vs float64: {name:6s} scale_backprop {ds:.2e}  offset_backprop {do:.2e}"
            )
    if args.json:
        _write_json(doc, args.json)
        print(f"# results written to {args.json}")
    if args.plot:
        report.plot(doc, args.plot)
        print(f"# plot written to {args.plot}")
    if old is not None:
        lines, regressions = report.compare(rows, old, args.threshold / 100, info)
        print("\n".join(["", f"# compared with {args.compare}", *lines]))
        return 1 if regressions else 0
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fbnops.tools.bench", description=__doc__.splitlines()[0])
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run(args)
    except BenchUsageError as e:
        print(f"{p.prog}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
