"""The attacks of classes 5-8 of issue 15: malformed files, silent wrong answers, typed errors, nothing lost."""

# ruff: noqa: E501  (a table of attack source code)
from __future__ import annotations

from ._attack_base import DNNL_ERROR as DNNL
from ._attack_base import INVALID_ARGUMENT as INVALID
from ._attack_base import JAVA_ILLEGAL_ARGUMENT, NOT_FOUND, RUN_FILE_ERROR, RUN_FILE_TOO_BIG, Attack
from ._attack_base import attack as _a

_BAD_PBTXT = {
    "unknown field": 'node { name: "a" op: "Identity" colour: 1 }',
    "duplicate names": 'node { name: "a" op: "NoOp" } node { name: "a" op: "NoOp" }',
    "cycle": 'node { name: "a" op: "Identity" input: "b" } node { name: "b" op: "Identity" input: "a" }',
    "unknown op": 'node { name: "a" op: "Conv2D" }',
    "bad tensor name": 'node { name: "a" op: "Identity" input: "b:x" }',
    "wrong type": "node { name: 3 }",
    "truncated": 'node { name: "a',
    "deep nesting": "a " + "{ a " * 100_000 + "}" * 100_000,
    "bad escape": 'node { name: "\\q" }',
    "missing op": 'node { name: "a" }',
}
_BAD_RUN_DOCS = {
    "wrong type (ops)": '{"ops": 3, "fetch": ["bn.y"]}',
    "missing field (fetch)": "doc_with(['fetch'], KeyError)",
    "unknown field": "doc_with(['colour'], 1)",
    "unknown op": "doc_with(['ops', 0, 'op'], 'Conv2D')",
    "bad fetch name": "doc_with(['fetch'], ['bn:x:1'])",
    "fetch of a missing output": "doc_with(['fetch'], ['bn.nope'])",
    "duplicate op names": "dict(GOOD_DOC, ops=GOOD_DOC['ops'] * 2)",
    "truncated JSON": '\'{"ops": [{"name": "bn", "op": "FusedBatch\'',
    "deeply nested JSON": "'[' * 100000 + ']' * 100000",
    "huge-shape literal": "doc_with(['ops', 0, 'inputs', 'x'], {'random': {'shape': [1 << 30, 1 << 30, 2, 3]}})",
    "1e40 into a float32 literal": "doc_with(['ops', 0, 'inputs', 'scale'], {'value': [1e40, 1, 1]})",
    "negative shape": "doc_with(['ops', 0, 'inputs', 'x'], {'random': {'shape': [-2, 2, 2, 3]}})",
}

OUTPUT_ATTACKS: list[Attack] = [
    # 5 -------------------------------------------------------------- malformed files
    *[
        _a(5, f"GraphDef pbtxt: {k}", f"pbtxt({v!r})", raises=NOT_FOUND if k == "unknown op" else INVALID)
        for k, v in _BAD_PBTXT.items()
        if "nesting" not in k
    ],
    _a(5, "GraphDef pbtxt: deep nesting", "pbtxt('a ' + '{ a ' * 100000 + '}' * 100000)", raises=INVALID),
    *[
        _a(5, f"run file: {k}", f"run_doc({v})", raises=RUN_FILE_TOO_BIG if "huge" in k else RUN_FILE_ERROR)
        for k, v in _BAD_RUN_DOCS.items()
        if k not in ("1e40 into a float32 literal",)
    ],
    _a(5, "run file (YAML): deep nesting", "run_doc('a: ' + '[' * 100000 + ']' * 100000, '.yaml')",
       raises=RUN_FILE_ERROR),
    _a(
        5,
        "chain of 100,000 ops: import, run, differentiate",
        """
import fbnops
from fbnops.framework.graph import Graph
from fbnops.framework.session import Session
g = Graph()
t = g.add_operation("x", "Placeholder", [], {"dtype": np.dtype(F), "shape": (2,)}).output(0)
for i in range(100000):
    t = g.add_operation(f"n{i}", "Identity", [t], {}).output(0)
g2 = Graph.from_pbtxt(g.to_pbtxt())
feed = {"x:0": np.array([1.5, -2], F)}
assert np.array_equal(Session(g2).run("n99999:0", feed), feed["x:0"])
(dx,) = fbnops.gradients(g2.get_output("n99999:0"), [g2.get_output("x:0")])
assert np.array_equal(Session(g2).run(dx, feed), np.ones(2, F))
result = "ok"
""",
        "ok",
        600,
    ),
    # 6 -------------------------------------------------------------- silent wrong answers
    _a(
        6,
        "AddN of [2,3] and [3,3] at run time",
        """
from fbnops.framework.graph import Graph
from fbnops.framework.session import Session
g = Graph()
p = g.add_operation("p", "Placeholder", [], {"dtype": np.dtype(F), "shape": None}).output(0)
q = g.add_operation("q", "Placeholder", [], {"dtype": np.dtype(F), "shape": None}).output(0)
y = g.add_operation("y", "AddN", [p, q], {}).output(0)
Session(g).run(y, {p: np.ones((2, 3), F), q: np.ones((3, 3), F)})
""",
        raises=INVALID,
    ),
    _a(
        6,
        "AddN of [1,3] and [3] in a graph",
        """
from fbnops.framework.graph import Graph
g = Graph()
p = g.add_operation("p", "Placeholder", [], {"dtype": np.dtype(F), "shape": (1, 3)}).output(0)
q = g.add_operation("q", "Placeholder", [], {"dtype": np.dtype(F), "shape": (3,)}).output(0)
g.add_operation("y", "AddN", [p, q], {})
""",
        raises=INVALID,
    ),
    _a(6, "GraphDef literal 1e40 into float32", "pbtxt(const_node('dtype: DT_FLOAT float_val: 1e40'))", raises=INVALID),
    _a(
        6,
        "GraphDef literal 2^40 into int32",
        "pbtxt(const_node('dtype: DT_INT32 int_val: 1099511627776', 'DT_INT32'))",
        raises=INVALID,
    ),
    _a(
        6,
        "GraphDef attr epsilon 1e40",
        """
import fbnops
from fbnops.framework.graph import Graph
from fbnops.framework.scope import Scope
s = Scope(Graph())
x = s.placeholder(F, (2, 2, 2, 3), name="x")
v = s.constant(np.ones(3, F), name="v")
s.add_op("FusedBatchNormV3", [x, v, v, v, v], {"epsilon": 0.001})
pbtxt(s.graph.to_pbtxt().replace("f: 0.001", "f: 1e40"))
""",
        raises=INVALID,
    ),
    _a(6, "run file literal 1e40 into float32", f"run_doc({_BAD_RUN_DOCS['1e40 into a float32 literal']})",
       raises=RUN_FILE_ERROR),
    _a(6, "raw_ops epsilon 1e40", "raw_grad(epsilon=1e40)", raises=INVALID),
    _a(
        6,
        "raw_ops epsilon -1e40 (forward)",
        """
import fbnops
fbnops.raw_ops.FusedBatchNormV3(x=np.ones((2, 2, 2, 3), F), scale=np.ones(3, F), offset=np.ones(3, F),
                                mean=np.ones(3, F), variance=np.ones(3, F), epsilon=-1e40)
""",
        raises=INVALID,
    ),
    _a(
        6,
        "raw_ops exponential_avg_factor 1e300",
        """
import fbnops
fbnops.raw_ops.FusedBatchNormV3(x=np.ones((2, 2, 2, 3), F), scale=np.ones(3, F), offset=np.ones(3, F),
                                mean=np.ones(3, F), variance=np.ones(3, F), exponential_avg_factor=1e300)
""",
        raises=INVALID,
    ),
    _a(
        6,
        "C++ mirror Attrs.Epsilon(1e40)",
        """
from bindings_mirror import cc
root = cc.Scope.NewRootScope()
x = np.ones((2, 2, 2, 3), F); v = np.ones(3, F)
op = cc.ops.FusedBatchNormGradV3(root, x, x, v, v, v, v, cc.ops.FusedBatchNormGradV3.Attrs().Epsilon(1e40))
assert not root.ok(), "accepted"
result = root.status().ToString()
""",
        "ok",
    ),
    _a(
        6,
        "Java mirror epsilon(1e40)",
        """
from bindings_mirror import java
g = java.Graph(); s = g.baseScope()
c = lambda n, a: java.Constant.create(s.withName(n), a)
x = np.ones((2, 2, 2, 3), F); v = np.ones(3, F)
java.FusedBatchNormGradV3.create(s, c("dy", x), c("x", x), c("s", v), c("m", v), c("v", v), c("r", v),
                                 java.FusedBatchNormGradV3.epsilon(1e40))
""",
        raises=JAVA_ILLEGAL_ARGUMENT,
    ),
    # 7 -------------------------------------------------------------- typed errors
    _a(
        7,
        "Session.run('bn:9')",
        """
from fbnops.framework.graph import Graph
from fbnops.framework.session import Session
g = Graph()
x = g.add_operation("x", "Placeholder", [], {"dtype": np.dtype(F), "shape": (2,)}).output(0)
g.add_operation("bn", "Identity", [x], {})
Session(g).run("bn:9")
""",
        raises=INVALID,
    ),
    _a(
        7,
        "Session.run(3)",
        "from fbnops.framework.graph import Graph\nfrom fbnops.framework.session import Session\n"
        "Session(Graph()).run(3)",
        raises=INVALID,
    ),
    _a(
        7,
        "C++ mirror: a string where a tensor goes (a Status, no exception)",
        """
from bindings_mirror import cc
root = cc.Scope.NewRootScope()
v = np.ones(3, F)
cc.ops.FusedBatchNormGradV3(root, "x", np.ones((2, 2, 2, 3), F), v, v, v, v)
assert not root.ok()
result = root.status().ToString()
""",
        "ok",
    ),
    _a(
        7,
        "C++ mirror: a rank-3 x (a Status, no exception)",
        """
from bindings_mirror import cc
root = cc.Scope.NewRootScope()
v = np.ones(3, F); x = np.ones((2, 2, 3), F)
cc.ops.FusedBatchNormGradV3(root, x, x, v, v, v, v)
assert not root.ok()
result = root.status().ToString()
""",
        "ok",
    ),
    _a(
        7,
        "Java mirror: None as an operand",
        """
from bindings_mirror import java
g = java.Graph(); s = g.baseScope()
v = java.Constant.create(s.withName("v"), np.ones(3, F))
java.FusedBatchNormGradV3.create(s, None, None, v, v, v, v)
""",
        raises=JAVA_ILLEGAL_ARGUMENT,
    ),
    _a(
        7,
        "zero sizes in every layout and backend (no SIGFPE)",
        """
import fbnops
for shape, fmt in [((0, 2, 2, 3), "NHWC"), ((2, 0, 2, 2), "NCHW"), ((0, 0, 0, 0), "NHWC"), ((1, 3, 0, 0, 0), "NCDHW")]:
    c = shape[1] if fmt.startswith("NC") else shape[-1]
    for b in fbnops.available_backends():
        with fbnops.backend(b):
            raw_grad(**grad_inputs(shape, fmt))
result = "ok"
""",
        "ok",
    ),
    *[
        _a(7, f"kernel plan helper ({where}) with zero sizes {args}", f"result = {call}(*{args!r})", "either",
           raises=INVALID)
        for where, call in (
            ("Python", "__import__('fbnops.kernels._plan', fromlist=['plan']).plan"),
            ("Cython", "__import__('fbnops.kernels._cython._tools', fromlist=['plan']).plan"),
        )
        for args in ((0, 0, 0, 4), (1, 3, 0, 4))
    ],
    _a(
        7,
        "oneDNN output into a read-only array",
        """
out = np.full(24, -7.0, F); out.flags.writeable = False
dnnl_grad(out_buf=out)
""",
        raises=DNNL,
    ),
    _a(
        7,
        "oneDNN two outputs in one array",
        """
stat = np.empty(3, F)
dnnl_grad(stats_out=(stat, stat))
""",
        raises=DNNL,
    ),
    _a(
        7,
        "oneDNN output aliasing its input (refused, or the same numbers)",
        """
x = np.random.default_rng(1).standard_normal(24).astype(F)
want = dnnl_grad(src_buf=x.copy(), out_buf=np.empty(24, F))
buf = x.copy()
got = dnnl_grad(src_buf=buf, out_buf=buf)
assert np.array_equal(got, want)
result = "same numbers"
""",
        "either",
        raises=DNNL,
    ),
    _a(
        7,
        "raw_ops with a DLPack object that raises",
        """
class Bad:
    def __dlpack__(self, *a, **k): raise RuntimeError("boom")
    def __dlpack_device__(self): return (1, 0)
raw_grad(x=Bad())
""",
        raises=INVALID,
    ),
    # 8 -------------------------------------------------------------- nothing lost
    _a(
        8,
        "raw_ops error leaves the inputs unchanged",
        """
from fbnops.errors import InvalidArgumentError
kw = grad_inputs()
before = {k: v.copy() for k, v in kw.items() if isinstance(v, np.ndarray)}
try:
    raw_grad(**dict(kw, scale=np.ones(5, F)))  # 5 scales for 3 channels
except InvalidArgumentError:
    pass
else:
    raise AssertionError("accepted a scale of 5 values for 3 channels")
assert all(np.array_equal(before[k], kw[k]) for k in before)
result = "refused, inputs unchanged"
""",
        "ok",
    ),
    _a(
        8,
        "failed GraphDef import leaves the graph untouched",
        """
from fbnops.framework.graph import Graph
from fbnops.framework.graphdef import graph_from_pbtxt
g = Graph.from_pbtxt('node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }')
from fbnops.errors import OpError
before = g.to_pbtxt()
try:  # a valid first node, then a Transpose of a float by a float permutation
    graph_from_pbtxt('node { name: "y" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }'
                     'node { name: "z" op: "Transpose" input: "y" input: "y" }', g)
except OpError:
    pass
else:
    raise AssertionError("imported a Transpose whose permutation is a float")
assert g.to_pbtxt() == before
result = "refused, graph unchanged"
""",
        "ok",
    ),
    _a(
        8,
        "failed run leaves the previous output file intact",
        """
from fbnops.cli import main
out = TMP / "out.npz"
(TMP / "good.json").write_text(json.dumps(GOOD_DOC))
assert main(["run", str(TMP / "good.json"), "--out", str(out)]) == 0
before = out.read_bytes()
(TMP / "bad.json").write_text(json.dumps(doc_with(["ops", 0, "inputs", "scale"], {"value": [1, 1]})))
assert main(["run", str(TMP / "bad.json"), "--out", str(out)]) != 0
assert out.read_bytes() == before and sorted(p.name for p in TMP.iterdir()) == ["bad.json", "good.json", "out.npz"]
result = "intact"
""",
        "ok",
    ),
    _a(
        8,
        "interrupted run (SIGKILL while writing) leaves the previous output intact",
        """
import subprocess, signal, time
out = TMP / "out.npz"
(TMP / "good.json").write_text(json.dumps(GOOD_DOC))
big = doc_with(["ops", 0, "inputs", "x"], {"random": {"shape": [64, 64, 64, 3], "seed": 0}})
(TMP / "big.json").write_text(json.dumps(big))
cli = [sys.executable, "-m", "fbnops.cli", "run"]
assert subprocess.run(cli + [str(TMP / "good.json"), "--out", str(out)]).returncode == 0
before = out.read_bytes()
for delay in (0.3, 0.6, 0.9, 1.2):
    p = subprocess.Popen(cli + [str(TMP / "big.json"), "--out", str(out)])
    time.sleep(delay)
    p.send_signal(signal.SIGKILL); p.wait()
    now = out.read_bytes()
    if now != before:  # a new, complete file
        assert [a.shape for a in np.load(out).values()] == [(64, 64, 64, 3)]
    before = now
result = "intact"
""",
        "ok",
        120,
    ),
    _a(
        8,
        "DirectML refused dispatch writes no output",
        """
from bindings_mirror import directml as dml
written = []
dml_grad(bound=written)  # the same call with a valid binding: the guard check sees its writes
assert not any(unwritten(b) for b in written), "an accepted dispatch left an output unwritten"
outs = []
try:
    dml_grad(offset=-16, bound=outs)
except dml.HRESULTError:
    pass
else:
    raise AssertionError("accepted a negative offset")
assert len(outs) == 3 and all(unwritten(b) for b in outs), "a refused dispatch wrote into an output"
result = "refused, outputs untouched"
""",
        "ok",
    ),
]
