"""The reproducible tree's block sums over one-row samples: compiled (one pass) and NumPy (leaves, then
the tree level by level) give the same bits, on every split, size, dtype and thread count."""

from __future__ import annotations

import numpy as np
import pytest
from dist_helpers import batch, differing_bits, one_row_slice, order_sensitive_batch, sharded_step, step

from fbnops import distributed as fd
from fbnops.distributed import _rows, _tree
from fbnops.framework import dtypes
from fbnops.testing import extras

DTYPES = {"float32": np.dtype(np.float32), "float16": dtypes.float16, "bfloat16": dtypes.bfloat16}
SIZES = (1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 31, 64, 100, 257)  # powers of two and not, N=1
CHANNELS = (1, 3, 130, 300)  # C=1, and more channels than a tile (128 pairs, 256 single)


def _compiled():
    extras.require_backend("cython")
    kernel = _rows._compiled()
    assert kernel is not None, "the Cython kernels are built but _tree_sums is not"
    return kernel


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit for bit, except that NaNs need only be NaN in the same places: which of two NaNs an
    addition keeps is the compiler's choice (NumPy's own ufunc loops differ on it with the shape)."""
    nan = np.isnan(a)
    return a.shape == b.shape and (nan == np.isnan(b)).all() and a[~nan].tobytes() == b[~nan].tobytes()


def _data(rng, n: int, c: int, dtype: str, special: bool):
    """Rows spanning many magnitudes (so the order of addition shows), with NaN, +-inf and -0.0."""
    x = rng.standard_normal((n, c, 1)) * 10.0 ** rng.integers(-6, 6, (n, 1, 1))
    dy = rng.standard_normal((n, c, 1))
    if special:
        flat = x.reshape(-1)
        flat[rng.integers(0, flat.size, 4)] = [np.nan, np.inf, -np.inf, -0.0]
        dy.reshape(-1)[rng.integers(0, flat.size, 2)] = [-0.0, np.inf]
    with np.errstate(over="ignore"):  # float16: the largest magnitudes become inf, on purpose
        return x.astype(DTYPES[dtype]), dy.astype(DTYPES[dtype]), rng.standard_normal(c).astype(np.float32)


def _both(mode, x, dy, mean, spans):
    """(compiled, NumPy) block sums of the same blocks."""
    before = _rows.use_kernel(True)
    try:
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf in the NumPy tree
            fast = _rows.block_sums(mode, x, dy, mean, spans)
            _rows.use_kernel(False)
            slow = _rows.block_sums(mode, x, dy, mean, spans)
    finally:
        _rows.use_kernel(before)
    return fast, slow


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_the_compiled_block_sums_are_the_numpy_leaves_summed_up_the_tree(dtype):
    _compiled()
    rng = np.random.default_rng(7)
    checked = 0
    for n in SIZES:
        for c in CHANNELS:
            x, dy, mean = _data(rng, n, c, dtype, special=n > 4)
            cuts = sorted(rng.integers(0, n + 1, 2))
            for start, stop in ((0, n), (0, cuts[0]), (cuts[0], cuts[1]), (cuts[1], n)):  # a random 3-way split
                spans = _tree.spans(start, stop - start, n)
                for mode in (_rows.SUM_X, _rows.SUM_SQ, _rows.SUM_GRAD):
                    fast, slow = _both(mode, x[start:stop], dy[start:stop], mean, spans)
                    assert _same(fast, slow), (n, c, start, stop, mode)
                    checked += fast.size
    assert checked > 100_000


def test_without_nan_the_bits_are_identical_and_the_thread_count_does_not_matter():
    kernel = _compiled()
    rng = np.random.default_rng(3)
    for n, c in ((257, 300), (100, 1000), (8, 5)):
        x, dy, mean = _data(rng, n, c, "float32", special=False)
        spans = _tree.spans(0, n, n)
        for mode in (_rows.SUM_X, _rows.SUM_SQ, _rows.SUM_GRAD):
            fast, slow = _both(mode, x, dy, mean, spans)
            assert fast.tobytes() == slow.tobytes(), (n, c, mode)
            for threads in (1, 2, 3):
                got = kernel.block_sums(mode, x, dy, mean, np.asarray(spans).reshape(-1, 2), threads)
                assert got.tobytes() == fast.tobytes(), (n, c, mode, threads)


def test_the_tree_sum_is_not_a_sequential_sum():
    """Data where the order shows: the block's value is the tree's ((a + b) + (c + d)) + (e + f)."""
    big = 2.0**60  # big + 1 rounds back to big in float64
    x = np.array([big, 1.0, -big, 1.0, 0.5, 0.25], np.float32).reshape(6, 1, 1)
    for compiled in (True, False):
        before = _rows.use_kernel(compiled)
        try:
            root = _rows.block_sums(_rows.SUM_X, x, None, None, _tree.spans(0, 6, 6))
        finally:
            _rows.use_kernel(before)
        assert root.tolist() == [[((big + 1.0) + (-big + 1.0)) + (0.5 + 0.25)]] == [[0.75]]  # in order: 1.75


def test_bad_blocks_are_refused_before_any_row_is_read():
    kernel = _compiled()
    x = np.ones((4, 3, 1), np.float32)
    for spans in ([[0, 5]], [[-1, 2]], [[2, 0]]):
        with pytest.raises(ValueError, match="outside"):
            kernel.block_sums(_rows.SUM_X, x, None, None, np.array(spans), 1)
    with pytest.raises(ValueError, match="float32, float16 or bfloat16"):
        kernel.block_sums(_rows.SUM_X, x.astype(np.float64), None, None, np.array([[0, 4]]), 1)
    with pytest.raises(ValueError, match="center"):
        kernel.block_sums(_rows.SUM_SQ, x, None, np.zeros(2, np.float32), np.array([[0, 4]]), 1)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_one_row_layers_are_the_same_bits_on_every_split_compiled_or_not(dtype):
    b = one_row_slice(batch(n=13, c=300, dtype=dtype, seed=5))
    want = step(fd.SerialComm(), b, reproducible=True)
    before = _rows.use_kernel(False)
    try:
        assert not differing_bits(step(fd.SerialComm(), b, reproducible=True), want)
    finally:
        _rows.use_kernel(before)
    for sizes in ([13], [5, 8], [0, 13, 0], [3, 3, 3, 4], [6, 0, 7], [1, 12]):
        for r in sharded_step(b, sizes, reproducible=True):
            assert not differing_bits(r, want, keys=("batch_mean", "batch_variance", "scale_backprop")), sizes


def test_one_row_layers_on_order_sensitive_data():
    b = one_row_slice(order_sensitive_batch(n=11, c=5))
    serial = step(fd.SerialComm(), b, reproducible=True)
    default = [differing_bits(sharded_step(b, s)[0], serial) for s in ([4, 7], [1, 5, 5])]
    assert any(default), "the data does not make the order of addition visible"
    for sizes in ([4, 7], [1, 5, 5], [0, 11], [8, 3]):
        for r in sharded_step(b, sizes, reproducible=True):
            assert not differing_bits(r, serial, keys=("batch_mean", "reserve_space_2", "offset_backprop")), sizes


def test_the_portable_and_the_x86_64_v3_builds_give_the_same_bits():
    _compiled()
    from fbnops.kernels._cython import _tree_sums, batch_norm

    if not batch_norm.cpu_has_x86_64_v3():
        pytest.skip("this CPU cannot run the x86-64-v3 build")
    from fbnops.kernels._cython import _tree_sums_avx2

    rng = np.random.default_rng(11)
    for dtype in DTYPES:
        x, dy, mean = _data(rng, 100, 300, dtype, special=True)
        spans = np.asarray(_tree.spans(37, 63, 100)).reshape(-1, 2)  # the last rank of a 37 + 63 split
        for mode in (_rows.SUM_X, _rows.SUM_SQ, _rows.SUM_GRAD):
            a = _tree_sums.block_sums(mode, x[37:], dy[37:], mean, spans, 1)
            b = _tree_sums_avx2.block_sums(mode, x[37:], dy[37:], mean, spans, 2)
            assert _same(a, b), (dtype, mode)
