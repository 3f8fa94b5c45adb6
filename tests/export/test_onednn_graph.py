"""``onednn-graph`` export, built and run against real oneDNN 3.2 (the ``export`` extra's wheels).

One program of every float32 prototype that oneDNN Graph can express (V1/V2/V3 forward, training
and frozen, and the training gradient, in NHWC/NCHW/NDHWC/NCDHW), and one of the 16-bit ones per
dtype, run only where the CPU has that dtype's kernels (an AVX2-only CPU has neither, an AMD Zen 5
no float16: the test skips and prints why). Results are compared with
fbnops' own (``plan.expected``) at ``float_tolerance``: oneDNN sums in float32 where fbnops sums in
float64, so float32 results differ by a few ulps of the sums. What oneDNN Graph cannot express is
refused at export time with ``UnimplementedError``; nothing is written then.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from export_helpers import (
    EPSILON,
    assert_close,
    batch,
    float_tolerance,
    inputs,
    prototypes,
    run_export,
    skip_if_missing,
)

from fbnops.framework.errors import UnimplementedError
from fbnops.framework.graph import Graph
from fbnops.framework.scope import Scope
from fbnops.tools.export import build_plan, export, write_plan

TARGET = "onednn-graph"
EXIT_UNSUPPORTED = 4  # run.sh: a partition has no kernel on this CPU


def expressible(p) -> bool:
    """What the target maps: every forward; the gradient in training mode only (not second order)."""
    return p.kind in ("forward", "grad_op") or (p.kind == "gradient" and p.is_training)


def _export(protos, directory):
    graph, feeds, fetches = batch(protos)
    plan = build_plan(graph, feeds=feeds, fetches=fetches, source="tests/export/test_onednn_graph.py")
    return plan, write_plan(plan, TARGET, directory)


def _run_timed(directory, fetches):
    """(outputs, build+run seconds, run seconds): the second run reuses the built binary."""
    start = time.perf_counter()
    actual = run_export(directory, fetches)
    first = time.perf_counter() - start
    start = time.perf_counter()
    run_export(directory, fetches)
    return actual, first, time.perf_counter() - start


def test_float32_prototypes_match_fbnops(tmp_path, capsys):
    protos = [p for p in prototypes(dtypes=("float32",), second_order=False) if expressible(p)]
    assert {p.version for p in protos} == {"V1", "V2", "V3"} and len({p.data_format for p in protos}) == 4
    plan, directory = _export(protos, tmp_path / "f32")
    actual, first, run = _run_timed(directory, plan.fetches)
    worst = assert_close(actual, plan.expected, float_tolerance)
    with capsys.disabled():
        print(f"\n{TARGET} float32: 1 program, {len(protos)} prototypes, {len(plan.fetches)} fetches, "
              f"max |diff| {worst:.2e}, build+run {first:.1f} s, run {run:.2f} s")  # fmt: skip


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_16_bit_prototypes_where_the_cpu_has_kernels(dtype, tmp_path, capsys):
    """One program per dtype: CPUs differ per dtype (an AMD Zen 5 has oneDNN's bfloat16 kernels but no float16 ones)."""
    protos = [p for p in prototypes(versions=("V3",), dtypes=(dtype,), second_order=False)
              if expressible(p) and p.data_format in ("NHWC", "NCHW")]  # fmt: skip
    plan, directory = _export(protos, tmp_path / dtype)
    done = subprocess.run(["bash", str(directory / "run.sh")], capture_output=True, text=True, timeout=1200)
    skip_if_missing(done)
    if done.returncode == EXIT_UNSUPPORTED:
        with capsys.disabled():
            print(f"\n{TARGET} {dtype}: {done.stderr.strip()}")
        pytest.skip(f"real oneDNN has no {dtype} batch-norm kernel on this CPU: {done.stderr.strip()}")
    actual = run_export(directory, plan.fetches)
    assert_close(actual, plan.expected, float_tolerance)


def _onednn_313_prefix():
    """The prefix of real oneDNN 3.13 (the onednn/onednn-devel 2026.1.0 wheels), as the mirror's oracle finds it."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "oracles" / "onednn"))
    import onednn_oracle

    found = onednn_oracle.installs().get("3.13")
    if found is None:
        pytest.skip(onednn_oracle.not_found("3.13"))
    return found.prefix


def test_prototypes_run_on_onednn_3_13_through_onednn_prefix(tmp_path, capsys):
    """The same exported programs built against oneDNN 3.13 (``ONEDNN_PREFIX=<prefix> ./run.sh``, the SYCL
    wheels' run-time libraries set up by run.sh): every float32 prototype, and the bfloat16 and float16 ones
    where this CPU has that dtype's kernels, agree with fbnops."""
    env = {"ONEDNN_PREFIX": str(_onednn_313_prefix())}
    f32 = [p for p in prototypes(dtypes=("float32",), second_order=False) if expressible(p)]
    plan, directory = _export(f32, tmp_path / "f32")
    worst = assert_close(run_export(directory, plan.fetches, extra_env=env), plan.expected, float_tolerance)
    notes = []
    for dtype in ("bfloat16", "float16"):  # a program per dtype: a CPU can have one's kernels and not the other's
        half = [p for p in prototypes(versions=("V3",), dtypes=(dtype,), second_order=False)
                if expressible(p) and p.data_format in ("NHWC", "NCHW")]  # fmt: skip
        plan16, directory16 = _export(half, tmp_path / dtype)
        done = subprocess.run(["bash", str(directory16 / "run.sh")], capture_output=True, text=True, timeout=1200,
                              env=dict(os.environ) | env)  # fmt: skip
        if done.returncode == EXIT_UNSUPPORTED:
            notes.append(f"{len(half)} {dtype} prototypes: no kernels on this CPU")
            continue
        assert_close(run_export(directory16, plan16.fetches, extra_env=env), plan16.expected, float_tolerance)
        notes.append(f"{len(half)} {dtype} prototypes agree")
    with capsys.disabled():
        print(f"\n{TARGET} on oneDNN 3.13: {len(f32)} float32 prototypes, max |diff| {worst:.2e}; {'; '.join(notes)}")


def test_support_ops_transpose_addn_oneslike_identity(tmp_path):
    """A learner's NHWC feed transposed to NCHW (host loop), AddN (oneDNN Add ops), OnesLike, Identity."""
    scope = Scope(Graph())
    v = inputs("NHWC")
    x = scope.placeholder(np.float32, v["x"].shape, name="x")
    perm = scope.constant(np.array([0, 3, 1, 2], np.int32), name="perm")
    xt = scope.with_op_name("to_nchw").add_op("Transpose", [x, perm], {}).output(0)
    consts = [scope.constant(v[k], name=k) for k in ("scale", "offset")]
    consts += [scope.constant(np.zeros(0, np.float32), name=k) for k in ("mean", "variance")]
    bn = scope.with_op_name("bn").add_op("FusedBatchNormV3", [xt, *consts], {"epsilon": EPSILON, "data_format": "NCHW"})
    total = scope.with_op_name("sum").add_op("AddN", [bn.outputs[0], bn.outputs[0], xt], {}).output(0)
    ones = scope.with_op_name("ones").add_op("OnesLike", [x], {}).output(0)
    same = scope.with_op_name("same").add_op("Identity", [total], {}).output(0)
    plan = build_plan(scope.graph, feeds={x: v["x"]}, fetches=[total, ones, same, bn.outputs[2]])
    directory = write_plan(plan, TARGET, tmp_path / "support")
    assert "op::kind::Add" in (directory / "main.cpp").read_text()
    assert_close(run_export(directory, plan.fetches), plan.expected, float_tolerance)


def _forward_graph(**attrs):
    scope = Scope(Graph())
    v = inputs("NHWC")
    x = scope.placeholder(np.float32, v["x"].shape, name="x")
    consts = [scope.constant(v[k], name=k) for k in ("scale", "offset", "mean", "variance")]
    full = {"epsilon": EPSILON, "data_format": "NHWC", "is_training": True} | attrs
    bn = scope.with_op_name("bn").add_op("FusedBatchNormV3", [x, *consts], full)
    return scope.graph, {x: v["x"]}, bn


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("exponential_avg_factor", "exponential_avg_factor 0.5 != 1"),
        ("frozen gradient", "the frozen gradient (is_training=False)"),
        ("second order", "FusedBatchNormGradGrad"),
    ],
)
def test_what_onednn_cannot_express_is_refused_at_export(tmp_path, case, message):
    if case == "exponential_avg_factor":
        graph, feeds, bn = _forward_graph(exponential_avg_factor=0.5)
        fetches = [bn.outputs[2]]
    else:
        kind = "gradient" if case == "frozen gradient" else "second_order"
        proto = next(p for p in prototypes(versions=("V3",), dtypes=("float32",), layouts=("NHWC",))
                     if p.kind == kind and p.is_training == (kind == "second_order"))  # fmt: skip
        graph, feeds, fetches = proto.graph()
    with pytest.raises(UnimplementedError, match="onednn-graph export") as info:
        export(graph, TARGET, tmp_path / "out", feeds=feeds, fetches=fetches)
    assert message in str(info.value)
    assert not (tmp_path / "out").exists()  # nothing written


def test_generated_program_reads_as_onednn_graph_code(tmp_path):
    graph, feeds, bn = _forward_graph()
    plan = build_plan(graph, feeds=feeds, fetches=[bn.outputs[0], bn.outputs[2]], source='a "file"\n#error injected')
    from fbnops.tools.export.onednn_graph import render

    files = render(plan)
    main = files["main.cpp"]
    for needle in ('#include "oneapi/dnnl/dnnl_graph.hpp"', "op::kind::BatchNormForwardTraining",
                   "op::attr::epsilon", '"NXC"', "g.finalize();", "g.get_partitions()", "p.compile(ins, outs, eng)",
                   "cp.execute(strm, in_ts, out_ts)", "bessel(", "dev_guide_op_batchnormtrainingbackward"):  # fmt: skip
        assert needle in main, needle
    assert main.count("{") == main.count("}") and main.count("(") == main.count(")")
    assert "-ldnnl" in files["run.sh"] and "exit 3" in files["run.sh"]
    assert not any(line.startswith("#error") for line in main.splitlines())  # a source line stays in its comment


def test_run_sh_names_what_is_missing(tmp_path):
    graph, feeds, bn = _forward_graph()
    directory = export(graph, TARGET, tmp_path / "out", feeds=feeds, fetches=[bn.outputs[0]])
    done = subprocess.run(["sh", str(directory / "run.sh")], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHON": "false"}, timeout=60)  # fmt: skip
    assert done.returncode == 3
    assert done.stdout.count("\n") == 1 and "pip install 'fbnops[export]'" in done.stdout
