"""Class 8 of issue 15 on the graph paths: on any error the caller's arrays and graph are unchanged,
and a graph's constants cannot be corrupted through fetched values."""

from __future__ import annotations

import numpy as np
import pytest

from fbnops.errors import OpError
from fbnops.framework.graph import Graph
from fbnops.framework.scope import Scope
from fbnops.framework.session import Session

F = np.float32


def test_failed_runs_leave_the_fed_arrays_unchanged():
    s = Scope(Graph())
    p = s.placeholder(F, None, name="p")
    q = s.placeholder(F, None, name="q")
    total = s.add_op("AddN", [p, q], {}).output(0)
    a = np.arange(6, dtype=F).reshape(2, 3)
    b = np.arange(9, dtype=F).reshape(3, 3)
    before = (a.copy(), b.copy())
    with pytest.raises(OpError):
        Session(s.graph).run(total, {p: a, q: b})
    np.testing.assert_array_equal(a, before[0])
    np.testing.assert_array_equal(b, before[1])
    got = Session(s.graph).run(total, {p: a, q: a})  # a success does not write into the feeds either
    np.testing.assert_array_equal(a, before[0])
    assert not np.shares_memory(got, a)


def test_fetched_constants_cannot_corrupt_the_graph():
    s = Scope(Graph())
    c = s.constant(np.array([1.0, 2.0], F), name="c")
    sess = Session(s.graph)
    got = sess.run(c)
    with pytest.raises(ValueError):
        got[0] = 99  # read-only: the graph's own buffer
    np.testing.assert_array_equal(sess.run(c), [1.0, 2.0])


def test_the_constant_is_a_copy_of_the_callers_array():
    value = np.array([1.0, 2.0], F)
    s = Scope(Graph())
    c = s.constant(value, name="c")
    value[0] = 42  # the caller keeps using its array
    np.testing.assert_array_equal(Session(s.graph).run(c), [1.0, 2.0])


def test_an_import_that_fails_late_leaves_a_non_empty_graph_as_it_was():
    g = Graph.from_pbtxt('node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }')
    before = g.to_pbtxt()
    from fbnops.framework.graphdef import graph_from_pbtxt

    text = (
        'node { name: "a" op: "Identity" input: "b" }\n'
        'node { name: "b" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }\n'
        'node { name: "c" op: "Transpose" input: "a" input: "b" }\n'  # builds after a and b: then fails
    )
    with pytest.raises(OpError):
        graph_from_pbtxt(text, g)
    assert g.to_pbtxt() == before
