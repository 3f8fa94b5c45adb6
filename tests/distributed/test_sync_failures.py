"""A failure on one rank at any stage: every rank raises the same typed error, promptly (thread ranks).

The MPI and gloo versions of these checks run in ``test_engines.py`` and ``test_torch.py``.
"""

from __future__ import annotations

import threading
import time

import pytest
from dist_helpers import batch, split, step
from failures import FORWARD_STAGES, GRADIENT_STAGES, STAGES, check_outcomes, inject, outcome

from fbnops import distributed as fd
from fbnops.distributed import _sync
from fbnops.errors import InternalError, ResourceExhaustedError

SIZES = [3, 2, 2]


def on_rank(rank: int):
    return lambda: threading.current_thread().name == f"fbnops-rank-{rank}"


def run_step(mode: str, timeout: float = 30) -> list[str]:
    b = batch()
    xs, dys = split(b["x"], SIZES), split(b["dy"], SIZES)
    kw = {"reproducible": mode == "reproducible", "param_grads": "local" if mode == "local" else "global"}
    return fd.ThreadComm(len(SIZES), timeout=timeout).run(
        lambda c: outcome(lambda: step(c, dict(b, x=xs[c.rank], dy=dys[c.rank]), **kw))
    )


@pytest.mark.parametrize("mode", ["default", "reproducible", "local", "reduce_scatter"])
@pytest.mark.parametrize("stage", STAGES)
def test_a_failure_at_any_stage_reaches_every_rank(stage, mode, monkeypatch):
    if mode == "reduce_scatter":
        monkeypatch.setattr(_sync, "REDUCE_SCATTER_FROM", 2)
    started = time.monotonic()
    with inject(stage, on_rank(1)):
        outcomes = run_step(mode)
    assert time.monotonic() - started < 10, "a rank waited for its timeout"
    check_outcomes(outcomes, stage, 1)


def test_the_stages_injected_are_the_ones_the_ops_run():
    """Each injected stage is really called by a training step (or the tests above prove nothing)."""
    for stage in STAGES:
        with inject(stage, lambda: True):
            assert all(o != "ok" for o in run_step("default")), stage
    assert set(STAGES) == set(FORWARD_STAGES) | set(GRADIENT_STAGES)


@pytest.mark.parametrize(
    "error,kind",
    [(MemoryError("no memory"), ResourceExhaustedError), (ZeroDivisionError("boom"), InternalError)],
    ids=["MemoryError", "ZeroDivisionError"],
)
def test_a_python_error_becomes_a_typed_error_naming_it(error, kind):
    with inject("sum_sq", on_rank(2), error):
        results = fd.ThreadComm(3, timeout=30).run(
            lambda c: step(
                c, dict(batch(), x=split(batch()["x"], SIZES)[c.rank], dy=split(batch()["dy"], SIZES)[c.rank])
            ),
            return_exceptions=True,
        )
    assert all(type(r) is kind for r in results), results
    assert len({str(r) for r in results}) == 1
    assert f"failed on rank 2: in sum_sq: {type(error).__name__}: {error}" in str(results[0])


class _BrokenAt:
    """A communicator whose ``k``-th collective raises on this rank before joining (an engine failure)."""

    def __init__(self, comm, k: int):
        self.comm, self.k, self.calls = comm, k, 0
        self.rank, self.size = comm.rank, comm.size

    def allgather(self, a):
        self.calls += 1
        if self.calls == self.k:
            raise RuntimeError("connection reset by peer (injected)")
        return self.comm.allgather(a)

    def allgatherv(self, a, rows):
        return self.comm.allgatherv(a, rows)


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
def test_an_engine_failure_in_a_collective_is_typed_on_every_rank(k):
    b = batch()
    xs, dys = split(b["x"], SIZES), split(b["dy"], SIZES)

    def body(c):
        comm = _BrokenAt(c, k) if c.rank == 1 else c
        return step(comm, dict(b, x=xs[c.rank], dy=dys[c.rank]))

    started = time.monotonic()
    results = fd.ThreadComm(3, timeout=30).run(body, return_exceptions=True)
    assert time.monotonic() - started < 10
    assert all(isinstance(r, InternalError) for r in results), results
    for r in results:
        assert "rank 1" in str(r) and "RuntimeError: connection reset by peer (injected)" in str(r), str(r)
