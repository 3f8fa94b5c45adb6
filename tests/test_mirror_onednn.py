"""oneDNN Graph mirror: checked vectors, the cross-mapping with DirectML (dml_onednn.md section C),
oneDNN 3.13 fidelity (overloads, enum values, status codes, dtype/attribute/rank rules) and errors.

The comparison with the real library, case by case, is tests/test_onednn_real.py.
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
from test_mirror_directml import DY1, GLOBAL_DX, TRAIN_DX, X1, F, dml_grad

import fbnops
from bindings_mirror import directml as dml
from bindings_mirror import onednn_graph as dg
from bindings_mirror.onednn_graph import engine, graph, logical_tensor, op, stream, tensor
from fbnops.framework import memory as dg_memory

LT = logical_tensor

# ------------------------------------------------------------------------------ oneDNN helpers


def onednn_bn_bwd(
    x, dy, mean, var, gamma=None, eps=0.0, fmt=None, n_out=3, dt=LT.data_type.f32, stat_dt=LT.data_type.f32
):
    strided = LT.layout_type.strided
    c = mean.shape[0]
    lts = [
        LT(0, dt, list(x.shape), strided),
        LT(1, dt, list(dy.shape), strided),
        LT(2, stat_dt, [c], strided),
        LT(3, stat_dt, [c], strided),
    ] + ([LT(4, stat_dt, [c], strided)] if gamma is not None else [])
    outs = [LT(10, dt, dg.DNNL_GRAPH_UNKNOWN_NDIMS, LT.layout_type.any)] + [
        LT(11 + i, stat_dt, [c], strided) for i in range(n_out - 1)
    ]
    bn = op(0, op.kind.BatchNormTrainingBackward, "bn_bwd")
    bn.set_attr(op.attr.epsilon, eps)
    if fmt:
        bn.set_attr(op.attr.data_format, fmt)
    bn.add_inputs(lts)
    bn.add_outputs(outs)
    g = graph(engine.kind.cpu)
    g.add_op(bn)
    g.finalize()
    (part,) = g.get_partitions()
    eng = engine(engine.kind.cpu, 0)
    cp = part.compile(part.get_input_ports(), part.get_output_ports(), eng)
    outs = [cp.query_logical_tensor(lt.get_id()) for lt in outs]
    results = [np.empty(lt.get_dims(), dg._NUMPY[lt.get_data_type()]) for lt in outs]
    vals = [x, dy, mean, var] + ([gamma] if gamma is not None else [])
    strm = stream(eng)
    cp.execute(
        strm,
        [tensor(lt, eng, v) for lt, v in zip(lts, vals, strict=True)],
        [tensor(lt, eng, r) for lt, r in zip(outs, results, strict=True)],
    )
    strm.wait()
    return results


def test_onednn_checked_vectors():
    v = lambda a: np.array([a], F)  # noqa: E731
    dx, dgamma, dbeta = onednn_bn_bwd(X1, DY1, v(2.5), v(1.25), v(2.0), fmt="NCX")
    np.testing.assert_allclose(dx.ravel(), TRAIN_DX, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose([dgamma.item(), dbeta.item()], [0.17888544, 0.6], rtol=1e-6)
    for gamma in (None, v(2.0)):  # one output: global statistics, gamma ignored even when given
        (dx,) = onednn_bn_bwd(X1, DY1, v(2.5), v(1.25), gamma, fmt="NCX", n_out=1)
        np.testing.assert_allclose(dx.ravel(), GLOBAL_DX, rtol=1e-6)


def test_onednn_random_nxc_default_against_float64():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 5)).astype(F)  # NXC by default: C = 5 (last)
    dy = rng.standard_normal((2, 3, 4, 5)).astype(F)
    x64 = x.astype(np.float64)
    mean, var = x64.mean((0, 1, 2)), x64.var((0, 1, 2))
    gamma = rng.random(5).astype(F) + 0.5
    dx, dgamma, dbeta = onednn_bn_bwd(x, dy, mean.astype(F), var.astype(F), gamma, eps=1e-5)
    rstd = 1 / np.sqrt(var.astype(F).astype(np.float64) + np.float32(1e-5))
    xhat = (x64 - mean.astype(F)) * rstd
    db = dy.sum((0, 1, 2), dtype=np.float64)
    dgm = (dy * xhat).sum((0, 1, 2))
    ref = gamma * rstd * (dy - db / 24 - xhat * dgm / 24)
    assert np.abs(dx - ref).max() < 1e-6 and np.abs(dgamma - dgm).max() < 1e-5 and np.abs(dbeta - db).max() < 1e-5


# ------------------------------------------------------------------------------ section C cross-mapping


@pytest.fixture
def nchw_case():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 4, 5, 6)).astype(F)
    dy = rng.standard_normal((3, 4, 5, 6)).astype(F)
    fwd = fbnops.raw_ops.FusedBatchNormV3(
        x=x,
        scale=np.ones(4, F),
        offset=np.zeros(4, F),
        mean=np.zeros(0, F),
        variance=np.zeros(0, F),
        data_format="NCHW",
    )
    gamma = rng.random(4).astype(F) + 0.5
    return x, dy, fwd.reserve_space_1, fwd.reserve_space_2, gamma


def test_cross_mapping_gradients(nchw_case):
    x, dy, mean, var, gamma = nchw_case
    eps = 1e-3
    tf = {
        t: fbnops.raw_ops.FusedBatchNormGradV3(
            y_backprop=dy,
            x=x,
            scale=gamma,
            reserve_space_1=mean,
            reserve_space_2=var,
            reserve_space_3=np.zeros(0, F),
            epsilon=eps,
            data_format="NCHW",
            is_training=t,
        )
        for t in (True, False)
    }
    s4 = lambda v: v.reshape(1, 4, 1, 1)  # noqa: E731 - DML statistics are rank-4 with 1s
    grad = dml_grad(dml.DML_OPERATOR_BATCH_NORMALIZATION_GRAD, x, dy, s4(mean), s4(var), s4(gamma), eps)
    tgrad = dml_grad(dml.DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD, x, dy, s4(mean), s4(var), s4(gamma), eps)
    one3 = onednn_bn_bwd(x, dy, mean, var, gamma, eps=eps, fmt="NCX")
    (one1,) = onednn_bn_bwd(x, dy, mean, var, gamma, eps=eps, fmt="NCX", n_out=1)
    # coincide: DML GRAD = TF frozen; DML TRAINING_GRAD = TF training = oneDNN 3 outputs (same kernels: bitwise)
    for got, want in [(grad, tf[False]), (tgrad, tf[True]), (one3, tf[True])]:
        np.testing.assert_array_equal(got[0], want.x_backprop)
        np.testing.assert_array_equal(np.ravel(got[1]), want.scale_backprop)
        np.testing.assert_array_equal(np.ravel(got[2]), want.offset_backprop)
    # differ exactly as documented: oneDNN's 1-output gradient has no gamma factor
    np.testing.assert_allclose(one1 * gamma.reshape(1, 4, 1, 1), tf[False].x_backprop, rtol=1e-6)
    assert not np.allclose(one1, tf[False].x_backprop)


def test_cross_mapping_forward_and_statistics(nchw_case):
    x, _, mean, var, gamma = nchw_case
    beta = np.linspace(-1, 1, 4).astype(F)
    s4 = lambda v: v.reshape(1, 4, 1, 1)  # noqa: E731
    T = dml.make_tensor_desc
    f32 = dml.DML_TENSOR_DATA_TYPE_FLOAT32
    dev = dml.DMLCreateDevice()
    train = dml.DML_BATCH_NORMALIZATION_TRAINING_OPERATOR_DESC(
        T(f32, x.shape),
        T(f32, (1, 4, 1, 1)),
        T(f32, (1, 4, 1, 1)),
        None,
        T(f32, x.shape),
        T(f32, (1, 4, 1, 1)),
        T(f32, (1, 4, 1, 1)),
        Epsilon=1e-3,
    )
    out = dml.run_operator(
        dev,
        dml.DML_OPERATOR_DESC(dml.DML_OPERATOR_BATCH_NORMALIZATION_TRAINING, train),
        dict(InputTensor=x, ScaleTensor=s4(gamma), BiasTensor=s4(beta), FusedAddTensor=None),
    )
    tf = fbnops.raw_ops.FusedBatchNormV3(
        x=x, scale=gamma, offset=beta, mean=np.zeros(0, F), variance=np.zeros(0, F), epsilon=1e-3, data_format="NCHW"
    )
    np.testing.assert_array_equal(out["OutputTensor"], tf.y)
    np.testing.assert_array_equal(out["OutputMeanTensor"].ravel(), tf.reserve_space_1)
    np.testing.assert_array_equal(out["OutputVarianceTensor"].ravel(), tf.reserve_space_2)  # biased, like TF's rs2
    n = x.size // 4  # TF's running batch_variance carries Bessel's correction; DML's does not
    np.testing.assert_allclose(out["OutputVarianceTensor"].ravel() * n / (n - 1), tf.batch_variance, rtol=1e-6)
    infer = dml.DML_BATCH_NORMALIZATION_OPERATOR_DESC(
        T(f32, x.shape),
        T(f32, (1, 4, 1, 1)),
        T(f32, (1, 4, 1, 1)),
        T(f32, (1, 4, 1, 1)),
        T(f32, (1, 1, 1, 1)),
        T(f32, x.shape),
        Spatial=True,
        Epsilon=1e-3,
    )
    y = dml.run_operator(
        dev,
        dml.DML_OPERATOR_DESC(dml.DML_OPERATOR_BATCH_NORMALIZATION, infer),
        dict(
            InputTensor=x,
            MeanTensor=s4(mean),
            VarianceTensor=s4(var),
            ScaleTensor=s4(gamma),
            BiasTensor=np.full((1, 1, 1, 1), 0.25, F),
        ),
    )["OutputTensor"]
    tfi = fbnops.raw_ops.FusedBatchNormV3(
        x=x,
        scale=gamma,
        offset=np.full(4, 0.25, F),
        mean=mean,
        variance=var,
        epsilon=1e-3,
        data_format="NCHW",
        is_training=False,
    )
    np.testing.assert_array_equal(y, tfi.y)  # the Bias broadcast on its own from {1,1,1,1}

    # oneDNN BatchNormForwardTraining: biased statistics, running = momentum*old + (1-momentum)*batch
    strided = LT.layout_type.strided
    lts = [LT(0, LT.data_type.f32, list(x.shape), strided)] + [
        LT(i, LT.data_type.f32, [4], strided) for i in range(1, 5)
    ]
    outs = [LT(10, LT.data_type.f32, list(x.shape), strided)] + [
        LT(11 + i, LT.data_type.f32, [4], strided) for i in range(4)
    ]
    fwd = op(1, op.kind.BatchNormForwardTraining, lts, outs, "bn_fwd")
    fwd.set_attr(op.attr.epsilon, 1e-3).set_attr(op.attr.data_format, "NCX")
    g = graph(engine.kind.cpu)
    g.add_op(fwd)
    g.finalize()
    eng = engine(engine.kind.cpu, 0)
    cp = g.get_partitions()[0].compile(lts, outs, eng)
    old_m, old_v = np.full(4, 1.0, F), np.full(4, 2.0, F)
    res = [np.empty(x.shape, F)] + [np.empty(4, F) for _ in range(4)]
    cp.execute(
        stream(eng),
        [tensor(lt, eng, a) for lt, a in zip(lts, [x, old_m, old_v, gamma, beta], strict=True)],
        [tensor(lt, eng, r) for lt, r in zip(outs, res, strict=True)],
    )
    np.testing.assert_array_equal(res[0], tf.y)
    np.testing.assert_array_equal(res[3], tf.reserve_space_1)
    np.testing.assert_array_equal(res[4], tf.reserve_space_2)
    np.testing.assert_allclose(res[1], 0.5 * old_m + 0.5 * tf.reserve_space_1, rtol=1e-6)  # default momentum 0.5
    np.testing.assert_allclose(res[2], 0.5 * old_v + 0.5 * tf.reserve_space_2, rtol=1e-6)


def test_dml_float16_and_onednn_bf16():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float16)
    dy = rng.standard_normal((2, 3, 4, 4)).astype(np.float16)
    s = lambda v: np.full((1, 3, 1, 1), v, np.float16)  # noqa: E731
    dx, ds, db = dml_grad(
        dml.DML_OPERATOR_BATCH_NORMALIZATION_GRAD, x, dy, s(0.0), s(1.0), s(2.0), 1e-3, dml.DML_TENSOR_DATA_TYPE_FLOAT16
    )
    assert dx.dtype == ds.dtype == np.float16
    np.testing.assert_allclose(dx, (dy.astype(F) * 2 / np.sqrt(F(1.001))).astype(np.float16), rtol=1e-3)
    bf = ml_dtypes.bfloat16
    xb, dyb = x.astype(bf), dy.astype(bf)
    for stat_dt in (LT.data_type.f32, LT.data_type.bf16):
        np_dt = F if stat_dt == LT.data_type.f32 else bf
        out = onednn_bn_bwd(
            xb,
            dyb,
            np.zeros(4, np_dt),
            np.ones(4, np_dt),
            np.ones(4, np_dt),
            eps=1e-3,
            dt=LT.data_type.bf16,
            stat_dt=stat_dt,
        )
        assert out[0].dtype == bf and out[1].dtype == np.dtype(np_dt)


# ------------------------------------------------------------------------------ oneDNN 3.13 fidelity

S = LT.layout_type.strided
DT = LT.data_type


def bn_op(ins, outs, attrs=None):
    bn = op(0, op.kind.BatchNormTrainingBackward, ins, outs, "bn")
    for name, value in (attrs if attrs is not None else {op.attr.epsilon: 1e-5, op.attr.data_format: "NCX"}).items():
        bn.set_attr(name, value)
    return bn


def bwd_lts(dims=(2, 3, 4, 5), dt=DT.f32, sdt=DT.f32, n_out=3, gamma=True, out_dt=None):
    c = dims[1] if len(dims) > 1 else dims[0]
    ins = [LT(0, dt, list(dims), S), LT(1, dt, list(dims), S), LT(2, sdt, [c], S), LT(3, sdt, [c], S)]
    ins += [LT(4, sdt, [c], S)] if gamma else []
    outs = [LT(10, out_dt or dt, list(dims), S), LT(11, sdt, [c], S), LT(12, sdt, [c], S)][:n_out]
    return ins, outs


def test_onednn_enum_values_are_the_headers():
    assert [DT.f16.value, DT.bf16.value, DT.f32.value, DT.boolean.value, DT.f8_e5m2.value, DT.s64.value] == [
        1,
        2,
        3,
        8,
        9,
        16,
    ]
    assert [DT.f8_e4m3.value, DT.s4.value, DT.u4.value] == [10, 11, 12]
    assert LT.property_type.host_scalar.value == 3
    assert [op.kind.BatchNormTrainingBackward.value, op.kind.BatchNormForwardTraining.value] == [5, 6]
    assert op.kind.BatchNormInference.value == 7
    assert (op.attr.epsilon.value, op.attr.momentum.value, op.attr.data_format.value) == (3, 6, 0x83)
    assert [dg.status(v).name for v in (0, 2, 7, 8, 9, 10)] == [
        "success",
        "invalid_arguments",
        "invalid_graph",
        "invalid_graph_op",
        "invalid_shape",
        "invalid_data_type",
    ]
    assert (dg.partition.policy.fusion.value, dg.partition.policy.debug.value) == (1, 2)


def test_onednn_logical_tensor_overloads():
    dims = [2, 3, 4, 5]
    lt = LT(0, DT.f32, dims, [60, 1, 15, 3])  # (tid, dt, dims, strides): positional strides
    assert lt.get_layout_type() == S and lt.get_strides() == [60, 1, 15, 3] and lt.get_mem_size() == 480
    assert LT(0, DT.f32, dims, S).get_strides() == [60, 20, 5, 1]  # (tid, dt, dims, layout): dense
    assert LT(0, DT.f32).ndims() == -1 and LT(0, DT.f32).get_layout_type() == LT.layout_type.undef
    assert LT(0, DT.f32, LT.layout_type.any).get_layout_type() == LT.layout_type.any  # (tid, dt, layout)
    lt = LT(0, DT.f32, 4, LT.layout_type.any, LT.property_type.constant)  # (tid, dt, ndims, layout, ptype)
    assert lt.ndims() == 4 and lt.get_property_type() == LT.property_type.constant
    lt = LT(0, DT.f32, dims, 7)  # (tid, dt, dims, layout_id): opaque
    assert lt.get_layout_type() == LT.layout_type.opaque and lt.get_layout_id() == 7
    with pytest.raises(dg.error) as e:
        LT(0, DT.f32, dims, S).get_layout_id()
    assert e.value.status == dg.status.invalid_arguments == 2
    with pytest.raises(dg.error, match="4 dims, 3 strides"):
        LT(0, DT.f32, dims, [1, 2, 3])


def test_onednn_add_op_returns_status_and_error_status_is_numeric():
    ins, outs = bwd_lts()
    g = graph(engine.kind.cpu)
    st = g.add_op(bn_op(ins, outs))
    assert st is dg.status.success and st == 0
    with pytest.raises(dg.error) as e:
        graph(engine.kind.cpu).add_op(bn_op(ins, outs, {op.attr.data_format: "NCX"}))
    assert e.value.status == dg.status.invalid_graph_op and int(e.value.status) == 8


ADD_OP_REJECTS = [  # oneDNN 3.13 refuses each at add_op with invalid_graph_op (8)
    ("f32 src with bf16 statistics", dict(sdt=DT.bf16), None),
    ("f16 src with bf16 statistics", dict(dt=DT.f16, sdt=DT.bf16), None),
    ("diff_src dtype differs", dict(out_dt=DT.f16), None),
    ("s32 src", dict(dt=DT.s32), None),
    ("momentum on backward", {}, {op.attr.epsilon: 1e-5, op.attr.momentum: 0.9}),
    ("data_format NCHW", {}, {op.attr.epsilon: 1e-5, op.attr.data_format: "NCHW"}),
    ("foreign attribute", {}, {op.attr.epsilon: 1e-5, op.attr.alpha: 1.0}),
    ("epsilon as s64", {}, {op.attr.epsilon: 1}),
    ("data_format as f32", {}, {op.attr.epsilon: 1e-5, op.attr.data_format: 1.0}),
    ("no epsilon", {}, {op.attr.data_format: "NCX"}),
]


@pytest.mark.parametrize("name,lts,attrs", ADD_OP_REJECTS, ids=[c[0] for c in ADD_OP_REJECTS])
def test_onednn_add_op_rejects_with_invalid_graph_op(name, lts, attrs):
    ins, outs = bwd_lts(**lts)
    bn = bn_op(ins, outs, attrs)  # set_attr takes any attribute, as in C++
    assert graph(engine.kind.cpu).add_op(bn, allow_exception=False) == dg.status.invalid_graph_op
    with pytest.raises(dg.error) as e:
        graph(engine.kind.cpu).add_op(bn)
    assert e.value.status == 8


def test_onednn_dtype_rules_t1_t2():
    for dt, sdt in ((DT.f32, DT.f32), (DT.bf16, DT.f32), (DT.bf16, DT.bf16), (DT.f16, DT.f32)):
        ins, outs = bwd_lts(dt=dt, sdt=sdt)
        assert graph(engine.kind.cpu).add_op(bn_op(ins, outs), False) == dg.status.success
    ins, outs = bwd_lts(dt=DT.bf16)
    ins[3] = LT(3, DT.bf16, [3], S)  # mean f32, variance bf16: T2 is one type
    assert graph(engine.kind.cpu).add_op(bn_op(ins, outs), False) == dg.status.invalid_graph_op


def _compile_status(ins, outs, attrs=None):
    """The status compile refuses with (it must refuse)."""
    with pytest.raises(dg.error) as e:
        _partition(ins, outs, attrs).compile(ins, outs, engine(engine.kind.cpu, 0))
    return e.value.status


def _partition(ins, outs, attrs=None, policy=None):
    g = graph(engine.kind.cpu)
    g.add_op(bn_op(ins, outs, attrs))
    g.finalize()
    parts = g.get_partitions() if policy is None else g.get_partitions(policy)
    assert len(parts) == 1
    return parts[0]


def test_onednn_two_outputs_are_added_but_unsupported():
    ins, outs = bwd_lts(n_out=2)
    part = _partition(ins, outs)
    assert not part.is_supported()
    with pytest.raises(dg.error, match="not supported"):
        part.compile(ins, outs, engine(engine.kind.cpu, 0))


def test_onednn_partition_queries_and_policy():
    ins, outs = bwd_lts()
    part = _partition(ins, outs, policy=dg.partition.policy.debug)
    assert part.get_ops() == [0] and part.get_ops_num() == 1 and part.get_engine_kind() == engine.kind.cpu
    assert [lt.get_id() for lt in part.get_input_ports()] == [0, 1, 2, 3, 4]
    g = graph(engine.kind.cpu)
    with pytest.raises(dg.error) as e:
        g.get_partitions()
    assert e.value.status == dg.status.invalid_graph
    g.finalize()
    with pytest.raises(dg.error):
        g.get_partitions("fusion")


def _run(ins, outs, data, attrs=None, cins=None, couts=None):
    part = _partition(ins, outs, attrs)
    eng = engine(engine.kind.cpu, 0)
    cp = part.compile(cins or ins, couts or outs, eng)
    qouts = [cp.query_logical_tensor(lt.get_id()) for lt in outs]
    results = [tensor(lt, eng) for lt in qouts]  # library-allocated (the 3.13 overload)
    cp.execute(stream(eng), [tensor(lt, eng, d) for lt, d in zip(cins or ins, data, strict=True)], results)
    return [
        np.frombuffer(t.get_data_handle(), dg._NUMPY[lt.get_data_type()]) for t, lt in zip(results, qouts, strict=True)
    ]


def _data(dims, c, seed=0):
    r = np.random.default_rng(seed)
    return [
        r.standard_normal(dims).astype(F),
        r.standard_normal(dims).astype(F),
        (r.standard_normal(c) * 0.1).astype(F),
        r.uniform(0.5, 2, c).astype(F),
        r.uniform(0.5, 2, c).astype(F),
    ]


@pytest.mark.parametrize("dims", [(4, 3), (2, 3, 5)])
def test_onednn_rank_2_and_3_ncx_run_with_known_outputs(dims):
    ins, outs = bwd_lts(dims)
    data = _data(dims, 3)
    dx, dgamma, dbeta = _run(ins, outs, data)
    view = (dims[0], 3, int(np.prod(dims[2:])))
    from fbnops.kernels import reference

    want = reference.batch_norm_grad(
        *(a.reshape(view) for a in data[:2]), data[4], data[2], data[3], epsilon=1e-5, is_training=True
    )
    np.testing.assert_allclose(dx.reshape(view), want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dgamma, want[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dbeta, want[2], rtol=1e-5, atol=1e-6)


COMPILE_REJECTS = [  # refused at compile with invalid_arguments (2)
    ("rank 6 (3.13 corrupts the heap)", dict(dims=(1, 3, 2, 2, 2, 2)), None),
    ("rank 1", dict(dims=(3,)), None),
    ("4 inputs with 3 outputs (3.13 throws out_of_range)", dict(gamma=False), None),
    ("rank 3 NXC (3.13 aborts)", dict(dims=(2, 5, 3)), {op.attr.epsilon: 1e-5, op.attr.data_format: "NXC"}),
]


@pytest.mark.parametrize("name,lts,attrs", COMPILE_REJECTS, ids=[c[0] for c in COMPILE_REJECTS])
def test_onednn_compile_rejects(name, lts, attrs):
    ins, outs = bwd_lts(**lts)
    assert _compile_status(ins, outs, attrs) == dg.status.invalid_arguments


def test_onednn_a_longer_gamma_runs_and_a_longer_diff_gamma_keeps_its_dims_when_every_output_is_given():
    """Real oneDNN 3.13.2 (and 3.2), with every output's dims given: their shape inference returns before it
    checks anything (infer_bn_bwd_output_shape), so a gamma of [5] for C = 3 is read up to C and a
    diff_gamma declared [4] stays [4], its first 3 values written and the 4th untouched (the oracle cases
    "gamma longer than C" and "diff_gamma declared [4] for C=3").  A shorter gamma or diff_gamma, or a
    [1, C] one, would be read or written past its buffer: refused at compile."""
    dims = (2, 3, 4, 5)
    data = _data(dims, 3)
    base = _run(*bwd_lts(dims), data)
    ins, outs = bwd_lts(dims)
    ins[4] = LT(4, DT.f32, [5], S)
    longer = [*data[:4], np.concatenate([data[4], np.float32([7.0, -9.0])])]
    for got, want in zip(_run(ins, outs, longer), base, strict=True):
        np.testing.assert_array_equal(got, want)
    ins, outs = bwd_lts(dims)
    ins[4] = LT(4, DT.f32, [2], S)
    assert _compile_status(ins, outs) == dg.status.invalid_arguments
    ins, outs = bwd_lts(dims)
    outs[1] = LT(11, DT.f32, [4], S)
    eng = engine(engine.kind.cpu, 0)
    cp = _partition(ins, outs).compile(ins, outs, eng)
    assert cp.query_logical_tensor(11).get_dims() == [4]
    buffers = [np.full(int(np.prod(lt.get_dims())), np.nan, F) for lt in outs]
    results = [tensor(cp.query_logical_tensor(lt.get_id()), eng, b) for lt, b in zip(outs, buffers, strict=True)]
    cp.execute(stream(eng), [tensor(lt, eng, d) for lt, d in zip(ins, data, strict=True)], results)
    np.testing.assert_array_equal(buffers[1][:3], base[1])
    assert np.isnan(buffers[1][3])
    for bad in ([2], [1, 3]):  # shorter, or [1, C]: the real library writes out of bounds
        ins, outs = bwd_lts(dims)
        outs[1] = LT(11, DT.f32, bad, S)
        assert _compile_status(ins, outs) == dg.status.invalid_arguments


def test_onednn_execute_checks_memory_before_copying_the_input_handles(monkeypatch):
    """Issue 24: execute copies whole input handles; a handle too large for the memory now available
    is out_of_memory (not a MemoryError), and no output byte changes."""
    dims = (2, 3, 4, 5)
    ins, outs = bwd_lts(dims)
    data = _data(dims, 3)
    eng = engine(engine.kind.cpu, 0)
    cp = _partition(ins, outs).compile(ins, outs, eng)
    big = np.zeros(dg_memory.SMALL // 4 + 1024, F)  # a handle larger than the memory guard's free pass
    big[: data[0].size] = data[0].ravel()
    out_ts = [tensor(cp.query_logical_tensor(lt.get_id()), eng) for lt in outs]
    before = [bytes(t.get_data_handle()) for t in out_ts]
    monkeypatch.setattr(dg_memory, "available_bytes", lambda: 2 * big.nbytes)  # fits alone, not with the copy
    ins_ts = [tensor(ins[0], eng, big)] + [tensor(lt, eng, d) for lt, d in zip(ins[1:], data[1:], strict=True)]
    with pytest.raises(dg.error) as e:
        cp.execute(stream(eng), ins_ts, out_ts)
    assert e.value.status == dg.status.out_of_memory
    assert [bytes(t.get_data_handle()) for t in out_ts] == before
    monkeypatch.undo()
    cp.execute(stream(eng), ins_ts, out_ts)  # the same call, with the memory: it runs
    np.testing.assert_array_equal(np.frombuffer(out_ts[1].get_data_handle(), F), _run(ins, outs, data)[1])


@pytest.mark.parametrize("bad", [10**400, -1, None, np.True_, 2.0, b"x", [[1]]])
def test_onednn_values_that_do_not_convert_to_the_cpp_types_are_invalid_arguments(bad):
    """Issue 24: ids are size_t, dims/strides int64 vectors, set_attr's integers int64_t; a Python value
    C++ could not pass is the mirror's ``invalid_arguments``, never a bare TypeError or OverflowError."""
    calls = [
        lambda: op(bad, op.kind.BatchNormTrainingBackward, "bn"),
        lambda: LT(bad, DT.f32, [2, 3], S),
        lambda: LT(0, DT.f32, [2, bad], S),
    ]
    if bad != -1:  # a negative stride is an int64 (refused later, at compile)
        calls.append(lambda: LT(0, DT.f32, [2, 3], [3, bad]))
    if isinstance(bad, (bytes, list)):
        calls.append(lambda: LT(0, DT.f32, bad, S))
    if isinstance(bad, int) and not isinstance(bad, bool) and bad > 0:
        calls.append(lambda: LT(0, DT.f32, [2, 3], bad))  # an opaque layout id is a size_t
        calls.append(lambda: op(0, op.kind.BatchNormTrainingBackward, "bn").set_attr(op.attr.axis, bad))
    for call in calls:
        with pytest.raises(dg.error) as e:
            call()
        assert e.value.status == dg.status.invalid_arguments


def test_onednn_compile_matches_ports_by_id_and_execute_checks_tensors():
    dims = (2, 3, 4, 5)
    ins, outs = bwd_lts(dims)
    data = _data(dims, 3)
    base = _run(ins, outs, data)
    reordered = _run(ins, outs, [data[1], data[0], *data[2:]], cins=[ins[1], ins[0], *ins[2:]])
    for a, b in zip(base, reordered, strict=True):
        np.testing.assert_array_equal(a, b)
    part = _partition(ins, outs)
    eng = engine(engine.kind.cpu, 0)
    cp = part.compile(ins, outs, eng)
    ts = [tensor(lt, eng, d) for lt, d in zip(ins, data, strict=True)]
    out_ts = [tensor(cp.query_logical_tensor(lt.get_id()), eng) for lt in outs]
    with pytest.raises(dg.error, match="each exactly once"):  # a missing input: 3.13 reads garbage
        cp.execute(stream(eng), ts[:4], out_ts)
    small = tensor(ins[0], eng, np.zeros(10, F))  # a buffer smaller than the tensor: proven before execute
    before = [bytes(t.get_data_handle()) for t in out_ts]
    with pytest.raises(dg.error, match="outside the 40-byte buffer") as e:
        cp.execute(stream(eng), [small, *ts[1:]], out_ts)
    assert e.value.status == dg.status.invalid_arguments
    assert [bytes(t.get_data_handle()) for t in out_ts] == before  # nothing written
    t = ts[0]
    t.set_data_handle(data[0].copy())
    cp.execute(stream(eng), ts, out_ts)


@pytest.mark.parametrize(
    "strides,is_output",
    [([-60, 20, 5, 1], False), ([0, 0, 0, 0], False), ([1, 1, 1, 1], True), ([-1, 20, 5, 1], True)],
)
def test_onednn_strides_refused_at_compile(strides, is_output):
    dims = [2, 3, 4, 5]
    ins, outs = bwd_lts(dims)
    if is_output:
        outs[0] = LT(10, DT.f32, dims, strides)
    else:
        ins[0] = LT(0, DT.f32, dims, strides)
    assert _compile_status(ins, outs) == dg.status.invalid_arguments


def test_onednn_huge_tensor_is_out_of_memory_before_allocating():
    lt = LT(0, DT.f32, [2**40, 3, 4, 5], S)
    with pytest.raises(dg.error) as e:
        tensor(lt, engine(engine.kind.cpu, 0))
    assert e.value.status == dg.status.out_of_memory


def test_onednn_compile_and_execute_errors():
    ins = [LT(0, DT.f32, [2, 3, 4, 5], S), LT(1, DT.f32, [2, 3, 4, 5], S), LT(2, DT.f32, [3], S), LT(3, DT.f32, [3], S)]
    outs = [LT(10, DT.f32, [2, 3, 4, 5], S)]
    part = _partition(ins, outs, {op.attr.epsilon: 1e-5})  # NXC: C is 5, not 3
    eng = engine(engine.kind.cpu)
    with pytest.raises(dg.error, match=re.escape("input 2 (mean, id 2) has dims [3]; [C] = [5] is expected")):
        part.compile(ins, outs, eng)
    part = _partition(ins, outs)  # NCX: C = 3
    cp = part.compile(ins, outs, eng)
    with pytest.raises(dg.error, match="each exactly once"):
        cp.execute(stream(eng), [], [])
    with pytest.raises(dg.error, match="must be a buffer"):
        tensor(ins[0], eng, [1.0, 2.0])
