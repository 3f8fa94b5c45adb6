"""The fast path of repeated calls (fbnops/ops/execute.py): a call with the signature of one that
passed validation skips it, and nothing else does."""

from __future__ import annotations

import numpy as np
import pytest

import fbnops
from fbnops.framework.errors import InvalidArgumentError
from fbnops.ops import execute as ex

rng = np.random.default_rng(7)
X = rng.standard_normal((2, 4, 4, 8)).astype(np.float32)
V = np.ones(8, np.float32)
R3 = np.zeros(0, np.float32)


def grad(**overrides):
    args = dict(y_backprop=X, x=X, scale=V, reserve_space_1=V * 0.5, reserve_space_2=V, reserve_space_3=R3)
    args.update(overrides)
    return fbnops.raw_ops.FusedBatchNormGradV3(**args)


def built_signature():
    """The compiled signature, which the fast path uses (without it there is no fast path)."""
    compiled = pytest.importorskip("fbnops.ops._signature", reason="fbnops/ops/_signature.pyx is not built here")
    assert ex.call_signature is compiled.call_signature
    return compiled


@pytest.fixture(autouse=True)
def forget():
    ex._PASSED.clear()
    yield
    ex._PASSED.clear()


def test_a_repeated_call_is_remembered_and_gives_the_same_bits():
    built_signature()
    first = grad()
    assert len(ex._PASSED) == 1
    second = grad()
    assert len(ex._PASSED) == 1
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


def test_a_failing_call_is_never_remembered():
    bad_scale = np.ones(7, np.float32)
    for _ in range(2):
        with pytest.raises(InvalidArgumentError, match="scale must have the same number of elements"):
            grad(scale=bad_scale)
    assert not ex._PASSED


@pytest.mark.parametrize(
    "change, error",
    [
        (dict(x=X.astype(np.float64), y_backprop=X.astype(np.float64)), InvalidArgumentError),  # another dtype
        (dict(scale=np.ones(9, np.float32)), InvalidArgumentError),  # another shape
        (dict(data_format="NCDHW"), InvalidArgumentError),  # another attr value (5-D format on 4-D input)
        (dict(epsilon="0.1"), TypeError),  # another attr type
    ],
)
def test_anything_the_checks_depend_on_makes_another_signature(change, error):
    grad()
    with pytest.raises(error):
        grad(**change)


def test_signed_zero_and_types_are_part_of_the_signature():
    built_signature()
    inputs = dict(x=X)
    assert ex.call_signature("raw_ops", "Op", inputs, {"epsilon": 0.0}) != ex.call_signature(
        "raw_ops", "Op", inputs, {"epsilon": -0.0}
    )
    assert ex.call_signature("raw_ops", "Op", inputs, {"flag": True}) != ex.call_signature(
        "raw_ops", "Op", inputs, {"flag": 1}
    )
    assert ex.call_signature("raw_ops", "Op", inputs, {"a": 1}) != ex.call_signature("execute", "Op", inputs, {"a": 1})


def test_literals_subclasses_layouts_and_unhashable_attrs_have_no_signature():
    built_signature()
    assert ex.call_signature("raw_ops", "Op", {"x": X}, {"nan": float("nan"), "axes": (1, 2)}) is not None
    assert ex.call_signature("raw_ops", "Op", {"x": [1.0, 2.0]}, {}) is None
    assert ex.call_signature("raw_ops", "Op", {"x": np.float32(1)}, {}) is None
    assert ex.call_signature("raw_ops", "Op", {"x": np.asfortranarray(X)}, {}) is None
    unaligned = np.frombuffer(bytearray(4 * 8 + 1), np.float32, count=8, offset=1)
    assert ex.call_signature("raw_ops", "Op", {"x": unaligned}, {}) is None
    assert ex.call_signature("raw_ops", "Op", {"x": np.ma.masked_array(X)}, {}) is None
    assert ex.call_signature("raw_ops", "Op", {"x": X}, {"shape": [1, 2]}) is None


def test_converted_inputs_are_not_remembered():
    grad(scale=[1.0] * 8)  # a list: converted, so this signature says nothing of a later call
    grad(x=X.astype(np.float16))  # cast to y_backprop's float32, as tf.raw_ops does: not remembered either
    assert not ex._PASSED


def test_large_calls_are_not_remembered():
    # the memory check reads the machine's free memory now: large calls always run it
    big = np.broadcast_to(np.float32(1), (1 << 11, 1, 1 << 10, 8))  # 64 MiB claimed, 4 bytes owned
    dx = grad(x=big, y_backprop=big).x_backprop
    assert dx.shape == big.shape and not ex._PASSED


def test_strided_inputs_have_no_signature_and_are_copied_for_the_kernel():
    built_signature()
    first = grad()  # remembered: a later call of this shape and dtype skips validation
    strided = np.empty((2, 4, 4, 16), np.float32)[..., ::2]
    strided[...] = X
    assert ex.call_signature("raw_ops", "Op", {"x": strided}, {}) is None
    second = grad(x=strided, y_backprop=strided)
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))
