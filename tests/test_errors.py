"""Bad input is rejected before any kernel runs, with TensorFlow's messages.

Each case asserts the error type and the message text; the CVE inputs of
tf_semantics.md section 7.1 are among them.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import fbnops
from fbnops.errors import InvalidArgumentError, NotFoundError
from fbnops.testing import PUBLISHED_CRASH_INPUTS, grad_inputs

raw = fbnops.raw_ops
F = np.float32


def fwd_inputs(shape=(2, 3, 3, 4), c=4):
    return dict(
        x=np.ones(shape, F),
        scale=np.ones(c, F),
        offset=np.zeros(c, F),
        mean=np.zeros(c, F),
        variance=np.ones(c, F),
    )


GRAD_CASES = [
    ({"y_backprop": np.ones((2, 2, 2), F)}, {}, "input must be 4 or 5-dimensional[2,2,2]"),
    ({"x": np.ones((2, 2, 2, 2, 2, 2), F)}, {}, "input must be 4 or 5-dimensional[2,2,2,2,2,2]"),
    ({"scale": np.ones((4, 1), F)}, {}, "scale must be 1-dimensional[4,1]"),
    ({"reserve_space_1": np.ones((), F)}, {}, "saved mean must be 1-dimensional[]"),
    ({"reserve_space_2": np.ones((2, 2), F)}, {}, "saved variance must be 1-dimensional[2,2]"),
    (
        {"x": np.ones((2, 3, 3, 5), F)},
        {},
        "x and y_backprop must have same shape, but x has shape [2,3,3,5] and y_backprop has shape [2,3,3,4]",
    ),
    ({"scale": np.ones(3, F)}, {}, "scale must have the same number of elements as the channels of x, got 3 and 4"),
    (
        {"reserve_space_1": np.ones(5, F)},
        {},
        "reserve_space_1 must have the same number of elements as the channels of x, got 5 and 4",
    ),
    (
        {"reserve_space_2": np.ones(0, F)},
        {},
        "reserve_space_2 must have the same number of elements as the channels of x, got 0 and 4",
    ),
    ({}, {"data_format": "NXYZ"}, "Value for attr 'data_format' of \"NXYZ\" is not in the list of allowed values"),
    ({}, {"epsilon": float("nan")}, "Attr 'epsilon' must be a finite float"),
    ({"y_backprop": np.ones((2, 3, 3, 4), np.int32)}, {}, "Value for attr 'T' of int32 is not in the list of allowed"),
    ({"y_backprop": np.ones((2, 3, 3, 4), np.float64)}, {}, "Value for attr 'T' of double is not in the list"),
    ({"y_backprop": np.ones((2, 3, 3, 4), bool)}, {}, "Value for attr 'T' of bool is not in the list"),
    ({"y_backprop": np.ones((2, 3, 3, 4), np.complex64)}, {}, "Value for attr 'T' of complex64"),
    ({"y_backprop": np.full((2, 3, 3, 4), "a")}, {}, "Value for attr 'T' of"),
    ({"y_backprop": np.empty((2, 3, 3, 4), object)}, {}, "Value for attr 'T' of object"),
    # raw_ops converts lists, scalars and other dtypes as tf.raw_ops does: tests/test_raw_ops_conversion.py
]


FWD_CASES = [
    ({"x": np.ones((2, 2, 2), F)}, {}, "input must be 4 or 5-dimensional[2,2,2]"),
    ({"offset": np.ones((4, 4), F)}, {}, "offset must be 1-dimensional[4,4]"),
    ({"mean": np.ones((), F)}, {}, "estimated_mean must be 1-dimensional[]"),
    ({"variance": np.ones((1, 4), F)}, {}, "estimated_variance must be 1-dimensional[1,4]"),
    ({"offset": np.ones(3, F)}, {}, "offset must have the same number of elements as the channels of x, got 3 and 4"),
    (
        {"mean": np.ones(3, F)},
        {"is_training": False},
        "When is_training=false, mean must have the same number of elements as the channels of x, got 3 and 4",
    ),
    (
        {"variance": np.ones(0, F)},
        {"exponential_avg_factor": 0.5},
        "When exponential_avg_factor != 1, variance must have the same number of elements as the channels "
        "of x, got 0 and 4",
    ),
    ({}, {"exponential_avg_factor": float("inf")}, "Attr 'exponential_avg_factor' must be a finite float"),
]


CASES = [("FusedBatchNormGradV3", *c) for c in GRAD_CASES] + [("FusedBatchNormV3", *c) for c in FWD_CASES]


@pytest.mark.parametrize("op_type,override,attrs,message", CASES)
def test_rejects_with_tensorflows_message(op_type, override, attrs, message):
    base = grad_inputs((2, 3, 3, 4)) if op_type == "FusedBatchNormGradV3" else fwd_inputs()
    with pytest.raises(InvalidArgumentError, match=re.escape(message)):
        getattr(raw, op_type)(**{**base, **override}, **attrs)


def test_forward_bfloat16_statistics_have_no_cpu_kernel():
    """U=bfloat16 is allowed by the op def but TensorFlow registers no CPU kernel for it."""
    bf = np.dtype("bfloat16")
    inputs = {k: (v.astype(bf) if k != "x" else v) for k, v in fwd_inputs().items()}
    with pytest.raises(NotFoundError, match="U=bfloat16"):
        raw.FusedBatchNormV3(**inputs)


@pytest.mark.parametrize("name", list(PUBLISHED_CRASH_INPUTS))
def test_published_crash_inputs_raise_tensorflows_message(name):
    """CVE-2021-41223, CVE-2021-29583 and the TF 2.4 fuzzer segfaults (tf_semantics.md 7.1)."""
    op_type, _, inputs, attrs, message = PUBLISHED_CRASH_INPUTS[name]
    with pytest.raises(InvalidArgumentError, match=re.escape(message)):
        getattr(raw, op_type)(**inputs, **attrs)


def test_unknown_and_missing_arguments():
    inputs = grad_inputs((2, 3, 3, 4))
    with pytest.raises(TypeError, match="unexpected keyword argument 'exponential_avg_factor'"):
        raw.FusedBatchNormGradV3(**inputs, exponential_avg_factor=1.0)
    del inputs["reserve_space_3"]
    with pytest.raises(TypeError, match="reserve_space_3"):
        raw.FusedBatchNormGradV3(**inputs)
    with pytest.raises(TypeError):
        raw.FusedBatchNormGradV3(*grad_inputs((2, 3, 3, 4)).values())  # keyword-only, as tf.raw_ops


def test_error_names_the_op():
    with pytest.raises(InvalidArgumentError) as info:
        raw.FusedBatchNormGradV3(**{**grad_inputs((2, 3, 3, 4)), "scale": np.ones(3, F)})
    assert info.value.op == "FusedBatchNormGradV3"
    assert str(info.value).endswith("[Op:FusedBatchNormGradV3]")
    assert isinstance(info.value, ValueError)


def test_unknown_backend_errors():
    with pytest.raises(NotFoundError, match="Unknown backend 'cuda'"):
        fbnops.set_backend("cuda")
