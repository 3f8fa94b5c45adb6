"""The tf-java export target, built and run against real tf-java 1.1.0 (Maven Central jars in ~/.m2).

Every prototype of ``export_helpers.prototypes()`` but the second-order ones (TensorFlow builds
those in Python; tf-java has no gradient for ``FusedBatchNormGrad``) goes into ONE graph, exported
once and run in ONE JVM: V1 (float32), V2 and V3 (float32, float16, bfloat16), NHWC/NCHW (and
NDHWC/NCDHW for V3), training and frozen, forward, ``fbnops.gradients`` and explicit grad ops.
Tolerances (``export_helpers.float_tolerance``): TF sums in float32 where fbnops sums in float64,
then both round once to the output type: float32 2e-5, float16 2e-3/4e-3, bfloat16 1.6e-2/3.2e-2.

Real TensorFlow's Grappler (its ``remapper`` pass) replaces a frozen float32 ``FusedBatchNorm``
whose batch_mean/batch_variance have no consumer in the graph by ``Mul``/``Add`` nodes, fetches
notwithstanding, and fetching ``bn:1`` then fails (``test_java_differential.py`` records it):
a program with an inference forward runs its session without that pass, and every output of
every prototype is fetched here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import defaultdict

import numpy as np
import pytest
from export_helpers import assert_close, batch, float_tolerance, prototypes, run_export, skip_if_missing

from fbnops.errors import UnimplementedError
from fbnops.framework.graph import Graph
from fbnops.framework.scope import Scope
from fbnops.tools.export import build_plan, export
from fbnops.tools.export.tf_java import MAIN_CLASS, float_literal, render

NO_JDK = "no JDK (javac): apt-get install openjdk-17-jdk-headless"
pytestmark = pytest.mark.skipif(shutil.which("javac") is None, reason=NO_JDK)


@pytest.fixture(scope="module")
def java_run(tmp_path_factory):
    """The one export of every prototype, run once: ``(protos, plan, outputs)``."""
    protos = prototypes(second_order=False)
    graph, feeds, fetches = batch(protos)
    out = export(graph, "tf-java", tmp_path_factory.mktemp("java") / "all", feeds=feeds, fetches=fetches)
    plan = build_plan(graph, feeds=feeds, fetches=fetches)
    return protos, plan, run_export(out, plan.fetches)


def test_every_prototype_agrees_with_real_tf_java(java_run):
    protos, plan, outputs = java_run
    assert len(plan.ops) > 700 and len(plan.fetches) > 300  # the large-graph form (split build methods) ran
    table: dict[tuple[str, str], list] = defaultdict(lambda: [0, 0, 0.0])  # prototypes, fetches, max diff
    checked = set()
    for proto in protos:
        mine = [t for t in plan.fetches if t.startswith(proto.name + "/")]  # its gradients() nodes included
        assert mine, proto.name
        row = table[proto.version, proto.dtype]
        row[0] += 1
        row[1] += len(mine)
        row[2] = max(row[2], assert_close(outputs, {t: plan.expected[t] for t in mine}, float_tolerance))
        checked.update(mine)
    assert checked == set(plan.fetches)
    assert any("/gradients/" in t for t in checked)  # fbnops.gradients' nodes ran on tf-java too
    print("\n| version | dtype | prototypes | fetches | max abs difference |\n|---|---|---|---|---|")
    for (version, dtype), (n, fetches, worst) in sorted(table.items()):
        print(f"| {version} | {dtype} | {n} | {fetches} | {worst:.3g} |")


def test_generated_source_reads_as_tf_java_code(tmp_path):
    """The docs' prototype alone: the calls a tf-java user writes, the seed page cited."""
    graph, feeds, fetches = next(p for p in prototypes() if p.name == "docs_example").graph()
    source = render(build_plan(graph, feeds=feeds, fetches=fetches))[f"src/main/java/{MAIN_CLASS}.java"]
    for expected in (
        "try (Graph graph = new Graph()) {",
        "Ops tf = Ops.create(graph);",
        'tf.withName("x").placeholder(TFloat32.class, Placeholder.shape(Shape.of(4, 3, 3, 3)));',
        'tf.withName("scale").constantOf(',
        'FusedBatchNorm<TFloat32, TFloat32> bn = tf.withName("bn").nn.fusedBatchNorm(',
        'FusedBatchNormGrad<TFloat32, TFloat32> grad = tf.withName("grad").nn.fusedBatchNormGrad(',
        "bn.reserveSpace3(),",
        "FusedBatchNormGrad.epsilon(0.001f),",
        'FusedBatchNormGrad.dataFormat("NHWC"),',
        "Result result = session.runner()",
        ".feed(x, x_value)",
        ".fetch(grad.xBackprop())  // grad:0",
        'Npy.write("outputs/grad_0.npy", result.get(0));',
        "https://www.tensorflow.org/jvm/api_docs/java/org/tensorflow/op/core/FusedBatchNormGradV3",
    ):
        assert expected in source, expected
    assert "private static void build" not in source  # a small graph is built in main


def test_names_that_are_not_identifiers_are_mapped_in_a_comment():
    scope = Scope(Graph())
    x = scope.placeholder(np.float32, (2, 1, 1, 2), name="in-put.1")
    c = scope.constant(np.ones(2, np.float32), name="class")  # a Java keyword
    e = scope.constant(np.zeros(0, np.float32), name="e")
    bn = scope.with_op_name("bn").add_op("FusedBatchNormV3", [x, c, c, e, e], {"epsilon": 0.001})
    plan = build_plan(scope.graph, feeds={x: np.ones((2, 1, 1, 2), np.float32)}, fetches=[bn.outputs[0]])
    source = render(plan)[f"src/main/java/{MAIN_CLASS}.java"]
    assert '//   "in-put.1" -> in_put_1' in source and '//   "class" -> class_' in source
    assert 'Placeholder<TFloat32> in_put_1 = tf.withName("in-put.1")' in source
    assert "Constant<TFloat32> e;" in source  # node "e" keeps its name...
    assert "catch (RuntimeException e_1)" in source  # ...so the program's own variable moves aside


def test_float_literals_read_back_exactly():
    for v in (0.001, 1e-5, 1.0, 3.4028235e38, 1.4e-45, -0.0):
        text = float_literal(v)
        assert np.float32(text.rstrip("f")) == np.float32(v), text
    assert float_literal(float("nan")) == "Float.NaN"


def test_second_order_gradient_is_refused_before_anything_is_written(tmp_path):
    graph, feeds, fetches = next(p for p in prototypes() if p.kind == "second_order").graph()
    with pytest.raises(UnimplementedError, match="second-order batch-norm gradient.*tf-python"):
        export(graph, "tf-java", tmp_path / "out", feeds=feeds, fetches=fetches)
    assert not (tmp_path / "out").exists()


def test_run_sh_says_what_is_missing_in_one_line(tmp_path):
    graph, feeds, fetches = next(p for p in prototypes() if p.name == "docs_example").graph()
    out = export(graph, "tf-java", tmp_path / "out", feeds=feeds, fetches=fetches)
    env = dict(os.environ, M2_REPO=str(tmp_path / "no-m2"))
    done = subprocess.run(["bash", str(out / "run.sh")], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 3
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("run.sh: tf-java 1.1.0 not found in ")
    assert "mvn -q dependency:get -Dartifact=org.tensorflow:tensorflow-core-api:1.1.0" in lines[0]
    assert not (out / "outputs" / "grad_0.npy").exists()


def test_the_real_librarys_exception_is_printed_and_the_exit_status_is_1(tmp_path):
    """Inputs edited after the export (x with 4 channels, scale with 3): tf-java's kernel refuses them."""
    proto = next(p for p in prototypes(versions=("V1",)) if p.name == "fwd_v1_nhwc_float32_frozen")
    graph, feeds, fetches = proto.graph()
    out = export(graph, "tf-java", tmp_path / "out", feeds=feeds, fetches=fetches)
    source = (out / "src" / "main" / "java" / f"{MAIN_CLASS}.java").read_text()
    assert "setRemapping(RewriterConfig.Toggle.OFF)" in source and "new Session(graph, config)" in source
    np.save(out / "inputs" / "x.npy", np.ones((2, 1, 1, 4), np.float32))
    done = subprocess.run(["bash", str(out / "run.sh")], capture_output=True, text=True, timeout=900)
    skip_if_missing(done)
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("org.tensorflow.exceptions.")]
    assert errors == [
        "org.tensorflow.exceptions.TFInvalidArgumentException: "
        "scale must have the same number of elements as the channels of x, got 3 and 4"
    ], done.stderr
    assert not list((out / "outputs").glob("*.npy"))  # nothing written: the run failed before the writes
