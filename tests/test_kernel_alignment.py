"""The C kernels read channels-last rows that start off a 64-byte line from the line on, with
their lanes turned to match (``reduce_span`` in ``fbnops/kernels/_cython/_loops.pxi``).  The
bits must not depend on where the data sits: every output of a call on the same values placed
at other offsets from a line is byte for byte the one at offset 0."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from fbnops import raw_ops
from fbnops.framework import registry, threads

DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
# (4,20,20,64): items of fewer than BLOCK_ROWS folded rows, added in strips where the rule allows;
# (16,56,56,64): items of more (a flush of the float32 lanes inside each), added row by row;
# (4,3,3,2048): rows wider than the turned tiles' buffers (MAX_W lanes), read as they are.
SHAPES = [(4, 20, 20, 64), (16, 56, 56, 64), (4, 3, 3, 2048)]


def _builds():
    from fbnops.kernels import cython_backend

    return {b.SIMD_VARIANT: b for b in cython_backend.available_builds()}


def _placed(values: np.ndarray, offset: int) -> np.ndarray:
    """A copy of `values` whose first byte sits `offset` bytes past a 64-byte line."""
    buf = np.empty(values.nbytes + 128, np.uint8)
    start = (offset - buf.ctypes.data) % 64
    out = buf[start : start + values.nbytes].view(values.dtype).reshape(values.shape)
    out[...] = values
    assert out.ctypes.data % 64 == offset
    return out


def _outputs(op: str, x: np.ndarray, dy: np.ndarray, stats: tuple[np.ndarray, np.ndarray]) -> list[bytes]:
    c = x.shape[-1]
    scale, offset = np.linspace(0.5, 1.5, c, dtype=np.float32), np.linspace(-1, 1, c, dtype=np.float32)
    empty = np.zeros(0, np.float32)
    if op == "forward":
        out = raw_ops.FusedBatchNormV3(x=x, scale=scale, offset=offset, mean=empty, variance=empty,
                                       epsilon=1e-3, data_format="NHWC")  # fmt: skip
    else:
        out = raw_ops.FusedBatchNormGradV3(y_backprop=dy, x=x, scale=scale, reserve_space_1=stats[0],
                                           reserve_space_2=stats[1], reserve_space_3=empty, epsilon=1e-3,
                                           data_format="NHWC")  # fmt: skip
    return [np.ascontiguousarray(o).tobytes() for o in out[:3]]


@pytest.mark.parametrize("simd", ["baseline", "x86-64-v3", "x86-64-v4"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_rows_off_a_line_give_the_bits_of_rows_on_one(simd, dtype, monkeypatch):
    from fbnops.kernels import cython_backend

    builds = _builds()
    if simd not in builds:
        pytest.skip(f"this CPU cannot run the {simd} build (or it is not built here)")
    monkeypatch.setattr(cython_backend, "_bn", builds[simd])
    rng = np.random.default_rng(7)
    itemsize = np.dtype(DTYPES[dtype]).itemsize
    offsets = (itemsize, 16, 48, 64 - itemsize)
    with registry.backend("cython"), threads.setting_kept():
        threads.set_num_threads(2)
        for shape in SHAPES:
            x = (rng.standard_normal(shape, dtype=np.float32) * 2 + 3).astype(DTYPES[dtype])
            dy = rng.standard_normal(shape, dtype=np.float32).astype(DTYPES[dtype])
            x32 = x.astype(np.float32)
            stats = (x32.mean(axis=(0, 1, 2)).astype(np.float32), x32.var(axis=(0, 1, 2)).astype(np.float32))
            for op in ("forward", "grad"):
                on_line = _outputs(op, _placed(x, 0), _placed(dy, 0), stats)
                for off in offsets:
                    got = _outputs(op, _placed(x, off), _placed(dy, off), stats)
                    assert got == on_line, f"{simd} {dtype} {op} {shape}: other bits at offset {off}"
                # x and dy at different places in their lines: read as they are, the same bits
                got = _outputs(op, _placed(x, 16), _placed(dy, 32), stats)
                assert got == on_line, f"{simd} {dtype} {op} {shape}: other bits with x and dy apart"
