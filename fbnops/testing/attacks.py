"""Hostile inputs, one per attack, in the eight classes of issue 15; each runs in its own process.

An :class:`Attack` is source code (run after :data:`PRELUDE`, which imports the helpers of
:mod:`.attack_helpers`) and what must happen:

* ``"error"``  - the input is hostile: the call must raise a *typed* error (an ``fbnops`` or
  ``bindings_mirror`` exception class: ``OpError``, ``RunFileError``, ``HRESULTError``, dnnl
  ``error``, tf-java exceptions);
* ``"ok"``     - the call must finish, and the code's own assertions check the numbers (an
  ``AssertionError`` is a wrong result);
* ``"either"`` - a typed error or a finish that passes the code's assertions (a documented clamp).

:func:`run_attack` classifies the outcome: ``pass``, ``crash``, ``hang``, ``untyped`` or ``wrong``.
"""

# ruff: noqa: E501  (a table of attack source code)
from __future__ import annotations

from dataclasses import dataclass

from .isolated import Outcome, run_isolated

__all__ = ["Attack", "ATTACKS", "CLASSES", "PRELUDE", "run_attack"]

CLASSES = {
    1: "memory safety of the mirrors",
    2: "fork",
    3: "memory guard",
    4: "thread counts",
    5: "malformed files",
    6: "silent wrong answers",
    7: "typed errors",
    8: "nothing lost",
}
TYPED = ("fbnops.", "bindings_mirror.")


@dataclass(frozen=True)
class Attack:
    cls: int
    name: str
    code: str
    expect: str = "error"  # "error" | "ok" | "either"
    timeout: float = 120.0
    env: tuple = ()  # (name, value) pairs set in the attack's process


PRELUDE = "from fbnops.testing.attack_helpers import *  # noqa: F403\n"


def _a(cls: int, name: str, code: str, expect: str = "error", timeout: float = 120.0, env: tuple = ()) -> Attack:
    return Attack(cls, name, code.strip(), expect, timeout, env)


_HUGE_BCAST = "np.broadcast_to(np.ones((1, 3, 2, 2), {dt}), (1 << 40, 3, 2, 2))"
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

ATTACKS: list[Attack] = [
    # 1 -------------------------------------------------------------- memory safety of the mirrors
    _a(1, "DirectML dense control", "dml_grad(); result = 'ok'", "ok"),
    _a(1, "DirectML negative input strides", "dml_grad(in_strides=[-12, -4, -2, -1])"),
    _a(1, "DirectML oversized input strides", "dml_grad(in_strides=[2**40, 4, 2, 1])"),
    _a(1, "DirectML strides past the buffer", "dml_grad(in_strides=[24, 4, 2, 1])"),
    _a(1, "DirectML overlapping output strides", "dml_grad(out_strides=[0, 0, 0, 0])"),
    _a(1, "DirectML negative binding offset", "dml_grad(offset=-16)"),
    _a(1, "DirectML oversized SizeInBytes", "dml_grad(size=2**40)"),
    _a(1, "DirectML offset past the resource", "dml_grad(offset=96, size=96, resource=128)"),
    _a(1, "DirectML TotalTensorSizeInBytes smaller than the strides", "dml_grad(total=16)"),
    _a(1, "oneDNN dense control", "dnnl_grad(); result = 'ok'", "ok"),
    _a(1, "oneDNN negative strides", "dnnl_grad(in_strides=[-12, -4, -2, -1])"),
    _a(1, "oneDNN oversized strides", "dnnl_grad(in_strides=[2**62, 4, 2, 1])"),
    _a(1, "oneDNN handle too small for the strides", "dnnl_grad(in_strides=[12, 4, 2, 1], in_elems=23)"),
    _a(1, "oneDNN overlapping output strides", "dnnl_grad(out_strides=[0, 1, 0, 0])"),
    _a(1, "oneDNN output handle too small", "dnnl_grad(out_elems=4)"),
    # 2 -------------------------------------------------------------- fork
    *[
        _a(2, f"kernel in a forked child after a parallel {b} kernel", f"result = fork_child_bits({b!r})", "ok", 60)
        for b in ("cython", "numba", "reference")
    ],
    _a(
        2,
        "multiprocessing fork workers after a parallel kernel",
        """
import multiprocessing as mp, fbnops
fbnops.set_num_threads(2)
want = bits(raw_grad(**grad_inputs((8, 16, 16, 32), "NHWC")))
ctx = mp.get_context("fork")
q = ctx.Queue()
procs = [ctx.Process(target=lambda: q.put(bits(raw_grad(**grad_inputs((8, 16, 16, 32), "NHWC"))) == want))
         for _ in range(3)]
for p in procs: p.start()
got = [q.get(timeout=60) for _ in procs]
for p in procs: p.join(60)
assert all(got) and all(p.exitcode == 0 for p in procs), (got, [p.exitcode for p in procs])
result = "same bits"
""",
        "ok",
        90,
    ),
    # 3 -------------------------------------------------------------- memory guard
    *[
        _a(
            3,
            f"broadcast 2^40-row {dt} x into the gradient",
            f"raw_grad(x={_HUGE_BCAST.format(dt=dt)}, y_backprop={_HUGE_BCAST.format(dt=dt)})",
        )
        for dt in ("F", "np.float16", "'>f4'")
    ],
    _a(
        3,
        "broadcast x of a 64-bit-overflowing shape",
        """
class Absurd:
    __array_interface__ = {"shape": (1 << 40, 1 << 40, 1 << 40, 3), "typestr": "<f4",
                           "data": (np.zeros(3, F).ctypes.data, False), "strides": (0, 0, 0, 0), "version": 3}
raw_grad(x=Absurd(), y_backprop=Absurd(), data_format="NHWC")
""",
    ),
    _a(
        3,
        "GraphDef Const with a huge shape and a short float_val",
        "pbtxt(const_node('dtype: DT_FLOAT tensor_shape { dim { size: 1000000000 } dim { size: 1000000 } } float_val: 1'))",
    ),
    _a(
        3,
        "Session feed: byte-swapped broadcast view",
        """
from fbnops.framework.graph import Graph
from fbnops.framework.session import Session
g = Graph()
x = g.add_operation("x", "Placeholder", [], {"dtype": np.dtype(F), "shape": None}).output(0)
y = g.add_operation("y", "Identity", [x], {}).output(0)
Session(g).run(y, {x: np.broadcast_to(np.array(1, ">f4"), (1 << 20, 1 << 20))})
""",
    ),
    _a(
        3,
        "Session: AddN of a fed broadcast view",
        """
from fbnops.framework.graph import Graph
from fbnops.framework.session import Session
g = Graph()
x = g.add_operation("x", "Placeholder", [], {"dtype": np.dtype(F), "shape": None}).output(0)
y = g.add_operation("y", "AddN", [x, x], {}).output(0)
Session(g).run(y, {x: np.broadcast_to(F(1), (1 << 20, 1 << 20))})
""",
    ),
    _a(
        3,
        "run file: random literal of 2^62 elements",
        "run_doc(doc_with(['ops', 0, 'inputs', 'x'], {'random': {'shape': [1 << 31, 1 << 31, 1, 3], 'seed': 0}}))",
    ),
    _a(
        3,
        "YAML alias bomb (billion laughs)",
        """
lines = ['a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]']
for i in range(1, 12):
    lines.append(f'a{i}: &a{i} [' + ', '.join([f'*a{i-1}'] * 10) + ']')
lines.append('ops: *a11')
run_doc(chr(10).join(lines), '.yaml')
""",
    ),
    _a(
        3,
        ".npy header claiming 40 GiB",
        """
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (10737418240,), }"
header = header + ' ' * (118 - len(header)) + chr(10)
(TMP / 'x.npy').write_bytes(b'\\x93NUMPY\\x01\\x00' + len(header).to_bytes(2, 'little') + header.encode())
run_doc(doc_with(['ops', 0, 'inputs', 'x'], {'npy': 'x.npy'}))
""",
    ),
    _a(3, "DirectML tensor of 2^62 bytes", "dml_grad(sizes=[1 << 30, 3, 1 << 15, 1 << 15], total=2**63 - 1)"),
    _a(3, "oneDNN logical tensor of 2^62 elements", "dnnl_grad(dims=(1 << 31, 3, 1 << 15, 1 << 15))"),
    # 4 -------------------------------------------------------------- thread counts
    *[
        _a(
            4,
            f"set_num_threads({v})",
            f"""
import fbnops, threading
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    fbnops.set_num_threads({v})
n = fbnops.get_num_threads()
assert isinstance(n, int) and 1 <= n <= 1024 and caught, (n, caught)
raw_grad(); assert threading.active_count() < 64
result = n
""",
            "either",
        )
        for v in ("0", "-1", "10**4", "2**31", "2**64", "1.5", "'2'", "True", "None", "float('nan')")
    ],
    *[
        _a(
            4,
            f"{var}={v!r}",
            f"""
import fbnops, threading
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    raw_grad()
    n = fbnops.get_num_threads()
assert isinstance(n, int) and 1 <= n <= 1024 and (caught or {v!r} == ""), (n, caught)
assert threading.active_count() < 64
result = n
""",
            "either",
            env=((var, v), ("OMP_NUM_THREADS" if var != "OMP_NUM_THREADS" else "FBNOPS_NUM_THREADS", None)),
        )
        for var in ("FBNOPS_NUM_THREADS", "OMP_NUM_THREADS")
        for v in ("0", "-3", "10000", "2147483648", "two", "1.5", "")
    ],
    # 5 -------------------------------------------------------------- malformed files
    *[_a(5, f"GraphDef pbtxt: {k}", f"pbtxt({v!r})") for k, v in _BAD_PBTXT.items() if "nesting" not in k],
    _a(5, "GraphDef pbtxt: deep nesting", "pbtxt('a ' + '{ a ' * 100000 + '}' * 100000)"),
    *[
        _a(5, f"run file: {k}", f"run_doc({v})")
        for k, v in _BAD_RUN_DOCS.items()
        if k not in ("1e40 into a float32 literal",)
    ],
    _a(5, "run file (YAML): deep nesting", "run_doc('a: ' + '[' * 100000 + ']' * 100000, '.yaml')"),
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
    ),
    _a(6, "GraphDef literal 1e40 into float32", "pbtxt(const_node('dtype: DT_FLOAT float_val: 1e40'))"),
    _a(
        6, "GraphDef literal 2^40 into int32", "pbtxt(const_node('dtype: DT_INT32 int_val: 1099511627776', 'DT_INT32'))"
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
    ),
    _a(6, "run file literal 1e40 into float32", f"run_doc({_BAD_RUN_DOCS['1e40 into a float32 literal']})"),
    _a(6, "raw_ops epsilon 1e40", "raw_grad(epsilon=1e40)"),
    _a(
        6,
        "raw_ops epsilon -1e40 (forward)",
        """
import fbnops
fbnops.raw_ops.FusedBatchNormV3(x=np.ones((2, 2, 2, 3), F), scale=np.ones(3, F), offset=np.ones(3, F),
                                mean=np.ones(3, F), variance=np.ones(3, F), epsilon=-1e40)
""",
    ),
    _a(
        6,
        "raw_ops exponential_avg_factor 1e300",
        """
import fbnops
fbnops.raw_ops.FusedBatchNormV3(x=np.ones((2, 2, 2, 3), F), scale=np.ones(3, F), offset=np.ones(3, F),
                                mean=np.ones(3, F), variance=np.ones(3, F), exponential_avg_factor=1e300)
""",
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
    ),
    _a(
        7,
        "Session.run(3)",
        "from fbnops.framework.graph import Graph\nfrom fbnops.framework.session import Session\n"
        "Session(Graph()).run(3)",
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
        _a(7, f"kernel plan helper ({where}) with zero sizes {args}", f"result = {call}(*{args!r})", "either")
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
    ),
    _a(
        7,
        "oneDNN two outputs in one array",
        """
stat = np.empty(3, F)
dnnl_grad(stats_out=(stat, stat))
""",
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
    ),
    # 8 -------------------------------------------------------------- nothing lost
    _a(
        8,
        "raw_ops error leaves the inputs unchanged",
        """
kw = grad_inputs()
before = {k: v.copy() for k, v in kw.items() if isinstance(v, np.ndarray)}
try:
    raw_grad(**dict(kw, scale=np.ones(5, F)))
except Exception as e:
    assert type(e).__module__.startswith("fbnops"), e
assert all(np.array_equal(before[k], kw[k]) for k in before)
result = "unchanged"
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
before = g.to_pbtxt()
try:
    graph_from_pbtxt('node { name: "y" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }'
                     'node { name: "z" op: "Transpose" input: "y" input: "y" }', g)
except Exception as e:
    assert type(e).__module__.startswith("fbnops"), e
assert g.to_pbtxt() == before
result = "unchanged"
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
try:
    outs = dml_grad(offset=-16)
except dml.HRESULTError:
    result = "refused"
else:
    raise AssertionError("accepted a negative offset")
""",
        "ok",
    ),
]


def run_attack(attack: Attack, timeout: float | None = None) -> tuple[str, Outcome]:
    """``(verdict, outcome)``: ``pass``, ``crash``, ``hang``, ``untyped`` or ``wrong``."""
    outcome = run_isolated(
        PRELUDE + "\n" + attack.code,
        timeout=timeout or attack.timeout,
        typed=TYPED,
        memory_limit=16 << 30,
        env=dict(attack.env),
    )
    if outcome.kind in ("crash", "hang"):
        return outcome.kind, outcome
    if outcome.kind == "error":
        if outcome.error_type.endswith("AssertionError"):
            return "wrong", outcome
        if not outcome.typed:
            return "untyped", outcome
        return ("wrong" if attack.expect == "ok" else "pass"), outcome
    return ("wrong" if attack.expect == "error" else "pass"), outcome
