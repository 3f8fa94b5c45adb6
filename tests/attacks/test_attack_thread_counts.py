"""Class 4, thread counts: a hostile count, given to ``set_num_threads`` or in the environment, is
refused (``InvalidArgumentError``) or clamped into 1..1024 with a warning; no thread explosion."""

from __future__ import annotations

import threading
import warnings

from fbnops.framework.threads import get_num_threads, set_num_threads

from .helpers import raw_grad
from .runner import INVALID_ARGUMENT, Variant, attack

_COUNTS = {"0": 0, "-1": -1, "10**4": 10**4, "2**31": 2**31, "2**64": 2**64, "1.5": 1.5, "'2'": "2", "True": True,
           "None": None, "float('nan')": float("nan")}  # fmt: skip


@attack(
    4,
    "set_num_threads({label})",
    expect="either",
    raises=INVALID_ARGUMENT,
    variants=[Variant(label, (value,)) for label, value in _COUNTS.items()],
)
def test_set_num_threads(value):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        set_num_threads(value)
    n = get_num_threads()
    assert isinstance(n, int) and 1 <= n <= 1024 and caught, (n, caught)
    raw_grad()
    assert threading.active_count() < 64
    return n


def _environment(var: str, value: str) -> tuple:
    """``var`` set to ``value``, the other thread-count variable unset."""
    other = "OMP_NUM_THREADS" if var != "OMP_NUM_THREADS" else "FBNOPS_NUM_THREADS"
    return ((var, value), (other, None))


@attack(
    4,
    "{label}",
    expect="either",
    raises=INVALID_ARGUMENT,
    variants=[
        Variant(f"{var}={value!r}", (value,), _environment(var, value))
        for var in ("FBNOPS_NUM_THREADS", "OMP_NUM_THREADS")
        for value in ("0", "-3", "10000", "2147483648", "two", "1.5", "")
    ],
)
def test_thread_count_from_the_environment(value: str):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        raw_grad()
        n = get_num_threads()
    assert isinstance(n, int) and 1 <= n <= 1024 and (caught or value == ""), (n, caught)
    assert threading.active_count() < 64
    return n
