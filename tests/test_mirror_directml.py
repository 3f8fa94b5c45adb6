"""DirectML mirror: the checked vectors, strides and N-D statistics, the constraint errors.

The cross-mapping with oneDNN is in test_mirror_onednn.py; the header fidelity (enum values,
feature support and levels, device methods) and bounds proofs are at the end of this module.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from bindings_mirror import directml as dml

F = np.float32
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


# ------------------------------------------------------------------------------ section D vectors


def test_dml_checked_vectors():
    dx, ds, db = dml_grad(dml.DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD, X1, DY1, stat(2.5), stat(1.25), stat(2))
    np.testing.assert_allclose(dx.ravel(), TRAIN_DX, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose([ds.item(), db.item()], [0.17888544, 0.6], rtol=1e-6)
    dx, ds, db = dml_grad(dml.DML_OPERATOR_BATCH_NORMALIZATION_GRAD, X1, DY1, stat(2.5), stat(1.25), stat(2))
    np.testing.assert_allclose(dx.ravel(), FROZEN_DX, rtol=1e-6)
    np.testing.assert_allclose([ds.item(), db.item()], [0.17888544, 0.6], rtol=1e-6)
    assert ds.shape == db.shape == (1, 1, 1, 1)


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


# ------------------------------------------------------------------------------ DirectML.h fidelity (D1-D4)


def test_dml_header_values():
    assert (dml.DML_OPERATOR_ACTIVATION_IDENTITY, dml.DML_OPERATOR_ACTIVATION_RELU) == (38, 44)
    assert (dml.DML_OPERATOR_BATCH_NORMALIZATION, dml.DML_OPERATOR_BATCH_NORMALIZATION_GRAD) == (72, 146)
    assert (dml.DML_OPERATOR_BATCH_NORMALIZATION_TRAINING, dml.DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD) == (
        151,
        152,
    )
    assert (dml.DML_TENSOR_DIMENSION_COUNT_MAX, dml.DML_TENSOR_DIMENSION_COUNT_MAX1) == (5, 8)
    assert dml.DML_TEMPORARY_BUFFER_ALIGNMENT == dml.DML_PERSISTENT_BUFFER_ALIGNMENT == 256
    assert (dml.DML_FEATURE_TENSOR_DATA_TYPE_SUPPORT, dml.DML_FEATURE_FEATURE_LEVELS) == (0, 1)
    assert (dml.DML_FEATURE_LEVEL_1_0, dml.DML_FEATURE_LEVEL_3_1, dml.DML_FEATURE_LEVEL_6_4) == (0x1000, 0x3100, 0x6400)


def _max_level(device, requested):
    query = dml.DML_FEATURE_QUERY_FEATURE_LEVELS(len(requested), requested)
    data = dml.DML_FEATURE_DATA_FEATURE_LEVELS()
    hr = device.CheckFeatureSupport(dml.DML_FEATURE_FEATURE_LEVELS, dml.sizeof(query), query, dml.sizeof(data), data)
    assert hr == dml.S_OK
    return data.MaxSupportedFeatureLevel


def test_dml_check_feature_support():
    levels = [
        dml.DML_FEATURE_LEVEL_1_0,
        dml.DML_FEATURE_LEVEL_3_1,
        dml.DML_FEATURE_LEVEL_4_1,
        dml.DML_FEATURE_LEVEL_5_0,
    ]
    assert _max_level(dml.DMLCreateDevice(), levels) == dml.DML_FEATURE_LEVEL_4_1
    old = dml.DMLCreateDevice1(None, 0, dml.DML_FEATURE_LEVEL_1_0, supportedFeatureLevel=dml.DML_FEATURE_LEVEL_3_1)
    assert _max_level(old, levels) == dml.DML_FEATURE_LEVEL_3_1
    dev = dml.DMLCreateDevice()
    for data_type, supported in ((dml.DML_TENSOR_DATA_TYPE_FLOAT32, True), (dml.DML_TENSOR_DATA_TYPE_INT32, False)):
        query = dml.DML_FEATURE_QUERY_TENSOR_DATA_TYPE_SUPPORT(data_type)
        data = dml.DML_FEATURE_DATA_TENSOR_DATA_TYPE_SUPPORT()
        dev.CheckFeatureSupport(dml.DML_FEATURE_TENSOR_DATA_TYPE_SUPPORT, 4, query, 4, data)
        assert data.IsSupported is supported
    query, data = dml.DML_FEATURE_QUERY_FEATURE_LEVELS(1, [0x3100]), dml.DML_FEATURE_DATA_FEATURE_LEVELS()
    for args in ((dml.DML_FEATURE_FEATURE_LEVELS, 4, query, 4, data), (7, 16, query, 4, data)):
        with pytest.raises(dml.HRESULTError) as e:  # a wrong struct size, an unknown DML_FEATURE
            dev.CheckFeatureSupport(*args)
        assert e.value.hresult == "E_INVALIDARG"


def test_dml_feature_levels_are_enforced():
    with pytest.raises(dml.HRESULTError) as e:
        dml.DMLCreateDevice1(None, 0, dml.DML_FEATURE_LEVEL_5_0)
    assert e.value.hresult == "DXGI_ERROR_UNSUPPORTED"
    dev31 = dml.DMLCreateDevice1(None, 0, dml.DML_FEATURE_LEVEL_3_0, supportedFeatureLevel=dml.DML_FEATURE_LEVEL_3_1)
    dev31.CreateOperator(_grad_desc())  # GRAD: 3_1
    training = dml_desc(dml.DML_OPERATOR_BATCH_NORMALIZATION_TRAINING_GRAD, (2, 3, 4, 4), (1, 3, 1, 1))
    with pytest.raises(dml.HRESULTError, match="needs DML_FEATURE_LEVEL 0x4100") as e:
        dev31.CreateOperator(training)  # TRAINING_GRAD: 4_1
    assert e.value.hresult == "E_INVALIDARG"
    dev30 = dml.DMLCreateDevice1(None, 0, dml.DML_FEATURE_LEVEL_1_0, supportedFeatureLevel=dml.DML_FEATURE_LEVEL_3_0)
    with pytest.raises(dml.HRESULTError, match="needs DML_FEATURE_LEVEL 0x3100"):
        dev30.CreateOperator(_grad_desc())
    dml.DMLCreateDevice().CreateOperator(training)


def test_dml_device_methods_and_residency():
    dev = dml.DMLCreateDevice()
    assert dev.SetName("bn device") == dml.S_OK and dev.GetDeviceRemovedReason() == dml.S_OK
    x, dy = np.ones((1, 1, 2, 2), F), np.full((1, 1, 2, 2), 0.5, F)
    op = dev.CreateOperator(dml_desc(dml.DML_OPERATOR_BATCH_NORMALIZATION_GRAD, x.shape, (1, 1, 1, 1)))
    compiled = dev.CompileOperator(op)
    assert compiled.SetName("bn grad") == dml.S_OK
    assert dev.Evict(1, [compiled]) == dml.S_OK
    init = dev.CreateOperatorInitializer([compiled])
    d3d = dev.GetParentDevice()
    cmd, queue, rec = d3d.CreateCommandList(), d3d.CreateCommandQueue(), dev.CreateCommandRecorder()
    rec.RecordDispatch(cmd, init, dev.CreateBindingTable(dml.DML_BINDING_TABLE_DESC(init)))
    table = dev.CreateBindingTable(dml.DML_BINDING_TABLE_DESC(compiled))

    def bound(value=None, n=16):
        res = d3d.CreateCommittedResource(n)
        if value is not None:
            res.Upload(value)
        return dml.DML_BINDING_DESC(dml.DML_BINDING_TYPE_BUFFER, dml.DML_BUFFER_BINDING(res, 0, n))

    table.BindInputs([bound(x), bound(dy), bound(stat(0.0)), bound(stat(1.0)), bound(stat(2.0))])
    outs = [bound(), bound(), bound()]
    table.BindOutputs(outs)
    rec.RecordDispatch(cmd, compiled, table)
    cmd.Close()
    with pytest.raises(dml.HRESULTError, match="evicted") as e:
        queue.ExecuteCommandLists([cmd])
    assert e.value.hresult == "DXGI_ERROR_INVALID_CALL"
    assert dev.MakeResident(1, [compiled]) == dml.S_OK
    queue.ExecuteCommandLists([cmd])
    np.testing.assert_allclose(outs[0].Desc.Buffer.Readback(F, (4,)), [1.0] * 4)  # dy * 2 / sqrt(1)
    with pytest.raises(dml.HRESULTError):
        dev.Evict(2, [compiled])


def test_dml_fused_relu_uses_the_header_value():
    T = dml.make_tensor_desc
    f32, shape, s = dml.DML_TENSOR_DATA_TYPE_FLOAT32, (1, 2, 2, 1), (1, 2, 1, 1)
    relu = dml.DML_OPERATOR_DESC(dml.DML_OPERATOR_ACTIVATION_RELU, dml.DML_ACTIVATION_RELU_OPERATOR_DESC())
    d = dml.DML_BATCH_NORMALIZATION_OPERATOR_DESC(
        T(f32, shape), T(f32, s), T(f32, s), T(f32, s), T(f32, s), T(f32, shape), FusedActivation=relu
    )
    x = np.array([-1, 2, -3, 4], F).reshape(shape)
    zero, one = np.zeros(s, F), np.ones(s, F)
    out = dml.run_operator(
        dml.DMLCreateDevice(),
        dml.DML_OPERATOR_DESC(dml.DML_OPERATOR_BATCH_NORMALIZATION, d),
        dict(InputTensor=x, MeanTensor=zero, VarianceTensor=one, ScaleTensor=one, BiasTensor=zero),
    )
    np.testing.assert_allclose(out["OutputTensor"].ravel(), [0, 2, 0, 4], rtol=1e-6)


# ------------------------------------------------------------------------------ bounds proof (issue 15.1)


def _dispatch_with(binding_override):
    """Run a GRAD op whose InputTensor binding is replaced; returns the output bytes (for 'nothing written')."""
    dev = dml.DMLCreateDevice()
    compiled = dev.CompileOperator(dev.CreateOperator(_grad_desc()))
    compiled._initialized = True
    table = dev.CreateBindingTable(dml.DML_BINDING_TABLE_DESC(compiled))

    def buf(n):
        return dml.DML_BINDING_DESC(dml.DML_BINDING_TYPE_BUFFER, dml.DML_BUFFER_BINDING(dml.ID3D12Resource(n), 0, n))

    table.BindInputs([binding_override, buf(384), buf(12), buf(12), buf(12)])
    outs = [buf(384), buf(12), buf(12)]
    for o in outs:
        o.Desc.Buffer.Upload(np.full(o.Desc.SizeInBytes, 7, np.uint8))
    table.BindOutputs(outs)
    d3d = dml.D3D12CreateDevice()
    cmd = d3d.CreateCommandList()
    dev.CreateCommandRecorder().RecordDispatch(cmd, compiled, table)
    cmd.Close()
    try:
        d3d.CreateCommandQueue().ExecuteCommandLists([cmd])
    except dml.HRESULTError:
        for o in outs:  # refused before any byte was written
            assert np.all(o.Desc.Buffer.Readback(np.uint8, (o.Desc.SizeInBytes,)) == 7)
        raise
    return outs


@pytest.mark.parametrize(
    "offset,size,resource",
    [(-16, 384, 400), (16, 384, 384), (0, 2**64 - 16, 384), (2**63, 384, 384), (0, 384, 100), (1.5, 384, 400)],
)
def test_dml_binding_outside_its_buffer_is_e_invalidarg(offset, size, resource):
    binding = dml.DML_BINDING_DESC(
        dml.DML_BINDING_TYPE_BUFFER, dml.DML_BUFFER_BINDING(dml.ID3D12Resource(resource), offset, size)
    )
    with pytest.raises(dml.HRESULTError) as e:
        _dispatch_with(binding)
    assert e.value.hresult == "E_INVALIDARG"


def test_dml_overlapping_output_strides_and_huge_buffers():
    out = dml.make_tensor_desc(dml.DML_TENSOR_DATA_TYPE_FLOAT32, (2, 3, 4, 4), (0, 1, 4, 1))  # rows written twice
    with pytest.raises(dml.HRESULTError, match="write the same element") as e:
        dml.DMLCreateDevice().CreateOperator(_grad_desc(OutputGradientTensor=out))
    assert e.value.hresult == "E_INVALIDARG"
    dml.DMLCreateDevice().CreateOperator(_grad_desc(InputGradientTensor=out))  # an input may broadcast
    with pytest.raises(dml.HRESULTError) as e:
        dml.ID3D12Resource(2**50)  # refused before allocating
    assert e.value.hresult == "E_OUTOFMEMORY"


# ------------------------------------------------------------------------------ CompileGraph (D4)


def _graph(dev, ops, input_edges, intermediate_edges, output_edges, n_in, n_out):
    def edges(kind, items):
        return [dml.DML_GRAPH_EDGE_DESC(kind, e) for e in items]

    nodes = [
        dml.DML_GRAPH_NODE_DESC(dml.DML_GRAPH_NODE_TYPE_OPERATOR, dml.DML_OPERATOR_GRAPH_NODE_DESC(o)) for o in ops
    ]
    desc = dml.DML_GRAPH_DESC(
        n_in,
        n_out,
        len(nodes),
        nodes,
        len(input_edges),
        edges(dml.DML_GRAPH_EDGE_TYPE_INPUT, input_edges),
        len(output_edges),
        edges(dml.DML_GRAPH_EDGE_TYPE_OUTPUT, output_edges),
        len(intermediate_edges),
        edges(dml.DML_GRAPH_EDGE_TYPE_INTERMEDIATE, intermediate_edges),
    )
    return dev.CompileGraph(desc, dml.DML_EXECUTION_FLAG_NONE)


def test_dml_compile_graph_runs_nodes_in_order():
    """Forward BATCH_NORMALIZATION feeding GRAD's InputGradientTensor: the graph equals the two calls."""
    T, f32 = dml.make_tensor_desc, dml.DML_TENSOR_DATA_TYPE_FLOAT32
    shape, s = (2, 3, 2, 2), (1, 3, 1, 1)
    dev = dml.DMLCreateDevice()
    fwd_desc = dml.DML_BATCH_NORMALIZATION_OPERATOR_DESC(
        T(f32, shape), T(f32, s), T(f32, s), T(f32, s), T(f32, s), T(f32, shape), Epsilon=1e-3
    )
    fwd = dev.CreateOperator(dml.DML_OPERATOR_DESC(dml.DML_OPERATOR_BATCH_NORMALIZATION, fwd_desc))
    grad_desc = dml_desc(dml.DML_OPERATOR_BATCH_NORMALIZATION_GRAD, shape, s, eps=1e-3)
    grad = dev.CreateOperator(grad_desc)
    In, Mid, Out = dml.DML_INPUT_GRAPH_EDGE_DESC, dml.DML_INTERMEDIATE_GRAPH_EDGE_DESC, dml.DML_OUTPUT_GRAPH_EDGE_DESC
    # graph inputs: 0 x, 1 mean, 2 variance, 3 scale, 4 bias; node 0 = forward, node 1 = grad
    input_edges = [In(0, 0, 0), In(1, 0, 1), In(2, 0, 2), In(3, 0, 3), In(4, 0, 4)]
    input_edges += [In(0, 1, 0), In(1, 1, 2), In(2, 1, 3), In(3, 1, 4)]
    compiled = _graph(
        dev, [fwd, grad], input_edges, [Mid(0, 0, 1, 1)], [Out(1, 0, 0), Out(1, 1, 1), Out(1, 2, 2)], 5, 3
    )
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(F)
    mean, var, scale, bias = (rng.standard_normal(s) * 0.1).astype(F), stat(1.5, s), stat(2.0, s), stat(0.5, s)
    d3d = dev.GetParentDevice()
    cmd, rec = d3d.CreateCommandList(), dev.CreateCommandRecorder()
    init = dev.CreateOperatorInitializer([compiled])
    rec.RecordDispatch(cmd, init, dev.CreateBindingTable(dml.DML_BINDING_TABLE_DESC(init)))
    table = dev.CreateBindingTable(dml.DML_BINDING_TABLE_DESC(compiled))

    def bound(value=None, n=96):
        res = d3d.CreateCommittedResource(n)
        if value is not None:
            res.Upload(value)
        return dml.DML_BINDING_DESC(dml.DML_BINDING_TYPE_BUFFER, dml.DML_BUFFER_BINDING(res, 0, n))

    table.BindInputs([bound(x), bound(mean, 12), bound(var, 12), bound(scale, 12), bound(bias, 12)])
    outs = [bound(), bound(None, 12), bound(None, 12)]
    table.BindOutputs(outs)
    rec.RecordDispatch(cmd, compiled, table)
    cmd.Close()
    d3d.CreateCommandQueue().ExecuteCommandLists([cmd])
    y = dml.run_operator(
        dev,
        dml.DML_OPERATOR_DESC(dml.DML_OPERATOR_BATCH_NORMALIZATION, fwd_desc),
        dict(InputTensor=x, MeanTensor=mean, VarianceTensor=var, ScaleTensor=scale, BiasTensor=bias),
    )["OutputTensor"]
    want = dml_grad(dml.DML_OPERATOR_BATCH_NORMALIZATION_GRAD, x, y, mean, var, scale, eps=1e-3)
    np.testing.assert_array_equal(outs[0].Desc.Buffer.Readback(F, shape), want[0])
    np.testing.assert_array_equal(outs[1].Desc.Buffer.Readback(F, s), want[1])


def test_dml_compile_graph_rejects_bad_edges():
    dev = dml.DMLCreateDevice()
    grad = dev.CreateOperator(_grad_desc())
    In, Mid, Out = dml.DML_INPUT_GRAPH_EDGE_DESC, dml.DML_INTERMEDIATE_GRAPH_EDGE_DESC, dml.DML_OUTPUT_GRAPH_EDGE_DESC
    full = [In(i, 0, i) for i in range(5)]
    outs = [Out(0, i, i) for i in range(3)]
    _graph(dev, [grad], full, [], outs, 5, 3)
    for ins, mids, o, n_in, message in (
        (full[:4], [], outs, 5, "graph inputs must be connected"),
        (full[:4], [], outs, 4, "ScaleTensor of node 0 is not connected"),
        ([*full, In(0, 0, 0)], [], outs, 5, "connected twice"),
        ([In(0, 1, 0)] + full[1:], [], outs, 5, "node index 1 is out of range"),
        (full, [], [Out(0, 3, 0)] + outs[1:], 5, "output index 3 of node 0 is out of range"),
        ([In(0, 0, 0), In(1, 0, 2), In(2, 0, 3), In(3, 0, 4)], [Mid(0, 0, 0, 1)], outs, 4, "cycle"),
    ):
        with pytest.raises(dml.HRESULTError, match=message) as e:
            _graph(dev, [grad], ins, mids, o, n_in, 3)
        assert e.value.hresult == "E_INVALIDARG"


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda r: r.Upload([1.0, 2.0]), "expected a NumPy array of numbers, got list"),
        (lambda r: r.Upload(np.array([object()])), "got ndarray of dtype object"),
        (lambda r: r.Upload(np.zeros(4, np.float32), True), "offset True must be a non-negative integer"),
        (lambda r: r.Upload(np.zeros(20, np.float32)), "outside the 64-byte buffer"),
        (lambda r: r.Readback("O", (2,)), "object is not a numeric dtype"),
        (lambda r: r.Readback("no such type", (1,)), "is not a dtype"),
        (lambda r: r.Readback(np.float32, (-1,)), "shape must be a tuple of non-negative integers"),
        (lambda r: r.Readback(np.float32, 5), "shape must be a tuple of non-negative integers"),
        (lambda r: r.Readback(np.float32, (4,), 60), "outside the 64-byte buffer"),
    ],
)
def test_upload_and_readback_refuse_what_is_not_bytes_of_numbers_in_bounds(call, message):
    res = dml.ID3D12Resource(64)
    res.Upload(np.arange(16, dtype=np.float32))
    with pytest.raises(dml.HRESULTError, match=message) as err:
        call(res)
    assert err.value.hresult == "E_INVALIDARG"
    np.testing.assert_array_equal(res.Readback(np.float32, (16,)), np.arange(16, dtype=np.float32))  # untouched
