"""Class 6 of issue 15: no silent wrong answer in the graph support ops and GraphDef literals."""

from __future__ import annotations

import numpy as np
import pytest

from fbnops.errors import InvalidArgumentError
from fbnops.framework.graph import Graph
from fbnops.framework.scope import Scope
from fbnops.framework.session import Session

F = np.float32


def _placeholders(*shapes):
    s = Scope(Graph())
    return s, [s.placeholder(F, shape, name=f"p{i}") for i, shape in enumerate(shapes)]


@pytest.mark.parametrize(
    "a,b,message",
    [
        ((2, 3), (3, 3), "Dimension 0 in both shapes must be equal, but are 2 and 3. Shapes are [2,3] and [3,3]."),
        ((1, 3), (3,), "Shapes must be equal rank, but are 2 and 1"),
        ((2, 3), (2, 1), "Dimension 1 in both shapes must be equal, but are 3 and 1"),
    ],
)
def test_addn_rejects_mismatched_static_shapes_as_tensorflow_does(a, b, message):
    s, (p, q) = _placeholders(a, b)
    with pytest.raises(InvalidArgumentError) as info:
        s.add_op("AddN", [p, q], {})
    assert message in str(info.value)


@pytest.mark.parametrize("a,b", [((2, 3), (3, 3)), ((1, 3), (3,)), ((2, 1), (2, 3))])
def test_addn_never_broadcasts_at_run_time(a, b):
    s, (p, q) = _placeholders(None, None)  # unknown shapes: only the kernel can check
    total = s.add_op("AddN", [p, q], {}).output(0)
    with pytest.raises(InvalidArgumentError) as info:
        Session(s.graph).run(total, {p: np.ones(a, F), q: np.ones(b, F)})
    want = (
        "Inputs to operation AddN of type AddN must have the same size and shape.  "
        f"Input 0: [{','.join(map(str, a))}] != input 1: [{','.join(map(str, b))}]"
    )
    assert want in str(info.value)


def test_addn_with_equal_shapes_is_the_exact_sum():
    s, (p, q, r) = _placeholders(None, None, None)
    total = s.add_op("AddN", [p, q, r], {}).output(0)
    v = [np.arange(6, dtype=F).reshape(2, 3) * k for k in (1, 2, 3)]
    np.testing.assert_array_equal(Session(s.graph).run(total, dict(zip((p, q, r), v, strict=True))), v[0] * 6)


def test_transpose_perm_checked_at_run_time():
    s, (x, perm) = _placeholders((2, 3), None)
    perm = s.placeholder(np.dtype(np.int32), None, name="perm")
    y = s.add_op("Transpose", [x, perm], {}).output(0)
    with pytest.raises(InvalidArgumentError, match="permutation"):
        Session(s.graph).run(y, {x: np.ones((2, 3), F), perm: np.array([0, 0], np.int32)})


@pytest.mark.parametrize(
    "tensor,word",
    [
        ("dtype: DT_FLOAT float_val: 1e40", "does not fit in a float"),
        ("dtype: DT_FLOAT float_val: -1e39", "does not fit in a float"),
        ("dtype: DT_DOUBLE double_val: 1e400", "does not fit in a double"),
        ("dtype: DT_INT32 int_val: 2147483648", "out of range for int32"),
        ("dtype: DT_INT32 int_val: 1099511627776", "out of range for int32"),
        ("dtype: DT_INT64 int64_val: 9223372036854775808", "out of range for int64"),
        ("dtype: DT_HALF half_val: 65536", "16-bit"),
        ("dtype: DT_BOOL bool_val: 2", "true or false"),
    ],
)
def test_literals_that_do_not_fit_their_dtype_are_errors_never_inf_or_truncation(tensor, word):
    dtype = tensor.split()[1]
    text = (
        f'node {{ name: "c" op: "Const" attr {{ key: "dtype" value {{ type: {dtype} }} }} '
        f'attr {{ key: "value" value {{ tensor {{ {tensor} }} }} }} }}'
    )
    with pytest.raises(InvalidArgumentError, match=word):
        Graph.from_pbtxt(text)
