"""Synchronized batch norm on thread ranks: against raw_ops on the whole batch, bitwise where promised."""

from __future__ import annotations

import numpy as np
import pytest
from dist_helpers import (
    PER_CHANNEL,
    ROWS,
    SHARDINGS,
    batch,
    differing_bits,
    joined,
    order_sensitive_batch,
    sharded_step,
    single_process,
    split,
    step,
)

import fbnops
from fbnops import distributed as fd
from fbnops.distributed import _tree
from fbnops.distributed.comm import sum_in_rank_order
from fbnops.framework.threads import setting_kept
from fbnops.kernels._plan import SERIAL_BELOW
from fbnops.testing import STAT_TOL, X_TOL, forward_f64, grad_f64, rel_err


@pytest.mark.parametrize("sizes", SHARDINGS, ids=str)
@pytest.mark.parametrize(
    "data_format,dtype", [("NHWC", "float32"), ("NCHW", "float32"), ("NDHWC", "float16"), ("NCDHW", "bfloat16")]
)
def test_default_mode_is_within_the_float64_oracle_tolerances(sizes, data_format, dtype):
    b = batch(data_format=data_format, dtype=dtype)
    ranks = sharded_step(b, sizes, data_format=data_format)
    for r in ranks[1:]:  # per-channel outputs are identical on every rank
        assert not differing_bits(r, ranks[0], PER_CHANNEL)
    got = joined(ranks)
    x = b["x"]
    y, mean, var = forward_f64(x, b["scale"], b["offset"], None, None, 1e-4, data_format, True)
    grad_in = dict(y_backprop=b["dy"], x=x, scale=b["scale"], reserve_space_1=got["reserve_space_1"],
                   reserve_space_2=got["reserve_space_2"])  # fmt: skip
    dx, dscale, doffset = grad_f64(grad_in, 1e-4, data_format, True)
    for name, want in (("reserve_space_1", mean), ("reserve_space_2", var)):
        assert rel_err(got[name], want) <= STAT_TOL, name
    assert rel_err(got["scale_backprop"], dscale) <= STAT_TOL
    assert rel_err(got["offset_backprop"], doffset) <= STAT_TOL
    assert rel_err(got["y"], y) <= X_TOL[dtype]
    assert rel_err(got["x_backprop"], dx) <= X_TOL[dtype]
    want = single_process(b, data_format=data_format)  # and the running statistics as raw_ops makes them
    for name in ("batch_mean", "batch_variance"):
        assert rel_err(got[name], want[name]) <= 2 * STAT_TOL, name


@pytest.mark.parametrize("backend", sorted({fbnops.get_backend(), "reference"}))
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW", "NDHWC", "NCDHW"])
@pytest.mark.parametrize("factor", [1.0, 0.25])
def test_one_rank_is_the_single_process_op_bit_for_bit(backend, data_format, factor):
    with fbnops.backend(backend):
        for dtype in ("float32", "float16", "bfloat16"):
            b = batch(n=6, c=9, data_format=data_format, dtype=dtype, seed=3)
            want = single_process(b, data_format=data_format, factor=factor)
            got = step(fd.SerialComm(), b, data_format=data_format, factor=factor)
            assert not differing_bits(got, want), dtype
            # the staged path (partials, exchange, finish, apply) with all the data on one rank of two
            staged = joined(sharded_step(b, [b["x"].shape[0], 0], data_format=data_format, factor=factor))
            assert not differing_bits(staged, want, PER_CHANNEL[:4] + ROWS), dtype
            ranks = sharded_step(b, [2, 0, 4], data_format=data_format, reproducible=True)
            one = step(fd.SerialComm(), b, data_format=data_format, factor=1.0, reproducible=True)
            assert not differing_bits(joined(ranks), one), dtype


ORDER_SENSITIVE = [("NHWC", "float32"), ("NCHW", "float32"), ("NDHWC", "bfloat16")]  # float16 adds exactly


def sharding_mismatches(b, data_format: str, **mode) -> dict[str, list[str]]:
    """For each sharding, the outputs whose bits differ from the same mode on one rank."""
    serial = step(fd.SerialComm(), b, data_format=data_format, **mode)
    out = {}
    for sizes in SHARDINGS + ([2, 2, 2, 1],):
        out[str(sizes)] = differing_bits(joined(sharded_step(b, sizes, data_format=data_format, **mode)), serial)
    return out


@pytest.mark.parametrize("data_format,dtype", ORDER_SENSITIVE)
def test_reproducible_mode_is_bitwise_identical_for_every_sharding(data_format, dtype):
    b = order_sensitive_batch(data_format=data_format, dtype=dtype)
    default = sharding_mismatches(b, data_format)
    assert any(default.values()), "the data does not make the order of addition visible"
    reproducible = sharding_mismatches(b, data_format, reproducible=True)
    assert not any(reproducible.values()), reproducible
    serial = step(fd.SerialComm(), b, data_format=data_format, reproducible=True)
    want = single_process(b, data_format=data_format)
    for k in ("reserve_space_2", "scale_backprop", "offset_backprop"):  # and it is still the op
        assert rel_err(serial[k], want[k]) <= STAT_TOL, k


def _rank_order_sum(comm, payload, samples):
    """The mutation: each rank adds its block sums in order, the ranks' totals are added in rank order."""
    head, mine = payload[0], np.zeros(payload.shape[1])
    for row in payload[1:]:
        mine += row
    rows = comm.allgatherv(np.stack([head, mine]), [2] * comm.size)
    return np.stack([r[0] for r in rows]), sum_in_rank_order([r[1] for r in rows])


def test_the_sharding_check_fails_when_the_tree_is_a_rank_order_sum(monkeypatch):
    """Mutation test: replace the fixed-order tree by a naive sum and the check above must catch it."""
    b = order_sensitive_batch()
    monkeypatch.setattr(_tree, "tree_total", _rank_order_sum)
    mismatches = sharding_mismatches(b, "NHWC", reproducible=True)
    assert any(mismatches.values()), "the reproducibility check cannot tell a naive sum from the tree"


def test_default_mode_is_bitwise_reproducible_across_thread_counts():
    b = batch(n=64, c=256, seed=2)  # shards of 40 and 24 samples: 61,440 and 36,864 elements, both threaded
    assert 24 * 6 * 256 >= SERIAL_BELOW
    results = []
    with setting_kept():
        for threads in (1, 2):
            fbnops.set_num_threads(threads)
            results.append(joined(sharded_step(b, [40, 24])))
    assert not differing_bits(results[0], results[1])


def test_local_param_grads_are_the_shards_own():
    b = batch(seed=4)
    sizes = [4, 3]
    ranks = sharded_step(b, sizes, param_grads="local")
    glob = sharded_step(b, sizes)
    np.testing.assert_allclose(sum(r["offset_backprop"] for r in ranks), glob[0]["offset_backprop"], rtol=1e-5)
    np.testing.assert_allclose(sum(r["scale_backprop"] for r in ranks), glob[0]["scale_backprop"], rtol=1e-4)
    assert rel_err(ranks[0]["offset_backprop"], glob[0]["offset_backprop"]) > 1e-3  # really local
    for r, g in zip(ranks, glob, strict=True):  # dx does not depend on the choice
        assert not differing_bits(r, g, ("x_backprop",))


def test_an_empty_global_batch_gives_nan_statistics_and_zero_gradients():
    b = batch(n=0)
    for r in sharded_step(b, [0, 0, 0]):
        assert r["y"].shape == b["x"].shape and r["x_backprop"].shape == b["x"].shape
        for k in ("batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"):
            assert np.isnan(r[k]).all(), k
        assert not r["scale_backprop"].any() and not r["offset_backprop"].any()


def test_one_sample_in_total_uses_bessel_on_the_global_count():
    b = batch(n=1, c=3)
    ranks = sharded_step(b, [0, 1, 0])
    want = single_process(b)
    for k in PER_CHANNEL:
        assert rel_err(ranks[0][k], want[k]) <= STAT_TOL, k


def test_inference_communicates_nothing_and_matches_raw_ops():
    b = batch(seed=5)
    counters = []

    def run(comm):
        counted = fd.CountingComm(comm)
        counters.append(counted)
        x = split(b["x"], [3, 4])[comm.rank]
        kw = {k: b[k] for k in ("scale", "offset", "mean", "variance")}
        return fd.FusedBatchNormV3(counted, x=x, is_training=False, **kw)

    ranks = fd.ThreadComm(2).run(run)
    want = fbnops.raw_ops.FusedBatchNormV3(
        x=b["x"], is_training=False, **{k: b[k] for k in ("scale", "offset", "mean", "variance")}
    )
    np.testing.assert_array_equal(np.concatenate([r.y for r in ranks]), want.y)
    assert [c.collectives for c in counters] == [0, 0]


def test_gradient_by_finite_differences_through_the_synchronized_forward():
    """d/dt of L(x + t v) = sum(w * y), all ranks together, against sum(dx * v)."""
    rng = np.random.default_rng(7)
    b = batch(n=5, c=2, seed=7, shift=0.5)
    x = b["x"].astype(np.float64)
    w, v = rng.standard_normal(x.shape), rng.standard_normal(x.shape)
    sizes = [2, 0, 3]

    def loss(xx):
        shards = split(xx.astype(np.float32), sizes)
        ys = fd.ThreadComm(3).run(
            lambda c: (
                fd.FusedBatchNormV3(
                    c, x=shards[c.rank], scale=b["scale"], offset=b["offset"], mean=b["mean"], variance=b["variance"]
                ).y
            )
        )
        return float((np.concatenate(ys).astype(np.float64) * w).sum())

    h = 1e-2
    numeric = (loss(x + h * v) - loss(x - h * v)) / (2 * h)
    ranks = sharded_step(dict(b, dy=w.astype(np.float32)), sizes)
    analytic = float((np.concatenate([r["x_backprop"] for r in ranks]).astype(np.float64) * v).sum())
    assert abs(numeric - analytic) <= 2e-3 * max(1.0, abs(analytic)), (numeric, analytic)


@pytest.mark.parametrize("param_grads", ["global", "local"])
def test_frozen_gradient_global_param_grads_cost_one_round(param_grads):
    b = batch(seed=6)
    sizes = [4, 0, 3]
    xs, dys = split(b["x"], sizes), split(b["dy"], sizes)
    rs = {"reserve_space_1": b["mean"], "reserve_space_2": b["variance"], "reserve_space_3": np.zeros((), np.float32)}

    def body(comm):
        counted = fd.CountingComm(comm)
        g = fd.FusedBatchNormGradV3(
            counted, y_backprop=dys[comm.rank], x=xs[comm.rank], scale=b["scale"], is_training=False,
            param_grads=param_grads, **rs,
        )  # fmt: skip
        return g, counted.collectives

    ranks = fd.ThreadComm(3).run(body)
    want = fbnops.raw_ops.FusedBatchNormGradV3(
        y_backprop=b["dy"], x=b["x"], scale=b["scale"], is_training=False, **rs
    )  # fmt: skip
    np.testing.assert_array_equal(np.concatenate([g.x_backprop for g, _ in ranks]), want.x_backprop)
    # the sums, then the status round
    assert [n for _, n in ranks] == ([2, 2, 2] if param_grads == "global" else [0, 0, 0])
    if param_grads == "global":
        for g, _ in ranks:
            assert rel_err(g.scale_backprop, want.scale_backprop) <= STAT_TOL
            assert rel_err(g.offset_backprop, want.offset_backprop) <= STAT_TOL


@pytest.mark.parametrize("backend", fbnops.available_backends())
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_one_row_samples_take_the_vectorized_partials_with_the_kernels_bits(backend, dtype):
    from fbnops.distributed import _rows
    from fbnops.kernels import stages

    b = batch(n=9, c=33, data_format="NCHW", dtype=dtype, seed=4)
    x, dy = b["x"][:, :, :1, :1].reshape(9, 33, 1), b["dy"][:, :, :1, :1].reshape(9, 33, 1)
    with fbnops.backend(backend):
        pairs = [
            (stages.sum_x(x, rows_per_sample=1), _rows.sum_x(x)),
            (stages.sum_sq(x, b["mean"], rows_per_sample=1), _rows.sum_sq(x, b["mean"])),
            (stages.sum_grad(x, dy, b["mean"], rows_per_sample=1), _rows.sum_grad(x, dy, b["mean"])),
        ]
    for kernel, vectorized in pairs:
        assert kernel.shape == vectorized.shape and kernel.tobytes() == vectorized.tobytes()
