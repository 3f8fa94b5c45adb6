"""Messages that say what to do: each names the fix (the extra, the nearest op name, data_format),
in the CLI's one-line form ``fbnops: error: ...`` with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import fbnops


def fbnops_cli(*args, cwd, hide: str | None = None) -> subprocess.CompletedProcess:
    """The CLI in a fresh interpreter; ``hide`` makes one optional module absent, as on a plain install."""
    prelude = f"import sys; sys.modules[{hide!r}] = None; " if hide else "import sys; "
    code = prelude + "from fbnops.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def one_line_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fbnops: error: "), result.stderr
    return lines[0]


def test_a_misspelt_op_in_a_run_file_gets_the_nearest_name_and_the_list(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps({"ops": [{"op": "FusedBatchNormV4", "inputs": {}}], "fetch": ["x"]}))
    line = one_line_error(fbnops_cli("run", "r.json", cwd=tmp_path))
    assert "did you mean 'FusedBatchNormV3'?" in line and "FusedBatchNormGradV3" in line


def test_an_array_file_given_to_run_says_how_arrays_go_in(tmp_path):
    np.save(tmp_path / "x.npy", np.ones(3))
    line = one_line_error(fbnops_cli("run", "x.npy", cwd=tmp_path))
    assert "--feed NAME=FILE.npy" in line and "JSON or YAML" in line


def test_a_missing_benchmark_peer_names_its_extra(tmp_path):
    line = one_line_error(fbnops_cli("bench", "--peers", "torch", "--quick", cwd=tmp_path, hide="torch"))
    assert "pip install 'fbnops[oracle]'" in line


def test_the_distributed_demo_without_mpi_names_the_extra(tmp_path):
    line = one_line_error(fbnops_cli("demo", "--ranks", "2", cwd=tmp_path, hide="mpi4py"))
    assert "pip install 'fbnops[mpi]'" in line


@pytest.mark.parametrize("data_format, shape, other", [("NHWC", (2, 3, 4, 5), "NCHW"), ("NCHW", (2, 4, 5, 3), "NHWC")])
def test_data_in_the_other_layout_names_data_format(data_format, shape, other):
    x = np.ones(shape, np.float32)
    c = 3
    empty = np.zeros(0, np.float32)
    with pytest.raises(fbnops.errors.InvalidArgumentError) as e:
        fbnops.raw_ops.FusedBatchNormV3(x=x, scale=np.ones(c, np.float32), offset=np.zeros(c, np.float32), mean=empty,
                                        variance=empty, data_format=data_format)  # fmt: skip
    assert e.value.message.startswith("scale must have the same number of elements as the channels of x")  # TF's
    assert f"pass data_format='{other}'" in e.value.message


def test_no_layout_hint_when_the_other_layout_does_not_fit_either():
    x, empty = np.ones((2, 3, 4, 5), np.float32), np.zeros(0, np.float32)
    with pytest.raises(fbnops.errors.InvalidArgumentError) as e:
        fbnops.raw_ops.FusedBatchNormV3(x=x, scale=np.ones(7, np.float32), offset=np.zeros(7, np.float32), mean=empty,
                                        variance=empty)  # fmt: skip
    assert "data_format" not in e.value.message
