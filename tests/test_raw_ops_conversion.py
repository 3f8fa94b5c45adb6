"""``fbnops.raw_ops`` converts arguments as ``tf.raw_ops`` does (the table in raw_ops_cases.py).

Also: the converted call computes what the same call with explicitly typed arrays
computes, the memory guard refuses casts and copies that cannot fit before
allocating them (broadcast views, big-endian arrays), and the caller's arrays are
never modified.
"""

from __future__ import annotations

import re
import tracemalloc
import warnings
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
import spec_examples as examples
from raw_ops_cases import ROWS, Row, call_inputs

import fbnops
from fbnops.errors import InvalidArgumentError, ResourceExhaustedError
from fbnops.specs import get_spec
from fbnops.testing import extras

CLASSES = {"InvalidArgumentError": InvalidArgumentError, "TypeError": TypeError, "ValueError": ValueError}
HUGE = (10**6, 10**4, 1, 3)  # 3e10 elements: more than any test machine's memory once copied


def run(row: Row):
    return getattr(fbnops.raw_ops, row.op)(**call_inputs(row), **row.attrs)


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_conversion_table(row):
    kind, detail = row.ours
    if kind == "ok":
        out = run(row)
        assert out[0].dtype == np.dtype(detail)
        assert all(np.isfinite(a).all() for a in out[:3] if a.size)
        return
    with pytest.raises(CLASSES[kind]) as info:
        run(row)
    assert detail in str(info.value)
    if kind == "TypeError":  # TensorFlow's exact class: not one of fbnops' OpErrors
        assert type(info.value) is TypeError


def test_converted_call_equals_the_typed_call():
    """Lists, scalars and other dtypes give exactly what the explicitly typed arrays give."""
    base = call_inputs(ROWS[0])
    loose = {
        "y_backprop": base["y_backprop"].tolist(),
        "x": base["x"].astype(np.float64),
        "scale": base["scale"].astype(np.float16).tolist(),
        "reserve_space_1": base["reserve_space_1"].tolist(),
        "reserve_space_2": base["reserve_space_2"].astype(np.float64),
        "reserve_space_3": 0,
    }
    typed = {k: np.asarray(v, np.float32) for k, v in loose.items()}
    got = fbnops.raw_ops.FusedBatchNormGradV3(**loose, epsilon=True, is_training=True, data_format=b"NHWC")
    want = fbnops.raw_ops.FusedBatchNormGradV3(**typed, epsilon=1.0, is_training=True, data_format="NHWC")
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "what,value",
    [
        ("broadcast float64 view", lambda: np.broadcast_to(np.float64(1.0), HUGE)),
        ("broadcast big-endian view", lambda: np.broadcast_to(np.array(1.0, ">f4"), HUGE)),
        ("broadcast int8 view", lambda: np.broadcast_to(np.int8(1), HUGE)),
    ],
)
def test_memory_guard_before_any_cast(what, value):
    inputs = {**call_inputs(ROWS[0]), "x": value()}
    tracemalloc.start()
    try:
        with pytest.raises(ResourceExhaustedError, match="OOM when allocating a float copy of input 'x'"):
            fbnops.raw_ops.FusedBatchNormGradV3(**inputs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"{what}: {peak} bytes allocated before the refusal"


def test_big_endian_inputs_give_the_native_result():
    base = call_inputs(ROWS[0])
    swapped = {k: v.astype(v.dtype.newbyteorder(">")) for k, v in base.items()}
    got = fbnops.raw_ops.FusedBatchNormGradV3(**swapped)
    want = fbnops.raw_ops.FusedBatchNormGradV3(**base)
    for a, b in zip(got, want, strict=True):
        assert a.dtype.isnative
        np.testing.assert_array_equal(a, b)


def test_the_callers_arrays_are_not_modified():
    base = call_inputs(ROWS[0])
    inputs = {**base, "x": base["x"].astype(np.float64), "scale": base["scale"].astype(np.float16)}
    before = {k: v.copy() for k, v in inputs.items()}
    fbnops.raw_ops.FusedBatchNormGradV3(**inputs)
    for k, v in inputs.items():
        assert v.dtype == before[k].dtype
        np.testing.assert_array_equal(v, before[k])


def test_error_names_the_input():
    with pytest.raises(InvalidArgumentError, match=r"\(input 'reserve_space_2'\)"):
        fbnops.raw_ops.FusedBatchNormGradV3(**{**call_inputs(ROWS[0]), "reserve_space_2": [[1.0], [2.0, 3.0]]})


@pytest.mark.parametrize("epsilon", [1e40, -1e40, 10**400, np.float64(1e300)])
def test_epsilon_beyond_float_is_typed_on_the_graph_surface_too(epsilon):
    """Issue: never an OverflowError (10**400) or a RuntimeWarning (1e40 into float32)."""
    scope = fbnops.Scope(fbnops.Graph())
    x, v = scope.placeholder(np.float32, (1, 1, 1, 2)), scope.placeholder(np.float32, (2,))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(InvalidArgumentError, match="is out of the range of float"):
            scope.add_op("FusedBatchNormV3", [x, v, v, v, v], {"epsilon": epsilon})


class _Index:  # has __index__ but is not a number: TensorFlow refuses it for every attr
    def __index__(self) -> int:
        return 1

    def __repr__(self) -> str:
        return "_Index()"


# values x attrs, compared with TensorFlow's make_float/make_bool/make_str (its eager fast path)
ATTR_VALUES = {
    "True": True, "False": False, "np.True_": np.True_, "np.False_": np.False_, "1": 1, "0.5": 0.5,
    "np.float16": np.float16(0.5), "np.float32": np.float32(0.5), "np.float64": np.float64(0.5),
    "np.int8": np.int8(1), "np.int64": np.int64(1), "np.uint16": np.uint16(1), "bfloat16": ml_dtypes.bfloat16(0.5),
    "Fraction": Fraction(1, 2), "0-d array": np.array(0.5), "bool array": np.array(True), "1j": 1j,
    "[0.5]": [0.5], "(1,)": (1,), "'NHWC'": "NHWC", "np.str_": np.str_("NCHW"), "b'NHWC'": b"NHWC",
    "bytearray": bytearray(b"NHWC"), "'x'": "x", "b'\\xff'": b"\xff", "10**40": 10**40, "inf": float("inf"),
    "nan": float("nan"), "object()": object(), "_Index()": _Index(), "None": None,
}  # fmt: skip
# Where fbnops deliberately differs (fbnops.ops.convert's module doc): (value, attr type) -> fbnops' outcome.
ATTR_DIFFERENCES = {
    ("10**40", "float"): "InvalidArgumentError",  # TF stores inf in a float32 attr
    ("inf", "float"): "InvalidArgumentError",  # epsilon: TF computes with it; factor: the op refuses it
    ("nan", "float"): "InvalidArgumentError",  # TF computes NaN
    ("b'\\xff'", "string"): "InvalidArgumentError",  # TF: a UnicodeDecodeError from its own decoding
}


def _attr_outcome(fn, call: dict) -> str:
    try:
        fn(**call)
    except TypeError as e:  # TensorFlow's exact message (object addresses aside)
        return "TypeError: " + re.sub(r" at 0x[0-9a-f]+", "", str(e))
    except Exception as e:  # fbnops' and TensorFlow's InvalidArgumentError alike: the class name
        return type(e).__name__
    return "ok"


def _attr_cells():
    from fbnops.specs import all_specs

    return [(s.name, a.name, a.type) for s in all_specs() for a in s.attrs]


@pytest.mark.parametrize("op,attr,attr_type", _attr_cells())
def test_attr_types_follow_tensorflow(op, attr, attr_type):
    """Every attr of every op, fed each value: TensorFlow's TypeError (same words), or both accept it."""
    tf = extras.require("tensorflow", "oracle")
    spec = get_spec(op)
    inputs = {**examples.inputs(spec, seed=0), **examples.required_attrs(spec)}
    mismatched = []
    for label, value in ATTR_VALUES.items():
        call = {**inputs, attr: value}
        theirs = _attr_outcome(getattr(tf.raw_ops, op), call)
        if theirs.startswith("InvalidArgumentError"):
            theirs = "InvalidArgumentError"  # the allowed-values and op checks: the class is what is compared
        if spec.deprecation is not None and theirs == "UnimplementedError":
            theirs = "ok"  # TensorFlow converted the attrs, then refused an op removed at its GraphDef version
        theirs = ATTR_DIFFERENCES.get((label, attr_type), theirs)
        ours = _attr_outcome(getattr(fbnops.raw_ops, op), call)
        if ours != theirs:
            mismatched.append((label, ours, theirs))
    assert mismatched == []
