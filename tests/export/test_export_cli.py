"""``fbnops export``: the command reads SOURCE as ``fbnops run`` does, and fails as it does, on one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from export_helpers import X, core_graph

from fbnops.cli import main


def _cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _pbtxt(tmp_path) -> tuple[Path, Path]:
    scope, _, _ = core_graph()
    graph_file, x_file = tmp_path / "g.pbtxt", tmp_path / "x.npy"
    graph_file.write_text(scope.graph.to_pbtxt())
    np.save(x_file, X)
    return graph_file, x_file


def test_cli_exports_a_pbtxt_with_feeds_and_fetches(tmp_path, capsys):
    g, xf = _pbtxt(tmp_path)
    code, out, err = _cli(capsys, "export", "--target", "tf-python", "-o", str(tmp_path / "o"), "--feed", f"x={xf}",
                          "--fetch", "bn", "--fetch", "bn:2", str(g))  # fmt: skip
    assert code == 0, err
    assert "exported 6 ops, 2 fetches (tf-python)" in out and "outputs/bn_0.npy, outputs/bn_2.npy" in out
    np.testing.assert_array_equal(np.load(tmp_path / "o/inputs/x.npy"), X)
    assert "g.pbtxt" in (tmp_path / "o/main.py").read_text().splitlines()[0]


def test_cli_exports_a_run_file(tmp_path, capsys):
    src = tmp_path / "p.json"
    src.write_text(json.dumps({
        "inputs": {"x": {"random": {"shape": [2, 2, 2, 3], "seed": 1}}},
        "ops": [{"name": "bn", "op": "FusedBatchNormV3", "inputs": {"x": "x", "scale": {"ones": [3]},
                 "offset": {"zeros": [3]}, "mean": {"zeros": [0]}, "variance": {"zeros": [0]}}}],
        "fetch": ["bn", "bn.batch_mean"]}))  # fmt: skip
    code, out, err = _cli(capsys, "export", "--target", "tf-python", "-o", str(tmp_path / "o"), str(src))
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "o/inputs").iterdir())[-1] == "x.npy"
    assert '("bn_1.npy", bn.batch_mean),  # bn:1' in (tmp_path / "o/main.py").read_text()


def _cli_error(capsys, *argv) -> str:
    """The message of a command that must fail with exit 2 and one line on stderr."""
    code, _, err = _cli(capsys, *argv)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("fbnops: error: "), err
    return err[len("fbnops: error: ") :].strip()


def test_cli_errors_are_one_line_and_match_fbnops_run(tmp_path, capsys):
    g, xf = _pbtxt(tmp_path)
    out = str(tmp_path / "o")
    cases = [  # (run's arguments, export's extra arguments): the same mistake through both commands
        (["--fetch", "bn", str(g)], []),  # missing feed
        (["--feed", f"x={xf}", "--fetch", "bn:7", str(g)], []),  # bad output index
        (["--feed", f"x={xf}", "--fetch", "nope", str(g)], []),  # unknown name
        (["--feed", f"x={tmp_path / 'none.npy'}", "--fetch", "bn", str(g)], []),  # unreadable feed
        (["--feed", "x", "--fetch", "bn", str(g)], []),  # not NAME=FILE
    ]
    for run_args, _ in cases:
        run_msg = _cli_error(capsys, "run", "-o", str(tmp_path / "r.npz"), *run_args)
        export_msg = _cli_error(capsys, "export", "--target", "tf-python", "-o", out, *run_args)
        assert export_msg == run_msg, run_args
        assert not Path(out).exists()


def test_cli_run_file_errors_match_fbnops_run(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({
        "inputs": {"x": {"random": {"shape": [2, 2, 2, 3]}}},
        "ops": [{"name": "bn", "op": "FusedBatchNormV3", "inputs": {"x": "x", "scale": {"ones": [3]},
                 "offset": {"zeros": [3]}, "mean": {"ones": [2]}, "variance": {"ones": [2]}},
                 "attrs": {"is_training": False}}],
        "fetch": ["bn"]}))  # fmt: skip
    run_msg = _cli_error(capsys, "run", str(bad))
    export_msg = _cli_error(capsys, "export", "--target", "tf-python", "-o", str(tmp_path / "o"),
                                       str(bad))  # fmt: skip
    assert export_msg == run_msg and "/ops/0: FusedBatchNormV3 (bn): Dimensions must be equal" in run_msg
    msg = _cli_error(capsys, "export", "--target", "tf-python", "-o", str(tmp_path / "o"), "--fetch", "bn",
                                str(bad))  # fmt: skip
    assert msg.startswith("--feed/--fetch are for GraphDef (.pbtxt) files")


def test_cli_refuses_an_existing_directory_and_unknown_targets(tmp_path, capsys):
    g, xf = _pbtxt(tmp_path)
    (tmp_path / "o").mkdir()
    args = ["--feed", f"x={xf}", "--fetch", "bn", str(g)]
    msg = _cli_error(capsys, "export", "--target", "tf-python", "-o", str(tmp_path / "o"), *args)
    assert msg.startswith("out_dir: ") and msg.endswith("already exists; pass force=True (--force) to replace it")
    assert _cli(capsys, "export", "--target", "tf-python", "--force", "-o", str(tmp_path / "o"), *args)[0] == 0
    msg = _cli_error(capsys, "export", "--target", "tf-go", "-o", str(tmp_path / "p"), *args)
    assert msg == "target: unknown target 'tf-go'; targets: tf-python, tf-cc, tf-java, onednn-graph, directml"
    assert not (tmp_path / "p").exists()
