"""The export core: every graph surface, validation by running, names, files, atomic writes.

Rendering uses the tf-python target (it needs no TensorFlow to render); running exported
programs is each target's own test (test_tf_python.py, test_tf_cc.py, ...).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from export_helpers import EMPTY, OFFSET, SCALE, X, batch, core_graph, docs_example, prototypes

import fbnops
from bindings_mirror import cc, java
from fbnops.errors import InvalidArgumentError, OpError
from fbnops.framework.graph import Graph
from fbnops.framework.scope import Scope
from fbnops.tools import runfile
from fbnops.tools.export import TARGETS, ExportError, _write, build_plan, export, tf_python
from fbnops.tools.export._plan import identifier, output_file

RNG = np.random.default_rng(3)


def java_graph():
    g = java.Graph()
    tf = java.Ops.create(g)
    x = tf.withName("x").placeholder(java.TFloat32, java.Placeholder.shape(java.Shape.of(*X.shape)))
    consts = [tf.withName(n).constant(v) for v, n in ((SCALE, "scale"), (OFFSET, "offset"), (EMPTY, "mean"),
                                                      (EMPTY, "variance"))]  # fmt: skip
    bn = tf.withName("bn").nn.fusedBatchNorm(x, *consts, java.FusedBatchNorm.epsilon(1e-3))
    return g, tf, x, bn


def cc_graph():
    root = cc.Scope.NewRootScope()
    ops = cc.ops
    x = ops.Placeholder(root.WithOpName("x"), cc.DT_FLOAT, ops.Placeholder.Shape(list(X.shape)))
    consts = [ops.Const(root.WithOpName(n), v) for v, n in ((SCALE, "scale"), (OFFSET, "offset"), (EMPTY, "mean"),
                                                            (EMPTY, "variance"))]  # fmt: skip
    bn = ops.FusedBatchNormV3(root.WithOpName("bn"), x, *consts, ops.FusedBatchNormV3.Epsilon(1e-3))
    assert root.ok(), root.status()
    return root, x, bn


# ------------------------------------------------------------------------------ every surface, one plan


def _summary(plan):
    return [(op.name, op.type) for op in plan.ops], plan.fetches, sorted(plan.arrays)


def test_every_graph_surface_gives_the_same_plan(tmp_path):
    scope, x, bn = core_graph()
    want = build_plan(scope, feeds={x: X}, fetches=[bn.outputs[0], "bn:1", "bn.reserve_space_2"])
    assert want.fetches == ("bn:0", "bn:1", "bn:4")
    g, tf, jx, jbn = java_graph()
    root, cx, cbn = cc_graph()
    pbtxt = tmp_path / "g.pbtxt"
    pbtxt.write_text(scope.graph.to_pbtxt())
    fetches = ["bn", "bn:1", "bn:4"]
    surfaces = {
        "core Graph": build_plan(scope.graph, feeds={"x": X}, fetches=fetches),
        "java Graph": build_plan(g, feeds={jx: X}, fetches=[jbn.y(), jbn.batchMean(), jbn.reserveSpace2()]),
        "java Ops": build_plan(tf, feeds={"x": X}, fetches=fetches),
        "cc Scope": build_plan(root, feeds={cx: X}, fetches=[cbn.y, cbn.batch_mean, cbn.reserve_space_2]),
        "pbtxt text": build_plan(scope.graph.to_pbtxt(), feeds={"x": X}, fetches=fetches),
        "pbtxt path": build_plan(pbtxt, feeds={"x": X}, fetches=fetches),
    }
    for name, plan in surfaces.items():
        assert _summary(plan) == _summary(want), name
        for f in want.fetches:
            np.testing.assert_array_equal(plan.expected[f], want.expected[f], err_msg=f"{name} {f}")
    assert surfaces["pbtxt path"].source == f"GraphDef {pbtxt}"
    assert surfaces["cc Scope"].source == "a TF C++ mirror Scope"


def test_expected_values_are_what_the_session_computes():
    scope, x, bn = core_graph()
    plan = build_plan(scope, feeds={x: X}, fetches=bn.outputs[:3])
    values = fbnops.Session(scope.graph).run(list(bn.outputs[:3]), {x: X})
    for f, v in zip(plan.fetches, values, strict=True):
        np.testing.assert_array_equal(plan.expected[f], v)
    assert plan.feeds == {"x": "inputs/x.npy"}
    assert plan.consts == {n: f"inputs/{n}.npy" for n in ("scale", "offset", "mean", "variance")}
    np.testing.assert_array_equal(plan.arrays["inputs/x.npy"], X)


def test_only_what_the_fetches_need_is_planned():
    graph, feeds, fetches = batch(prototypes(versions=("V3",), dtypes=("float32",), layouts=("NHWC",)))
    wanted = [f for f in fetches if f.name.startswith("fwd_v3_nhwc_float32_train/")]
    plan = build_plan(graph, feeds=feeds, fetches=wanted)
    assert {op.name.split("/")[0] for op in plan.ops} == {"fwd_v3_nhwc_float32_train"}
    assert set(plan.feeds) == {"fwd_v3_nhwc_float32_train/x"}  # the other prototypes' feeds are not written


def test_second_order_node_brings_the_grad_op_it_differentiates():
    proto = next(p for p in prototypes() if p.name == "second_nhwc_train")
    graph, feeds, fetches = proto.graph()
    gg = next(op for op in graph.operations() if op.type == "FusedBatchNormGradGrad")
    plan = build_plan(graph, feeds=feeds, fetches=[gg.outputs[1]])
    types = [op.type for op in plan.ops]
    assert types.index("FusedBatchNormGradV3") < types.index("FusedBatchNormGradGrad")


# ------------------------------------------------------------------------------ validation: as running it


def _session_error(graph, fetches, feeds):
    with pytest.raises(OpError) as e:
        fbnops.Session(graph).run(fetches, feeds)
    return e.value


@pytest.mark.parametrize(
    "feeds",
    [{}, {"x": X[:2]}, {"x": X.astype(np.float16)}],
    ids=["missing feed", "feed shape", "feed dtype"],
)
def test_a_graph_that_would_not_run_fails_as_running_it(tmp_path, feeds):
    scope, x, bn = core_graph()
    want = _session_error(scope.graph, [bn.outputs[0]], {scope.graph.get_output(k): v for k, v in feeds.items()})
    with pytest.raises(type(want)) as got:
        export(scope, "tf-python", tmp_path / "out", feeds=feeds, fetches=["bn"])
    assert str(got.value) == str(want)
    assert not (tmp_path / "out").exists() and list(tmp_path.iterdir()) == []


def test_a_bad_kernel_input_fails_as_running_it(tmp_path):
    scope = Scope(Graph())
    x = scope.placeholder(np.float32, None, name="x")  # any shape: a 3-D feed is found when the kernel runs
    scale = scope.constant(np.ones(3, np.float32), name="scale")
    bn = scope.with_op_name("bn").add_op("FusedBatchNormV3", [x, scale, scale, scale, scale], {"is_training": False})
    feeds = {x: np.ones((2, 2, 3), np.float32)}
    want = _session_error(scope.graph, [bn.outputs[0]], feeds)
    assert isinstance(want, InvalidArgumentError)
    with pytest.raises(InvalidArgumentError, match=re.escape(want.message)):
        export(scope, "tf-python", tmp_path / "out", feeds=feeds, fetches=[bn.outputs[0]])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "kwargs, argument, text",
    [
        (dict(target="tf-rust"), "target", "unknown target 'tf-rust'; targets: tf-python, tf-cc"),
        (dict(fetches=[]), "fetches", "nothing to fetch"),
        (dict(fetches=["nope"]), "fetches", "unknown reference 'nope'"),
        (dict(fetches=["bn:9"]), "fetches", "'bn' (FusedBatchNormV3) has no output '9'"),
        (dict(fetches=["bn.nope"]), "fetches", "has no output 'nope'"),
        (dict(fetches=[3.5]), "fetches", "expected an output or a tensor name, got float"),
        (dict(feeds={"scale": SCALE}), "feeds", "scale:0 is a Const output; an exported program feeds placeholders"),
        (dict(feeds={"y": X}), "feeds", "unknown reference 'y'"),
    ],
)
def test_bad_requests_name_the_argument(tmp_path, kwargs, argument, text):
    scope, _, _ = core_graph()
    args = dict(target="tf-python", feeds={"x": X}, fetches=["bn"]) | kwargs
    with pytest.raises(ExportError) as e:
        export(scope, args.pop("target"), tmp_path / "out", **args)
    assert e.value.argument == argument and text in str(e.value) and str(e.value).startswith(argument + ": ")
    assert list(tmp_path.iterdir()) == []


def test_foreign_graphs_are_refused(tmp_path):
    with pytest.raises(ExportError, match="^graph: cannot export a dict"):
        build_plan({}, fetches=["bn"])
    with pytest.raises(ExportError, match="^graph: an eager Scope has no graph"):
        build_plan(Scope(fbnops.EagerContext()), fetches=["bn"])
    with pytest.raises(ExportError, match="^graph: an EagerSession"):
        build_plan(java.Ops.create(java.EagerSession.create()), fetches=["bn"])
    with pytest.raises(ExportError, match="^graph: cannot read"):
        build_plan(tmp_path / "missing.pbtxt", fetches=["bn"])
    other, _, _ = core_graph()
    scope, x, _ = core_graph()
    with pytest.raises(ExportError, match="^fetches: bn:0 is not in the exported graph"):
        build_plan(scope, feeds={x: X}, fetches=[other.graph.get_output("bn")])


def test_a_cc_scope_holding_an_error_is_that_error():
    root, _, _ = cc_graph()
    cc.ops.Placeholder(root, cc.DT_FLOAT, cc.ops.Placeholder.Shape("2x3"))  # C++ records the error in the scope
    assert not root.ok()
    with pytest.raises(InvalidArgumentError, match=re.escape(root.status().ToString())):
        build_plan(root, feeds={"x": X}, fetches=["bn"])


# ------------------------------------------------------------------------------ names and files


def test_identifiers_are_valid_unique_and_shown():
    taken: set[str] = set()
    names = ["1st-input.x", "grad/bn", "grad_bn", "class", "main", "a>b", "x"]
    idents = [identifier(n, taken) for n in names]
    assert idents == ["n_1st_input_x", "grad_bn", "grad_bn_1", "class_", "main_", "a_b", "x"]
    assert all(re.fullmatch(r"[A-Za-z_]\w*", i) for i in idents)
    scope = Scope(Graph())
    x = scope.placeholder(np.float32, (2, 2, 2, 3), name="1st-input.x")
    c = scope.constant(np.ones(3, np.float32), name="class")
    e = scope.constant(EMPTY, name="e")
    bn = scope.with_op_name("grad/bn").add_op("FusedBatchNormV3", [x, c, c, e, e], {})
    plan = build_plan(scope, feeds={x: np.ones((2, 2, 2, 3), np.float32)}, fetches=[bn.outputs[0]])
    assert plan.renamed() == {"1st-input.x": "n_1st_input_x", "class": "class_", "grad/bn": "grad_bn"}
    files = tf_python.render(plan)
    header = files["main.py"].split('"""')[1]
    for name, ident in plan.renamed().items():
        assert re.search(rf"'{re.escape(name)}'\s+-> {ident}$", header, re.M), name
    assert 'name="1st-input.x"' in files["main.py"] and 'name="grad/bn"' in files["main.py"]
    assert output_file("grad/bn:0") == "outputs/grad__bn_0.npy"
    compile(files["main.py"], "main.py", "exec")  # valid Python


def test_files_written_executable_and_bfloat16_widened(tmp_path):
    scope = Scope(Graph())
    xb = RNG.standard_normal((2, 2, 2, 3)).astype(ml_dtypes.bfloat16)
    x = scope.placeholder(ml_dtypes.bfloat16, xb.shape, name="x")
    c = scope.constant(np.ones(3, np.float32), name="scale")
    e = scope.constant(EMPTY, name="e")
    bn = scope.with_op_name("bn").add_op("FusedBatchNormV3", [x, c, c, e, e], {})
    out = export(scope, "tf-python", tmp_path / "bf", feeds={x: xb}, fetches=[bn.outputs[0]])
    assert out == (tmp_path / "bf").absolute()
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == [
        "inputs", "inputs/e.npy", "inputs/scale.npy", "inputs/x.npy", "main.py", "outputs", "run.sh"]  # fmt: skip
    assert os.stat(out / "run.sh").st_mode & stat.S_IXUSR
    stored = np.load(out / "inputs/x.npy")
    assert stored.dtype == np.float32 and np.array_equal(stored.astype(ml_dtypes.bfloat16), xb)
    assert "tf.compat.v1.placeholder(tf.bfloat16" in (out / "main.py").read_text()


def test_existing_directory_refused_unless_force(tmp_path):
    scope, x, _ = core_graph()
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    with pytest.raises(ExportError, match="^out_dir: .* already exists; pass force=True"):
        export(scope, "tf-python", out, feeds={x: X}, fetches=["bn"])
    assert (out / "mine.txt").read_text() == "keep"
    export(scope, "tf-python", out, feeds={x: X}, fetches=["bn"], force=True)
    assert not (out / "mine.txt").exists() and (out / "run.sh").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temporary directories left
    (tmp_path / "file").write_text("")
    with pytest.raises(ExportError, match="is not a directory"):
        export(scope, "tf-python", tmp_path / "file", feeds={x: X}, fetches=["bn"], force=True)


def test_a_failed_write_leaves_nothing_and_keeps_the_old_directory(tmp_path, monkeypatch):
    scope, x, _ = core_graph()
    out = tmp_path / "out"
    calls = []

    def failing_put(path, data):
        calls.append(path)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    monkeypatch.setattr(_write, "_put", failing_put)
    with pytest.raises(OSError, match="No space left"):
        export(scope, "tf-python", out, feeds={x: X}, fetches=["bn"])
    assert list(tmp_path.iterdir()) == []
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    calls.clear()
    with pytest.raises(OSError, match="No space left"):
        export(scope, "tf-python", out, feeds={x: X}, fetches=["bn"], force=True)
    assert [p.name for p in tmp_path.iterdir()] == ["out"] and (out / "mine.txt").read_text() == "keep"


def test_fbnops_export_is_the_api():
    assert fbnops.export is export
    assert set(TARGETS) == {"tf-python", "tf-cc", "tf-java", "onednn-graph", "directml"}


def test_runfile_build_and_run_agree(tmp_path):
    """runfile.build (what export uses) builds the graph runfile.run runs."""
    doc = {"inputs": {"x": {"random": {"shape": [2, 2, 2, 3]}}},
           "ops": [{"name": "bn", "op": "FusedBatchNormV3", "inputs": {"x": "x", "scale": {"ones": [3]},
                    "offset": {"zeros": [3]}, "mean": {"zeros": [0]}, "variance": {"zeros": [0]}}}],
           "fetch": ["bn", "bn:2"]}  # fmt: skip
    graph, outputs = runfile.build(doc)
    values = fbnops.Session(graph).run(outputs)
    for v, (k, w) in zip(values, runfile.run(doc).items(), strict=True):
        np.testing.assert_array_equal(v, w, err_msg=k)


def test_docs_example_is_a_prototype():
    graph, feeds, fetches = docs_example().graph()
    plan = build_plan(graph, feeds=feeds, fetches=fetches)
    assert [op.type for op in plan.ops if op.type.startswith("Fused")] == ["FusedBatchNormV3", "FusedBatchNormGradV3"]


def test_the_docs_page_prototype_is_docs_example():
    """docs/export.md's first python block (shown, and exported at build time) is the verified prototype."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "export.md").read_text()
    block = re.search(r"^```python\n(.*?)^```", page, re.S | re.M).group(1)
    names: dict = {}
    exec(compile(block, "export.md", "exec"), names)
    shown = build_plan(names["scope"], feeds=names["feeds"], fetches=names["fetches"])
    graph, feeds, fetches = docs_example().graph()
    verified = build_plan(graph, feeds=feeds, fetches=fetches)
    assert _summary(shown) == _summary(verified)
    assert [op.attrs for op in shown.ops if op.type.startswith("Fused")] == [
        op.attrs for op in verified.ops if op.type.startswith("Fused")]  # fmt: skip
    for path, value in verified.arrays.items():
        np.testing.assert_array_equal(shown.arrays[path], value, err_msg=path)
    assert "<!-- exports -->" in page


def test_one_fetch_alone_and_names_tensorflow_would_suffix():
    scope, x, bn = core_graph()
    assert build_plan(scope, feeds={x: X}, fetches=bn.outputs[2]).fetches == ("bn:2",)
    twin = scope.with_op_name("BN").add_op("FusedBatchNormV3", list(bn.inputs), {})
    plan = build_plan(scope, feeds={x: X}, fetches=[bn.outputs[0], twin.outputs[0]])
    header = tf_python.render(plan)["main.py"].split('"""')[1]
    assert "TensorFlow makes node names unique ignoring case" in header and "    bn, BN\n" in header
