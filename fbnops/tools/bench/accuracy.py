"""Accuracy of the channel sums on a hard input: x offset by 1e4, N*H*W = 2**20, vs float64."""

from __future__ import annotations

import numpy as np

from fbnops import raw_ops
from fbnops.kernels import reference
from fbnops.ops.canonical import NdView

from .cases import EPS
from .peers import tf_grad


def _rel(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a, np.float64) - b)) / np.max(np.abs(b)))


def accuracy(peers, shape=(16, 256, 256, 4)) -> dict[str, tuple[float, float]]:
    """Relative error of scale_backprop and offset_backprop of fbnops and of each framework peer."""
    rng = np.random.default_rng(7)
    c = shape[-1]
    x = (rng.standard_normal(shape) + 1e4).astype(np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)
    mean = x.astype(np.float64).mean(axis=(0, 1, 2)).astype(np.float32)
    var = x.astype(np.float64).var(axis=(0, 1, 2)).astype(np.float32)
    scale = np.ones(c, np.float32)
    view = NdView.for_data_format(shape, "NHWC").view
    _, ds64, do64 = reference.batch_norm_grad(
        x.reshape(view), dy.reshape(view), scale, mean, var, epsilon=EPS, is_training=True, compute=np.float64
    )
    out = raw_ops.FusedBatchNormGradV3(
        y_backprop=dy, x=x, scale=scale, reserve_space_1=mean, reserve_space_2=var,
        reserve_space_3=np.zeros((), np.float32), epsilon=EPS,
    )  # fmt: skip
    result = {"fbnops": (_rel(out.scale_backprop, ds64), _rel(out.offset_backprop, do64))}
    if "tf" in peers:
        import tensorflow as tf

        t = tf_grad(tf, dy, x, scale, mean, var, "NHWC")
        result["tf"] = (_rel(t[1].numpy(), ds64), _rel(t[2].numpy(), do64))
    if "torch" in peers:
        import torch

        tx, tdy = torch.from_numpy(x).permute(0, 3, 1, 2), torch.from_numpy(dy).permute(0, 3, 1, 2)
        invstd = torch.from_numpy((1 / np.sqrt(var.astype(np.float64) + EPS)).astype(np.float32))
        _, dw, db = torch.ops.aten.native_batch_norm_backward(
            tdy, tx, torch.from_numpy(scale), None, None, torch.from_numpy(mean), invstd, True, EPS, [True] * 3
        )
        result["torch"] = (_rel(dw.numpy(), ds64), _rel(db.numpy(), do64))
    return result
