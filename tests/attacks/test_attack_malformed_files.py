"""Class 5, malformed files: broken GraphDef text and run files (JSON, YAML) are refused with a typed
error naming what is wrong; a 100,000-op chain imports, runs and differentiates."""

from __future__ import annotations

import numpy as np

from fbnops.framework.gradients import gradients
from fbnops.framework.graph import Graph
from fbnops.framework.session import Session

from .helpers import GOOD_DOC, F, doc_with, pbtxt, run_doc
from .runner import INVALID_ARGUMENT, NOT_FOUND, RUN_FILE_ERROR, RUN_FILE_TOO_BIG, Variant, attack

BAD_PBTXT = {
    "unknown field": 'node { name: "a" op: "Identity" colour: 1 }',
    "duplicate names": 'node { name: "a" op: "NoOp" } node { name: "a" op: "NoOp" }',
    "cycle": 'node { name: "a" op: "Identity" input: "b" } node { name: "b" op: "Identity" input: "a" }',
    "unknown op": 'node { name: "a" op: "Conv2D" }',
    "bad tensor name": 'node { name: "a" op: "Identity" input: "b:x" }',
    "wrong type": "node { name: 3 }",
    "truncated": 'node { name: "a',
    "bad escape": 'node { name: "\\q" }',
    "missing op": 'node { name: "a" }',
}
BAD_RUN_DOCS = {
    "wrong type (ops)": '{"ops": 3, "fetch": ["bn.y"]}',
    "missing field (fetch)": doc_with(["fetch"], KeyError),
    "unknown field": doc_with(["colour"], 1),
    "unknown op": doc_with(["ops", 0, "op"], "Conv2D"),
    "bad fetch name": doc_with(["fetch"], ["bn:x:1"]),
    "fetch of a missing output": doc_with(["fetch"], ["bn.nope"]),
    "duplicate op names": dict(GOOD_DOC, ops=GOOD_DOC["ops"] * 2),
    "truncated JSON": '{"ops": [{"name": "bn", "op": "FusedBatch',
    "deeply nested JSON": "[" * 100000 + "]" * 100000,
    "huge-shape literal": doc_with(["ops", 0, "inputs", "x"], {"random": {"shape": [1 << 30, 1 << 30, 2, 3]}}),
    "negative shape": doc_with(["ops", 0, "inputs", "x"], {"random": {"shape": [-2, 2, 2, 3]}}),
}


@attack(
    5,
    "GraphDef pbtxt: {label}",
    raises=INVALID_ARGUMENT,
    variants=[Variant(k, (v,), raises=NOT_FOUND if k == "unknown op" else "") for k, v in BAD_PBTXT.items()],
)
def test_graphdef_pbtxt(text: str):
    pbtxt(text)


@attack(5, "GraphDef pbtxt: deep nesting", raises=INVALID_ARGUMENT)
def test_graphdef_pbtxt_deep_nesting():
    pbtxt("a " + "{ a " * 100000 + "}" * 100000)


@attack(
    5,
    "run file: {label}",
    raises=RUN_FILE_ERROR,
    variants=[Variant(k, (v,), raises=RUN_FILE_TOO_BIG if "huge" in k else "") for k, v in BAD_RUN_DOCS.items()],
)
def test_run_file(doc):
    run_doc(doc)


@attack(5, "run file (YAML): deep nesting", raises=RUN_FILE_ERROR)
def test_run_file_yaml_deep_nesting():
    run_doc("a: " + "[" * 100000 + "]" * 100000, ".yaml")


@attack(5, "chain of 100,000 ops: import, run, differentiate", expect="ok", timeout=600)
def test_chain_of_100000_ops():
    g = Graph()
    t = g.add_operation("x", "Placeholder", [], {"dtype": np.dtype(F), "shape": (2,)}).output(0)
    for i in range(100000):
        t = g.add_operation(f"n{i}", "Identity", [t], {}).output(0)
    g2 = Graph.from_pbtxt(g.to_pbtxt())  # import (topological order), run (scheduling), gradients(): iterative
    assert len(g2) == 100001
    feed = {"x:0": np.array([1.5, -2], F)}
    assert np.array_equal(Session(g2).run("n99999:0", feed), feed["x:0"])
    (dx,) = gradients(g2.get_output("n99999:0"), [g2.get_output("x:0")])
    assert np.array_equal(Session(g2).run(dx, feed), np.ones(2, F))
    return "ok"
