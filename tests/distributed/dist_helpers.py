"""Builders shared by the distributed tests: inputs, shardings, and one training step on any communicator."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from fbnops import distributed as fd
from fbnops import raw_ops

DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
SHARDINGS = ([7], [4, 3], [3, 0, 4], [0, 7, 0], [1, 1, 5])
SPATIAL = {"NHWC": (3, 2), "NCHW": (3, 2), "NDHWC": (2, 2, 2), "NCDHW": (2, 2, 2)}


def batch(n=7, c=5, data_format="NHWC", dtype="float32", seed=0, shift=3.0):
    """Inputs of one training step on the full batch (x offset from 0: variance about a real mean)."""
    rng = np.random.default_rng(seed)
    spatial = SPATIAL[data_format]
    shape = (n, c, *spatial) if data_format.startswith("NC") else (n, *spatial, c)
    dt = DTYPES[dtype]
    return dict(
        x=(rng.standard_normal(shape) * 2 + shift).astype(dt),
        dy=rng.standard_normal(shape).astype(dt),
        scale=(rng.random(c) + 0.5).astype(np.float32),
        offset=rng.standard_normal(c).astype(np.float32),
        mean=rng.standard_normal(c).astype(np.float32),
        variance=(rng.random(c) + 0.5).astype(np.float32),
    )


def order_sensitive_batch(n=7, c=3, data_format="NHWC", dtype="float32", seed=0):
    """A batch whose float64 sums change bits with the order of addition, visibly in float32 outputs.

    Samples alternate between huge values (+-2**40, exact in float32 and bfloat16) that cancel
    over the batch and ordinary ones: adding an ordinary partial to a huge one rounds it to the
    float64 spacing there (2**-10), so the total, hence the mean and everything after it, depends
    on which partials meet first.  (float16 cannot do this: a few of its values always add exactly.)
    """
    b = batch(n=n, c=c, data_format=data_format, dtype="float32", seed=seed)
    rng = np.random.default_rng(seed)
    huge = np.zeros(n)
    huge[0 : n - 1 : 3], huge[2:n:3] = 2.0**40, -(2.0**40)  # +, ., - repeating: they cancel in pairs
    x = b["x"].astype(np.float64) * rng.uniform(0.5, 2.0, (n,) + (1,) * (b["x"].ndim - 1))
    x = x + huge.reshape((n,) + (1,) * (x.ndim - 1))
    dt = DTYPES[dtype]
    return dict(b, x=x.astype(dt), dy=b["dy"].astype(dt))


def one_row_slice(b: dict) -> dict:
    """The batch's N x 1 x 1 x C slice (NHWC): each sample one row of C values (a 1x1 layer)."""
    return dict(b, x=np.ascontiguousarray(b["x"][:, :1, :1]), dy=np.ascontiguousarray(b["dy"][:, :1, :1]))


# The batches the MPI worker runs (tests/distributed/mpi_worker.py) and test_engines checks.
MPI_CASES = {
    "nhwc_f32": dict(data_format="NHWC", dtype="float32"),
    "ncdhw_f16": dict(data_format="NCDHW", dtype="float16"),
    "nhwc1x1_bf16": dict(data_format="NHWC", dtype="bfloat16", one_row=True),  # the one-pass tree sums
}


def case_batch(n: int, data_format: str, dtype: str, one_row: bool = False) -> dict:
    b = batch(n=n, data_format=data_format, dtype=dtype)
    return one_row_slice(b) if one_row else b


def split(a: np.ndarray, sizes) -> list[np.ndarray]:
    return np.split(a, np.cumsum(sizes)[:-1])


def step(comm, b, *, data_format="NHWC", factor=1.0, **mode):
    """Forward then gradient on this rank's shard; returns every output by name."""
    grad_mode = {k: v for k, v in mode.items() if k in ("reproducible", "param_grads")}
    fwd_mode = {k: v for k, v in mode.items() if k == "reproducible"}
    f = fd.FusedBatchNormV3(
        comm, x=b["x"], scale=b["scale"], offset=b["offset"], mean=b["mean"], variance=b["variance"],
        exponential_avg_factor=factor, data_format=data_format, **fwd_mode,
    )  # fmt: skip
    g = fd.FusedBatchNormGradV3(
        comm, y_backprop=b["dy"], x=b["x"], scale=b["scale"], reserve_space_1=f.reserve_space_1,
        reserve_space_2=f.reserve_space_2, reserve_space_3=f.reserve_space_3, data_format=data_format, **grad_mode,
    )  # fmt: skip
    return {**f._asdict(), **{k: v for k, v in g._asdict().items() if not k.startswith("reserve")}}


def single_process(b, *, data_format="NHWC", factor=1.0):
    """The same step through raw_ops on the whole batch."""
    f = raw_ops.FusedBatchNormV3(
        x=b["x"], scale=b["scale"], offset=b["offset"], mean=b["mean"], variance=b["variance"],
        exponential_avg_factor=factor, data_format=data_format,
    )  # fmt: skip
    g = raw_ops.FusedBatchNormGradV3(
        y_backprop=b["dy"], x=b["x"], scale=b["scale"], reserve_space_1=f.reserve_space_1,
        reserve_space_2=f.reserve_space_2, reserve_space_3=f.reserve_space_3, data_format=data_format,
    )  # fmt: skip
    return {**f._asdict(), **{k: v for k, v in g._asdict().items() if not k.startswith("reserve")}}


def sharded_step(b, sizes, **kw):
    """Run :func:`step` on ``len(sizes)`` thread ranks; returns one dict of outputs per rank."""
    shards = [dict(b, x=x, dy=dy) for x, dy in zip(split(b["x"], sizes), split(b["dy"], sizes), strict=True)]
    return fd.ThreadComm(len(sizes)).run(lambda comm: step(comm, shards[comm.rank], **kw))


PER_CHANNEL = (
    "batch_mean",
    "batch_variance",
    "reserve_space_1",
    "reserve_space_2",
    "scale_backprop",
    "offset_backprop",
)
ROWS = ("y", "x_backprop")


def joined(ranks: list[dict]) -> dict:
    """Rank 0's per-channel outputs and the rows of every rank concatenated."""
    out = {k: ranks[0][k] for k in PER_CHANNEL}
    out.update({k: np.concatenate([r[k] for r in ranks]) for k in ROWS})
    return out


def bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def differing_bits(a: dict, b: dict, keys=PER_CHANNEL + ROWS) -> list[str]:
    """The names whose arrays differ in any bit (NaNs compare by their bits)."""
    return [k for k in keys if a[k].dtype != b[k].dtype or a[k].shape != b[k].shape or bits(a[k]) != bits(b[k])]
