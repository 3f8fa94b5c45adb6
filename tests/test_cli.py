"""The ``fbnops`` console script, run as a user runs it (a subprocess)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

import fbnops

EXE = shutil.which("fbnops")
CMD = [EXE] if EXE else [sys.executable, "-m", "fbnops.cli"]


def fbnops_cli(*args, cwd=None):
    return subprocess.run([*CMD, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_console_script_is_installed():
    assert EXE is not None, "pip install should put an 'fbnops' console script on PATH"


def test_demo_runs_and_checks():
    r = fbnops_cli("demo")
    assert r.returncode == 0, r.stderr
    assert "FusedBatchNormGradV3" in r.stdout and "finite-difference check" in r.stdout and "OK" in r.stdout
    r = fbnops_cli("demo", "--backend", "reference")
    assert r.returncode == 0 and "backend: reference" in r.stdout


def test_help_everywhere_and_bad_usage():
    for sub in ([], ["demo"], ["run"], ["bench"], ["check"], ["info"]):
        r = fbnops_cli(*sub, "--help")
        assert r.returncode == 0 and "usage: fbnops" in r.stdout
    assert fbnops_cli().returncode == 2
    assert fbnops_cli("frobnicate").returncode == 2
    assert fbnops_cli("check", "--shape", "4,x").returncode == 2
    assert fbnops_cli("--threads", "0", "info").returncode == 2


def test_info():
    r = fbnops_cli("info")
    assert r.returncode == 0
    assert f"fbnops {fbnops.__version__}" in r.stdout and "OpenMP" in r.stdout and "threads" in r.stdout


def test_check_passes_and_covers_backends():
    r = fbnops_cli("check", "--shape", "3,4,4,5", "--data-format", "NCHW", "--dtype", "float16")
    assert r.returncode == 0, r.stdout + r.stderr
    for b in fbnops.available_backends():
        assert b in r.stdout
    assert "FAILED" not in r.stdout


JOB = {
    "inputs": {
        "x": {"random": {"shape": [4, 3, 3, 2], "seed": 0}},
        "dy": {"npy": "dy.npy"},
        "scale": {"value": [1.0, 2.0]},
    },
    "ops": [
        {
            "name": "bn",
            "op": "FusedBatchNormV3",
            "inputs": {
                "x": "x",
                "scale": "scale",
                "offset": {"zeros": [2]},
                "mean": {"zeros": [0]},
                "variance": {"zeros": [0]},
            },
            "attrs": {"epsilon": 0.001},
        },
        {
            "name": "grad",
            "op": "FusedBatchNormGradV3",
            "inputs": {
                "y_backprop": "dy",
                "x": "x",
                "scale": "scale",
                "reserve_space_1": "bn.reserve_space_1",
                "reserve_space_2": "bn:4",
                "reserve_space_3": "bn.reserve_space_3",
            },
            "attrs": {"epsilon": 0.001},
        },
    ],
    "fetch": ["bn.y", "grad.x_backprop", "grad:1"],
}


def test_run_file_matches_raw_ops(tmp_path):
    dy = np.random.default_rng(1).standard_normal((4, 3, 3, 2)).astype(np.float32)
    np.save(tmp_path / "dy.npy", dy)
    (tmp_path / "job.json").write_text(json.dumps(JOB))
    r = fbnops_cli("run", tmp_path / "job.json", "-o", tmp_path / "out.npz")
    assert r.returncode == 0, r.stderr
    out = np.load(tmp_path / "out.npz")
    x = np.random.default_rng(0).standard_normal((4, 3, 3, 2)).astype(np.float32)
    f = fbnops.raw_ops.FusedBatchNormV3(
        x=x,
        scale=np.array([1, 2], np.float32),
        offset=np.zeros(2, np.float32),
        mean=np.zeros(0, np.float32),
        variance=np.zeros(0, np.float32),
        epsilon=1e-3,
    )
    g = fbnops.raw_ops.FusedBatchNormGradV3(
        y_backprop=dy,
        x=x,
        scale=np.array([1, 2], np.float32),
        reserve_space_1=f.reserve_space_1,
        reserve_space_2=f.reserve_space_2,
        reserve_space_3=f.reserve_space_3,
        epsilon=1e-3,
    )
    np.testing.assert_array_equal(out["bn.y"], f.y)
    np.testing.assert_array_equal(out["grad.x_backprop"], g.x_backprop)
    np.testing.assert_array_equal(out["grad:1"], g.scale_backprop)


def test_run_yaml(tmp_path):
    yaml = pytest.importorskip("yaml")
    np.save(tmp_path / "dy.npy", np.ones((4, 3, 3, 2), np.float32))
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(JOB))
    r = fbnops_cli("run", tmp_path / "job.yaml", "--backend", "reference")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "job.out.npz").exists()


def _mutate(path, *keys_and_value):
    job = json.loads(json.dumps(JOB))
    *keys, value = keys_and_value
    node = job
    for k in keys[:-1]:
        node = node[k]
    if value is KeyError:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    path.write_text(json.dumps(job))


BAD = [
    (("ops", 1, "inputs", "scale", "scal"), "ops[1] (grad).inputs.scale: unknown reference 'scal'"),
    (("ops", 0, "op", "FusedBatchNormV4"), "ops[0] (bn).op: unknown op type 'FusedBatchNormV4'"),
    (("ops", 0, "attrs", "data_format", "NXYZ"), "ops[0] (bn): Value for attr 'data_format'"),
    (("ops", 0, "inputs", "scale", {"value": [1.0, 2.0, 3.0]}), "Dimensions must be equal, but are 2 and 3"),
    (("ops", 1, "inputs", "reserve_space_2", "bn:9"), "'bn' (FusedBatchNormV3) has no output '9'"),
    (("ops", 1, "inputs", "offset", "x"), "ops[1] (grad).inputs.offset: FusedBatchNormGradV3 has no input 'offset'"),
    (("ops", 1, "inputs", "x", KeyError), "ops[1] (grad).inputs: missing ['x']"),
    (("inputs", "x", "random", "shape", [4, -3]), "inputs.x.random.shape: shape must be a list of non-negative"),
    (("inputs", "dy", "npy", "missing.npy"), "inputs.dy.npy: cannot load missing.npy"),
    (("inputs", "scale", "dtype", "int8"), "inputs.scale.dtype: dtype must be one of"),
    (("fetch", []), "fetch: must be a non-empty list"),
    (("inputs", "scale", "value", None), "inputs.scale.value: must be a number or a nested list of numbers"),
    (("inputs", "scale", "value", [1.0, "a"]), "inputs.scale.value: must be a number"),
    (("extra", 1), "extra: unknown top-level field"),
]


@pytest.mark.parametrize("mutation,message", BAD)
def test_bad_run_files_name_entry_and_field_and_write_nothing(tmp_path, mutation, message):
    np.save(tmp_path / "dy.npy", np.ones((4, 3, 3, 2), np.float32))
    _mutate(tmp_path / "job.json", *mutation)
    r = fbnops_cli("run", tmp_path / "job.json", "-o", tmp_path / "out.npz")
    assert r.returncode == 2
    assert message in r.stderr, r.stderr
    assert not (tmp_path / "out.npz").exists()
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".npz"] == []


def test_bad_json_and_missing_file(tmp_path):
    (tmp_path / "job.json").write_text("{ not json")
    r = fbnops_cli("run", tmp_path / "job.json")
    assert r.returncode == 2 and "not valid JSON" in r.stderr
    r = fbnops_cli("run", tmp_path / "nope.json")
    assert r.returncode == 2 and "cannot read" in r.stderr


def test_run_graphdef(tmp_path):
    from fbnops.framework.graph import Graph
    from fbnops.framework.scope import Scope

    s = Scope(Graph())
    x = s.placeholder(np.float32, (2, 2, 2, 3), name="x")
    v = s.constant(np.ones(3, np.float32))
    s.with_op_name("bn").add_op("FusedBatchNormV3", [x, v, v, v, v], {})
    (tmp_path / "g.pbtxt").write_text(s.graph.to_pbtxt())
    xv = np.random.default_rng(2).standard_normal((2, 2, 2, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", xv)
    r = fbnops_cli(
        "run", tmp_path / "g.pbtxt", "--feed", f"x={tmp_path / 'x.npy'}", "--fetch", "bn:0", "-o", tmp_path / "o.npz"
    )
    assert r.returncode == 0, r.stderr
    ref = fbnops.raw_ops.FusedBatchNormV3(
        x=xv,
        scale=np.ones(3, np.float32),
        offset=np.ones(3, np.float32),
        mean=np.ones(3, np.float32),
        variance=np.ones(3, np.float32),
    )
    np.testing.assert_array_equal(np.load(tmp_path / "o.npz")["bn:0"], ref.y)
    r = fbnops_cli("run", tmp_path / "g.pbtxt", "--fetch", "bn:0")
    assert r.returncode == 2 and "You must feed a value for placeholder tensor 'x'" in r.stderr


def test_bench_quick_runs_with_progress_and_table():
    r = fbnops_cli("bench", "--quick", "--peers", "ref", "--rounds", "1")
    assert r.returncode == 0, r.stderr
    assert "ratio" in r.stdout and "# raw_ops call" in r.stdout
    assert "floor" in r.stdout.splitlines()[2]  # the streaming floor column
    rows = [line for line in r.stdout.splitlines() if line.startswith("grad ")]
    assert len(rows) == 10
    for row in rows:  # fbnops time, then ref time and ratio, ..., the floor in ms: all positive
        assert float(row.split()[-2].rstrip("m")) > 0
