"""The ``fbnops`` console script, run as a user runs it (a subprocess).

Every user mistake gives exit code 2 and one line ``fbnops: error: ...`` on stderr that
names the problem, never a traceback, and writes nothing; 1 stays "a check failed"."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import ml_dtypes
import numpy as np
import pytest
from test_runfile import JOB as RUNFILE_JOB

import fbnops
from fbnops.testing import extras

EXE = shutil.which("fbnops")
CMD = [EXE] if EXE else [sys.executable, "-m", "fbnops.cli"]


def fbnops_cli(*args, cwd=None, blocked=()):
    """Run the CLI; ``blocked`` modules are made unimportable (an optional dependency that is absent)."""
    if blocked:
        code = f"import sys; sys.modules.update(dict.fromkeys({list(blocked)!r})); from fbnops.cli import main; "
        cmd = [sys.executable, "-c", code + "sys.exit(main(sys.argv[1:]))"]
    else:
        cmd = CMD
    return subprocess.run([*cmd, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_console_script_is_installed():
    assert EXE is not None, "pip install should put an 'fbnops' console script on PATH"


def test_demo_runs_and_checks():
    r = fbnops_cli("demo", "--backend", "reference")
    assert r.returncode == 0, r.stderr
    assert "FusedBatchNormGradV3" in r.stdout and "finite-difference check" in r.stdout and "OK" in r.stdout
    assert "backend: reference" in r.stdout and r.stderr == ""


def test_help_everywhere():
    for sub in ([], ["demo"], ["run"], ["bench"], ["check"], ["explain"], ["info"]):
        r = fbnops_cli(*sub, "--help")
        assert r.returncode == 0 and "usage: fbnops" in r.stdout
    r = fbnops_cli()
    assert r.returncode == 2 and "usage: fbnops" in r.stderr and r.stdout == ""


def test_info_text_and_json():
    r = fbnops_cli("info")
    assert r.returncode == 0
    assert f"fbnops {fbnops.__version__}" in r.stdout and "OpenMP" in r.stdout and "threads" in r.stdout
    info = json.loads(fbnops_cli("info", "--json").stdout)
    assert info["version"] == fbnops.__version__ and info["backends"]["reference"] == "available"


def test_check_passes_covers_backends_and_prints_no_progress_off_a_terminal():
    r = fbnops_cli("check", "--shape", "3,4,4,5", "--data-format", "NCHW", "--dtype", "float16")
    assert r.returncode == 0, r.stdout + r.stderr
    for b in fbnops.available_backends():
        assert b in r.stdout
    assert "FAILED" not in r.stdout and r.stderr == ""  # no progress bar in a pipe
    doc = json.loads(fbnops_cli("check", "--shape", "2,3,3,2", "--backends", "reference", "--json").stdout)
    assert doc["ok"] and {res["training"] for res in doc["results"]} == {True, False}


def test_check_fails_on_a_wrong_gradient(monkeypatch, capsys):
    """Exit 1 ("a check failed") when a backend's gradient is off, caught by the finite differences."""
    from fbnops import cli

    real = fbnops.raw_ops.FusedBatchNormGradV3

    def off(**kw):
        out = real(**kw)
        return out._replace(offset_backprop=out.offset_backprop + np.float32(0.01))

    monkeypatch.setattr(fbnops.raw_ops, "FusedBatchNormGradV3", off)
    assert cli.main(["check", "--shape", "2,3,3,2", "--backends", "reference"]) == 1
    assert "FAILED" in capsys.readouterr().out


def test_check_shows_progress_on_a_terminal():
    extras.require("rich", "cli")
    import pty

    master, slave = pty.openpty()
    env = dict(os.environ, TERM="xterm", COLUMNS="100")
    p = subprocess.Popen([*CMD, "check", "--shape", "2,3,3,2"], stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    out, _ = p.communicate(timeout=300)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert p.returncode == 0
    assert b"gradient checks" in seen  # the bar, on the terminal
    assert b"gradient checks" not in out and b"\x1b" not in out  # the table alone on stdout


def test_explain_prints_every_step_and_checks_it():
    r = fbnops_cli("explain")
    assert r.returncode == 0, r.stderr
    for step in ("mean", "variance", "rstd", "x_hat", "sum_dy", "sum_dy_xc", "dx_via_mean", "dx_via_variance"):
        assert step in r.stdout
    assert "Checked against the" in r.stdout and "FAILED" not in r.stdout
    md = fbnops_cli("explain", "--markdown", "--frozen", "--data-format", "NCHW", "--dtype", "bfloat16")
    assert md.returncode == 0 and "$$" in md.stdout and "dx_via_mean" not in md.stdout
    assert json.loads(fbnops_cli("explain", "--json").stdout)["ok"]


JOB = copy.deepcopy(RUNFILE_JOB)  # tests/test_runfile.py's run file, with dy read from an .npy file
JOB["inputs"]["dy"] = {"npy": "dy.npy"}


@pytest.fixture
def workdir(tmp_path):
    """A run file, its .npy input, a GraphDef with a placeholder and its feed."""
    from fbnops.framework.graph import Graph
    from fbnops.framework.scope import Scope

    np.save(tmp_path / "dy.npy", np.random.default_rng(1).standard_normal((4, 3, 3, 2)).astype(np.float32))
    (tmp_path / "job.json").write_text(json.dumps(JOB, indent=1))
    s = Scope(Graph())
    x = s.placeholder(np.float32, (2, 2, 2, 3), name="x")
    v = s.constant(np.ones(3, np.float32))
    s.with_op_name("bn").add_op("FusedBatchNormV3", [x, v, v, v, v], {})
    (tmp_path / "g.pbtxt").write_text(s.graph.to_pbtxt())
    np.save(tmp_path / "x.npy", np.random.default_rng(2).standard_normal((2, 2, 2, 3)).astype(np.float32))
    (tmp_path / "bad.json").write_text('{\n  "ops": [\n    {"op": "FusedBatchNormV3",}\n  ]\n}\n')
    (tmp_path / "huge.json").write_text(json.dumps({**JOB, "inputs": {**JOB["inputs"], "x": {"zeros": [1 << 40]}}}))
    bomb = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    bomb += [f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]" for p, n in zip("abcdefgh", "bcdefghi", strict=True)]
    (tmp_path / "bomb.yaml").write_text("\n".join(bomb) + "\n")
    (tmp_path / "outdir").mkdir()
    (tmp_path / "truncated.pbtxt").write_text('node {\n  name: "x"\n  op: "Placeholder"\n')
    (tmp_path / "unknown.pbtxt").write_text('node {\n  name: "x"\n  op: "Bogus"\n}\n')
    return tmp_path


def test_run_file_matches_raw_ops_and_bare_name_is_output_0(workdir):
    r = fbnops_cli("run", "job.json", "-o", "out.npz", cwd=workdir)
    assert r.returncode == 0, r.stderr
    out = np.load(workdir / "out.npz")
    x = np.random.default_rng(0).standard_normal((4, 3, 3, 2)).astype(np.float32)
    e = np.zeros(0, np.float32)
    f = fbnops.raw_ops.FusedBatchNormV3(x=x, scale=np.array([1, 2], np.float32), offset=np.zeros(2, np.float32),
                                        mean=e, variance=e, epsilon=1e-3)  # fmt: skip
    g = fbnops.raw_ops.FusedBatchNormGradV3(
        y_backprop=np.load(workdir / "dy.npy"),
        x=x,
        scale=np.array([1, 2], np.float32),
        reserve_space_1=f.reserve_space_1,
        reserve_space_2=f.reserve_space_2,
        reserve_space_3=f.reserve_space_3,
    )  # fmt: skip  (the run file leaves the gradient's epsilon at TensorFlow's default)
    np.testing.assert_array_equal(out["bn"], f.y)
    np.testing.assert_array_equal(out["grad.x_backprop"], g.x_backprop)
    np.testing.assert_array_equal(out["grad:1"], g.scale_backprop)
    listed = json.loads(fbnops_cli("run", "job.json", "--json", cwd=workdir).stdout)
    assert listed["arrays"]["bn"] == {"shape": [4, 3, 3, 2], "dtype": "float"}
    assert (workdir / "job.out.npz").exists()


def test_run_yaml_and_bfloat16_output_is_plain_float32(workdir):
    yaml = extras.require("yaml", "yaml")
    job = copy.deepcopy(JOB)
    job["inputs"]["x"]["random"]["dtype"] = "bfloat16"
    job["inputs"]["dy"] = {"random": {"shape": [4, 3, 3, 2], "seed": 1, "dtype": "bfloat16"}}
    (workdir / "job.yaml").write_text(yaml.safe_dump(job))
    r = fbnops_cli("run", "job.yaml", "--backend", "reference", cwd=workdir)
    assert r.returncode == 0, r.stderr
    assert "stored as float32" in r.stdout
    out = np.load(workdir / "job.out.npz")  # plain NumPy reads it
    assert out["grad.x_backprop"].dtype == np.float32
    from fbnops.tools.runfile import load_npz

    assert load_npz(workdir / "job.out.npz")["grad.x_backprop"].dtype == ml_dtypes.bfloat16


def test_run_graphdef_bare_fetch_is_output_0(workdir):
    r = fbnops_cli("run", "g.pbtxt", "--feed", "x=x.npy", "--fetch", "bn", "--fetch", "bn:2", "-o", "o.npz",
                   cwd=workdir)  # fmt: skip
    assert r.returncode == 0, r.stderr
    one = np.ones(3, np.float32)
    ref = fbnops.raw_ops.FusedBatchNormV3(x=np.load(workdir / "x.npy"), scale=one, offset=one, mean=one, variance=one)
    out = np.load(workdir / "o.npz")  # plain arrays, no pickled objects
    np.testing.assert_array_equal(out["bn"], ref.y)
    np.testing.assert_array_equal(out["bn:2"], ref.batch_variance)


# Every mistake: (arguments, text the one-line message must contain).  The list is the
# closing note's "CLI mistakes tried"; each must exit 2 with one line and no traceback.
MISTAKES = [
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["check", "--shape", "4,x"], "shape must be comma-separated integers"),
    (["check", "--shape", "4,4,4"], "shape must have 4 or 5 dims"),
    (["check", "--data-format", "NDHWC"], "--data-format NDHWC needs a 5-D --shape"),
    (["check", "--points", "many"], "--points: must be a positive integer, got 'many'"),
    (["check", "--points", "-3"], "--points: must be a positive integer, got '-3'"),  # was: OK after checking nothing
    (["check", "--points", str(10**400)], "--points: at most 100000 points"),  # was: a loop without end
    (["--threads", "0", "info"], "num_threads"),
    (["--threads", "two", "info"], "invalid int value: 'two'"),
    (["explain", "--shape", "100,100,100,100"], "at most 2**16 elements"),
    (["run", "job.json", "-o", "/missing/dir/out.npz"], "output directory '/missing/dir' does not exist"),
    (["run", "job.json", "-o", "outdir"], "is a directory"),
    (["run", "nope.json"], "nope.json: cannot read: No such file or directory"),
    (["run", "bad.json"], "bad.json:3:"),
    (["run", "huge.json"], "OOM when allocating"),
    (["run", "bomb.yaml"], "billion laughs"),
    (["run", "job.json", "--fetch", "bn"], "--feed/--fetch are for GraphDef (.pbtxt) files"),
    (["run", "g.pbtxt", "--feed", "x=x.npy", "--fetch", "bn:9"], "'bn' (FusedBatchNormV3) has no output '9'"),
    (["run", "g.pbtxt", "--feed", "x=x.npy", "--fetch", "nosuchop"], "unknown reference 'nosuchop'"),
    (["run", "g.pbtxt", "--feed", "x", "--fetch", "bn"], "--feed expects NAME=FILE.npy"),
    (["run", "g.pbtxt", "--feed", "x=missing.npy", "--fetch", "bn"], "missing.npy"),
    (["run", "g.pbtxt", "--fetch", "bn"], "You must feed a value for placeholder tensor 'x'"),
    (["run", "g.pbtxt"], "a GraphDef run needs at least one --fetch"),
    (["run", "truncated.pbtxt", "--fetch", "x"], "truncated.pbtxt:1:6: truncated text"),
    (["run", "unknown.pbtxt", "--fetch", "x"], "unknown.pbtxt:3:3: node 'x': Op type not registered 'Bogus'"),
    (["run", "g.pbtxt", "--feed", "y=x.npy", "--fetch", "bn"], "--feed y: g.pbtxt: unknown reference 'y'"),
    (["run", "job.json", "--backend", "gpu"], "invalid choice: 'gpu'"),
    (["bench", "--peers", "bogus"], "unknown peer(s) ['bogus']"),
    (["bench", "--quick", "--rounds", "3"], "not allowed with argument --quick"),
    (["bench", "--rounds", "0"], "must be a positive integer"),
    (["bench", "--shapes", "1,2,3"], "must be 4 positive sizes N,H,W,C"),
    (["bench", "--shapes", "1,2,x,3"], "is not 4 comma-separated integers"),
    (["bench", "--dtypes", "float64"], "expected a comma-separated list of float32, bfloat16, float16"),
    (["bench", "--json", "/missing/dir/b.json"], "--json: output directory '/missing/dir' does not exist"),
    (["bench", "--compare", "nope.json"], "--compare: cannot read nope.json"),
    (["bench", "--compare", "job.json"], "job.json has no 'rows'"),
]
BLOCKED = [  # an optional dependency that is not installed
    (["bench", "--plot", "p.png"], ("matplotlib",), "--plot needs matplotlib: pip install 'fbnops[bench]'"),
    (["bench", "--peers", "torch"], ("torch",), "peer 'torch' cannot run: torch is not installed"),
    (["run", "job.yaml"], ("yaml",), "YAML run files need PyYAML"),
]


def test_every_mistake_is_one_line_exit_2_no_traceback_and_writes_nothing(workdir):
    (workdir / "job.yaml").write_text("ops: []\n")
    cases = [(args, (), message) for args, message in MISTAKES] + BLOCKED
    before = sorted(p.name for p in workdir.iterdir())
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda c: fbnops_cli(*c[0], cwd=workdir, blocked=c[1]), cases))
    failures = []
    for (args, _, message), r in zip(cases, runs, strict=True):
        lines = r.stderr.splitlines()
        ok = r.returncode == 2 and len(lines) == 1 and lines[0].startswith("fbnops: error: ") and message in lines[0]
        if not ok or "Traceback" in r.stderr or r.stdout.strip():
            failures.append((args, r.returncode, r.stderr[-600:], r.stdout[-200:]))
    assert failures == []
    assert sorted(p.name for p in workdir.iterdir()) == before  # no output, no temporary file


def test_plot_to_a_missing_directory_is_a_usage_error(workdir):
    extras.require("matplotlib", "bench")  # without it, --plot is refused first (BLOCKED above)
    r = fbnops_cli("bench", "--plot", "/missing/dir/p.png", cwd=workdir)
    assert r.returncode == 2 and r.stderr.startswith("fbnops: error: --plot: output directory"), r.stderr
    assert len(r.stderr.splitlines()) == 1 and r.stdout == ""


def test_broken_pipe_is_quiet():
    p = subprocess.run(f"{' '.join(CMD)} check --shape 2,3,3,2 | head -1", shell=True, capture_output=True,
                       text=True, timeout=300)  # fmt: skip
    assert p.stdout.startswith("fbnops check:") and p.stderr == ""


def test_distributed_demo_is_wired(monkeypatch):
    """``fbnops demo --ranks N`` calls ``fbnops.distributed.demo.main(N)`` and exits with its code."""
    from fbnops import cli
    from fbnops.distributed import demo

    calls = []
    monkeypatch.setattr(demo, "main", lambda ranks: calls.append(ranks) or 7)
    assert cli.main(["demo", "--ranks", "3"]) == 7 and calls == [3]


def test_distributed_demo_absent_or_bad_ranks_is_a_clean_error():
    r = fbnops_cli("demo", "--ranks", "2", blocked=("fbnops.distributed.demo",))
    assert r.returncode == 2 and r.stderr.startswith("fbnops: error: --ranks needs") and len(r.stderr.splitlines()) == 1
    r = fbnops_cli("demo", "--ranks", "0")
    assert r.returncode == 2 and "--ranks: must be a positive integer" in r.stderr
