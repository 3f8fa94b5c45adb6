"""The benchmark's command-line arguments, apart from the benchmark itself.

``fbnops`` builds its whole parser for every command; this module is all of the benchmark it
imports then (the peers and cases are named here; nothing is timed or loaded until ``bench`` runs).
"""

from __future__ import annotations

import argparse

from .cases import ALL_LAYOUTS, DTYPES, LAYOUTS, OPS, SHAPES, parse_shapes
from .peers import PEERS

DEFAULT_ROUNDS = 9


class BenchUsageError(ValueError):
    """A bad benchmark argument, found before anything is timed."""


def _list(allowed):
    def parse(text: str) -> list[str]:
        items = [s for s in text.split(",") if s]
        bad = [s for s in items if s not in allowed]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list of {', '.join(allowed)}; got {text!r}")
        return items

    return parse


def _shapes(text: str):
    try:
        return parse_shapes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return int(text)


MAX_ROUNDS = 1000  # each round times every case and peer: more is a run without end, not a better median


def _rounds(text: str) -> int:
    n = positive_int(text)
    if n > MAX_ROUNDS:
        raise argparse.ArgumentTypeError(f"at most {MAX_ROUNDS} rounds, got {text[:20]!r}")
    return n


def add_case_arguments(p: argparse.ArgumentParser, ops=OPS, dtypes=DTYPES, layouts=LAYOUTS) -> None:
    """--ops, --dtypes, --layouts and --shapes (validated lists; the defaults given): the cases
    of the benchmark and of the scripts in benchmarks/, for fbnops.tools.bench.cases.make_cases."""
    p.add_argument("--ops", type=_list(OPS), default=list(ops), help="grad,forward")
    p.add_argument("--dtypes", type=_list(DTYPES), default=list(dtypes), help="float32,bfloat16,float16")
    p.add_argument("--layouts", type=_list(ALL_LAYOUTS), default=list(layouts), help="NHWC,NCHW (also NDHWC,NCDHW)")
    p.add_argument("--shapes", type=_shapes, default=SHAPES, metavar="N,H,W,C;...", help="default: 5 ResNet shapes")


def add_arguments(p: argparse.ArgumentParser, threads: bool = True) -> None:
    p.add_argument(
        "--peers", default="auto", help=f"comma-separated, of {', '.join(PEERS)} (default: the installed ones)"
    )
    rounds = p.add_mutually_exclusive_group()
    rounds.add_argument("--rounds", type=_rounds, help=f"interleaved rounds per case (default {DEFAULT_ROUNDS})")
    rounds.add_argument("--quick", action="store_true", help="3 rounds, float32 gradient only, no accuracy test")
    add_case_arguments(p, dtypes=("float32", "bfloat16"))
    if threads:
        p.add_argument("--threads", type=positive_int, help="kernel threads of every peer (default: fbnops' default)")
    p.add_argument("--json", metavar="FILE", help="write the results (and the machine) as JSON")
    p.add_argument("--plot", metavar="FILE.png", help="plot the times against the streaming floor (needs matplotlib)")
    p.add_argument("--compare", metavar="OLD.json", help="compare with an earlier --json file; exit 1 on a regression")
    p.add_argument("--threshold", type=float, default=10.0, metavar="PCT", help="slowdown that counts (default 10)")
