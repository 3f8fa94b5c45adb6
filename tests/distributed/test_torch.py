"""SyncBatchNorm for PyTorch on CPU against nn.BatchNorm2d on the whole batch: thread ranks and gloo."""

from __future__ import annotations

import numpy as np
import pytest

from fbnops.testing import extras

torch = extras.require("torch", "oracle")

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
    assert all(r["copies"].all() for r in ranks), [r["copies"] for r in ranks]  # deepcopy, torch.save after from_torch
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


def test_a_failure_at_any_stage_on_one_gloo_rank_reaches_every_rank(tmp_path):
    dist = pytest.importorskip("torch.distributed", reason=extras.reason("oracle"))
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("this torch build has no gloo backend")
    import json

    import torch_worker
    from failures import STAGES, check_outcomes

    prefix = str(tmp_path / "rank")
    torch.multiprocessing.start_processes(
        torch_worker.run_failures, args=(2, str(tmp_path / "init"), prefix, full_batch()), nprocs=2, start_method="fork"
    )
    reports = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert sorted(reports[0]) == sorted(STAGES)
    for stage in STAGES:
        check_outcomes([r[stage] for r in reports], stage, 1)


# -- issue 24: SyncBatchNorm in a real training loop -----------------------------------------------


def test_without_a_process_group_it_is_local_batch_norm():
    """As torch.nn.SyncBatchNorm: no process group (or one rank) means plain batch norm."""
    assert not torch.distributed.is_initialized()
    data = full_batch(seed=2)
    sync, ref = fd.SyncBatchNorm(4, momentum=0.2), torch.nn.BatchNorm2d(4, momentum=0.2)
    x = torch.from_numpy(data["x"])
    torch.testing.assert_close(sync(x), ref(x), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(sync.running_var, ref.running_var, rtol=1e-6, atol=1e-7)
    assert sync.comm is None  # nothing resolved is kept on the module


def test_deepcopy_and_torch_save_of_a_trained_module(tmp_path):
    import copy

    bn = fd.SyncBatchNorm(4, comm=fd.SerialComm())
    x = torch.from_numpy(full_batch()["x"])
    bn(x)
    bn.eval()
    path = tmp_path / "bn.pt"
    torch.save(bn, path)
    for twin in (copy.deepcopy(bn), torch.load(path, weights_only=False)):
        torch.testing.assert_close(twin.running_mean, bn.running_mean)
        torch.testing.assert_close(twin(x), bn(x))
        assert twin.train()(x).shape == x.shape  # and it still trains


def test_double_backward_raises_instead_of_a_gradient_without_graph():
    bn = fd.SyncBatchNorm(4, comm=fd.SerialComm())
    x = torch.from_numpy(full_batch()["x"]).requires_grad_(True)
    (dx,) = torch.autograd.grad((bn(x) ** 2).sum(), x, create_graph=True)
    assert dx.requires_grad  # not a silently detached gradient
    with pytest.raises(RuntimeError, match="differentiate twice"):
        dx.sum().backward()


@pytest.mark.parametrize("dims", [4, 5])
def test_a_channels_last_input_comes_back_channels_last(dims):
    torch.manual_seed(0)
    shape, fmt = ((6, 3, 4, 5), torch.channels_last) if dims == 4 else ((6, 3, 2, 4, 5), torch.channels_last_3d)
    base = torch.randn(*shape) * 2 + 1
    ref_bn = torch.nn.BatchNorm2d(3) if dims == 4 else torch.nn.BatchNorm3d(3)
    bn = fd.SyncBatchNorm(3, comm=fd.SerialComm())
    x = base.to(memory_format=fmt).requires_grad_(True)
    ref_x = base.clone().to(memory_format=fmt).requires_grad_(True)
    y, want = bn(x), ref_bn(ref_x)
    assert y.is_contiguous(memory_format=fmt) and not y.is_contiguous()
    torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5)
    w = torch.randn(*shape)
    (y * w).sum().backward()
    (want * w).sum().backward()
    assert x.grad.is_contiguous(memory_format=fmt)
    torch.testing.assert_close(x.grad, ref_x.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_parameters_are_supported(dtype):
    data = full_batch(seed=3)
    bn = fd.SyncBatchNorm(4, comm=fd.SerialComm()).to(dtype)
    ref = torch.nn.BatchNorm2d(4).to(dtype)
    x = torch.from_numpy(data["x"]).to(dtype)
    xs = [x.clone().requires_grad_(True) for _ in range(2)]
    y, want = bn(xs[0]), ref(xs[1])
    assert y.dtype == dtype and bn.running_mean.dtype == dtype
    tol = {"rtol": 2e-2, "atol": 2e-2}
    torch.testing.assert_close(y.float(), want.float(), **tol)
    torch.testing.assert_close(bn.running_var.float(), ref.running_var.float(), **tol)
    y.sum().backward()
    want.sum().backward()
    assert bn.weight.grad.dtype == dtype and bn.bias.grad.dtype == dtype
    torch.testing.assert_close(bn.bias.grad.float(), ref.bias.grad.float(), **tol)


def test_double_precision_gets_a_message_in_pytorch_terms():
    bn = fd.SyncBatchNorm(4, comm=fd.SerialComm())
    x = torch.from_numpy(full_batch()["x"])
    with pytest.raises(
        RuntimeError, match="expected input to have scalar type Float, Half or BFloat16, but found Double"
    ):
        bn(x.double())
    with pytest.raises(RuntimeError, match="expected parameter to have scalar type .* but found Double"):
        bn.double()(x)


def test_an_empty_shard_of_2d_input_joins_the_collective():
    """A (0, C) shard, as nn.BatchNorm1d accepts it, next to a full one."""
    rng = np.random.default_rng(5)
    x = torch.from_numpy((rng.standard_normal((5, 4)) * 2 + 1).astype(np.float32))
    shards = [x[:0], x]

    def body(comm):
        bn = fd.SyncBatchNorm(4, comm=comm)
        xt = shards[comm.rank].clone().requires_grad_(True)
        y = bn(xt)
        y.sum().backward()
        return y.detach(), xt.grad, bn.running_mean.clone()

    ranks = fd.ThreadComm(2).run(body)
    ref = torch.nn.BatchNorm1d(4)
    want = ref(x)
    assert ranks[0][0].shape == (0, 4) and ranks[0][1].shape == (0, 4)
    torch.testing.assert_close(ranks[1][0], want, rtol=1e-5, atol=1e-5)
    for r in ranks:
        torch.testing.assert_close(r[2], ref.running_mean, rtol=1e-6, atol=1e-7)


def test_one_step_on_an_empty_global_batch_leaves_the_running_statistics():
    """As nn.BatchNorm2d: the counter moves, the running statistics do not (the raw op keeps TF's NaN)."""
    ref = torch.nn.BatchNorm2d(4)
    with torch.no_grad():
        ref.running_mean.fill_(0.5)
        ref.running_var.fill_(2.0)
    ref(torch.zeros(0, 4, 3, 2))

    def body(comm):
        bn = fd.SyncBatchNorm(4, comm=comm)
        with torch.no_grad():
            bn.running_mean.fill_(0.5)
            bn.running_var.fill_(2.0)
        y = bn(torch.zeros(0, 4, 3, 2))
        return y.shape, bn.running_mean, bn.running_var, bn.num_batches_tracked

    for shape, mean, var, count in fd.ThreadComm(2).run(body):
        assert shape == (0, 4, 3, 2)
        torch.testing.assert_close(mean, ref.running_mean)
        torch.testing.assert_close(var, ref.running_var)
        assert count == ref.num_batches_tracked == 1
