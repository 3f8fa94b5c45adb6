"""One gloo rank for tests/distributed/test_torch.py (started by torch.multiprocessing.spawn)."""

from __future__ import annotations

import numpy as np


def run(rank: int, world: int, init_file: str, out_prefix: str, sizes: list[int], data: dict) -> None:
    import torch
    import torch.distributed as dist

    from fbnops import distributed as fd

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        lo = sum(sizes[:rank])
        x = data["x"][lo : lo + sizes[rank]]
        w = data["w"][lo : lo + sizes[rank]]
        bn = fd.SyncBatchNorm(x.shape[1], momentum=0.2)
        with torch.no_grad():
            bn.weight.copy_(torch.from_numpy(data["weight"]))
            bn.bias.copy_(torch.from_numpy(data["bias"]))
        xt = torch.from_numpy(x).requires_grad_(True)
        y = bn(xt)
        (y * torch.from_numpy(w)).sum().backward()
        # the raw op through from_torch, reproducible mode (allgatherv padded and trimmed over gloo)
        c = x.shape[1]
        rep = fd.FusedBatchNormV3(
            fd.from_torch(), x=x, scale=data["weight"], offset=data["bias"], mean=np.zeros(c, np.float32),
            variance=np.ones(c, np.float32), data_format="NCHW", reproducible=True,
        )  # fmt: skip
        np.savez(
            f"{out_prefix}{rank}.npz",
            reproducible_y=rep.y,
            reproducible_mean=rep.batch_mean,
            y=y.detach().numpy(),
            dx=xt.grad.numpy(),
            dweight=bn.weight.grad.numpy(),
            dbias=bn.bias.grad.numpy(),
            running_mean=bn.running_mean.numpy(),
            running_var=bn.running_var.numpy(),
        )
    finally:
        dist.destroy_process_group()
