"""Class 3 of issue 15 on the graph paths: sizes a user declares (GraphDef constants, fed broadcast
views, byte-swapped feeds) are refused with ResourceExhaustedError before anything is allocated."""

from __future__ import annotations

import numpy as np
import pytest

from fbnops.errors import ResourceExhaustedError
from fbnops.framework import memory
from fbnops.framework.graph import Graph
from fbnops.framework.session import Session

HUGE = (1 << 20, 1 << 20)  # 4 TiB of float32


def _const(name: str, n: int) -> str:
    return (
        f'node {{ name: "{name}" op: "Const" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} '
        f'attr {{ key: "value" value {{ tensor {{ dtype: DT_FLOAT tensor_shape {{ dim {{ size: {n} }} }} '
        "float_val: 1 } } } }\n"
    )


def test_constants_are_guarded_by_their_sum(monkeypatch):
    """Each constant fits alone; the third one would exceed what is available: refused before allocating."""
    monkeypatch.setattr(memory, "SMALL", 0)
    monkeypatch.setattr(memory, "available_bytes", lambda: 2 << 20)  # 2 MiB: half of it may be used
    one = 100_000  # 400 kB each
    Graph.from_pbtxt(_const("a", one) + _const("b", one))
    with pytest.raises(ResourceExhaustedError, match="OOM when allocating tensor with shape \\[100000\\]"):
        Graph.from_pbtxt(_const("a", one) + _const("b", one) + _const("c", one))


def _graph(op: str):
    g = Graph()
    x = g.add_operation("x", "Placeholder", [], {"dtype": np.dtype(np.float32), "shape": None}).output(0)
    inputs = {"AddN": [x, x], "OnesLike": [x], "Identity": [x]}[op]
    return g, g.add_operation("y", op, inputs, {}).output(0)


@pytest.mark.parametrize("op", ["AddN", "OnesLike"])
def test_ops_on_a_fed_broadcast_view_refuse_a_huge_output(op):
    g, y = _graph(op)
    view = np.broadcast_to(np.float32(1), HUGE)
    with pytest.raises(ResourceExhaustedError, match="OOM when allocating an output of shape \\[1048576,1048576\\]"):
        Session(g).run(y, {"x:0": view})


def test_transpose_of_a_fed_broadcast_view_refuses_a_huge_output():
    g = Graph()
    x = g.add_operation("x", "Placeholder", [], {"dtype": np.dtype(np.float32), "shape": None}).output(0)
    p = g.add_operation("p", "Placeholder", [], {"dtype": np.dtype(np.int32), "shape": None}).output(0)
    y = g.add_operation("y", "Transpose", [x, p], {}).output(0)
    with pytest.raises(ResourceExhaustedError):
        Session(g).run(y, {x: np.broadcast_to(np.float32(1), HUGE), p: np.array([1, 0], np.int32)})


def test_identity_of_a_broadcast_view_allocates_nothing():
    g, y = _graph("Identity")
    view = np.broadcast_to(np.float32(2), HUGE)
    got = Session(g).run(y, {"x:0": view})
    assert got.shape == HUGE and got.strides == (0, 0)


def test_a_byte_swapped_broadcast_feed_is_refused_before_its_native_copy():
    g, y = _graph("Identity")
    view = np.broadcast_to(np.array(1, ">f4"), HUGE)
    with pytest.raises(ResourceExhaustedError, match="the feed for x:0"):
        Session(g).run(y, {"x:0": view})
