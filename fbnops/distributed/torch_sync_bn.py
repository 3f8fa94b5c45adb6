"""``SyncBatchNorm`` for PyTorch on CPU: batch statistics over every rank, on fbnops' kernels.

PyTorch's own ``nn.SyncBatchNorm`` runs only on GPUs.  This module is a drop-in for
``nn.BatchNorm1d/2d/3d`` inside a ``torch.distributed`` job (gloo)::

    torch.distributed.init_process_group("gloo", ...)
    model.bn = fbnops.distributed.SyncBatchNorm(64)

As PyTorch's, its weight and bias gradients are this rank's own (``param_grads="local"``):
DistributedDataParallel averages them with every other parameter.  The running
statistics use PyTorch's update ``(1 - momentum) * running + momentum * unbiased``, which
is TensorFlow's ``exponential_avg_factor``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import torch

from .adapters import from_torch
from .comm import Communicator
from .ops import FusedBatchNormGradV3, FusedBatchNormV3

__all__ = ["SyncBatchNorm"]


def _to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:  # NumPy has no bfloat16: reinterpret the bits
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _to_torch(a: np.ndarray) -> torch.Tensor:
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a))


def _as_nchw(x: torch.Tensor) -> torch.Tensor:
    """(N, C), (N, C, L) and (N, C, H, W) as 4-D channels-first; (N, C, D, H, W) stays 5-D."""
    if x.dim() in (4, 5):
        return x
    return x.reshape(x.shape[0], x.shape[1], -1, 1)


class _SyncBatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, comm, eps, stats, training, reproducible):
        x4 = _as_nchw(x)
        fmt = "NCHW" if x4.dim() == 4 else "NCDHW"
        running_mean, running_var, momentum = stats
        out = FusedBatchNormV3(
            comm, x=_to_numpy(x4), scale=_to_numpy(weight), offset=_to_numpy(bias),
            mean=_to_numpy(running_mean), variance=_to_numpy(running_var), epsilon=eps,
            exponential_avg_factor=momentum, data_format=fmt, is_training=training, reproducible=reproducible,
        )  # fmt: skip
        if training and running_mean.numel():
            with torch.no_grad():
                running_mean.copy_(_to_torch(out.batch_mean))
                running_var.copy_(_to_torch(out.batch_variance))
        ctx.comm, ctx.eps, ctx.fmt, ctx.training, ctx.reproducible = comm, eps, fmt, training, reproducible
        ctx.saved = (_to_numpy(x4), _to_numpy(weight), out.reserve_space_1, out.reserve_space_2, out.reserve_space_3)
        return _to_torch(out.y).reshape(x.shape)

    @staticmethod
    def backward(ctx, dy):
        x4, weight, rs1, rs2, rs3 = ctx.saved
        g = FusedBatchNormGradV3(
            ctx.comm, y_backprop=_to_numpy(dy.reshape(x4.shape)), x=x4, scale=weight, reserve_space_1=rs1,
            reserve_space_2=rs2, reserve_space_3=rs3, epsilon=ctx.eps, data_format=ctx.fmt,
            is_training=ctx.training, param_grads="local", reproducible=ctx.reproducible,
        )  # fmt: skip
        dx = _to_torch(g.x_backprop).reshape(dy.shape)
        return dx, _to_torch(g.scale_backprop), _to_torch(g.offset_backprop), None, None, None, None, None


class SyncBatchNorm(torch.nn.Module):
    """Batch norm over the global batch of a ``torch.distributed`` job, on CPU.

    Arguments follow ``torch.nn.BatchNorm2d``; ``comm`` defaults to :func:`from_torch`
    over the default process group (any :class:`Communicator` works, e.g. ``ThreadComm``
    ranks); ``reproducible=True`` gives the same bits for any number of ranks.
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        *,
        comm: Communicator | None = None,
        reproducible: bool = False,
    ):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.comm, self.reproducible = comm, reproducible
        if affine:
            self.weight = torch.nn.Parameter(torch.ones(num_features))
            self.bias = torch.nn.Parameter(torch.zeros(num_features))
        else:  # as nn.BatchNorm*d: no parameters at all (not frozen ones)
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:  # the same buffers as nn.BatchNorm*d: checkpoints load either way
            self.register_buffer("running_mean", torch.zeros(num_features))
            self.register_buffer("running_var", torch.ones(num_features))
            self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long))
        else:
            self.register_buffer("running_mean", torch.zeros(0))
            self.register_buffer("running_var", torch.zeros(0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() < 2:
            raise ValueError(f"expected at least 2-D input (N, C, ...), got {x.dim()}-D")
        training = self.training or not self.track_running_stats
        if self.comm is None:
            self.comm = from_torch()
        factor = 1.0
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            # momentum=None: PyTorch's cumulative moving average
            factor = self.momentum if self.momentum is not None else 1.0 / float(self.num_batches_tracked)
        stats = (self.running_mean, self.running_var, factor)
        weight, bias = self.weight, self.bias
        if weight is None:  # affine=False: the identity scale and shift
            weight, bias = torch.ones(self.num_features), torch.zeros(self.num_features)
        return _SyncBatchNormFunction.apply(x, weight, bias, self.comm, self.eps, stats, training, self.reproducible)

    @classmethod
    def convert_sync_batchnorm(
        cls, module: torch.nn.Module, comm: Communicator | None = None, *, reproducible: bool = False
    ) -> torch.nn.Module:
        """Replace every ``nn.BatchNorm1d/2d/3d`` in ``module`` by this class, keeping weights and buffers
        (PyTorch's ``nn.SyncBatchNorm.convert_sync_batchnorm``, for CPU)."""
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm) and not isinstance(module, cls):
            out = cls(module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats,
                      comm=comm, reproducible=reproducible)  # fmt: skip
            with torch.no_grad():
                if module.affine:
                    out.weight.copy_(module.weight)
                    out.bias.copy_(module.bias)
                if module.track_running_stats:
                    out.running_mean.copy_(module.running_mean)
                    out.running_var.copy_(module.running_var)
                    out.num_batches_tracked.copy_(module.num_batches_tracked)
            out.train(module.training)
            return out
        for name, child in module.named_children():
            module.add_module(name, cls.convert_sync_batchnorm(child, comm, reproducible=reproducible))
        return module
