"""``SyncBatchNorm`` for PyTorch on CPU: batch statistics over every rank, on fbnops' kernels.

PyTorch's own ``nn.SyncBatchNorm`` runs only on GPUs.  This module is a drop-in for
``nn.BatchNorm1d/2d/3d`` inside a ``torch.distributed`` job (gloo)::

    torch.distributed.init_process_group("gloo", ...)
    model.bn = fbnops.distributed.SyncBatchNorm(64)

As PyTorch's, its weight and bias gradients are this rank's own (``param_grads="local"``):
DistributedDataParallel averages them with every other parameter.  The running
statistics use PyTorch's update ``(1 - momentum) * running + momentum * unbiased``, which
is TensorFlow's ``exponential_avg_factor``; an empty global batch leaves them unchanged.

As ``nn.SyncBatchNorm``: without a process group (or with one rank) it is local batch norm.
Channels-last inputs stay channels-last; float16/bfloat16 parameters are supported (float32
inside the op); the backward is once-differentiable (double backward raises).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import torch

from .adapters import from_torch
from .comm import Communicator, SerialComm
from .ops import FusedBatchNormGradV3, forward

__all__ = ["SyncBatchNorm"]


_SUPPORTED = {torch.float32: "Float", torch.float16: "Half", torch.bfloat16: "BFloat16"}


def _to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:  # NumPy has no bfloat16: reinterpret the bits
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _to_torch(a: np.ndarray) -> torch.Tensor:
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a))


def _check_dtype(what: str, t: torch.Tensor) -> None:
    """fbnops' kernels read float32, float16 and bfloat16 (parameters are float32 in the op)."""
    if t.dtype not in _SUPPORTED:
        name = {torch.float64: "Double"}.get(t.dtype, str(t.dtype))
        raise RuntimeError(
            f"SyncBatchNorm (fbnops): expected {what} to have scalar type Float, Half or BFloat16, but found {name}"
        )


class _Layout:
    """How a torch tensor is handed to the op: a channels-last input runs as NHWC/NDHWC (no copy,
    and its results come back channels-last); anything else as NCHW/NCDHW."""

    def __init__(self, x: torch.Tensor):
        self.shape = x.shape
        formats = {4: torch.channels_last, 5: torch.channels_last_3d}
        last = x.dim() in formats and not x.is_contiguous() and x.is_contiguous(memory_format=formats[x.dim()])
        self.perm = (0, *range(2, x.dim()), 1) if last else None
        self.format = ("NHWC" if x.dim() == 4 else "NDHWC") if last else ("NCDHW" if x.dim() == 5 else "NCHW")

    def to_op(self, t: torch.Tensor) -> np.ndarray:
        if self.perm is not None:
            return _to_numpy(t.permute(self.perm))
        if t.dim() == 5:
            return _to_numpy(t)
        # (N, C), (N, C, L) and (N, C, H, W) as 4-D channels-first, with explicit sizes: N may be 0
        return _to_numpy(t.reshape(t.shape[0], t.shape[1], int(np.prod(t.shape[2:], dtype=np.int64)), 1))

    def from_op(self, a: np.ndarray) -> torch.Tensor:
        t = _to_torch(a)
        if self.perm is not None:
            return t.permute(tuple(int(i) for i in np.argsort(self.perm)))  # channels-last strides
        return t.reshape(self.shape)


class _SyncBatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, comm, eps, stats, training, reproducible):
        layout = _Layout(x)
        running_mean, running_var, momentum = stats
        x_op = layout.to_op(x)
        inputs = {
            "x": x_op, "scale": _to_numpy(weight.float()), "offset": _to_numpy(bias.float()),
            "mean": _to_numpy(running_mean.float()), "variance": _to_numpy(running_var.float()),
        }  # fmt: skip
        attrs = {"epsilon": eps, "exponential_avg_factor": momentum, "data_format": layout.format}
        out, count = forward(comm, inputs, {**attrs, "is_training": training}, reproducible)
        if training and running_mean.numel() and count != 0:  # an empty global batch leaves them (as PyTorch)
            with torch.no_grad():
                running_mean.copy_(_to_torch(out.batch_mean))
                running_var.copy_(_to_torch(out.batch_variance))
        ctx.comm, ctx.eps, ctx.layout, ctx.training, ctx.reproducible = comm, eps, layout, training, reproducible
        ctx.param_dtype = weight.dtype
        ctx.saved = (x_op, inputs["scale"], out.reserve_space_1, out.reserve_space_2, out.reserve_space_3)
        return layout.from_op(out.y)

    @staticmethod
    @torch.autograd.function.once_differentiable  # the gradient is computed outside autograd: no double backward
    def backward(ctx, dy):
        x_op, weight, rs1, rs2, rs3 = ctx.saved
        g = FusedBatchNormGradV3(
            ctx.comm, y_backprop=ctx.layout.to_op(dy), x=x_op, scale=weight, reserve_space_1=rs1,
            reserve_space_2=rs2, reserve_space_3=rs3, epsilon=ctx.eps, data_format=ctx.layout.format,
            is_training=ctx.training, param_grads="local", reproducible=ctx.reproducible,
        )  # fmt: skip
        dweight = _to_torch(g.scale_backprop).to(ctx.param_dtype)
        dbias = _to_torch(g.offset_backprop).to(ctx.param_dtype)
        return ctx.layout.from_op(g.x_backprop), dweight, dbias, None, None, None, None, None


class SyncBatchNorm(torch.nn.Module):
    """Batch norm over the global batch of a ``torch.distributed`` job, on CPU.

    Arguments follow ``torch.nn.BatchNorm2d``; ``comm`` defaults to :func:`from_torch`
    over the default process group, looked up at each call (local batch norm without
    one); any :class:`Communicator` works, e.g. ``ThreadComm`` ranks.
    ``reproducible=True`` gives the same bits for any number of ranks.
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
        """Batch norm of ``x`` (N, C, ...) with statistics over every rank's batch in training
        (this rank's alone without a process group), the running statistics in evaluation."""
        if x.dim() < 2:
            raise ValueError(f"expected at least 2-D input (N, C, ...), got {x.dim()}-D")
        _check_dtype("input", x)
        if self.weight is not None:
            _check_dtype("parameter", self.weight)
        training = self.training or not self.track_running_stats
        factor = 1.0
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            # momentum=None: PyTorch's cumulative moving average
            factor = self.momentum if self.momentum is not None else 1.0 / float(self.num_batches_tracked)
        stats = (self.running_mean, self.running_var, factor)
        weight, bias = self.weight, self.bias
        if weight is None:  # affine=False: the identity scale and shift
            weight, bias = torch.ones(self.num_features), torch.zeros(self.num_features)
        comm = self._communicator() if training else SerialComm()  # inference communicates nothing
        return _SyncBatchNormFunction.apply(x, weight, bias, comm, self.eps, stats, training, self.reproducible)

    def _communicator(self) -> Communicator:
        """The ``comm`` given, else the default process group; without one (or with one rank), local
        batch norm, as ``torch.nn.SyncBatchNorm``.  Resolved per call and never stored, so the module
        deep-copies and pickles (``torch.save(model)``) like any other."""
        if self.comm is not None:
            return self.comm
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            return from_torch()
        return SerialComm()

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
