"""Class 5 of issue 15: malformed GraphDef text gives ONE typed error naming file:line:column and the
field.  That graph traversal is iterative (a 100,000-op chain imports, runs and differentiates) is attack 5
in tests/attacks/test_attack_malformed_files.py, run in a child process with a time limit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from fbnops.errors import InvalidArgumentError, NotFoundError, OpError, ResourceExhaustedError
from fbnops.framework.graph import Graph
from fbnops.framework.graphdef import graph_from_pbtxt
from fbnops.framework.session import Session
from fbnops.testing import strategies

P = 'node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }\n'


def _const(tensor: str, dtype: str = "DT_FLOAT") -> str:
    return (
        f'node {{ name: "c" op: "Const" attr {{ key: "dtype" value {{ type: {dtype} }} }}\n'
        f'  attr {{ key: "value" value {{ tensor {{ {tensor} }} }} }} }}\n'
    )


# (text, error type, the location "line:col", words the message must contain)
MALFORMED = {
    "unknown field": ('node { name: "a" op: "Identity" colour: "red" }', InvalidArgumentError, "1:33", ["colour"]),
    "field given twice": ('node { name: "a" name: "b" op: "Identity" }', InvalidArgumentError, "1:18", ['"name"']),
    "wrong type (int for string)": ("node { name: 3 }", InvalidArgumentError, "1:14", ["'name'", "string"]),
    "wrong type (scalar for message)": ("node: 3", InvalidArgumentError, "1:1", ["'node'", "message"]),
    "missing name": ('node { op: "Identity" }', InvalidArgumentError, "1:1", ["'name'"]),
    "missing op": ('node { name: "a" }', InvalidArgumentError, "1:1", ["'op'"]),
    "duplicate node names": (P + P, InvalidArgumentError, "2:1", ["Duplicate node name", "'x'"]),
    "cycle": (
        'node { name: "a" op: "Identity" input: "b" }\nnode { name: "b" op: "Identity" input: "a" }',
        InvalidArgumentError,
        ":1:",
        ["cycle", "a -> b -> a"],
    ),
    "self loop": ('node { name: "a" op: "Identity" input: "a" }', InvalidArgumentError, "1:1", ["cycle"]),
    "unknown op": ('node { name: "a" op: "Conv2D" }', NotFoundError, "1:18", ["Op type not registered 'Conv2D'"]),
    "unknown input node": (
        'node { name: "a" op: "Identity" input: "missing" }',
        InvalidArgumentError,
        "1:33",
        ["unknown node", "'missing'"],
    ),
    "bad tensor name": (P + 'node { name: "a" op: "Identity" input: "x:y" }', InvalidArgumentError, "2:33", ["'x:y'"]),
    "control input with index": (
        P + 'node { name: "a" op: "Identity" input: "^x:1" }',
        InvalidArgumentError,
        "2:33",
        ["'^x:1'"],
    ),
    "output index out of range": (
        P + 'node { name: "a" op: "Identity" input: "x:7" }',
        InvalidArgumentError,
        "2:33",
        ["invalid output 7", "which has 1 outputs"],
    ),
    "unknown attr": (
        'node { name: "x" op: "Placeholder" attr { key: "colour" value { s: "red" } } }',
        InvalidArgumentError,
        "1:43",
        ["attr 'colour'", "Op<name=Placeholder>"],
    ),
    "attr of the wrong kind": (
        'node { name: "x" op: "Placeholder" attr { key: "dtype" value { s: "float" } } }',
        InvalidArgumentError,
        "1:64",
        ["attr 'dtype'", "type"],
    ),
    "missing attr": ('node { name: "x" op: "Placeholder" }', InvalidArgumentError, "1:1", ["attr 'dtype'"]),
    "unknown dtype": (
        'node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FOO } } }',
        InvalidArgumentError,
        "1:70",
        ["DT_FOO"],
    ),
    "truncated text (brace)": ('node { name: "a" op: "Identity"', InvalidArgumentError, "1:6", ["truncated", "'{'"]),
    "truncated text (string)": ('node { name: "a', InvalidArgumentError, "1:14", ["truncated", "string"]),
    "truncated text (value)": ("node { name:", InvalidArgumentError, "1:13", ["truncated", "'name'"]),
    "bad escape": ('node { name: "a\\q" }', InvalidArgumentError, "1:16", ["bad escape \\q"]),
    "bad octal escape": ('node { name: "a\\777" }', InvalidArgumentError, "1:16", ["\\777"]),
    "empty hex escape": ('node { name: "a\\xz" }', InvalidArgumentError, "1:16", ["\\x"]),
    "newline in a string": ('node { name: "a\n" }', InvalidArgumentError, "1:14", ["string"]),
    "stray character": ('node { name: "a" } @', InvalidArgumentError, "1:20", ["'@'"]),
    "deep nesting": ("a " + "{ a " * 5000 + "}" * 5000, InvalidArgumentError, "1:", ["nested deeper than 100"]),
    "float literal out of range": (
        _const("dtype: DT_FLOAT tensor_shape { dim { size: 2 } } float_val: 1e40"),
        InvalidArgumentError,
        "2:",
        ["float_val", "1e40", "does not fit in a float"],
    ),
    "int32 literal out of range": (
        _const("dtype: DT_INT32 int_val: 1099511627776", "DT_INT32"),
        InvalidArgumentError,
        "2:",
        ["int_val", "out of range for int32"],
    ),
    "attr float out of range": (
        'node { name: "x" op: "Placeholder" attr { key: "dtype" value { f: -3.5e38 } } }',
        InvalidArgumentError,
        "1:",
        ["'f'", "does not fit in a float"],
    ),
    "too many values": (
        _const("dtype: DT_FLOAT tensor_shape { dim { size: 2 } } float_val: [1, 2, 3]"),
        InvalidArgumentError,
        "2:",
        ["3 values", "2 elements"],
    ),
    "values in the wrong field": (
        _const("dtype: DT_FLOAT int_val: 1"),
        InvalidArgumentError,
        "2:",
        ["'int_val'", "DT_FLOAT"],
    ),
    "tensor_content of the wrong size": (
        _const('dtype: DT_FLOAT tensor_shape { dim { size: 2 } } tensor_content: "abc"'),
        InvalidArgumentError,
        "2:",
        ["tensor_content", "3 bytes", "needs 8"],
    ),
    "negative tensor dimension": (
        _const("dtype: DT_FLOAT tensor_shape { dim { size: -1 } }"),
        InvalidArgumentError,
        "2:",
        ["fully known shape"],
    ),
    "huge Const with a short float_val": (
        _const("dtype: DT_FLOAT tensor_shape { dim { size: 1000000000 } dim { size: 1000000000 } } float_val: 1"),
        ResourceExhaustedError,
        "",
        ["OOM when allocating", "[1000000000,1000000000]"],
    ),
    "Const dims overflowing int64": (
        _const("dtype: DT_FLOAT tensor_shape { " + "dim { size: 9223372036854775807 } " * 3 + "}"),
        ResourceExhaustedError,
        "",
        ["OOM when allocating"],
    ),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_graphdef_gives_one_located_typed_error(name):
    text, error, where, words = MALFORMED[name]
    with pytest.raises(error) as info:
        graph_from_pbtxt(text, Graph(), source="model.pbtxt")
    message = str(info.value)
    if where:
        assert message.startswith("model.pbtxt:") and where in message.split(" ")[0], message
    for w in words:
        assert w in message, (w, message)


def test_file_name_defaults_to_a_placeholder_and_errors_are_op_errors():
    with pytest.raises(OpError, match=r"^<pbtxt>:1:1: "):
        Graph.from_pbtxt("node: 3")


def test_a_failed_import_leaves_the_graph_untouched():
    g = Graph()
    graph_from_pbtxt(P, g)
    bad = P.replace('"x"', '"y"') + 'node { name: "z" op: "AddN" input: "y" input: "nope" }'
    with pytest.raises(InvalidArgumentError):
        graph_from_pbtxt(bad, g)
    late = P.replace('"x"', '"y"') + 'node { name: "z" op: "Transpose" input: "y" input: "y" }'
    with pytest.raises(OpError):  # fails while building (perm must be int), after 'y' was valid
        graph_from_pbtxt(late, g)
    assert [op.name for op in g.operations()] == ["x"]


def test_short_float_val_repeats_the_last_value_as_tensorflow_does():
    g = Graph.from_pbtxt(_const("dtype: DT_FLOAT tensor_shape { dim { size: 4 } } float_val: [1.5, 2]"))
    np.testing.assert_array_equal(Session(g).run("c:0"), np.array([1.5, 2, 2, 2], np.float32))
    g = Graph.from_pbtxt(_const("dtype: DT_FLOAT tensor_shape { dim { size: 3 } }"))
    np.testing.assert_array_equal(Session(g).run("c:0"), np.zeros(3, np.float32))


def test_literals_at_the_edge_of_their_type_are_exact():
    g = Graph.from_pbtxt(
        _const(
            "dtype: DT_INT32 tensor_shape { dim { size: 4 } } int_val: [-2147483648, 2147483647, 0x10, 010]", "DT_INT32"
        )
    )
    np.testing.assert_array_equal(Session(g).run("c:0"), [-(2**31), 2**31 - 1, 16, 8])
    g = Graph.from_pbtxt(
        _const("dtype: DT_FLOAT tensor_shape { dim { size: 4 } } float_val: [3.4028234e38, -inf, nan, 1.5f]")
    )
    got = Session(g).run("c:0")
    assert got[0] == np.finfo(np.float32).max and got[1] == -np.inf and np.isnan(got[2]) and got[3] == 1.5


@settings(max_examples=150, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(text=strategies.mutated_pbtxt())
def test_mutated_graphdef_text_imports_or_raises_one_typed_error(text):
    try:
        Graph.from_pbtxt(text)
    except OpError as e:
        assert str(e).startswith("<pbtxt>:"), str(e)


@settings(max_examples=30, deadline=None, database=None, derandomize=True)
@given(text=strategies.pbtxt_graphs())
def test_generated_graphs_round_trip(text):
    g = Graph.from_pbtxt(text)
    assert Graph.from_pbtxt(g.to_pbtxt()).to_pbtxt() == g.to_pbtxt()
    last = g.operations()[-1].name
    got = Session(g).run(f"{last}:0", {"x:0": np.ones(3, np.float32)})
    assert got.shape == (3,) and np.all(got >= 1)


@settings(max_examples=60, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(doc=strategies.run_file_documents(as_text=True))
def test_hostile_run_files_end_in_results_or_one_typed_error(doc, tmp_path_factory):
    """The run-file reader (fbnops.tools.runfile) under the file-format strategy: never an untyped error."""
    from fbnops.tools import runfile

    path = tmp_path_factory.mktemp("run") / "run.json"
    path.write_text(doc)
    try:
        runfile.run_file(path)
    except (runfile.RunFileError, OpError) as e:
        assert str(e)
