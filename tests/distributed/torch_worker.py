"""One gloo rank for tests/distributed/test_torch.py (started by torch.multiprocessing)."""

from __future__ import annotations

import copy
import io
import json
from datetime import timedelta

import numpy as np


def run(rank: int, world: int, init_file: str, out_prefix: str, sizes: list[int], data: dict) -> None:
    import torch
    import torch.distributed as dist

    from fbnops import distributed as fd

    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world, timeout=timedelta(seconds=60)
    )
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
        results = dict(
            reproducible_y=rep.y,
            reproducible_mean=rep.batch_mean,
            y=y.detach().numpy(),
            dx=xt.grad.numpy(),
            dweight=bn.weight.grad.numpy(),
            dbias=bn.bias.grad.numpy(),
            running_mean=bn.running_mean.numpy().copy(),
            running_var=bn.running_var.numpy().copy(),
        )
        # then (more steps) deepcopy and torch.save of a module that resolved the default group, or was given it
        copies = _copies_work(bn, xt.detach()) + _copies_work(fd.SyncBatchNorm(c, comm=fd.from_torch()), xt)
        np.savez(f"{out_prefix}{rank}.npz", copies=np.array(copies), **results)
    finally:
        dist.destroy_process_group()


def _copies_work(bn, x) -> list[bool]:
    """After a step over the process group: deepcopy and torch.save/torch.load give a working module."""
    import torch

    bn(x.detach())  # resolve the communicator at least once
    twin = copy.deepcopy(bn)
    buffer = io.BytesIO()
    torch.save(bn, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    pairs = zip(bn.state_dict().values(), loaded.state_dict().values(), strict=True)
    same = all(torch.equal(a, b) for a, b in pairs)
    outputs = [m(x.detach()) for m in (bn, twin, loaded)]  # all three still run synchronized
    return [same, all(torch.allclose(o, outputs[0]) for o in outputs)]


def run_failures(rank: int, world: int, init_file: str, out_prefix: str, data: dict) -> None:
    """Rank 1 raises inside each stage in turn during a SyncBatchNorm training step; record every rank's error."""
    import torch
    import torch.distributed as dist
    from failures import STAGES, inject, outcome

    from fbnops import distributed as fd

    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world, timeout=timedelta(seconds=60)
    )
    try:
        x = torch.from_numpy(data["x"][rank * 2 : rank * 2 + 2])
        report = {}
        for stage in STAGES:
            bn = fd.SyncBatchNorm(x.shape[1])

            def train_step(bn=bn):
                xt = x.clone().requires_grad_(True)
                bn(xt).sum().backward()

            with inject(stage, lambda: rank == 1):
                report[stage] = outcome(train_step)
        with open(f"{out_prefix}{rank}.json", "w") as f:
            json.dump(report, f)
    finally:
        dist.destroy_process_group()
