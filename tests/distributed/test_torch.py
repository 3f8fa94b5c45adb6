"""SyncBatchNorm for PyTorch on CPU against nn.BatchNorm2d on the whole batch: thread ranks and gloo."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch not installed (the oracle extra brings it)")

from fbnops import distributed as fd  # noqa: E402

SIZES = [3, 0, 2]


def full_batch(seed=0, n=5, c=4):
    rng = np.random.default_rng(seed)
    return {
        "x": (rng.standard_normal((n, c, 3, 2)) * 2 + 1).astype(np.float32),
        "w": rng.standard_normal((n, c, 3, 2)).astype(np.float32),
        "weight": (rng.random(c) + 0.5).astype(np.float32),
        "bias": rng.standard_normal(c).astype(np.float32),
    }


def torch_reference(data):
    bn = torch.nn.BatchNorm2d(data["x"].shape[1], momentum=0.2)
    with torch.no_grad():
        bn.weight.copy_(torch.from_numpy(data["weight"]))
        bn.bias.copy_(torch.from_numpy(data["bias"]))
    x = torch.from_numpy(data["x"]).requires_grad_(True)
    y = bn(x)
    (y * torch.from_numpy(data["w"])).sum().backward()
    return {
        "y": y.detach().numpy(),
        "dx": x.grad.numpy(),
        "dweight": bn.weight.grad.numpy(),
        "dbias": bn.bias.grad.numpy(),
        "running_mean": bn.running_mean.numpy(),
        "running_var": bn.running_var.numpy(),
    }


def compare(ranks: list[dict], want: dict) -> None:
    np.testing.assert_allclose(np.concatenate([r["y"] for r in ranks]), want["y"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.concatenate([r["dx"] for r in ranks]), want["dx"], rtol=1e-4, atol=1e-5)
    for k in ("dweight", "dbias"):  # local per rank, as PyTorch's SyncBatchNorm: they add up to the whole
        np.testing.assert_allclose(sum(r[k] for r in ranks), want[k], rtol=1e-5, atol=1e-5)
    for r in ranks:
        for k in ("running_mean", "running_var"):
            np.testing.assert_allclose(r[k], want[k], rtol=1e-6, atol=1e-7)


def test_sync_batch_norm_on_thread_ranks_matches_batchnorm2d():
    data = full_batch()
    lo = np.concatenate([[0], np.cumsum(SIZES)[:-1]])

    def body(comm):
        bn = fd.SyncBatchNorm(4, momentum=0.2, comm=comm)
        with torch.no_grad():
            bn.weight.copy_(torch.from_numpy(data["weight"]))
            bn.bias.copy_(torch.from_numpy(data["bias"]))
        sl = slice(lo[comm.rank], lo[comm.rank] + SIZES[comm.rank])
        x = torch.from_numpy(data["x"][sl]).requires_grad_(True)
        y = bn(x)
        (y * torch.from_numpy(data["w"][sl])).sum().backward()
        out = {"y": y.detach().numpy(), "dx": x.grad.numpy(), "dweight": bn.weight.grad.numpy()}
        out.update(dbias=bn.bias.grad.numpy(), running_mean=bn.running_mean.numpy(), running_var=bn.running_var.numpy())
        bn.eval()  # inference uses the synchronized running statistics, no communication
        out["eval"] = bn(torch.from_numpy(data["x"][sl])).detach().numpy()
        return out

    ranks = fd.ThreadComm(len(SIZES)).run(body)
    want = torch_reference(data)
    compare(ranks, want)
    ref = torch.nn.BatchNorm2d(4, momentum=0.2).eval()
    with torch.no_grad():
        for name in ("weight", "bias"):
            getattr(ref, name).copy_(torch.from_numpy(data[name]))
        ref.running_mean.copy_(torch.from_numpy(want["running_mean"]))
        ref.running_var.copy_(torch.from_numpy(want["running_var"]))
        evaluated = ref(torch.from_numpy(data["x"])).numpy()
    np.testing.assert_allclose(np.concatenate([r["eval"] for r in ranks]), evaluated, rtol=1e-5, atol=1e-5)


def test_sync_batch_norm_over_gloo_processes(tmp_path):
    dist = pytest.importorskip("torch.distributed", reason="torch.distributed not available")
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("this torch build has no gloo backend")
    import torch_worker

    data, sizes = full_batch(seed=1), [2, 3]
    prefix = str(tmp_path / "rank")
    # fork: the children start with torch already imported (spawn re-imports it: ~6 s each)
    torch.multiprocessing.start_processes(
        torch_worker.run, args=(2, str(tmp_path / "init"), prefix, sizes, data), nprocs=2, start_method="fork"
    )
    ranks = []
    for r in range(2):
        with np.load(f"{prefix}{r}.npz") as z:
            ranks.append({k: z[k] for k in z.files})
    compare(ranks, torch_reference(data))
    c = data["x"].shape[1]
    one = fd.FusedBatchNormV3(
        fd.SerialComm(), x=data["x"], scale=data["weight"], offset=data["bias"], mean=np.zeros(c, np.float32),
        variance=np.ones(c, np.float32), data_format="NCHW", reproducible=True,
    )  # fmt: skip
    assert np.concatenate([r["reproducible_y"] for r in ranks]).tobytes() == one.y.tobytes()
    assert all(r["reproducible_mean"].tobytes() == one.batch_mean.tobytes() for r in ranks)


def test_convert_sync_batchnorm_keeps_parameters_buffers_and_results():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4, momentum=None), torch.nn.ReLU())
    x = torch.randn(6, 3, 5, 5)
    model(x)  # one step: running statistics and num_batches_tracked move away from their defaults
    state = {k: v.clone() for k, v in model.state_dict().items()}
    reference = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4, momentum=None), torch.nn.ReLU())
    reference.load_state_dict(state)
    converted = fd.SyncBatchNorm.convert_sync_batchnorm(model, fd.SerialComm())
    assert isinstance(converted[1], fd.SyncBatchNorm)
    assert converted.state_dict().keys() == state.keys()
    for k, v in converted.state_dict().items():
        assert torch.equal(v, state[k]), k
    y, want = converted(x), reference(x)  # training step: cumulative average (momentum=None) as PyTorch
    torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5)
    for k in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(getattr(converted[1], k), getattr(reference[1], k), rtol=1e-6, atol=1e-7)


def test_affine_false_has_no_parameters_and_matches_batchnorm2d():
    data = full_batch(seed=4)
    ref = torch.nn.BatchNorm2d(4, affine=False)
    sync = fd.SyncBatchNorm(4, affine=False, comm=fd.SerialComm())
    assert sync.weight is None and sync.bias is None and list(sync.parameters()) == []
    assert set(sync.state_dict()) == set(ref.state_dict())
    xs = [torch.from_numpy(data["x"]).requires_grad_(True) for _ in range(2)]
    ys = [ref(xs[0]), sync(xs[1])]
    for y in ys:
        (y * torch.from_numpy(data["w"])).sum().backward()
    np.testing.assert_allclose(ys[1].detach().numpy(), ys[0].detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(xs[1].grad.numpy(), xs[0].grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(sync.running_var.numpy(), ref.running_var.numpy(), rtol=1e-6)
