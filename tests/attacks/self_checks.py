"""Calls the attack runner's own test runs (tests/test_reliability.py): each must get the verdict that
test names, so a runner that passed everything would fail there."""

from __future__ import annotations

from fbnops.errors import InvalidArgumentError

from .helpers import doc_with, run_doc

HUGE = [1 << 20, 1 << 20, 1, 3]  # 12 TiB of float32


def raise_invalid_argument():
    raise InvalidArgumentError("x")


def raise_key_error():
    raise KeyError("k")


def return_one():
    return 1


def run_a_huge_run_file():
    """Raises RunFileResourceError, a subclass of ResourceExhaustedError."""
    run_doc(doc_with(["ops", 0, "inputs", "x"], {"random": {"shape": HUGE}}))
