"""DirectML (seed 003) and oneDNN Graph (seed 004) mirrors on the fbnops kernels.

Checked vectors of dml_onednn.md section D, the cross-mapping of section C
(agreement where the semantics coincide, the documented differences where they
do not), strides and N-D statistics shapes, and the constraint errors.
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import fbnops
from bindings_mirror import directml as dml
from bindings_mirror import onednn_graph as dg
from bindings_mirror.onednn_graph import engine, graph, logical_tensor, op, stream, tensor

F = np.float32
LT = logical_tensor
X1 = np.array([1, 2, 3, 4], F).reshape(1, 1, 2, 2)
DY1 = np.array([0.1, 0.1, 0.2, 0.2], F).reshape(1, 1, 2, 2)
TRAIN_DX = [0.01788854, -0.05366563, 0.05366563, -0.01788854]
FROZEN_DX = [0.17888544, 0.17888544, 0.35777088, 0.35777088]
GLOBAL_DX = [0.08944272, 0.08944272, 0.17888544, 0.17888544]


# ------------------------------------------------------------------------------ DirectML helpers


def dml_desc(op_type, x_shape, stat_shape, dtype=dml.DML_TENSOR_DATA_TYPE_FLOAT32, eps=0.0, x_strides=None):
    T = dml.make_tensor_desc
    cls = {
        dml.DML_OPERATOR_BATCH_NORMALIZATION_GRAD: dml.DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC,
        dml.DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD: dml.DML_BATCH_NORMALIZATION_TRAINING_GRAD_OPERATOR_DESC,
    }[op_type]
    d = cls(
        T(dtype, x_shape, x_strides),
        T(dtype, x_shape, x_strides),
        T(dtype, stat_shape),
        T(dtype, stat_shape),
        T(dtype, stat_shape),
        T(dtype, x_shape),
        T(dtype, stat_shape),
        T(dtype, stat_shape),
        Epsilon=eps,
    )
    return dml.DML_OPERATOR_DESC(op_type, d)


def dml_grad(op_type, x, dy, mean, var, scale, eps=0.0, dtype=dml.DML_TENSOR_DATA_TYPE_FLOAT32):
    desc = dml_desc(op_type, x.shape, mean.shape, dtype, eps)
    out = dml.run_operator(
        dml.DMLCreateDevice(),
        desc,
        dict(InputTensor=x, InputGradientTensor=dy, MeanTensor=mean, VarianceTensor=var, ScaleTensor=scale),
    )
    return out["OutputGradientTensor"], out["OutputScaleGradientTensor"], out["OutputBiasGradientTensor"]


def stat(v, shape=(1, 1, 1, 1)):
    return np.full(shape, v, F)


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


# ------------------------------------------------------------------------------ section D vectors


def test_dml_checked_vectors():
    dx, ds, db = dml_grad(dml.DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD, X1, DY1, stat(2.5), stat(1.25), stat(2))
    np.testing.assert_allclose(dx.ravel(), TRAIN_DX, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose([ds.item(), db.item()], [0.17888544, 0.6], rtol=1e-6)
    dx, ds, db = dml_grad(dml.DML_OPERATOR_BATCH_NORMALIZATION_GRAD, X1, DY1, stat(2.5), stat(1.25), stat(2))
    np.testing.assert_allclose(dx.ravel(), FROZEN_DX, rtol=1e-6)
    np.testing.assert_allclose([ds.item(), db.item()], [0.17888544, 0.6], rtol=1e-6)
    assert ds.shape == db.shape == (1, 1, 1, 1)


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


# ------------------------------------------------------------------------------ strides, N-D, dtypes


def test_dml_strides_are_honoured():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 4, 5)).astype(F)
    dy = rng.standard_normal((2, 3, 4, 5)).astype(F)
    m, v, s = stat(0.1, (1, 3, 1, 1)), stat(0.9, (1, 3, 1, 1)), stat(1.5, (1, 3, 1, 1))
    packed = dml_grad(dml.DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD, x, dy, m, v, s, 1e-3)
    # NHWC memory (DMLX InterleavedChannel strides) with the same logical NCHW sizes
    strides = [3 * 4 * 5, 1, 5 * 3, 3]
    desc = dml_desc(dml.DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD, x.shape, m.shape, eps=1e-3, x_strides=strides)
    out = dml.run_operator(
        dml.DMLCreateDevice(),
        desc,
        dict(InputTensor=x, InputGradientTensor=dy, MeanTensor=m, VarianceTensor=v, ScaleTensor=s),
    )
    np.testing.assert_array_equal(out["OutputGradientTensor"], packed[0])
    np.testing.assert_allclose(out["OutputScaleGradientTensor"], packed[1], rtol=1e-6)


@pytest.mark.parametrize("stat_shape", [(1, 3, 4, 5), (1, 3, 1, 5), (1, 1, 1, 1), (2, 1, 1, 1)])
def test_dml_reduced_axes_are_the_size_one_axes(stat_shape):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 4, 5)).astype(F)
    dy = rng.standard_normal((2, 3, 4, 5)).astype(F)
    m = (rng.standard_normal(stat_shape) * 0.1).astype(F)
    v = (rng.random(stat_shape) + 0.5).astype(F)
    s = (rng.random(stat_shape) + 0.5).astype(F)
    ax = tuple(a for a, n in enumerate(stat_shape) if n == 1)
    x64, dy64, m64, v64, s64 = (a.astype(np.float64) for a in (x, dy, m, v, s))
    rstd = 1 / np.sqrt(v64 + 1e-3)
    mean = lambda t: t.mean(axis=ax, keepdims=True)  # noqa: E731
    xc = x64 - m64  # the Mean given (the batch mean in practice; dml_onednn.md 0.2)
    ref = s64 * rstd * ((dy64 - mean(dy64)) - xc * mean(dy64 * xc) * rstd**2)
    dx, ds, db = dml_grad(dml.DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD, x, dy, m, v, s, 1e-3)
    assert ds.shape == stat_shape
    np.testing.assert_allclose(dx, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ds, (dy64 * xc * rstd).sum(axis=ax, keepdims=True), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(db, dy64.sum(axis=ax, keepdims=True), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ndim", [1, 2, 3, 8])
def test_dml_any_dimension_count(ndim):
    rng = np.random.default_rng(ndim)
    shape = (4, 3, 2, 1, 2, 1, 2, 1)[:ndim] if ndim > 1 else (7,)
    x = rng.standard_normal(shape).astype(F)
    dy = rng.standard_normal(shape).astype(F)
    stat_shape = tuple(1 if a != min(1, ndim - 1) else shape[a] for a in range(ndim))
    dx, ds, db = dml_grad(
        dml.DML_OPERATOR_BATCH_NORMALIZATION_GRAD,
        x,
        dy,
        stat(0.0, stat_shape),
        stat(1.0, stat_shape),
        stat(2.0, stat_shape),
    )
    np.testing.assert_allclose(dx, dy * 2 / np.sqrt(1.0), rtol=1e-6)
    assert ds.shape == stat_shape


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


# ------------------------------------------------------------------------------ constraint violations


def _grad_desc(**override):
    T = dml.make_tensor_desc
    f32 = dml.DML_TENSOR_DATA_TYPE_FLOAT32
    members = dict(
        InputTensor=T(f32, (2, 3, 4, 4)),
        InputGradientTensor=T(f32, (2, 3, 4, 4)),
        MeanTensor=T(f32, (1, 3, 1, 1)),
        VarianceTensor=T(f32, (1, 3, 1, 1)),
        ScaleTensor=T(f32, (1, 3, 1, 1)),
        OutputGradientTensor=T(f32, (2, 3, 4, 4)),
        OutputScaleGradientTensor=T(f32, (1, 3, 1, 1)),
        OutputBiasGradientTensor=T(f32, (1, 3, 1, 1)),
    )
    members.update(override)
    return dml.DML_OPERATOR_DESC(
        dml.DML_OPERATOR_BATCH_NORMALIZATION_GRAD,
        dml.DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC(**members, Epsilon=1e-3),
    )


def _bad_buffer(**fields):
    t = dml.make_tensor_desc(dml.DML_TENSOR_DATA_TYPE_FLOAT32, (1, 3, 1, 1))
    for k, v in fields.items():
        setattr(t.Desc, k, v)
    return t


T16 = dml.make_tensor_desc(dml.DML_TENSOR_DATA_TYPE_FLOAT16, (1, 3, 1, 1))
DML_VIOLATIONS = [
    (dict(MeanTensor=T16), "MeanTensor: DataType FLOAT16 differs from InputTensor's FLOAT32"),
    (dict(VarianceTensor=dml.make_tensor_desc(1, (3, 1, 1))), "VarianceTensor: DimensionCount 3 differs"),
    (dict(ScaleTensor=dml.make_tensor_desc(1, (1, 2, 1, 1))), "ScaleTensor: Sizes {1,2,1,1} differ from MeanTensor's"),
    (dict(OutputGradientTensor=dml.make_tensor_desc(1, (2, 3, 4, 5))), "OutputGradientTensor: Sizes {2,3,4,5} differ"),
    (
        dict(
            **{
                n: dml.make_tensor_desc(1, (1, 3, 2, 1))
                for n in (
                    "MeanTensor",
                    "VarianceTensor",
                    "ScaleTensor",
                    "OutputScaleGradientTensor",
                    "OutputBiasGradientTensor",
                )
            }
        ),
        "MeanTensor: Sizes[2] = 2 must be 1 or InputTensor's size 4",
    ),
    (dict(MeanTensor=_bad_buffer(DataType=dml.DML_TENSOR_DATA_TYPE_INT32)), "DataType INT32 is not supported"),
    (dict(MeanTensor=_bad_buffer(Sizes=[1, 0, 1, 1])), "a size of zero is invalid"),
    (dict(MeanTensor=_bad_buffer(DimensionCount=9, Sizes=[1] * 9)), "DimensionCount must be 1 to 8"),
    (dict(MeanTensor=_bad_buffer(TotalTensorSizeInBytes=4)), "TotalTensorSizeInBytes 4 is below the minimum"),
    (dict(MeanTensor=_bad_buffer(GuaranteedBaseOffsetAlignment=3)), "GuaranteedBaseOffsetAlignment 3"),
    (dict(MeanTensor=_bad_buffer(Strides=[1, 1])), "Strides must hold DimensionCount"),
    (dict(OutputScaleGradientTensor=_bad_buffer(Flags=dml.DML_TENSOR_FLAG_OWNED_BY_DML)), "input tensors only"),
    (dict(ScaleTensor=None), "ScaleTensor: required tensor is null"),
    (dict(InputTensor=dml.DML_TENSOR_DESC(dml.DML_TENSOR_TYPE_INVALID, None)), "DML_TENSOR_TYPE_BUFFER"),
]


@pytest.mark.parametrize("override,message", DML_VIOLATIONS)
def test_dml_create_operator_rejects(override, message):
    with pytest.raises(dml.HRESULTError, match=re.escape(message)) as info:
        dml.DMLCreateDevice().CreateOperator(_grad_desc(**override))
    assert info.value.hresult == "E_INVALIDARG" and info.value.code == 0x80070057
    assert "DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC." in str(info.value)


def test_dml_binding_and_execution_rules():
    dev = dml.DMLCreateDevice()
    compiled = dev.CompileOperator(dev.CreateOperator(_grad_desc()))
    table = dev.CreateBindingTable(dml.DML_BINDING_TABLE_DESC(compiled))

    def buf(n):
        return dml.DML_BINDING_DESC(dml.DML_BINDING_TYPE_BUFFER, dml.DML_BUFFER_BINDING(dml.ID3D12Resource(n), 0, n))

    with pytest.raises(dml.HRESULTError, match="4 bindings for 5 inputs"):
        table.BindInputs([buf(384)] * 4)
    with pytest.raises(dml.HRESULTError, match="ScaleTensor is required"):
        table.BindInputs([buf(384), buf(384), buf(12), buf(12), dml.DML_BINDING_DESC(dml.DML_BINDING_TYPE_NONE)])
    table.BindInputs([buf(384), buf(384), buf(12), buf(12), buf(8)])  # ScaleTensor buffer too small
    shared = dml.ID3D12Resource(1024)
    table.BindOutputs(
        [
            dml.DML_BINDING_DESC(dml.DML_BINDING_TYPE_BUFFER, dml.DML_BUFFER_BINDING(shared, 0, 384)),
            dml.DML_BINDING_DESC(dml.DML_BINDING_TYPE_BUFFER, dml.DML_BUFFER_BINDING(shared, 368, 16)),
            buf(12),
        ]
    )
    d3d = dml.D3D12CreateDevice()
    cmd, queue = d3d.CreateCommandList(), d3d.CreateCommandQueue()
    rec = dev.CreateCommandRecorder()
    rec.RecordDispatch(cmd, compiled, table)
    cmd.Close()
    with pytest.raises(dml.HRESULTError, match="before its IDMLOperatorInitializer was dispatched"):
        queue.ExecuteCommandLists([cmd])
    compiled._initialized = True
    with pytest.raises(dml.HRESULTError, match="does not hold TotalTensorSizeInBytes 12"):
        queue.ExecuteCommandLists([cmd])
    table.BindInputs([buf(384), buf(384), buf(12), buf(12), buf(12)])
    cmd.Reset()
    rec.RecordDispatch(cmd, compiled, table)
    cmd.Close()
    with pytest.raises(dml.HRESULTError, match="overlap"):
        queue.ExecuteCommandLists([cmd])
    with pytest.raises(dml.HRESULTError, match="closed command list"):
        rec.RecordDispatch(cmd, compiled, table)


def test_dml_calc_buffer_tensor_size():
    assert dml.DMLCalcBufferTensorSize(dml.DML_TENSOR_DATA_TYPE_FLOAT32, 4, [2, 3, 4, 5], None) == 480
    assert dml.DMLCalcBufferTensorSize(dml.DML_TENSOR_DATA_TYPE_FLOAT16, 1, [3], None) == 8  # rounded up to 4 bytes
    assert dml.DMLCalcBufferTensorSize(dml.DML_TENSOR_DATA_TYPE_FLOAT32, 2, [2, 3], [0, 1]) == 12  # broadcast rows
    assert dml.DMLCalcBufferTensorSize(99, 1, [3], None) == 0


ONEDNN_VIOLATIONS = [
    ("two_outputs", "expects 1 or 3 outputs, got 2"),
    ("no_epsilon", "the required attribute epsilon is not set"),
    ("bad_format", "data_format must be NCX or NXC"),
    ("bf16_stats_f32_src", "statistics and gamma/beta are f32"),
    ("three_dims", "src needs at least 4 dimensions, got 3"),
]


@pytest.mark.parametrize("case,message", ONEDNN_VIOLATIONS)
def test_onednn_rejects(case, message):
    s = LT.layout_type.strided
    dims = [2, 3, 4] if case == "three_dims" else [2, 3, 4, 5]
    stat_dt = LT.data_type.bf16 if case == "bf16_stats_f32_src" else LT.data_type.f32
    ins = [
        LT(0, LT.data_type.f32, dims, s),
        LT(1, LT.data_type.f32, dims, s),
        LT(2, stat_dt, [5], s),
        LT(3, stat_dt, [5], s),
    ]
    outs = [LT(10, LT.data_type.f32, dims, s)] + ([LT(11, LT.data_type.f32, [5], s)] if case == "two_outputs" else [])
    bn = op(0, op.kind.BatchNormTrainingBackward, ins, outs, "bn")
    if case != "no_epsilon":
        bn.set_attr(op.attr.epsilon, 1e-5)
    if case == "bad_format":
        bn.set_attr(op.attr.data_format, "NHWC")
    with pytest.raises(dg.error, match=re.escape(message)):
        graph(engine.kind.cpu).add_op(bn)
    assert graph(engine.kind.cpu).add_op(bn, allow_exception=False) != "success"


def test_onednn_compile_and_execute_errors():
    s = LT.layout_type.strided
    ins = [
        LT(0, LT.data_type.f32, [2, 3, 4, 5], s),
        LT(1, LT.data_type.f32, [2, 3, 4, 5], s),
        LT(2, LT.data_type.f32, [3], s),
        LT(3, LT.data_type.f32, [3], s),
    ]  # NXC: C is 5, not 3
    bn = op(0, op.kind.BatchNormTrainingBackward, ins, [LT(10, LT.data_type.f32, [2, 3, 4, 5], s)], "bn")
    bn.set_attr(op.attr.epsilon, 1e-5)
    g = graph(engine.kind.cpu)
    g.add_op(bn)
    with pytest.raises(dg.error, match="finalize the graph"):
        g.get_partitions()
    g.finalize()
    part = g.get_partitions()[0]
    eng = engine(engine.kind.cpu)
    with pytest.raises(dg.error, match=re.escape("input 2 (id 2) has dims [3], expected [5]")):
        part.compile(ins, part.get_output_ports(), eng)
    bn.set_attr(op.attr.data_format, "NCX")  # now C = 3
    cp = part.compile(ins, part.get_output_ports(), eng)
    with pytest.raises(dg.error, match="expects 4 inputs and 1 outputs"):
        cp.execute(stream(eng), [], [])
    with pytest.raises(dg.error, match="handle dtype float64"):
        tensor(ins[0], eng, np.zeros((2, 3, 4, 5)))
