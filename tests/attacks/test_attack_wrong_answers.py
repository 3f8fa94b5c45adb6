"""Class 6, silent wrong answers: what would compute garbage quietly (mismatched AddN shapes, literals
and attrs out of their type's range) is refused instead, on every surface."""

from __future__ import annotations

import numpy as np

from bindings_mirror import cc, java
from fbnops import raw_ops
from fbnops.framework.graph import Graph
from fbnops.framework.scope import Scope
from fbnops.framework.session import Session

from .helpers import F, const_node, doc_with, pbtxt, raw_grad, run_doc
from .runner import INVALID_ARGUMENT, JAVA_ILLEGAL_ARGUMENT, RUN_FILE_ERROR, attack


@attack(6, "AddN of [2,3] and [3,3] at run time", raises=INVALID_ARGUMENT)
def test_add_n_of_mismatched_shapes_at_run_time():
    g = Graph()
    p = g.add_operation("p", "Placeholder", [], {"dtype": np.dtype(F), "shape": None}).output(0)
    q = g.add_operation("q", "Placeholder", [], {"dtype": np.dtype(F), "shape": None}).output(0)
    y = g.add_operation("y", "AddN", [p, q], {}).output(0)
    Session(g).run(y, {p: np.ones((2, 3), F), q: np.ones((3, 3), F)})


@attack(6, "AddN of [1,3] and [3] in a graph", raises=INVALID_ARGUMENT)
def test_add_n_of_mismatched_ranks_in_a_graph():
    g = Graph()
    p = g.add_operation("p", "Placeholder", [], {"dtype": np.dtype(F), "shape": (1, 3)}).output(0)
    q = g.add_operation("q", "Placeholder", [], {"dtype": np.dtype(F), "shape": (3,)}).output(0)
    g.add_operation("y", "AddN", [p, q], {})


@attack(6, "GraphDef literal 1e40 into float32", raises=INVALID_ARGUMENT)
def test_graphdef_literal_1e40_into_float32():
    pbtxt(const_node("dtype: DT_FLOAT float_val: 1e40"))


@attack(6, "GraphDef literal 2^40 into int32", raises=INVALID_ARGUMENT)
def test_graphdef_literal_2_40_into_int32():
    pbtxt(const_node("dtype: DT_INT32 int_val: 1099511627776", "DT_INT32"))


@attack(6, "GraphDef attr epsilon 1e40", raises=INVALID_ARGUMENT)
def test_graphdef_attr_epsilon_1e40():
    s = Scope(Graph())
    x = s.placeholder(F, (2, 2, 2, 3), name="x")
    v = s.constant(np.ones(3, F), name="v")
    s.add_op("FusedBatchNormV3", [x, v, v, v, v], {"epsilon": 0.001})
    pbtxt(s.graph.to_pbtxt().replace("f: 0.001", "f: 1e40"))


@attack(6, "run file literal 1e40 into float32", raises=RUN_FILE_ERROR)
def test_run_file_literal_1e40_into_float32():
    run_doc(doc_with(["ops", 0, "inputs", "scale"], {"value": [1e40, 1, 1]}))


@attack(6, "raw_ops epsilon 1e40", raises=INVALID_ARGUMENT)
def test_raw_ops_epsilon_1e40():
    raw_grad(epsilon=1e40)


def _forward(**attrs):
    ones = np.ones(3, F)
    raw_ops.FusedBatchNormV3(x=np.ones((2, 2, 2, 3), F), scale=ones, offset=ones, mean=ones, variance=ones, **attrs)


@attack(6, "raw_ops epsilon -1e40 (forward)", raises=INVALID_ARGUMENT)
def test_raw_ops_forward_epsilon_minus_1e40():
    _forward(epsilon=-1e40)


@attack(6, "raw_ops exponential_avg_factor 1e300", raises=INVALID_ARGUMENT)
def test_raw_ops_exponential_avg_factor_1e300():
    _forward(exponential_avg_factor=1e300)


@attack(6, "C++ mirror Attrs.Epsilon(1e40)", expect="ok")
def test_cc_mirror_epsilon_1e40():
    root = cc.Scope.NewRootScope()
    x = np.ones((2, 2, 2, 3), F)
    v = np.ones(3, F)
    cc.ops.FusedBatchNormGradV3(root, x, x, v, v, v, v, cc.ops.FusedBatchNormGradV3.Attrs().Epsilon(1e40))
    assert not root.ok(), "accepted"
    return root.status().ToString()


@attack(6, "Java mirror epsilon(1e40)", raises=JAVA_ILLEGAL_ARGUMENT)
def test_java_mirror_epsilon_1e40():
    g = java.Graph()
    s = g.baseScope()

    def const(name, value):
        return java.Constant.create(s.withName(name), value)

    x = np.ones((2, 2, 2, 3), F)
    v = np.ones(3, F)
    java.FusedBatchNormGradV3.create(s, const("dy", x), const("x", x), const("s", v), const("m", v), const("v", v),
                                     const("r", v), java.FusedBatchNormGradV3.epsilon(1e40))  # fmt: skip
