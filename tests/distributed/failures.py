"""Failure injection for the synchronized ops: one rank raises inside one stage (a test hook only).

Shared by the thread tests (``test_sync_failures.py``) and the MPI and gloo workers.  A stage is
an entry point of :mod:`fbnops.kernels.stages` (or the running-statistics step) that the
synchronized ops call between their collectives; ``inject`` wraps it so that it raises on
one rank only, leaving the kernels themselves untouched.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from fbnops.distributed import ops
from fbnops.errors import ResourceExhaustedError
from fbnops.kernels import stages

FORWARD_STAGES = ("sum_x", "finish_mean", "sum_sq", "finish_forward", "apply_forward", "running_statistics")
GRADIENT_STAGES = ("sum_grad", "finish_grad", "apply_grad")
STAGES = FORWARD_STAGES + GRADIENT_STAGES
INJECTED = "OOM when allocating tensor (injected)"


def _owner(stage: str):
    return ops if stage == "running_statistics" else stages


@contextlib.contextmanager
def inject(stage: str, fails_here: Callable[[], bool], error: BaseException | None = None) -> Iterator[None]:
    """Within the block, ``stage`` raises ``error`` (a ResourceExhaustedError) where ``fails_here()``."""
    owner = _owner(stage)
    original = getattr(owner, stage)
    error = error if error is not None else ResourceExhaustedError(INJECTED)

    def wrapper(*args, **kwargs):
        if fails_here():
            raise error
        return original(*args, **kwargs)

    setattr(owner, stage, wrapper)
    try:
        yield
    finally:
        setattr(owner, stage, original)


def outcome(fn: Callable[[], object]) -> str:
    """``"ok"`` or ``"<ErrorType>|<message>"`` of one call (what a worker reports per rank)."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - reported, the test judges it
        return f"{type(e).__name__}|{e}"
    return "ok"


def check_outcomes(outcomes: list[str], stage: str, failing_rank: int) -> None:
    """Every rank raised the same ResourceExhaustedError naming the failing rank, stage and original error."""
    assert len(set(outcomes)) == 1, outcomes
    kind, message = outcomes[0].split("|", 1)
    assert kind == "ResourceExhaustedError", outcomes[0]
    assert f"failed on rank {failing_rank}: in {stage}: ResourceExhaustedError: {INJECTED}" in message, message
