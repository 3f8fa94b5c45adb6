"""Every public entry point, fed values of the wrong Python type, fails in its surface's own error model.

The entry points are discovered (the raw_ops functions and their arguments from the specs, the C++
ops and Attrs setters, the Java ``create`` methods and option setters, the DirectML operator descs
and their members, the oneDNN op/attr/logical_tensor constructors, the Graph/Scope builders, the
run-file fields, the CLI's numeric flags) and each argument is given each of :data:`WRONG`.  The
outcome must be the surface's documented error (C++: an INVALID_ARGUMENT ``Status`` on the scope;
Java: ``IllegalArgumentException``, or the ``NullPointerException`` a Java null gives; DirectML:
``E_INVALIDARG`` at ``CreateOperator``; oneDNN: ``invalid_arguments``; raw_ops: TensorFlow's
``TypeError`` or ``InvalidArgumentError``; Graph/Scope: ``fbnops.errors``; run files:
``RunFileError``; CLI: ``fbnops: error:`` on one line, exit 2), never a bare Python error.  A value
may pass only where the API documents it (``None`` for an optional attr is the default, C++
converts ``np.True_`` to a float implicitly, a nested list is a fine constant).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
import io
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest

import bindings_mirror.directml as dml
import fbnops
from bindings_mirror import cc, java
from bindings_mirror import onednn_graph as dnnl
from bindings_mirror.cc import ops as cc_ops
from fbnops.errors import OpError
from fbnops.specs import all_specs
from fbnops.tools import runfile

WRONG: dict[str, Any] = {
    "10**400": 10**400, "-10**400": -(10**400), "None": None, "nested list": [[1.0], [2.0]], "bytes": b"x",
    "nan": float("nan"), "object": object(), "np.True_": np.True_,
}  # fmt: skip
NUMBERS = frozenset({"nan", "np.True_"})  # numbers some APIs convert implicitly (C++'s float(bool))
IGNORED = frozenset({"nested list", "nan", "np.True_"})  # tensors a training op does not read (any shape)
UNREAD = ("mean", "variance", "reserve_space_3")  # in training, TensorFlow's shape functions skip them
C = 3
X = np.ones((2, 2, 2, C), np.float32)
V = np.ones(C, np.float32)


class Entry(NamedTuple):
    surface: str
    name: str
    call: Callable[[Any], Any]  # feeds the wrong value to one argument
    accepts: frozenset = frozenset()  # the values the API documents as valid there


class Refused(Exception):
    """The surface refused the value in its own error model (raised by the surface checks below)."""


# ------------------------------------------------------------------------------ surfaces' error models


def _refused(call: Callable[[], Any], errors: tuple, check: Callable[[BaseException], bool] = lambda e: True) -> None:
    """Run ``call``; an error of the surface's model (``errors``, passing ``check``) is :class:`Refused`."""
    try:
        call()
    except errors as e:
        assert check(e), f"{type(e).__name__}: {e}"
        raise Refused from e


def _raw_ops(call: Callable[[], Any]) -> None:  # TensorFlow's own TypeError class, or a typed op error
    _refused(call, (OpError, TypeError), lambda e: isinstance(e, OpError) or type(e) is TypeError)


def _cc(build: Callable[[cc.Scope], Any]) -> None:
    root = cc.Scope.NewRootScope()
    build(root)
    status = root.status()
    if not status.ok():
        assert status.code() == cc.StatusCode.kInvalidArgument, status.ToString()
        raise Refused(status.ToString())


def _java(call: Callable[[], Any]) -> None:
    _refused(call, (java.IllegalArgumentException, java.NullPointerException))


def _directml(call: Callable[[], Any]) -> None:
    _refused(call, (dml.HRESULTError,), lambda e: e.hresult == "E_INVALIDARG")


def _onednn(call: Callable[[], Any]) -> None:
    statuses = ("invalid_arguments", "invalid_graph_op", "unimplemented")
    _refused(call, (dnnl.error,), lambda e: e.status.name in statuses)


def _graph(call: Callable[[], Any]) -> None:
    _refused(call, (OpError,))


def _run_file(doc_fn: Callable[[], dict]) -> None:
    _refused(lambda: runfile.build(doc_fn()), (runfile.RunFileError,))


def _cli(args: list[str]) -> None:
    from fbnops import cli

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = cli.main(args)
        except SystemExit as e:  # argparse's exit, through the parser's one-line error
            code = e.code
    lines = err.getvalue().splitlines()
    if code == 0:
        return
    assert code == 2 and len(lines) == 1 and lines[0].startswith("fbnops: error: "), (code, err.getvalue())
    raise Refused(lines[0])


# ------------------------------------------------------------------------------ entry points, discovered


def _raw_ops_entries() -> list[Entry]:
    out = []
    for spec in all_specs():
        fn = getattr(fbnops.raw_ops, spec.name)
        inputs = {a.name: (X if a.kind == "tensor" else V if a.kind == "channels" else V * 0) for a in spec.inputs}
        for a in spec.inputs:  # reserve_space_3 is not read on CPU: TensorFlow takes any tensor there
            out.append(Entry("raw_ops", f"{spec.name}({a.name})",
                             lambda v, fn=fn, k=a.name, i=inputs: _raw_ops(lambda: fn(**{**i, k: v})),
                             IGNORED if a.name == "reserve_space_3" else frozenset()))  # fmt: skip
        for a in spec.attrs:  # None: the attr's default, as in tf.raw_ops
            out.append(Entry("raw_ops", f"{spec.name}({a.name}=)",
                             lambda v, fn=fn, k=a.name, i=inputs: _raw_ops(lambda: fn(**i, **{k: v})),
                             frozenset({"None"})))  # fmt: skip
    return out


def _cc_entries() -> list[Entry]:
    out = []
    for name in cc_ops.__all__:
        cls = getattr(cc_ops, name)
        if not hasattr(cls, "Attrs") or name == "Placeholder":
            continue
        params = [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "scope", "attrs")]

        def build(root, v, cls=cls, params=params, at=None, setter=None):
            x = cc_ops.Placeholder(root, cc.DT_FLOAT)
            args = [v if p == at else x for p in params]
            attrs = getattr(cls, setter)(v) if setter else None
            return cls(root, *args, attrs) if attrs is not None else cls(root, *args)

        for p in params:
            out.append(Entry("cc", f"ops.{name}({p})", lambda v, b=build, p=p: _cc(lambda r: b(r, v, at=p)),
                             IGNORED if p in UNREAD else frozenset()))  # fmt: skip
        for setter in [m for m in vars(cls.Attrs) if m[0].isupper()]:
            accepts = NUMBERS if setter in ("Epsilon", "ExponentialAvgFactor", "IsTraining") else frozenset()
            out.append(Entry(
                "cc", f"ops.{name}::{setter}", lambda v, b=build, s=setter: _cc(lambda r: b(r, v, setter=s)), accepts
            ))  # fmt: skip
    out.append(Entry("cc", "ops.Placeholder(dtype)", lambda v: _cc(lambda r: cc_ops.Placeholder(r, v))))
    out.append(Entry("cc", "ops.Placeholder::Shape", lambda v: _cc(lambda r: cc_ops.Placeholder(
        r, cc.DT_FLOAT, cc_ops.Placeholder.Shape(v)))))  # fmt: skip
    out.append(Entry("cc", "ops.Const(value)", lambda v: _cc(lambda r: cc_ops.Const(r, v)),
                     frozenset({"nested list", "nan", "np.True_"})))  # fmt: skip
    # WithOpName(...) concatenates StrCat fragments: "nan" and "1" are names
    out.append(Entry("cc", "Scope::WithOpName",
                     lambda v: _cc(lambda r: cc_ops.Placeholder(r.WithOpName(v), cc.DT_FLOAT)), NUMBERS))  # fmt: skip
    return out


def _java_entries() -> list[Entry]:
    out = []
    for name in ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3", "FusedBatchNormGrad",
                 "FusedBatchNormGradV2", "FusedBatchNormGradV3"):  # fmt: skip
        cls = getattr(java, name)
        params = [p for p in inspect.signature(cls.create).parameters if p not in ("scope", "options")]

        def create(v, cls=cls, params=params, at=None, option=None):
            g = java.Graph()
            s = g.baseScope()
            x = java.Constant.create(s, X)
            c = java.Constant.create(s, V)
            args = [v if p == at else (x if p in ("x", "yBackprop") else c) for p in params]
            opts = (getattr(cls, option)(v),) if option else ()
            return cls.create(s, *args, *opts)

        for p in params:
            out.append(Entry("java", f"{name}.create({p})", lambda v, f=create, p=p: _java(lambda: f(v, at=p))))
        for option in [m for m, f in vars(cls).items() if isinstance(f, staticmethod) and m != "create"]:
            accepts = {"None"} | ({"np.True_"} if option == "isTraining" else set())  # a NumPy bool is a Boolean
            out.append(Entry("java", f"{name}.{option}", lambda v, f=create, o=option: _java(lambda: f(v, option=o)),
                             frozenset(accepts)))  # fmt: skip  # null leaves the attr unset
    out.append(Entry("java", "Constant.create",
                     lambda v: _java(lambda: java.Constant.create(java.Graph().baseScope(), v)),
                     frozenset({"nested list", "nan", "np.True_"})))  # fmt: skip
    out.append(Entry("java", "Scope.withName", lambda v: _java(lambda: java.Graph().baseScope().withName(v))))
    out.append(Entry("java", "Scope.withSubScope", lambda v: _java(lambda: java.Graph().baseScope().withSubScope(v))))
    return out


def _dml_desc(op_type: int, value: Any, member: str | None = None, buffer_field: str | None = None) -> Any:
    """A valid operator desc of ``op_type`` with ``value`` put in one member (or one InputTensor field)."""
    from bindings_mirror.directml.schemas import SCHEMAS

    s = SCHEMAS[op_type]
    f32 = dml.DML_TENSOR_DATA_TYPE_FLOAT32
    kw = {m: None if m in s.optional else dml.make_tensor_desc(f32, (1, 3, 1, 1) if m in s.stats else (2, 3, 2, 2))
          for m in (*s.inputs, *s.outputs)}  # fmt: skip
    d = s.desc_type(**kw)
    if member is not None:
        setattr(d, member, value)
    if buffer_field is not None:
        setattr(getattr(d, s.inputs[0]).Desc, buffer_field, value)
    return dml.DML_OPERATOR_DESC(op_type, d)


def _directml_entries() -> list[Entry]:
    from bindings_mirror.directml.schemas import SCHEMAS

    create = dml.DMLCreateDevice().CreateOperator
    out = []
    for op_type, schema in SCHEMAS.items():
        # Spatial is a BOOL (any scalar converts) that the mirror ignores (always spatial); a NaN is a FLOAT C passes
        for f in [f.name for f in dataclasses.fields(schema.desc_type) if f.name != "Spatial"]:
            optional = f in schema.optional or f == "FusedActivation"
            accepts = frozenset({"None"} if optional else {"nan"} if f == "Epsilon" else ())
            out.append(Entry("directml", f"{schema.name}.{f}",
                             lambda v, t=op_type, f=f: _directml(lambda: create(_dml_desc(t, v, member=f))),
                             accepts))  # fmt: skip
        for bf in [f.name for f in dataclasses.fields(dml.DML_BUFFER_TENSOR_DESC)]:
            out.append(Entry("directml", f"{schema.name}.{schema.inputs[0]}.{bf}",
                             lambda v, t=op_type, bf=bf: _directml(lambda: create(_dml_desc(t, v, buffer_field=bf))),
                             frozenset({"None"}) if bf == "Strides" else frozenset()))  # fmt: skip
    f32 = dml.DML_TENSOR_DATA_TYPE_FLOAT32
    out.append(Entry("directml", "make_tensor_desc(sizes)", lambda v: _directml(lambda: dml.make_tensor_desc(f32, v))))
    out.append(Entry("directml", "make_tensor_desc(strides)",
                     lambda v: _directml(lambda: dml.make_tensor_desc(f32, (2, 3), v)),
                     frozenset({"None"})))  # fmt: skip
    return out


def _onednn_entries() -> list[Entry]:
    op, lt = dnnl.op, dnnl.logical_tensor
    f32 = lt.data_type.f32
    out = [
        Entry("onednn", "op(id)", lambda v: _onednn(lambda: op(v, op.kind.BatchNormTrainingBackward, "bn"))),
        Entry("onednn", "op(kind)", lambda v: _onednn(lambda: op(0, v, "bn"))),
        Entry("onednn", "logical_tensor(tid)", lambda v: _onednn(lambda: lt(v, f32, [2, 3], lt.layout_type.strided))),
        Entry("onednn", "logical_tensor(dtype)", lambda v: _onednn(lambda: lt(0, v, [2, 3], lt.layout_type.strided))),
        Entry("onednn", "logical_tensor(dims)", lambda v: _onednn(lambda: lt(0, f32, v, lt.layout_type.strided))),
        Entry("onednn", "logical_tensor(strides)", lambda v: _onednn(lambda: lt(0, f32, [2, 3], v))),
    ]
    for attr in dnnl.op.attr:  # set_attr takes any attribute as C++ does; add_op judges it against the op
        out.append(Entry("onednn", f"op.set_attr({attr.name})", lambda v, a=attr: _onednn(lambda: _onednn_add(a, v)),
                         frozenset({"nan"})))  # fmt: skip  # a NaN is an f32 (C++ passes it on)
    return out


def _onednn_add(attr, value) -> None:
    op, lt = dnnl.op, dnnl.logical_tensor
    f32, strided = lt.data_type.f32, lt.layout_type.strided
    ins = [lt(i, f32, d, strided) for i, d in enumerate([[2, 3, 2, 2], [2, 3, 2, 2], [3], [3], [3]])]
    outs = [lt(5, f32, [2, 3, 2, 2], strided), lt(6, f32, [3], strided), lt(7, f32, [3], strided)]
    bn = op(0, op.kind.BatchNormTrainingBackward, ins, outs, "bn").set_attr(op.attr.epsilon, 1e-3)
    bn.set_attr(attr, value)
    g = dnnl.graph(dnnl.engine.kind.cpu)
    g.add_op(bn)
    g.finalize()


def _graph_entries() -> list[Entry]:
    def scope():
        return fbnops.Scope(fbnops.Graph())

    def bn(attr, v):
        s = scope()
        x, c = s.placeholder(np.float32, X.shape), s.placeholder(np.float32, (C,))
        return s.add_op("FusedBatchNormV3", [x, c, c, c, c], {attr: v})

    out = [
        Entry(
            "graph",
            "Scope.constant(value)",
            lambda v: _graph(lambda: scope().constant(v)),
            frozenset({"nested list", "nan", "np.True_"}),
        ),
        Entry("graph", "Scope.placeholder(dtype)", lambda v: _graph(lambda: scope().placeholder(v))),
        Entry(
            "graph",
            "Scope.placeholder(shape)",
            lambda v: _graph(lambda: scope().placeholder(np.float32, v)),
            frozenset({"None"}),
        ),  # None: any shape
        Entry("graph", "Scope.with_op_name", lambda v: _graph(lambda: scope().with_op_name(v).constant(V))),
        Entry("graph", "Scope.sub_scope", lambda v: _graph(lambda: scope().sub_scope(v).constant(V))),
        Entry(
            "graph",
            "Graph.add_operation(name)",
            lambda v: _graph(lambda: fbnops.Graph().add_operation(v, "Const", [], {"value": V})),
        ),  # fmt: skip
    ]
    for a in next(s for s in all_specs() if s.name == "FusedBatchNormV3").attrs:
        out.append(Entry("graph", f"Scope.add_op(FusedBatchNormV3, {a.name}=)",
                         lambda v, a=a.name: _graph(lambda: bn(a, v)),
                         frozenset({"np.True_"}) if a.type == "bool" else frozenset()))  # fmt: skip
    return out


JOB = {
    "inputs": {"x": {"random": {"shape": [2, 2, 2, C], "seed": 0}}},
    "ops": [{"name": "bn", "op": "FusedBatchNormV3", "attrs": {"epsilon": 0.001},
             "inputs": {"x": "x", "scale": {"ones": [C]}, "offset": {"zeros": [C]}, "mean": {"zeros": [0]},
                        "variance": {"zeros": [0]}}}],
    "fetch": ["bn"],
}  # fmt: skip
RUN_FILE_FIELDS = {  # field -> where it is in JOB
    "inputs.x.random.shape": ("inputs", "x", "random", "shape"),
    "inputs.x.random.seed": ("inputs", "x", "random", "seed"),
    "inputs.x.random.scale": ("inputs", "x", "random", "scale"),
    "inputs.x.random.loc": ("inputs", "x", "random", "loc"),
    "inputs.x.random.dtype": ("inputs", "x", "random", "dtype"),
    "inputs.x.value": ("inputs", "x"),  # replaced by {"value": v}
    "ops.0.attrs.epsilon": ("ops", 0, "attrs", "epsilon"),
    "ops.0.attrs.exponential_avg_factor": ("ops", 0, "attrs", "exponential_avg_factor"),
    "ops.0.attrs.is_training": ("ops", 0, "attrs", "is_training"),
    "ops.0.attrs.data_format": ("ops", 0, "attrs", "data_format"),
    "ops.0.name": ("ops", 0, "name"),
    "ops.0.op": ("ops", 0, "op"),
    "ops.0.inputs.scale.ones": ("ops", 0, "inputs", "scale", "ones"),
    "fetch.0": ("fetch", 0),
    "backend": ("backend",),
}


def _run_file_entries() -> list[Entry]:
    def doc(v, path):
        d = copy.deepcopy(JOB)
        node = d
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = {"value": v} if path == ("inputs", "x") else v
        return d

    # the file format is JSON/YAML: its values are numbers, strings, lists, booleans, null (not bytes or objects)
    accepts = {  # YAML's true read as a bool: epsilon=True is 1.0; a seed is any non-negative integer
        "ops.0.attrs.epsilon": frozenset({"np.True_"}), "ops.0.attrs.is_training": frozenset({"np.True_"}),
        "inputs.x.random.seed": frozenset({"10**400"}),
    }  # fmt: skip
    return [Entry("run file", k, lambda v, p=p: _run_file(lambda: doc(v, p)), accepts.get(k, frozenset()))
            for k, p in RUN_FILE_FIELDS.items()]  # fmt: skip


CLI_FLAGS = {
    "check --points": ["check", "--shape", "2,2,2,2", "--backends", "reference", "--points"],
    "check --seed": ["check", "--shape", "2,2,2,2", "--backends", "reference", "--seed"],
    "check --shape": ["check", "--backends", "reference", "--shape"],
    "explain --epsilon": ["explain", "--epsilon"],
    "--threads": ["--threads"],  # followed by a command below
    "bench --rounds": ["bench", "--shapes", "1,2,2,2", "--peers", "ref", "--rounds"],
    "demo --ranks": ["demo", "--ranks"],
}
CLI_TEXT = {  # a command line has only text: the wrong values as a user would type them
    "10**400": str(10**400), "-10**400": str(-(10**400)), "None": "None", "nested list": "[[1.0],[2.0]]",
    "bytes": "b'x'", "nan": "nan", "object": "object()", "np.True_": "True",
}  # fmt: skip


def _cli_entries() -> list[Entry]:
    out = []
    for flag, args in CLI_FLAGS.items():
        tail = ["check", "--shape", "2,2,2,2", "--backends", "reference", "--points", "1"] * (flag == "--threads")
        # a seed may be any non-negative integer; more threads than cores are clamped (documented)
        accepts = frozenset({"10**400"}) if flag in ("check --seed", "--threads") else frozenset()
        out.append(Entry("cli", flag, lambda v, a=args, t=tail: _cli([*a, CLI_TEXT[v], *t]), accepts))
    return out


ENTRIES = (_raw_ops_entries() + _cc_entries() + _java_entries() + _directml_entries() + _onednn_entries()
           + _graph_entries() + _run_file_entries() + _cli_entries())  # fmt: skip


def test_entry_points_are_discovered():
    by_surface = {s: sum(e.surface == s for e in ENTRIES) for s in dict.fromkeys(e.surface for e in ENTRIES)}
    print(f"\n{len(ENTRIES)} entry points x {len(WRONG)} wrong values: {by_surface}")
    assert len({(e.surface, e.name) for e in ENTRIES}) == len(ENTRIES)
    assert by_surface["raw_ops"] == sum(len(s.inputs) + len(s.attrs) for s in all_specs())
    assert min(by_surface.values()) >= 5 and len(ENTRIES) >= 200


@pytest.mark.parametrize("entry", ENTRIES, ids=[f"{e.surface}:{e.name}" for e in ENTRIES])
def test_wrong_types_get_the_surfaces_error(entry: Entry):
    wrong = []
    for label in WRONG:
        try:  # the CLI entries get the label (they type its text); the others the value
            entry.call(label if entry.surface == "cli" else WRONG[label])
        except Refused:
            continue
        except Exception as e:  # not the surface's error model: a Python internal leaked out
            wrong.append(f"{label}: {type(e).__module__}.{type(e).__name__}: {str(e)[:160]}")
            continue
        if label not in entry.accepts:
            wrong.append(f"{label}: accepted")
    assert wrong == []
