"""The output pool (fbnops/kernels/_cython/_outputs.pyx): large outputs reuse the pages of
dead outputs of the same size, never memory that an array or view still uses."""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np
import pytest

import fbnops
from fbnops.framework import dtypes
from fbnops.kernels import outputs
from fbnops.testing import extras

pytestmark = pytest.mark.skipif(
    outputs.stats()["limit"] == 0 and outputs.empty is np.empty, reason="the compiled output pool is not built"
)
SHAPE = (4, 64, 32, 32)  # 1 MiB of float32: the smallest pooled size


@pytest.fixture
def pool_on():
    old = outputs.set_limit(256 << 20)
    yield
    outputs.set_limit(old)


def test_a_dead_output_is_reused(pool_on):
    a = outputs.empty(SHAPE, np.float32)
    address = a.ctypes.data
    assert address % (2 << 20) == 0  # huge-page aligned
    del a
    gc.collect()
    b = outputs.empty(SHAPE, np.float32)
    assert b.ctypes.data == address
    assert b.shape == SHAPE and b.dtype == np.float32 and b.flags.c_contiguous and b.flags.writeable


def test_memory_behind_a_live_view_is_never_reused(pool_on):
    a = outputs.empty(SHAPE, np.float32)
    a[...] = 7
    view = a[1:, ::2]
    address = a.ctypes.data
    del a
    b = outputs.empty(SHAPE, np.float32)
    b[...] = -1
    assert b.ctypes.data != address
    assert (view == 7).all()
    del view, b  # now both blocks are free; the view's comes back once the other is taken
    again = [outputs.empty(SHAPE, np.float32) for _ in range(2)]
    assert address in {a.ctypes.data for a in again}


def test_sizes_are_matched_and_small_arrays_bypass_the_pool(pool_on):
    a = outputs.empty(SHAPE, np.float32)
    address = a.ctypes.data
    del a
    other = outputs.empty((16, 64, 32, 32), np.float32)  # 4 MiB: another size class (2 MiB steps)
    assert other.ctypes.data != address
    before = outputs.stats()
    small = outputs.empty((2, 3), np.float32)
    assert small.base is None and outputs.stats() == before


def test_limit_zero_frees_and_disables(pool_on):
    a = outputs.empty(SHAPE, np.float32)
    del a
    assert outputs.stats()["free_blocks"] >= 1
    outputs.set_limit(0)
    assert outputs.stats()["free_blocks"] == 0 and outputs.stats()["free_bytes"] == 0
    b = outputs.empty(SHAPE, np.float32)
    assert b.base is None  # plain numpy memory
    with pytest.raises(ValueError, match="nbytes"):
        outputs.set_limit(-1)


def test_tracemalloc_sees_handed_out_blocks(pool_on):
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        a = outputs.empty(SHAPE, np.float32)
        assert tracemalloc.get_traced_memory()[0] - base >= a.nbytes
        del a
        assert tracemalloc.get_traced_memory()[0] - base < 4096
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("backend", ["cython", "numba"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_op_outputs_come_from_the_pool_and_keep_their_values(pool_on, backend, dtype):
    extras.require_backend(backend)
    rng = np.random.default_rng(3)
    dt = dtypes.from_user_name(dtype)
    x = rng.standard_normal((8, 32, 32, 64)).astype(dt)
    dy = rng.standard_normal(x.shape).astype(dt)
    v = np.ones(64, np.float32)
    r3 = np.zeros(0, np.float32)

    def grad():
        with fbnops.backend(backend):
            return fbnops.raw_ops.FusedBatchNormGradV3(
                y_backprop=dy, x=x, scale=v, reserve_space_1=v * 0.1, reserve_space_2=v, reserve_space_3=r3
            ).x_backprop

    first = grad()
    kept = first.copy()
    address = first.ctypes.data
    del first
    before = outputs.stats()["hits"]
    second = grad()
    assert second.ctypes.data == address and outputs.stats()["hits"] == before + 1
    np.testing.assert_array_equal(second.view(np.uint8), kept.view(np.uint8))
