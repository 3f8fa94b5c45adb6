"""The TensorFlow C++ mirror (``bindings_mirror.cc``) against tensorflow/cc's behaviour.

Numbers are compared bit for bit with ``fbnops.raw_ops``; construction errors are
non-OK ``Status``es (never exceptions) whose messages are TensorFlow's NodeDef-form
text, checked against TensorFlow 2.21's own graph builder when it is installed and
against messages recorded from it otherwise.  Points C1-C11 of
docs/fidelity/tensorflow_cc.md.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import spec_examples as examples

import fbnops
from bindings_mirror import cc
from bindings_mirror.cc import ClientSession, ops
from fbnops.testing import extras

F = np.float32
RNG = np.random.default_rng(7)
X = RNG.standard_normal((2, 2, 2, 3)).astype(F)
DY = RNG.standard_normal((2, 2, 2, 3)).astype(F)
ONES = [1.0, 1.0, 1.0]
ZEROS = [0.0, 0.0, 0.0]


def raw(is_training=True, epsilon=1e-3):
    fwd = fbnops.raw_ops.FusedBatchNormV3(
        x=X, scale=np.ones(3, F), offset=np.zeros(3, F), mean=np.zeros(0, F), variance=np.zeros(0, F), epsilon=epsilon
    )
    grad = fbnops.raw_ops.FusedBatchNormGradV3(
        y_backprop=DY,
        x=X,
        scale=np.ones(3, F),
        reserve_space_1=fwd.reserve_space_1,
        reserve_space_2=fwd.reserve_space_2,
        reserve_space_3=fwd.reserve_space_3,
        epsilon=epsilon,
        is_training=is_training,
    )
    return fwd, grad


def assert_same(tensors, reference):
    assert len(tensors) == len(reference)
    for t, want in zip(tensors, reference, strict=True):
        assert isinstance(t, cc.Tensor)
        got = np.asarray(t)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def built_status(build) -> cc.Status:
    root = cc.Scope.NewRootScope()
    build(root)  # must not raise: C++ records the error
    return root.status()


# ------------------------------------------------------------------------------ numbers, C1, C2, C3


def test_seed_usage_with_initializer_lists_and_placeholder_feed_key():
    fwd_ref, grad_ref = raw(is_training=False)
    root = cc.Scope.NewRootScope()
    x = ops.Placeholder(root, cc.DT_FLOAT, ops.Placeholder.Shape([2, 2, 2, 3]))  # C3: an initializer list
    fwd = ops.FusedBatchNormV3(root, x, ONES, ZEROS, [], [], ops.FusedBatchNormV3.Epsilon(1e-3))  # C2
    attrs = ops.FusedBatchNormGradV3.Attrs().Epsilon(1e-3).IsTraining(False)
    grad = ops.FusedBatchNormGradV3(
        root, DY, x, ONES, fwd.reserve_space_1, fwd.reserve_space_2, fwd.reserve_space_3, attrs
    )
    assert root.ok(), root.status()
    outputs: list = []
    fetch = [grad.x_backprop, grad.scale_backprop, grad.offset_backprop, grad.reserve_space_4, grad.reserve_space_5]
    status = ClientSession(root).Run({x: X}, fetch, outputs)  # C1: the Placeholder itself is the feed key
    assert status.ok(), status.ToString()
    assert_same(outputs, list(grad_ref))
    assert ClientSession(root).Run({x: X}, [fwd.y, fwd.batch_mean], outputs).ok()
    assert_same(outputs, [fwd_ref.y, fwd_ref.batch_mean])


@pytest.mark.parametrize(
    "value, dtype, shape",
    [
        (1.0, cc.DT_FLOAT, ()),  # the C++ literal 1.f
        (1, cc.DT_INT32, ()),
        (2**40, cc.DT_INT64, ()),
        (True, cc.DT_BOOL, ()),
        (np.float64(1.0), cc.DT_DOUBLE, ()),  # the C++ double 1.0
        ([1.0, 2.0], cc.DT_FLOAT, (2,)),
        ([[1, 2], [3, 4], [5, 6]], cc.DT_INT32, (3, 2)),
        ([], cc.DT_FLOAT, (0,)),  # TF: an empty list is a float tensor of shape (0,)
        (np.zeros((2, 3), np.float16), cc.DT_HALF, (2, 3)),
    ],
)
def test_initializer_dtype_follows_the_element_type(value, dtype, shape):
    root = cc.Scope.NewRootScope()
    c = ops.Const(root, value)
    assert root.ok(), root.status()
    assert c.output.type() is dtype and c.operation.output_type(0) is dtype
    out: list = []
    assert ClientSession(root).Run([c], out).ok()  # C1: a single-output op converts to Output
    assert out[0].dtype() is dtype and out[0].shape().dim_sizes() == list(shape)


@pytest.mark.parametrize(
    "value, message",
    [
        ([1.0, 1], "Initializer list components should all have the same type"),
        ([[1.0], [1.0, 2.0]], "Initializer list components should all have the same shape"),
        (1e40, "1e+40 does not fit in float"),
        ("abc", "cannot make a tensor from a str"),
    ],
)
def test_bad_initializers_are_statuses(value, message):
    status = built_status(lambda root: ops.Const(root, value))
    assert status.code() == cc.StatusCode.kInvalidArgument and message in status.message()


def test_placeholder_shape_forms_and_failures_take_no_name():
    root = cc.Scope.NewRootScope()
    for shape in ([2, -1], (2, 3), cc.PartialTensorShape([2, 3]), cc.TensorShape([2, 3])):
        ops.Placeholder(root, cc.DT_FLOAT, ops.Placeholder.Shape(shape))
    assert root.ok()
    bad = cc.Scope.NewRootScope()
    ops.Placeholder(bad, cc.DT_FLOAT, ops.Placeholder.Shape("2x3"))
    assert not bad.ok() and "Placeholder::Shape takes" in bad.status().message()
    assert bad.GetUniqueNameForOp("Placeholder") == "Placeholder"  # the failed call took no name


# ------------------------------------------------------------------------------ C4: Status


def test_status_code_is_absl_status_code():
    status = built_status(lambda root: ops.FusedBatchNormGradV3(root, X, X, [1.0], ONES, ONES, ONES))
    assert status.code() == 3 and status.code() is cc.StatusCode.kInvalidArgument is cc.error.INVALID_ARGUMENT
    assert str(status.code()) == "INVALID_ARGUMENT" and status.ToString().startswith("INVALID_ARGUMENT: Dimensions")
    assert cc.errors.IsInvalidArgument(status) and not cc.errors.IsNotFound(status)
    assert [int(getattr(cc.StatusCode, k)) for k in ("kOk", "kNotFound", "kResourceExhausted", "kUnauthenticated")] == [
        0,
        5,
        8,
        16,
    ]
    assert cc.Status.OK().ToString() == "OK" and cc.Status.OK().code() == 0


def test_run_errors_are_statuses_with_codes():
    root = cc.Scope.NewRootScope()
    x = ops.Placeholder(root, cc.DT_FLOAT)
    fwd = ops.FusedBatchNormV3(root, x, ONES, ZEROS, [], [])
    outputs: list = []
    status = ClientSession(root).Run([fwd.y], outputs)
    assert status.code() is cc.StatusCode.kInvalidArgument and "You must feed a value" in status.message()
    status = ClientSession(root).Run({x: X[..., :1]}, [fwd.y], outputs)
    assert not status.ok() and "scale must have the same number of elements" in status.message()
    assert outputs == []


def test_run_errors_have_direct_session_messages():
    """C11: the messages TF 2.21's ClientSession::Run returns (recorded by test_cc_differential.py)."""
    root = cc.Scope.NewRootScope()
    x = ops.Placeholder(root.WithOpName("x"), cc.DT_FLOAT, ops.Placeholder.Shape([2, 2, 2, 3]))
    bn = ops.FusedBatchNormV3(root.WithOpName("bn"), x, ONES, ZEROS, [], [])
    outputs: list = []
    missing = ClientSession(root).Run([bn.y], outputs)
    assert missing == cc.Status(
        3, "You must feed a value for placeholder tensor 'x' with dtype float and shape [2,2,2,3]\n\t [[{{node x}}]]"
    )
    half = ClientSession(root).Run({x: X.astype(np.float16)}, [bn.y], outputs)
    assert half == cc.Status(3, "Expects arg[0] to be float but half is provided")
    narrow = ClientSession(root).Run({x: X[..., :2]}, [bn.y], outputs)  # the placeholder's shape is not checked
    assert narrow == cc.Status(
        3, "scale must have the same number of elements as the channels of x, got 3 and 2\n\t [[{{node bn}}]]"
    )
    bad_index = cc.Output(bn.operation, 7)
    assert bad_index.name() == "bn:7"
    status = ClientSession(root).Run({x: X}, [bad_index], outputs)
    assert status.code() is cc.StatusCode.kOutOfRange
    assert status.message() == "Node 'bn' (type: 'FusedBatchNormV3', num of outputs: 6) does not have output 7"
    assert ClientSession(root).Run({x: X}, [bn.y, x], outputs) == cc.Status(3, "x:0 is both fed and fetched.")
    assert outputs == []


# ------------------------------------------------------------------------------ C5: Attrs


def test_attrs_setters_convert_like_cpp_and_are_values():
    base = ops.FusedBatchNormGradV3.Attrs()
    changed = base.Epsilon(1).DataFormat("NCHW").IsTraining(0)
    assert (base.epsilon_, base.data_format_, base.is_training_) == (0.0001, "NHWC", True)
    assert (changed.epsilon_, changed.data_format_, changed.is_training_) == (1.0, "NCHW", False)
    assert ops.FusedBatchNormGradV3.IsTraining(1).is_training_ is True  # int converts to bool
    assert ops.FusedBatchNormV3.ExponentialAvgFactor(0.3).exponential_avg_factor_ == 0.3


def test_another_ops_attrs_is_a_status_not_an_exception():
    status = built_status(
        lambda root: ops.FusedBatchNormGradV3(root, X, X, ONES, ONES, ONES, ONES, ops.FusedBatchNormV3.Epsilon(1.0))
    )
    assert status.code() == 3
    assert status.message() == (
        "attrs: a FusedBatchNormV3::Attrs is not a FusedBatchNormGradV3::Attrs "
        "(no conversion; C++ would not compile this)"
    )


def test_multi_output_op_is_not_an_input():
    def build(root):
        fwd = ops.FusedBatchNormV3(root, X, ONES, ZEROS, [], [])
        ops.FusedBatchNormGradV3(root, fwd, X, ONES, ONES, ONES, ONES)

    status = built_status(build)
    assert "Input 'y_backprop': a FusedBatchNormV3 has several outputs" in status.message()


# ------------------------------------------------------------------------------ C6: NodeDef-form messages

SIG_GRAD = (
    "Op<name=FusedBatchNormGradV3; signature=y_backprop:T, x:T, scale:float, reserve_space_1:U, reserve_space_2:U, "
    "reserve_space_3:U -> x_backprop:T, scale_backprop:U, offset_backprop:U, reserve_space_4:U, reserve_space_5:U; "
    "attr=T:type,allowed=[DT_HALF, DT_BFLOAT16, DT_FLOAT]; attr=U:type,allowed=[DT_FLOAT]; "
    'attr=epsilon:float,default=0.0001; attr=data_format:string,default="NHWC",allowed=["NHWC", "NCHW", "NDHWC", '
    '"NCDHW"]; attr=is_training:bool,default=true>'
)

# (op, input dtypes/shapes as Const nodes in order, attrs) -> TF 2.21's message, recorded from
# tf.Graph()._create_op_internal (the same C++ NodeBuilder the real API uses)
CASES = {
    "shape": (
        "FusedBatchNormGradV3",
        [(F, (4, 3, 3, 2)), (F, (4, 3, 3, 2)), (F, (1,)), (F, (2,)), (F, (2,)), (F, (2,))],
        {},
        "Dimensions must be equal, but are 2 and 1 for '{{node FusedBatchNormGradV3}} = FusedBatchNormGradV3["
        'T=DT_FLOAT, U=DT_FLOAT, data_format="NHWC", epsilon=0.0001, is_training=true](Const, Const_1, Const_2, '
        "Const_3, Const_4, Const_5)' with input shapes: [4,3,3,2], [4,3,3,2], [1], [2], [2], [2].",
    ),
    "inconsistent_T": (
        "FusedBatchNormGradV3",
        [(np.float16, (4, 3, 3, 2)), (F, (4, 3, 3, 2)), (F, (2,)), (F, (2,)), (F, (2,)), (F, (2,))],
        {},
        "Inconsistent values for attr 'T' DT_HALF vs. DT_FLOAT while building NodeDef 'FusedBatchNormGradV3' using "
        + SIG_GRAD,
    ),
    "fixed_type": (
        "FusedBatchNormGradV3",
        [(F, (4, 3, 3, 2)), (F, (4, 3, 3, 2)), (np.int32, (2,)), (F, (2,)), (F, (2,)), (F, (2,))],
        {},
        "Input 'scale' passed int32 expected float while building NodeDef 'FusedBatchNormGradV3' using " + SIG_GRAD,
    ),
    "disallowed_T": (
        "FusedBatchNormGradV3",
        [(np.float64, (4, 3, 3, 2)), (np.float64, (4, 3, 3, 2)), (F, (2,)), (F, (2,)), (F, (2,)), (F, (2,))],
        {},
        "Value for attr 'T' of double is not in the list of allowed values: half, bfloat16, float\n\t; NodeDef: "
        "{{node FusedBatchNormGradV3}}; " + SIG_GRAD,
    ),
    "data_format": (
        "FusedBatchNormGradV3",
        [(F, (4, 3, 3, 2)), (F, (4, 3, 3, 2)), (F, (2,)), (F, (2,)), (F, (2,)), (F, (2,))],
        {"data_format": "XYZW"},
        'Value for attr \'data_format\' of "XYZW" is not in the list of allowed values: "NHWC", "NCHW", "NDHWC", '
        '"NCDHW"\n\t; NodeDef: {{node FusedBatchNormGradV3}}; ' + SIG_GRAD,
    ),
    "forward_attrs": (
        "FusedBatchNormV3",
        [(F, (4, 3, 3, 2)), (F, (1,)), (F, (2,)), (F, (2,)), (F, (2,))],
        {"epsilon": 1e-7, "is_training": False, "exponential_avg_factor": 0.5},
        "Dimensions must be equal, but are 2 and 1 for '{{node FusedBatchNormV3}} = FusedBatchNormV3[T=DT_FLOAT, "
        'U=DT_FLOAT, data_format="NHWC", epsilon=1e-07, exponential_avg_factor=0.5, is_training=false](Const, '
        "Const_1, Const_2, Const_3, Const_4)' with input shapes: [4,3,3,2], [1], [2], [2], [2].",
    ),
}


def mirror_message(op_type, inputs, attrs) -> str:
    root = cc.Scope.NewRootScope()
    consts = [ops.Const(root, np.zeros(shape, dtype)) for dtype, shape in inputs]
    cls = getattr(ops, op_type)
    a = cls.Attrs()
    for k, v in attrs.items():
        a = getattr(a, "".join(p.title() for p in k.split("_")))(v)
    cls(root, *consts, a)
    assert root.status().code() == cc.StatusCode.kInvalidArgument
    return root.status().message()


@pytest.mark.parametrize("case", sorted(CASES))
def test_nodedef_form_messages(case):
    op_type, inputs, attrs, want = CASES[case]
    assert mirror_message(op_type, inputs, attrs) == want


_TF_ORACLE = """
import json, sys, numpy as np, tensorflow as tf
from tensorflow.core.framework import attr_value_pb2 as av
out = {}
for name, (op, inputs, attrs) in json.loads(sys.stdin.read()).items():
    g = tf.Graph()
    with g.as_default():
        ins = [tf.constant(np.zeros(shape, dtype)) for dtype, shape in inputs]
        values = {k: av.AttrValue(s=v.encode()) if isinstance(v, str) else av.AttrValue(b=v) if isinstance(v, bool)
                  else av.AttrValue(f=v) for k, v in attrs.items()}
        try:
            g._create_op_internal(op, ins, attrs=values)
            out[name] = None
        except Exception as e:
            out[name] = str(e)
print(json.dumps(out))
"""


def test_nodedef_messages_agree_with_tensorflow():
    """The recorded messages are TensorFlow's own: rebuild each case in TF 2.21 (separate process)."""
    extras.require("tensorflow", "oracle")
    import json

    payload = {
        k: (op, [(np.dtype(d).name, list(s)) for d, s in ins], attrs) for k, (op, ins, attrs, _) in CASES.items()
    }
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_ENABLE_ONEDNN_OPTS="0")
    proc = subprocess.run(
        [sys.executable, "-c", _TF_ORACLE],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    real = json.loads(proc.stdout.strip().splitlines()[-1])
    for name, (*_, want) in CASES.items():
        assert real[name] == want, name


# ------------------------------------------------------------------------------ C7, C8


def test_failed_scope_stops_later_ops_and_run():
    root = cc.Scope.NewRootScope()
    x = ops.Placeholder(root, cc.DT_FLOAT, ops.Placeholder.Shape([2, 2, 2, 3]))
    bad = ops.FusedBatchNormGradV3(root, DY, x, [1.0], ONES, ONES, ONES)
    assert not root.ok() and bad.operation.node() is None and bad.x_backprop.node() is None
    later = ops.FusedBatchNormV3(root, x, ONES, ZEROS, [], [])
    assert later.operation.node() is None and root.graph().operation("FusedBatchNormV3") is None
    outputs: list = []
    assert ClientSession(root).Run([later.y], outputs) == root.status() and outputs == []
    with pytest.raises(cc.FatalError):
        ops.FusedBatchNormV3(cc.Scope.NewRootScope().ExitOnError(), DY, [1.0], ONES, ONES, ONES)


def test_run_with_run_options_operation_inputs_and_graphdef():
    root = cc.Scope.NewRootScope()
    x = ops.Placeholder(root.WithOpName("x"), cc.DT_FLOAT)
    fwd = ops.FusedBatchNormV3(root.WithKernelLabel("reference"), x, ONES, ZEROS, [], [])
    assert fwd.operation.num_inputs() == 5 and fwd.operation.input(0).name() == "x:0"
    assert fwd.operation.input(1).name() == "Const/Const:0" and fwd.operation.input_type(1) is cc.DT_FLOAT
    assert fwd.operation.output(2).index() == 2 and fwd.operation.node().kernel_label == "reference"
    outputs: list = []
    metadata = cc.RunMetadata()
    status = ClientSession(root).Run(cc.RunOptions(), {x: X}, [fwd.y], [fwd.operation], outputs, metadata)
    assert status.ok(), status.ToString()
    np.testing.assert_array_equal(np.asarray(outputs[0]), raw(epsilon=1e-4)[0].y)
    gdef = cc.GraphDef()
    assert root.ToGraphDef(gdef).ok() and 'op: "FusedBatchNormV3"' in gdef.text


def test_tensor_class():
    t = cc.Tensor(cc.DT_FLOAT, cc.TensorShape([2, 3]))
    assert t.IsInitialized() and t.dtype() is cc.DT_FLOAT and t.NumElements() == 6 and t.TotalBytes() == 24
    assert t.DebugString() == "Tensor<type: float shape: [2,3]>" and t.flat().shape == (6,)
    huge = cc.Tensor(cc.DT_FLOAT, cc.TensorShape([10**7, 10**7]))  # TF's allocator fails softly
    assert not huge.IsInitialized()


def test_add_symbolic_gradients_matches_the_grad_op():
    root = cc.Scope.NewRootScope()
    x = ops.Placeholder(root, cc.DT_FLOAT, ops.Placeholder.Shape([2, 2, 2, 3]))
    scale = ops.Const(root, ONES)
    fwd = ops.FusedBatchNormV3(root, x, scale, ZEROS, [], [], ops.FusedBatchNormV3.Epsilon(1e-3))
    dy = ops.Const(root, DY)
    grads: list = []
    assert cc.AddSymbolicGradients(root, [fwd.y], [x, scale], [dy], grads).ok()
    outputs: list = []
    assert ClientSession(root).Run({x: X}, grads, outputs).ok()
    _, grad_ref = raw(epsilon=1e-3)
    assert_same(outputs, [grad_ref.x_backprop, grad_ref.scale_backprop])
    no_path: list = []
    assert cc.AddSymbolicGradients(root, [fwd.y], [dy], no_path).ok() and no_path[0].index() == -1  # NoGradient
    wrong: list = []
    status = cc.AddSymbolicGradients(root, [fwd.y], [x], [dy, dy], wrong)
    assert status.code() == 3 and "Must specify a gradient input for each output" in status.message()


# ------------------------------------------------------------------------------ naming, generated code


def test_naming():
    root = cc.Scope.NewRootScope()
    assert root.GetUniqueNameForOp("FusedBatchNormV3") == "FusedBatchNormV3"
    assert root.GetUniqueNameForOp("FusedBatchNormV3") == "FusedBatchNormV3_1"
    linear = root.NewSubScope("linear")
    w = ops.Placeholder(linear.WithOpName("W"), cc.DT_FLOAT)
    assert w.operation.name() == "linear/W"
    bn = ops.FusedBatchNormV3(linear.WithOpName("bn", 1), w, [1.0], [1.0], [1.0], [1.0])
    assert bn.operation.name() == "linear/bn1"
    assert [i.op.name for i in bn.operation.node().inputs[1:3]] == ["linear/Const/Const", "linear/Const_1/Const"]


def test_generated_mirrors_are_current():
    result = subprocess.run(
        [sys.executable, "-m", "bindings_mirror.generate", "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("spec", fbnops.specs.all_specs(), ids=lambda s: s.name)
def test_every_spec_is_a_cc_class_that_matches_raw_ops(spec):
    """Generated for every spec: required attrs are constructor arguments, optional ones ``Attrs``
    setters (no ``Attrs`` without any), outputs named by the spec, bits as fbnops.raw_ops."""
    cls = getattr(ops, spec.surfaces.cc_class)
    setters = {pascal for pascal in dir(getattr(cls, "Attrs", object)) if pascal[0].isupper()}
    assert setters == {"".join(p.title() for p in a.name.split("_")) for a in spec.optional_attrs}
    assert hasattr(cls, "Attrs") == bool(spec.optional_attrs)
    root = cc.Scope.NewRootScope()
    values = examples.inputs(spec)
    required = examples.required_attrs(spec)
    op = cls(root, *values.values(), *required.values())
    assert root.ok(), root.status()
    outputs: list = []
    assert ClientSession(root).Run([getattr(op, n) for n in spec.output_names], outputs).ok()
    want = getattr(fbnops.raw_ops, spec.name)(**values, **required)
    for name, got, ref in zip(spec.output_names, outputs, want, strict=True):
        np.testing.assert_array_equal(np.asarray(got), ref, err_msg=name)


def test_v1_types_are_float_only():
    spec = next((s for s in fbnops.specs.all_specs() if s.name == "FusedBatchNorm"), None)
    if spec is None:
        pytest.skip("the V1 FusedBatchNorm spec is not registered")
    status = built_status(lambda root: ops.FusedBatchNorm(root, X.astype(np.float16), ONES, ZEROS, [], []))
    assert status.message().startswith("4 errors while building NodeDef 'FusedBatchNorm' using Op<name=FusedBatchNorm;")
    assert "attr=T:type,allowed=[DT_FLOAT]" in status.message()
    assert status.message().endswith(":\n" + "\n".join(["Inconsistent values for attr 'T' DT_HALF vs. DT_FLOAT"] * 4))
