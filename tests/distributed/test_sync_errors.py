"""A bad rank or a disagreement: every rank raises the same typed error, nobody hangs."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from dist_helpers import batch, split, step

from fbnops import distributed as fd
from fbnops.errors import InvalidArgumentError

SIZES = [3, 2, 2]


def run_with(change, *, reproducible=False, grad_only=False):
    """Every rank runs a step; rank 1's inputs or attributes go through ``change``."""
    b = batch()
    xs, dys = split(b["x"], SIZES), split(b["dy"], SIZES)

    def body(comm):
        mine = dict(b, x=xs[comm.rank], dy=dys[comm.rank])
        kw = {"reproducible": reproducible}
        if comm.rank == 1:
            mine, kw = change(mine, kw)
        if grad_only:
            rs = {
                "reserve_space_1": b["mean"],
                "reserve_space_2": b["variance"],
                "reserve_space_3": np.zeros((), np.float32),
            }
            return fd.FusedBatchNormGradV3(comm, y_backprop=mine["dy"], x=mine["x"], scale=mine["scale"], **rs, **kw)
        return step(comm, mine, **kw)

    return fd.ThreadComm(len(SIZES), timeout=20).run(body, return_exceptions=True)


def assert_same_error(results) -> str:
    """Every rank raised InvalidArgumentError with the same message; returns it."""
    assert all(isinstance(r, InvalidArgumentError) for r in results), results
    messages = {str(r) for r in results}
    assert len(messages) == 1, messages
    return messages.pop()


@pytest.mark.parametrize("reproducible", [False, True])
@pytest.mark.parametrize("grad_only", [False, True])
def test_invalid_input_on_one_rank_raises_on_every_rank(reproducible, grad_only):
    results = run_with(lambda m, kw: (dict(m, x=m["x"][0]), kw), reproducible=reproducible, grad_only=grad_only)
    msg = assert_same_error(results)
    assert "on rank 1" in msg and "4 or 5-dimensional" in msg, msg


def test_the_failing_ranks_own_message_reaches_every_rank():
    results = run_with(lambda m, kw: (dict(m, scale=m["scale"][:2]), kw))
    msg = assert_same_error(results)
    assert "on rank 1" in msg and "scale must have the same number of elements" in msg, msg


@pytest.mark.parametrize(
    "change,what",
    [
        (lambda m, kw: (m, dict(kw, reproducible=True)), "the attributes"),
        (lambda m, kw: (dict(m, x=m["x"].astype(np.float16)), kw), "dtype"),
        (
            lambda m, kw: (
                dict(m, x=np.moveaxis(m["x"], 3, 1).copy(), dy=np.moveaxis(m["dy"], 3, 1).copy()),
                dict(kw, data_format="NCHW"),
            ),
            "data_format",
        ),
    ],
    ids=["mode", "dtype", "layout"],
)
def test_ranks_that_disagree_raise_on_every_rank(change, what):
    results = run_with(change)
    msg = assert_same_error(results)
    assert f"disagree on {what}" in msg and "rank(s) 1 differ" in msg, msg


def test_an_epsilon_mismatch_raises_on_every_rank():
    b = batch()
    xs = split(b["x"], SIZES)

    def body(comm):
        eps = 1e-3 if comm.rank == 2 else 1e-4
        kw = {k: b[k] for k in ("scale", "offset", "mean", "variance")}
        return fd.FusedBatchNormV3(comm, x=xs[comm.rank], epsilon=eps, **kw)

    msg = assert_same_error(fd.ThreadComm(3, timeout=20).run(body, return_exceptions=True))
    assert "disagree on the attributes" in msg and "rank(s) 2 differ" in msg


def test_a_channel_count_mismatch_raises_on_every_thread_rank():
    b4, b5 = batch(c=4), batch(c=5)

    def body(comm):
        b = b4 if comm.rank == 0 else b5
        kw = {k: b[k] for k in ("scale", "offset", "mean", "variance")}
        return fd.FusedBatchNormV3(comm, x=b["x"][:2], **kw)

    msg = assert_same_error(fd.ThreadComm(2, timeout=20).run(body, return_exceptions=True))
    assert "number of channels" in msg


def test_bad_mode_arguments_are_named():
    b = batch()
    kw = {k: b[k] for k in ("scale", "offset", "mean", "variance")}
    with pytest.raises(InvalidArgumentError, match="reproducible must be a bool"):
        fd.FusedBatchNormV3(fd.SerialComm(), x=b["x"], reproducible="yes", **kw)
    with pytest.raises(InvalidArgumentError, match="param_grads must be 'global' or 'local'"):
        fd.FusedBatchNormGradV3(
            fd.SerialComm(), y_backprop=b["dy"], x=b["x"], scale=b["scale"], reserve_space_1=b["mean"],
            reserve_space_2=b["variance"], reserve_space_3=np.zeros(()), param_grads="mean",
        )  # fmt: skip


def test_a_rank_that_dies_outside_the_ops_does_not_hang_its_peers():
    b = batch()

    def body(comm):
        if comm.rank == 0:
            raise RuntimeError("rank 0 crashed")
        kw = {k: b[k] for k in ("scale", "offset", "mean", "variance")}
        return fd.FusedBatchNormV3(comm, x=b["x"][:2], **kw)

    results = fd.ThreadComm(2, timeout=20).run(body, return_exceptions=True)
    assert isinstance(results[0], RuntimeError) and isinstance(results[1], threading.BrokenBarrierError)


@pytest.mark.parametrize("comm", [None, object(), "MPI.COMM_WORLD"])
def test_a_non_communicator_is_a_typed_error(comm):
    x = np.ones((2, 2, 2, 3), np.float32)
    one, none = np.ones(3, np.float32), np.zeros(0, np.float32)
    with pytest.raises(InvalidArgumentError, match="comm must be a Communicator"):
        fd.FusedBatchNormV3(comm, x=x, scale=one, offset=one, mean=none, variance=none)
    with pytest.raises(InvalidArgumentError, match="comm must be a Communicator"):
        fd.FusedBatchNormGradV3(
            comm, y_backprop=x, x=x, scale=one, reserve_space_1=one, reserve_space_2=one, reserve_space_3=none
        )


@pytest.mark.parametrize("timeout", [0, -1.0, float("nan"), float("inf"), True, "5", None])
def test_thread_comm_refuses_a_timeout_that_is_not_a_positive_finite_number(timeout):
    with pytest.raises(ValueError, match="timeout must be a positive finite number"):
        fd.ThreadComm(2, timeout=timeout)
