"""Communication counts and bytes per layer, the reduce-scatter switch, the communicators themselves."""

from __future__ import annotations

import numpy as np
import pytest
from dist_helpers import batch, differing_bits, joined, sharded_step, split, step

from fbnops import distributed as fd
from fbnops.distributed import _sync, _tree

HEADER_BYTES = 8 * _sync.HEADER
STATUS_BYTES = 8  # the status word of a later collective, and of the round that ends each op


def counted_step(b, sizes, **mode):
    """One forward and one gradient per rank, counting each separately."""
    xs, dys = split(b["x"], sizes), split(b["dy"], sizes)
    fwd_counts, grad_counts = [None] * len(sizes), [None] * len(sizes)

    def body(comm):
        counted = fd.CountingComm(comm)
        shard = dict(b, x=xs[comm.rank], dy=dys[comm.rank])
        f = fd.FusedBatchNormV3(
            counted, x=shard["x"], **{k: b[k] for k in ("scale", "offset", "mean", "variance")}, **mode
        )
        fwd_counts[comm.rank] = (counted.collectives, counted.bytes_sent)
        counted.reset()
        fd.FusedBatchNormGradV3(
            counted, y_backprop=shard["dy"], x=shard["x"], scale=b["scale"], reserve_space_1=f.reserve_space_1,
            reserve_space_2=f.reserve_space_2, reserve_space_3=f.reserve_space_3, **mode,
        )  # fmt: skip
        grad_counts[comm.rank] = (counted.collectives, counted.bytes_sent)

    fd.ThreadComm(len(sizes)).run(body)
    return fwd_counts, grad_counts


@pytest.mark.parametrize("c", [1, 64, 256])
def test_two_rounds_forward_one_backward_about_32_c_bytes(c):
    fwd, grad = counted_step(batch(n=6, c=c), [2, 4, 0])
    assert all(f == (3, HEADER_BYTES + 8 * c + (STATUS_BYTES + 8 * c) + STATUS_BYTES) for f in fwd), fwd
    assert all(g == (2, HEADER_BYTES + 16 * c + STATUS_BYTES) for g in grad), grad
    per_layer = fwd[0][1] + grad[0][1]
    assert per_layer == 32 * c + 2 * HEADER_BYTES + 3 * STATUS_BYTES
    if c >= 256:
        assert per_layer <= 1.05 * 32 * c


def test_reproducible_mode_adds_one_header_round_per_op():
    fwd, grad = counted_step(batch(n=6, c=8), [2, 4, 0], reproducible=True)
    assert all(f[0] == 4 for f in fwd) and all(g[0] == 3 for g in grad), (fwd, grad)


def test_reduce_scatter_gives_the_same_bits_in_two_collectives(monkeypatch):
    b = batch(n=9, c=11, seed=3)
    sizes = [3, 0, 2, 4]
    plain = joined(sharded_step(b, sizes))
    monkeypatch.setattr(_sync, "REDUCE_SCATTER_FROM", 2)
    assert not differing_bits(joined(sharded_step(b, sizes)), plain)
    fwd, grad = counted_step(b, sizes)
    assert all(f[0] == 5 for f in fwd) and all(g[0] == 3 for g in grad), (fwd, grad)
    bad = dict(b, x=b["x"][:, 0])  # errors still reach every rank through the alltoall headers
    results = fd.ThreadComm(2).run(lambda c: step(c, bad if c.rank else dict(b, x=b["x"][:2])), return_exceptions=True)
    assert len({str(r) for r in results}) == 1 and "on rank 1" in str(results[0])


def test_tree_blocks_tile_every_range_and_the_total_does_not_depend_on_the_split():
    rng = np.random.default_rng(0)
    leaves = rng.standard_normal((13, 3)) * 10.0 ** rng.integers(-8, 8, (13, 1))
    want = _tree.subtree(leaves)
    for sizes in ([13], [5, 8], [0, 13, 0], [1] * 13, [3, 3, 3, 4], [6, 0, 7]):
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        covered = []
        for s, n in zip(starts, sizes, strict=True):
            for level, i in _tree.blocks(int(s), int(s + n), 13):
                covered += [j for j in range(i << level, (i + 1) << level) if j < 13]
        assert covered == list(range(13)), sizes
        got = fd.ThreadComm(
            len(sizes)
        ).run(
            lambda c, st=starts, sz=sizes: _tree.tree_total(
                c,
                np.concatenate(
                    [
                        np.full((1, 3), float(c.rank)),  # the head row
                        _tree.local_nodes(leaves[st[c.rank] : st[c.rank] + sz[c.rank]], int(st[c.rank]), 13),
                    ]
                ),
                sz,
            )
        )
        assert all(g.tobytes() == want.tobytes() for _, g in got), sizes
        assert all((heads == np.arange(len(sizes))[:, None]).all() for heads, _ in got), sizes


def test_serial_and_thread_communicators_follow_the_protocol():
    assert isinstance(fd.SerialComm(), fd.Communicator)
    out = fd.ThreadComm(3).run(
        lambda c: (c.allgather(np.full(2, c.rank)), c.allgatherv(np.ones((c.rank, 2)), [0, 1, 2]))
    )
    for gathered, parts in out:
        np.testing.assert_array_equal(gathered, [[0, 0], [1, 1], [2, 2]])
        assert [p.shape for p in parts] == [(0, 2), (1, 2), (2, 2)]
    with pytest.raises(ValueError, match="positive integer"):
        fd.ThreadComm(0)
