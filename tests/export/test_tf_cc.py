"""``tf-cc`` export, built and run against real TensorFlow C++ (the ``tensorflow-cpu`` 2.21 wheel).

ONE compiled program runs every prototype (``export_helpers.prototypes``: V1/V2/V3 forward, the
gradient through ``fbnops.gradients`` and the explicit grad op, NHWC/NCHW and, for V3, NDHWC/NCDHW,
float32/float16/bfloat16 where the version has them, training and frozen; every output of each
forward op) plus a graph of the support ops (Identity, OnesLike, ZerosLike, AddN, Transpose with
int32 and int64 perms, a control dependency, a device, node names that are not C++ identifiers, a
fetched placeholder). The same directory is then re-run (the build
is reused) with broken inputs to check the error paths: TensorFlow's Status printed, exit 1.

Tolerances (``export_helpers.float_tolerance``): TF's CPU kernels sum per-channel totals in float32
where fbnops sums in float64, so float32 results differ by a few ulps of those sums (<= 2e-5 for
values of order 1-10); 16-bit results are rounded once to the type, so they may differ by a
rounding step of it (float16 2**-10, bfloat16 2**-7, relative).

One TensorFlow behaviour shapes the program: for an inference (``is_training=False``) forward op,
TF's graph optimizer (grappler's remapper) replaces the op by Mul/Add even when its ``batch_mean``
is fetched, after which Run fails with ``OUT_OF_RANGE: Node 'bn' (type: 'Add', num of outputs: 1)
does not have output 1``. An exported graph that holds one runs its ClientSession with the
remapper off (``test_inference_graphs_run_without_the_remapper``); the plain behaviour is a case
of ``test_cc_differential.py`` (fidelity row C10).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from export_helpers import EXIT_MISSING, assert_close, batch, docs_example, float_tolerance, prototypes, run_export

from fbnops.framework.errors import UnimplementedError
from fbnops.framework.graph import Graph
from fbnops.framework.scope import Scope
from fbnops.testing import extras
from fbnops.tools.export import build_plan, tf_cc, write_plan
from fbnops.tools.export.tf_cc import render

TARGET = "tf-cc"


def support_ops(scope: Scope):
    """The support ops (array_ops.py's and ZerosLike), a control dependency, a device, names C++ cannot take."""
    x = scope.placeholder(np.float32, (2, 3, 4, 5), name="1st-input.x")  # not an identifier
    tensor = scope.constant(np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5) / 7, name="Tensor")  # a C++ type
    perm32 = scope.constant(np.array([0, 3, 1, 2], np.int32), name="perm32")
    perm64 = scope.constant(np.array([0, 2, 3, 1], np.int64), name="perm64")
    total = scope.with_op_name("sum").add_op("AddN", [x, tensor, x], {})
    ident = scope.with_control_dependencies([total]).with_op_name("ident").add_op("Identity", [total.outputs[0]], {})
    ones = scope.with_device("/device:CPU:0").with_op_name("ones").add_op("OnesLike", [x], {})
    zeros = scope.with_op_name("zeros").add_op("ZerosLike", [tensor], {})
    nchw = scope.with_op_name("to_nchw").add_op("Transpose", [ident.outputs[0], perm32], {})
    back = scope.with_op_name("to_nhwc").add_op("Transpose", [nchw.outputs[0], perm64], {})
    value = np.random.default_rng(2).standard_normal((2, 3, 4, 5)).astype(np.float32)
    fetches = [nchw.outputs[0], back.outputs[0], ones.outputs[0], zeros.outputs[0], ident.outputs[0], tensor, x]
    return {x: value}, fetches


def _cases():
    """(prototypes, graph, feeds, fetches) of the one verification program."""
    protos = [p for p in prototypes(second_order=False)]
    graph, feeds, fetches = batch(protos)
    f, t = support_ops(Scope(graph).sub_scope("support"))
    return protos, graph, {**feeds, **f}, fetches + t


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The exported program, built and run once: (plan, directory, outputs, build+run s, run s)."""
    extras.require("tensorflow", "export")
    if shutil.which("g++") is None:
        pytest.skip("no C++ compiler (apt-get install g++)")
    protos, graph, feeds, fetches = _cases()
    plan = build_plan(graph, feeds=feeds, fetches=fetches, source="tests/export/test_tf_cc.py")
    directory = write_plan(plan, TARGET, tmp_path_factory.mktemp("tf_cc") / "all")
    start = time.perf_counter()
    actual = run_export(directory, plan.fetches)
    first = time.perf_counter() - start
    start = time.perf_counter()
    run_export(directory, plan.fetches)  # the build is reused
    return protos, plan, directory, actual, first, time.perf_counter() - start


def test_every_prototype_matches_fbnops(built, capsys):
    protos, plan, _, actual, first, run = built
    assert {p.version for p in protos} == {"V1", "V2", "V3"}
    assert {p.data_format for p in protos} == {"NHWC", "NCHW", "NDHWC", "NCDHW"}
    assert {p.dtype for p in protos} == {"float32", "float16", "bfloat16"}
    assert {p.is_training for p in protos} == {True, False}
    assert {p.kind for p in protos} == {"forward", "gradient", "grad_op"}
    worst = assert_close(actual, plan.expected, float_tolerance)
    by_dtype = {}
    for fetch, want in plan.expected.items():
        got = np.asarray(actual[fetch]).astype(want.dtype).astype(np.float64)
        diff = float(np.max(np.abs(got - want.astype(np.float64)))) if want.size else 0.0
        by_dtype[want.dtype.name] = max(by_dtype.get(want.dtype.name, 0.0), diff)
    with capsys.disabled():
        print(f"\n{TARGET}: 1 program, {len(protos)} prototypes + support ops, {len(plan.fetches)} fetches, "
              f"max |diff| {worst:.2e} ({', '.join(f'{k} {v:.1e}' for k, v in sorted(by_dtype.items()))}), "
              f"build+run {first:.1f} s, run {run:.2f} s")  # fmt: skip


def test_support_ops_match(built):
    """Exact, but for the AddN x + Tensor + x that feeds Identity and the transposes: TF's grappler
    may rewrite it (2x + Tensor), so it can differ by one float32 rounding (relative 2**-23)."""
    _, plan, _, actual, _, _ = built
    summed = ("support/ident:0", "support/to_nchw:0", "support/to_nhwc:0")
    for fetch in [f for f in plan.fetches if f.startswith("support/")]:
        if fetch in summed:
            np.testing.assert_allclose(actual[fetch], plan.expected[fetch], rtol=2**-22, atol=0, err_msg=fetch)
        else:
            np.testing.assert_array_equal(actual[fetch], plan.expected[fetch], err_msg=fetch)
    assert np.array_equal(actual["support/to_nhwc:0"], np.transpose(actual["support/to_nchw:0"], (0, 2, 3, 1)))


def test_shim_is_compiled_once_and_reused(built):
    *_, directory, _, first, run = built
    text = (directory / "run.sh").read_text()
    cache = Path(os.environ.get("FBNOPS_EXPORT_CACHE", Path.home() / ".cache/fbnops/export"))
    shims = list(cache.glob("tf-cc-*/shim.o"))
    assert shims, f"no shim.o under {cache}"
    assert "shim.o" in text and "tf-cc-$key" in text
    assert run < first  # the second run compiled nothing
    assert tf_cc.build_shim() == 0  # what CI calls first: the cached object is found, nothing compiled


def _rerun(directory: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    return subprocess.run(["bash", str(directory / "run.sh")], capture_output=True, text=True, timeout=600, env=env)


def test_a_tensorflow_error_prints_its_status_and_exits_1(built, tmp_path):
    *_, directory, _, _, _ = built
    broken = shutil.copytree(directory, tmp_path / "broken", symlinks=True)
    x_file = next(broken.glob("inputs/docs_example_x.npy"))
    np.save(x_file, np.ones((4, 3, 3, 2), np.float32))  # 2 channels, scale has 3
    done = _rerun(broken)
    assert done.returncode == 1, done.stderr
    assert "ClientSession::Run failed: INVALID_ARGUMENT: " in done.stderr, done.stderr
    assert "scale must have the same number of elements as the channels of x" in done.stderr, done.stderr
    assert not list((broken / "outputs").glob("*.npy")) or all(
        p.stat().st_mtime <= x_file.stat().st_mtime for p in (broken / "outputs").glob("*.npy")
    )  # nothing newer written


def test_an_unreadable_input_file_is_one_line_and_exit_1(built, tmp_path):
    *_, directory, _, _, _ = built
    broken = shutil.copytree(directory, tmp_path / "truncated", symlinks=True)
    x_file = broken / "inputs/docs_example_x.npy"
    x_file.write_bytes(x_file.read_bytes()[:100])
    done = _rerun(broken)
    assert done.returncode == 1
    assert "npy: inputs/docs_example_x.npy is shorter than its header says" in done.stderr


def test_missing_tensorflow_is_one_line_and_exit_3(tmp_path):
    graph, feeds, fetches = docs_example().graph()
    directory = write_plan(build_plan(graph, feeds=feeds, fetches=fetches), TARGET, tmp_path / "bn")
    done = subprocess.run(["sh", str(directory / "run.sh")], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHON": "false", "HOME": str(tmp_path)})  # fmt: skip
    assert done.returncode == EXIT_MISSING
    assert done.stderr.strip() == (
        "run.sh: TensorFlow C++ not found (no tensorflow-cpu wheel for false): pip install 'fbnops[export]'"
    )
    assert not (directory / "build").exists()


def test_main_cc_reads_like_the_cpp_api(tmp_path):
    graph, feeds, fetches = docs_example().graph()
    main = render(build_plan(graph, feeds=feeds, fetches=fetches))["main.cc"]
    for expected in (
        "Scope scope = Scope::NewRootScope();",
        'auto x = ops::Placeholder(scope.WithOpName("x"), DT_FLOAT, ops::Placeholder::Shape({4, 3, 3, 3}));',
        'auto scale = ops::Const(scope.WithOpName("scale"), scale_value);',
        'auto grad = ops::FusedBatchNormGradV3(scope.WithOpName("grad"),',
        "dy, x, scale, bn.reserve_space_1, bn.reserve_space_2, bn.reserve_space_3,",
        'ops::FusedBatchNormGradV3::Epsilon(0.001f).DataFormat("NHWC").IsTraining(true));',
        "ClientSession session(scope);",
        "ClientSession::FeedType feeds = {{x, x_value}, {dy, dy_value}};",
        "std::vector<Output> fetches = {grad.x_backprop, grad.scale_backprop, grad.offset_backprop};",
        'CheckOk(session.Run(feeds, fetches, &outputs), "ClientSession::Run");',
        'npy::SaveTensor("outputs/grad_0.npy", outputs[0]);',
        "https://www.tensorflow.org/api_docs/cc/class/tensorflow/ops/fused-batch-norm-grad-v3",
    ):
        assert expected in main, expected


def test_names_that_are_not_identifiers_are_mapped_in_a_comment():
    graph = Graph()
    feeds, fetches = support_ops(Scope(graph))
    main = render(build_plan(graph, feeds=feeds, fetches=fetches))["main.cc"]
    assert '//   "1st-input.x" -> n_1st_input_x' in main
    assert '//   "Tensor" -> Tensor_1' in main  # would shadow tensorflow::Tensor
    assert 'auto Tensor_1 = ops::Const(scope.WithOpName("Tensor"), Tensor_1_value);' in main
    assert 'scope.WithControlDependencies(std::vector<Operation>{sum.operation}).WithOpName("ident")' in main
    assert 'scope.WithDevice("/device:CPU:0").WithOpName("ones")' in main


def test_second_order_gradient_is_refused_naming_the_node(tmp_path):
    proto = next(p for p in prototypes(versions=("V3",), dtypes=("float32",)) if p.kind == "second_order")
    graph, feeds, fetches = proto.graph()
    plan = build_plan(graph, feeds=feeds, fetches=fetches)
    with pytest.raises(UnimplementedError, match=r"tf-cc target cannot express node '.*' \(FusedBatchNormGradGrad\)"):
        write_plan(plan, TARGET, tmp_path / "second")
    assert not (tmp_path / "second").exists()


def test_inference_graphs_run_without_the_remapper():
    protos = prototypes(versions=("V3",), dtypes=("float32",))
    frozen = next(p for p in protos if p.kind == "forward" and not p.is_training)
    training = docs_example()
    texts = {}
    for p in (frozen, training):
        graph, feeds, fetches = p.graph()
        texts[p.name] = render(build_plan(graph, feeds=feeds, fetches=fetches))["main.cc"]
    remapper_off = "mutable_rewrite_options()->set_remapping(RewriterConfig::OFF);"
    assert remapper_off in texts[frozen.name] and "ClientSession session(scope, options);" in texts[frozen.name]
    assert remapper_off not in texts[training.name] and "ClientSession session(scope);" in texts[training.name]
