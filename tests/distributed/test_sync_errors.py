"""A bad rank or a disagreement: every rank raises the same typed error, nobody hangs."""

from __future__ import annotations

import threading
import time
import zlib

import numpy as np
import pytest
from dist_helpers import batch, split, step

from fbnops import distributed as fd
from fbnops import raw_ops
from fbnops.errors import InternalError, InvalidArgumentError, ResourceExhaustedError

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
        (lambda m, kw: (m, dict(kw, reproducible=True)), "reproducible"),
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


@pytest.mark.parametrize("collective", ["allgather", "reduce_scatter"])
@pytest.mark.parametrize("default_ranks", [(1,), (0, 2)], ids=["one_default", "two_default"])
def test_a_mode_disagreement_is_caught_in_the_first_collective(monkeypatch, collective, default_ranks):
    """The reproducible header round sends what the default mode's first collective sends (the same
    collective, the same length), so the header check catches the disagreement on every rank."""
    from fbnops.distributed import _sync

    if collective == "reduce_scatter":
        monkeypatch.setattr(_sync, "REDUCE_SCATTER_FROM", 2)
    sent = []
    b = batch()
    xs = split(b["x"], SIZES)

    class Recording:  # the ThreadComm rank, recording each first message's shape and collective
        def __init__(self, comm):
            self.comm, self.rank, self.size = comm, comm.rank, comm.size

        def allgather(self, a):
            sent.append((self.rank, "allgather", a.shape))
            return self.comm.allgather(a)

        def allgatherv(self, a, rows):
            return self.comm.allgatherv(a, rows)

        def alltoall(self, a):
            sent.append((self.rank, "alltoall", a.shape))
            return self.comm.alltoall(a)

    def body(comm):
        kw = {k: b[k] for k in ("scale", "offset", "mean", "variance")}
        repro = comm.rank not in default_ranks
        return fd.FusedBatchNormV3(Recording(comm), x=xs[comm.rank], reproducible=repro, **kw)

    msg = assert_same_error(fd.ThreadComm(3, timeout=20).run(body, return_exceptions=True))
    assert "disagree on reproducible" in msg, msg
    first = {rank: (kind, shape) for rank, kind, shape in reversed(sent)}  # each rank's first message
    assert len(set(first.values())) == 1, first


def test_an_epsilon_mismatch_raises_on_every_rank():
    b = batch()
    xs = split(b["x"], SIZES)

    def body(comm):
        eps = 1e-3 if comm.rank == 2 else 1e-4
        kw = {k: b[k] for k in ("scale", "offset", "mean", "variance")}
        return fd.FusedBatchNormV3(comm, x=xs[comm.rank], epsilon=eps, **kw)

    msg = assert_same_error(fd.ThreadComm(3, timeout=20).run(body, return_exceptions=True))
    assert "disagree on epsilon: 0.0001 on rank 0, 0.001 on rank 2" in msg and "rank(s) 2 differ" in msg, msg


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
    assert type(results[0]) is RuntimeError
    assert isinstance(results[1], InternalError), results[1]  # typed, naming the rank and what it raised
    assert "rank 0 failed before collective 0: RuntimeError: rank 0 crashed" in str(results[1])


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


# -- issue 24: attributes read as raw_ops reads them, compared by value ------------------------------


def _outcome(call):
    try:
        return call()
    except Exception as e:  # noqa: BLE001 - compared below
        return e


@pytest.mark.parametrize("value", [np.False_, np.True_, False, True], ids=repr)
@pytest.mark.parametrize("op", ["forward", "gradient"])
def test_is_training_is_read_exactly_as_raw_ops_reads_it(value, op):
    """np.False_ once ran a training forward (an ``is False`` test): the op must do what raw_ops does."""
    b = batch(seed=8)
    stats = {k: b[k] for k in ("scale", "offset", "mean", "variance")}
    rs = {"reserve_space_1": b["mean"], "reserve_space_2": b["variance"], "reserve_space_3": np.zeros((), np.float32)}
    if op == "forward":
        want = _outcome(lambda: raw_ops.FusedBatchNormV3(x=b["x"], is_training=value, **stats))
        got = _outcome(lambda: fd.FusedBatchNormV3(fd.SerialComm(), x=b["x"], is_training=value, **stats))
    else:
        args = dict(y_backprop=b["dy"], x=b["x"], scale=b["scale"], is_training=value, **rs)
        want = _outcome(lambda: raw_ops.FusedBatchNormGradV3(**args))
        got = _outcome(lambda: fd.FusedBatchNormGradV3(fd.SerialComm(), **args))
    if isinstance(want, Exception):  # TensorFlow's make_bool: TypeError, the same words
        assert isinstance(got, type(want)) and str(want) in str(got), (repr(want), repr(got))
        # on several ranks: every rank raises it, typed, naming the rank
        if op == "forward":
            xs = split(b["x"], [4, 3])
            results = fd.ThreadComm(2, timeout=20).run(
                lambda c: fd.FusedBatchNormV3(c, x=xs[c.rank], is_training=value, **stats), return_exceptions=True
            )
            msg = assert_same_error(results)
            assert all(isinstance(r, type(want)) for r in results) and f"on rank 0: TypeError: {want}" in msg, msg
        return
    assert not isinstance(got, Exception), repr(got)
    for name, w in want._asdict().items():
        np.testing.assert_array_equal(getattr(got, name), w, err_msg=name)


# Two float32 epsilons whose old attribute encoding has the same CRC-32 (found by a birthday
# search over float32 values from 1e-3): the old 32-bit digest let ranks run with both.
COLLIDING_EPSILONS = (0.0010037071770057082, 0.001007087528705597)


def _old_digest(eps: float) -> int:
    attrs = {"epsilon": eps, "exponential_avg_factor": 1.0, "data_format": "NHWC", "is_training": True}
    return zlib.crc32(repr(sorted((k, repr(v)) for k, v in {**attrs, "reproducible": False}.items())).encode())


def test_epsilons_that_collide_under_a_32_bit_digest_still_raise():
    a, b_ = COLLIDING_EPSILONS
    assert np.float32(a) != np.float32(b_) and _old_digest(a) == _old_digest(b_)  # the case is real
    b = batch()
    xs = split(b["x"], [4, 3])

    def body(comm):
        kw = {k: b[k] for k in ("scale", "offset", "mean", "variance")}
        return fd.FusedBatchNormV3(comm, x=xs[comm.rank], epsilon=COLLIDING_EPSILONS[comm.rank], **kw)

    msg = assert_same_error(fd.ThreadComm(2, timeout=20).run(body, return_exceptions=True))
    assert "disagree on epsilon: 0.0010037072 on rank 0, 0.0010070875 on rank 1" in msg, msg


def test_a_channel_mismatch_on_the_reduce_scatter_path_is_typed_on_all_32_ranks():
    p = fd.ThreadComm(32, timeout=30)
    wide, narrow = batch(n=2, c=96, seed=1), batch(n=2, c=64, seed=1)  # slices of 3 and 2 channels

    def body(comm):
        b = narrow if comm.rank == 5 else wide
        return fd.FusedBatchNormV3(comm, x=b["x"], **{k: b[k] for k in ("scale", "offset", "mean", "variance")})

    results = p.run(body, return_exceptions=True)
    msg = assert_same_error(results)
    assert "number of channels" in msg, msg


def test_when_not_every_thread_starts_the_started_ranks_fail_at_once(monkeypatch):
    real = threading.Thread

    class Refused(real):
        def start(self):
            if self.name == "fbnops-rank-2":
                raise RuntimeError("can't start new thread")
            super().start()

    monkeypatch.setattr(threading, "Thread", Refused)
    b = batch()
    xs = split(b["x"], [2, 2, 2, 1])

    def body(comm):
        return fd.FusedBatchNormV3(comm, x=xs[comm.rank], **{k: b[k] for k in ("scale", "offset", "mean", "variance")})

    started = time.monotonic()
    results = fd.ThreadComm(4, timeout=30).run(body, return_exceptions=True)
    assert time.monotonic() - started < 10  # not the 30 s timeout (nor re-armed by each exit)
    assert all(isinstance(r, ResourceExhaustedError) for r in results), results
    assert all(
        "could not start the thread of rank 2 of 4: RuntimeError: can't start new thread" in str(r) for r in results
    )
    assert not [t for t in threading.enumerate() if t.name.startswith("fbnops-rank-")]
    with pytest.raises(ResourceExhaustedError, match="rank 2"):
        fd.ThreadComm(4, timeout=30).run(body)


def test_a_rank_that_skips_the_collective_is_named_at_once():
    """One rank in inference (no communication) while the others train: they raise, naming it, without waiting."""
    b = batch()
    xs = split(b["x"], SIZES)

    def body(comm):
        kw = {k: b[k] for k in ("scale", "offset", "mean", "variance")}
        return fd.FusedBatchNormV3(comm, x=xs[comm.rank], is_training=comm.rank != 2, **kw)

    started = time.monotonic()
    results = fd.ThreadComm(3, timeout=30).run(body, return_exceptions=True)
    assert time.monotonic() - started < 10
    assert not isinstance(results[2], Exception)
    for r in results[:2]:
        assert isinstance(r, InternalError) and "rank 2 returned before joining collective 0" in str(r), r
