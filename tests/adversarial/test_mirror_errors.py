"""Hostile input to the TensorFlow C++ and Java mirrors (issue 15, class 7).

* C++: every construction error is a non-OK ``Status`` recorded in the scope (an
  ``absl::StatusCode`` and a message); nothing raises, whatever goes into any input,
  attribute setter, feed or fetch.
* Java: every error is one of tensorflow/java's exception classes (a
  ``java.lang.RuntimeException`` of the mirror), never a bare Python error.

Building graphs is pure Python and runs in-process; running kernels on the accepted
hostile values happens in a child process, so a crash fails the test instead of pytest.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import spec_examples as examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bindings_mirror import cc, java
from bindings_mirror.generate import camel, pascal
from fbnops.specs import all_specs

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SPECS = sorted(all_specs(), key=lambda s: s.name)
F = np.float32


def _deep(depth: int):
    value = [1.0]
    for _ in range(depth):
        value = [value]
    return value


HOSTILE = [
    None,
    "x",
    b"\x00",
    {"a": 1},
    object(),
    float("nan"),
    float("inf"),
    1e40,
    2**70,
    -(2**70),
    True,
    [],
    [[1.0], [1.0, 2.0]],
    [1.0, "a"],
    [1.0, 1],
    _deep(300),
    np.array([object()], dtype=object),
    np.zeros((2, 2, 2, 3), np.complex64),
    np.zeros((2, 2, 2, 3), ">f4"),
    np.zeros((2, 2, 2, 3), np.uint64),
    np.zeros((0, 2, 2, 3), F),
    np.zeros((2, 2, 2, 0), F),
    np.zeros((), F),
    np.zeros((1, 1, 1, 1, 1, 1), F),
    np.broadcast_to(np.float32(1.0), (2**36, 1, 1, 3)),
    np.full(3, np.nan, F),
    np.ones((2, 2, 2, 3), F)[:, ::-1],
]

hostile = st.sampled_from(HOSTILE) | st.floats() | st.integers() | st.text(max_size=8)
spec_st = st.sampled_from(SPECS)


def valid_inputs(spec):
    return [
        np.ones(shape, examples.dtype_of(spec, a.type))
        for a, shape in zip(spec.inputs, examples.input_shapes(spec).values(), strict=True)
    ]


def with_attr(spec, index: int, value):
    """The required attrs' values and the optional attr to set: attr ``index`` (of all) set to ``value``."""
    attr = spec.attrs[index % len(spec.attrs)]
    required = examples.required_attrs(spec)
    if attr.required:
        return [*{**required, attr.name: value}.values()], None
    return list(required.values()), attr


# ------------------------------------------------------------------------------ C++


def assert_cc_status(root: cc.Scope) -> None:
    status = root.status()
    assert isinstance(status, cc.Status)
    if not status.ok():
        assert isinstance(status.code(), cc.StatusCode) and status.code() != cc.StatusCode.kOk
        assert isinstance(status.message(), str) and status.message()


@SETTINGS
@given(spec=spec_st, position=st.integers(0, 5), value=hostile)
def test_cc_any_input_is_a_status(spec, position, value):
    args = valid_inputs(spec)
    args[position % len(args)] = value
    root = cc.Scope.NewRootScope()
    getattr(cc.ops, spec.surfaces.cc_class)(root, *args, *examples.required_attrs(spec).values())  # must not raise
    assert_cc_status(root)


@SETTINGS
@given(spec=spec_st, attr=st.integers(0, 3), value=hostile)
def test_cc_any_attr_value_is_a_status(spec, attr, value):
    cls = getattr(cc.ops, spec.surfaces.cc_class)
    required, optional = with_attr(spec, attr, value)
    root = cc.Scope.NewRootScope()
    options = [] if optional is None else [getattr(cls, pascal(optional.name))(value)]
    cls(root, *valid_inputs(spec), *required, *options)
    assert_cc_status(root)


@pytest.mark.parametrize("attrs", [object(), "NHWC", 1.0, cc.ops.Placeholder.Attrs()], ids=repr)
def test_cc_foreign_attrs_objects_are_statuses(attrs):
    spec = next(s for s in SPECS if s.optional_attrs)  # an op with an Attrs struct
    root = cc.Scope.NewRootScope()
    getattr(cc.ops, spec.surfaces.cc_class)(root, *valid_inputs(spec), *examples.required_attrs(spec).values(), attrs)
    assert root.status().code() == cc.StatusCode.kInvalidArgument and "Attrs" in root.status().message()


@SETTINGS
@given(value=hostile, shape=hostile)
def test_cc_placeholder_const_and_feeds_are_statuses(value, shape):
    root = cc.Scope.NewRootScope()
    cc.ops.Placeholder(root, cc.DT_FLOAT, cc.ops.Placeholder.Shape(shape))
    assert_cc_status(root)
    root = cc.Scope.NewRootScope()
    cc.ops.Const(root, value)
    assert_cc_status(root)
    root = cc.Scope.NewRootScope()
    x = cc.ops.Placeholder(root, cc.DT_FLOAT, cc.ops.Placeholder.Shape([3]))
    outputs: list = []
    status = cc.ClientSession(root).Run({x: value}, [x], outputs)
    assert isinstance(status, cc.Status) and (status.ok() or (status.message() and outputs == []))


@pytest.mark.parametrize(
    "args",
    [(), ([],), ([], [], [], [], [], [], []), (None, None), ({}, "x", []), ("x", [])],
    ids=repr,
)
def test_cc_run_bad_arguments_are_statuses(args):
    root = cc.Scope.NewRootScope()
    cc.ops.Const(root, [1.0])
    status = cc.ClientSession(root).Run(*args)
    assert status.code() == cc.StatusCode.kInvalidArgument


def test_cc_inputs_from_another_graph_or_unbuilt_ops_are_statuses():
    other = cc.Scope.NewRootScope()
    foreign = cc.ops.Const(other, np.ones((2, 2, 2, 3), F))
    spec = next(s for s in SPECS if s.name == "FusedBatchNormV3")
    root = cc.Scope.NewRootScope()
    cc.ops.FusedBatchNormV3(root, foreign, *valid_inputs(spec)[1:])
    assert "different graph" in root.status().message()
    root = cc.Scope.NewRootScope()
    cc.ops.FusedBatchNormV3(root, cc.Output(), *valid_inputs(spec)[1:])
    assert "empty Output" in root.status().message()


# ------------------------------------------------------------------------------ Java

JAVA_ERRORS = (java.RuntimeException,)


def java_call(fn):
    """Run ``fn``; any exception must be one of the mirror's Java classes."""
    try:
        return fn()
    except JAVA_ERRORS:
        return None


@SETTINGS
@given(spec=spec_st, position=st.integers(0, 5), value=hostile)
def test_java_any_input_is_a_java_exception(spec, position, value):
    g = java.Graph()
    tf = java.Ops.create(g)
    args = [tf.constant(v) for v in valid_inputs(spec)]
    index = position % len(args)
    args[index] = java_call(lambda: tf.constant(value)) or value
    java_call(
        lambda: getattr(tf, spec.name[:1].lower() + spec.name[1:])(*args, *examples.required_attrs(spec).values())
    )


@SETTINGS
@given(spec=spec_st, attr=st.integers(0, 3), value=hostile)
def test_java_any_option_value_is_a_java_exception(spec, attr, value):
    cls = getattr(java.core, spec.name)
    required, optional = with_attr(spec, attr, value)
    g = java.Graph()
    tf = java.Ops.create(g)
    args = [tf.constant(v) for v in valid_inputs(spec)]

    def build():
        options = [] if optional is None else [getattr(cls, camel(optional.name))(value)]
        return cls.create(g.baseScope(), *args, *required, *options)

    java_call(build)


@SETTINGS
@given(name=st.text(max_size=12) | st.sampled_from(["bn:99999999999", "bn:-1", "^bn", "bn:", ":0", "bn:0:1"]))
def test_java_any_tensor_name_is_a_java_exception(name):
    g = java.Graph()
    tf = java.Ops.create(g)
    spec = next(s for s in SPECS if s.name == "FusedBatchNormV3")
    tf.withName("bn").fusedBatchNormV3(*[tf.constant(v) for v in valid_inputs(spec)])
    with java.Session(g) as s:
        java_call(lambda: s.runner().fetch(name).run().close())
        java_call(lambda: s.runner().feed(name, np.ones(3, F)))
        java_call(lambda: s.runner().addTarget(name))
        java_call(lambda: s.run(name))


@SETTINGS
@given(key=hostile | st.integers(-(2**40), 2**40))
def test_java_result_and_runner_reject_any_key(key):
    g = java.Graph()
    tf = java.Ops.create(g)
    c = tf.constant(np.ones(3, F))
    with java.Session(g) as s:
        result = s.runner().fetch(c).run()
        java_call(lambda: result.get(key))
        java_call(lambda: s.runner().fetch(key))
        java_call(lambda: s.runner().feed(c, key))
        java_call(lambda: java.Placeholder.create(g.baseScope(), key))
        java_call(lambda: java.Shape.of(key))


# ------------------------------------------------------------------------------ running (child process)

RUN_HOSTILE = textwrap.dedent(
    """
    import numpy as np
    from bindings_mirror import cc, java
    F = np.float32
    cases = [
        np.full((2, 2, 2, 3), np.nan, F), np.full((2, 2, 2, 3), np.inf, F), np.zeros((0, 2, 2, 3), F),
        np.zeros((2, 0, 2, 3), F), np.ones((2, 2, 2, 3), ">f4"), np.ones((2, 4, 2, 3), F)[:, ::2],
        np.ones((2, 2, 2, 3), np.float16), np.ones((1, 1, 1, 3), F) * 3e38, np.ones((2, 2, 2, 2, 3), F),
    ]
    for x in cases:
        root = cc.Scope.NewRootScope()
        ph = cc.ops.Placeholder(root, cc.DT_FLOAT)
        bn = cc.ops.FusedBatchNormV3(root, ph, [1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [], [])
        grad = cc.ops.FusedBatchNormGradV3(root, ph, ph, [1.0, 1.0, 1.0], bn.reserve_space_1,
                                           bn.reserve_space_2, bn.reserve_space_3)
        out = []
        status = cc.ClientSession(root).Run({ph: x}, [bn.y, grad.x_backprop], out)
        assert isinstance(status, cc.Status)
        g = java.Graph()
        tf = java.Ops.create(g)
        p = tf.placeholder(java.TFloat32)
        one = tf.constant(np.ones(3, F))
        bnj = tf.nn.fusedBatchNorm(p, one, tf.constant(np.zeros(3, F)), tf.constant(np.zeros(0, F)),
                                   tf.constant(np.zeros(0, F)))
        try:
            with java.Session(g) as s:
                s.runner().feed(p, x).fetch(bnj.y()).run().close()
        except java.RuntimeException:
            pass
    print("survived", len(cases))
    """
)


def test_running_hostile_values_never_crashes():
    proc = subprocess.run([sys.executable, "-c", RUN_HOSTILE], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "survived 9" in proc.stdout
