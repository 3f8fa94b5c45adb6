"""The ``tf-python`` export, run on real TensorFlow and compared with fbnops' own results.

Every prototype (the docs' example; V1/V2/V3 forward and gradient in every layout and dtype
each has, training and frozen; TF Python's second-order gradient) goes into ONE exported
script, so TensorFlow is imported once. Tolerances (``export_helpers.float_tolerance``): fbnops
sums in float64 and rounds once, TensorFlow sums in float32; 16-bit results may differ by a
rounding step of their type.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from export_helpers import DTYPES, Prototype, assert_close, batch, float_tolerance, prototypes, run_export

import fbnops
from fbnops.framework.graph import Graph
from fbnops.framework.scope import Scope
from fbnops.testing import extras
from fbnops.tools import runfile
from fbnops.tools.export import build_plan

pytestmark = pytest.mark.skipif(not extras.have("tensorflow"), reason=extras.reason("export"))

PROTOTYPES = prototypes()


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """All prototypes exported as one tf-python project, run once: (plan, outputs, seconds)."""
    graph, feeds, fetches = batch(PROTOTYPES)
    plan = build_plan(graph, feeds=feeds, fetches=fetches)
    out = fbnops.export(graph, "tf-python", tmp_path_factory.mktemp("tfpy") / "all", feeds=feeds, fetches=fetches)
    t0 = time.perf_counter()
    outputs = run_export(out, plan.fetches)
    return plan, outputs, time.perf_counter() - t0


def _of(plan, proto: Prototype) -> list[str]:
    return [f for f in plan.fetches if f.startswith(proto.name + "/")]


@pytest.mark.parametrize("proto", PROTOTYPES, ids=lambda p: p.name)
def test_prototype_matches_fbnops(exported, proto):
    plan, outputs, _ = exported
    names = _of(plan, proto)
    assert names, proto.name
    worst = assert_close(outputs, {f: plan.expected[f] for f in names}, float_tolerance)
    assert np.isfinite(worst)


def test_verification_summary(exported):
    """One line per dtype for the verification table (printed with -s; asserted: every case ran)."""
    plan, outputs, seconds = exported
    assert set(outputs) == set(plan.fetches)
    worst: dict[str, float] = {}  # by the fetched tensor's dtype
    for f in plan.fetches:
        want, got = plan.expected[f], outputs[f]
        if want.dtype == DTYPES["bfloat16"]:
            got = got.astype(want.dtype)
        diff = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) if want.size else 0.0
        worst[want.dtype.name] = max(worst.get(want.dtype.name, 0.0), diff)
    summary = {"programs": 1, "cases": len(PROTOTYPES), "fetches": len(plan.fetches), "run_seconds": round(seconds, 1),
               "max_abs_diff": worst}  # fmt: skip
    print("tf-python verification:", json.dumps(summary))
    assert summary["cases"] == len(PROTOTYPES) > 90


def test_node_names_are_fbnops_names(exported, tmp_path):
    """In graph mode every fbnops node is a TensorFlow node of the same name and type."""
    tf = extras.require("tensorflow", "export")
    plan, _, _ = exported
    proto = next(p for p in PROTOTYPES if p.name == "second_nchw_frozen")
    graph, feeds, fetches = proto.graph()
    out = fbnops.export(graph, "tf-python", tmp_path / "names", feeds=feeds, fetches=fetches)
    spec = importlib.util.spec_from_file_location("exported_main", out / "main.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tf_graph = tf.Graph()
    with tf_graph.as_default():
        module.build()
    tf_types = {op.name: op.type for op in tf_graph.get_operations()}
    for op in build_plan(graph, feeds=feeds, fetches=fetches).ops:
        if op.type != "FusedBatchNormGradGrad":  # TF Python's gradient subgraph, under that name scope
            assert tf_types.get(op.name) == op.type, op.name
    assert any(n.startswith("gradients_1/FusedBatchNormGradGrad/") for n in tf_types)


def test_run_file_exports_eager_and_matches_fbnops_run(tmp_path):
    """A run file (constants only) through the CLI: an eager script, equal to `fbnops run`."""
    doc = {
        "inputs": {
            "x": {"random": {"shape": [4, 5, 5, 3], "seed": 0, "loc": 5.0, "scale": 2.0}},
            "scale": {"value": [1.0, 0.5, 2.0]},
        },
        "ops": [
            {"name": "bn", "op": "FusedBatchNormV3",
             "inputs": {"x": "x", "scale": "scale", "offset": {"zeros": [3]}, "mean": {"zeros": [0]},
                        "variance": {"zeros": [0]}}, "attrs": {"epsilon": 0.001}},
            {"name": "grad", "op": "FusedBatchNormGradV3",
             "inputs": {"y_backprop": "bn", "x": "x", "scale": "scale", "reserve_space_1": "bn.reserve_space_1",
                        "reserve_space_2": "bn:4", "reserve_space_3": "bn.reserve_space_3"}},
        ],
        "fetch": ["bn", "bn.batch_variance", "grad:0", "grad.scale_backprop"],
    }  # fmt: skip
    src = tmp_path / "prog.json"
    src.write_text(json.dumps(doc))
    from fbnops.cli import main

    assert main(["export", "--target", "tf-python", "-o", str(tmp_path / "out"), str(src)]) == 0
    assert "tf.compat.v1.Session" not in (tmp_path / "out" / "main.py").read_text()  # eager
    want = runfile.run_file(src)
    got = run_export(tmp_path / "out", ["bn:0", "bn:2", "grad:0", "grad:1"])
    assert_close(dict(zip(doc["fetch"], got.values(), strict=True)), want, float_tolerance)


def test_tensorflow_error_is_printed_and_exits_1(tmp_path):
    """fbnops runs a frozen NCHW grad op (documented: it does better); TensorFlow's CPU kernel refuses it."""
    scope = Scope(Graph())
    rng = np.random.default_rng(0)
    x = scope.placeholder(np.float32, (2, 3, 2, 2), name="x")
    c = [scope.constant(rng.uniform(1, 2, 3).astype(np.float32), name=n) for n in ("scale", "mean", "variance")]
    attrs = {"epsilon": 0.001, "data_format": "NCHW", "is_training": False}
    grad = scope.with_op_name("grad").add_op("FusedBatchNormGradV3", [x, x, c[0], c[1], c[2], c[1]], attrs)
    out = fbnops.export(scope, "tf-python", tmp_path / "e", feeds={x: rng.random((2, 3, 2, 2), np.float32)},
                        fetches=[grad.outputs[0]])  # fmt: skip
    done = subprocess.run(["bash", str(out / "run.sh")], capture_output=True, text=True, timeout=600,
                          env=_env())  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert re.search(r"^InvalidArgumentError: ", done.stderr, re.M), done.stderr  # the exception class, its message
    assert "FusedBatchNormGrad with is_training=False only support NHWC tensor format" in done.stderr
    assert not list((out / "outputs").iterdir())


def test_missing_tensorflow_says_so_and_exits_3(tmp_path):
    shadow = tmp_path / "shadow" / "tensorflow"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('hidden for this test')\n")
    graph, feeds, fetches = next(p for p in PROTOTYPES if p.name == "docs_example").graph()
    out = fbnops.export(graph, "tf-python", tmp_path / "m", feeds=feeds, fetches=fetches)
    done = subprocess.run(["bash", str(out / "run.sh")], capture_output=True, text=True, timeout=120,
                          env={**_env(), "PYTHONPATH": str(shadow.parent)})  # fmt: skip
    assert done.returncode == 3
    assert done.stdout.strip() == "run.sh: TensorFlow (Python) not found: pip install 'fbnops[export]'"


def _env() -> dict:
    import os

    return {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
