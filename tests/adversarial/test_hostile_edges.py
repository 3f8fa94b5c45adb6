"""Issue 24's hostile classes, each fixed at its root: names, injection, dtypes, structure, files, signals.

Each test states the class and checks a few members of it (the replay that found them has more)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import fbnops
from bindings_mirror import cc, java
from bindings_mirror.cc import ops as cc_ops
from fbnops.errors import InvalidArgumentError
from fbnops.framework.graph import Graph
from fbnops.tools._arrays import ArrayFileError, load_array, save_npz

CLI = [sys.executable, "-m", "fbnops.cli"]


# ------------------------------------------------------------------------------ names and injection


@pytest.mark.parametrize("name", ["x\n", "x\ny", "\nx", "x\r", "x ", "x\x00"])
def test_names_are_matched_in_full_on_every_surface(name):
    """``$`` matches before a trailing newline: every name check is a full match (TF and tf-java refuse these)."""
    with pytest.raises(InvalidArgumentError, match="is not valid"):
        fbnops.Scope(Graph()).with_op_name(name).constant(np.ones(2, np.float32))
    text = f'node {{ name: "{name.encode("unicode_escape").decode()}" op: "Placeholder" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} }}'  # noqa: E501
    with pytest.raises(InvalidArgumentError):
        Graph.from_pbtxt(text)
    with pytest.raises(java.IllegalArgumentException, match="invalid name"):
        java.Graph().baseScope().withName(name)
    root = cc.Scope.NewRootScope()
    cc_ops.Placeholder(root.WithOpName(name), cc.DT_FLOAT)
    assert root.status().code() == cc.StatusCode.kInvalidArgument


@pytest.mark.parametrize("device", ['/cpu:0" } node { name: "evil" op: "NoOp', "a\\b", "line\nbreak", "quote'd"])
def test_every_string_written_to_a_graphdef_is_escaped(device):
    s = fbnops.Scope(Graph())
    s.with_device(device).constant(np.ones(3, np.float32), name="c")
    text = s.graph.to_pbtxt()
    back = Graph.from_pbtxt(text)
    assert [op.name for op in back.operations()] == ["c"]  # nothing injected
    assert back.operations()[0].device == device


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.complex64, np.str_, object])
def test_constants_and_placeholders_of_types_a_graphdef_cannot_hold_are_refused_when_created(dtype):
    s = fbnops.Scope(Graph())
    with pytest.raises(InvalidArgumentError, match="a graph cannot hold"):
        s.placeholder(dtype, (2,))
    with pytest.raises(InvalidArgumentError, match="a graph cannot hold"):
        s.constant(np.zeros(2, dtype))
    assert s.graph.operations() == [] or all(o.type for o in s.graph.operations())
    s.graph.to_pbtxt()  # what was created can be written


# ------------------------------------------------------------------------------ malformed structure


@pytest.mark.parametrize(
    "nodes, message",
    [
        ('node { name: "i" op: "Identity" attr { key: "T" value { type: DT_FLOAT } } }',
         "NodeDef expected inputs 'float' do not match 0 inputs specified"),
        ('node { name: "i" op: "Identity" }', "NodeDef expected inputs 'T' do not match 0 inputs specified"),
        ('node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }\n'
         'node { name: "t" op: "Transpose" input: "x" }', "NodeDef expected inputs 'T, Tperm' do not match 1 inputs"),
        ('node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }\n'
         'node { name: "t" op: "Transpose" input: "x" attr { key: "T" value { type: DT_FLOAT } } '
         'attr { key: "Tperm" value { type: DT_INT32 } } }',
         "NodeDef expected inputs 'float, int32' do not match 1 inputs specified"),  # TensorFlow's words
    ],
)  # fmt: skip
def test_graphdef_nodes_with_the_wrong_number_of_inputs_say_what_was_expected(nodes, message):
    with pytest.raises(InvalidArgumentError, match=message):
        Graph.from_pbtxt(nodes)


def test_a_directml_desc_whose_strides_and_sizes_differ_in_length_is_e_invalidarg():
    import bindings_mirror.directml as dml

    with pytest.raises(dml.HRESULTError, match="E_INVALIDARG"):
        dml.make_tensor_desc(dml.DML_TENSOR_DATA_TYPE_FLOAT32, (2, 3, 4), (12, 4))
    with pytest.raises(dml.HRESULTError, match="E_INVALIDARG"):
        dml.DMLCalcBufferTensorSize(dml.DML_TENSOR_DATA_TYPE_FLOAT32, 3, [2, 3, 4], [12, 4])


def test_a_yaml_input_name_that_is_not_a_string_is_a_run_file_error(tmp_path):
    job = "inputs:\n  5: {zeros: [3]}\nops:\n - op: Identity\n   inputs: {input: x}\nfetch: [x]\n"
    (tmp_path / "job.yaml").write_text(job)
    r = subprocess.run([*CLI, "run", "job.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.startswith("fbnops: error: ") and "keys are strings" in r.stderr, r.stderr


# ------------------------------------------------------------------------------ files and signals


def test_an_npy_input_that_is_a_fifo_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "x.npy"
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(ArrayFileError, match="not a regular file \\(a FIFO\\)"):
        load_array(fifo)
    assert time.monotonic() - start < 5  # open() of a FIFO without a writer would block for ever


def test_saving_never_replaces_a_device_or_other_special_file(tmp_path):
    with pytest.raises(OSError) as info:
        save_npz({"a": np.ones(3)}, Path("/dev/full"))
    assert info.value.errno == 28  # ENOSPC: written to, and the device said no
    save_npz({"a": np.ones(3)}, Path("/dev/null"))  # writing to it is fine; it stays a device
    assert Path("/dev/null").is_char_device()
    fifo = tmp_path / "out.npz"
    os.mkfifo(fifo)
    with pytest.raises(ArrayFileError, match="is a FIFO, not a file to replace"):
        save_npz({"a": np.ones(3)}, fifo)
    assert fifo.is_fifo() and sorted(p.name for p in tmp_path.iterdir()) == ["out.npz"]


SLOW_SAVE = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import numpy as np
    from fbnops.tools import _arrays

    def slow_savez(f, **arrays):  # writes part of the archive, then takes its time
        f.write(b"PK" * 1000); f.flush(); print("writing", flush=True); time.sleep(60)

    _arrays.np.savez = slow_savez
    _arrays.save_npz({"a": np.ones(3)}, Path(sys.argv[1]))
""")


def test_sigterm_while_saving_leaves_no_temporary_file_and_ends_the_process(tmp_path):
    out = tmp_path / "o.npz"
    p = subprocess.Popen([sys.executable, "-c", SLOW_SAVE, str(out)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "writing"
    assert any(n.name.endswith(".tmp") for n in tmp_path.iterdir())  # the partial file exists now...
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) == -signal.SIGTERM  # ...the signal still ends the process, as SIGTERM does...
    assert list(tmp_path.iterdir()) == []  # ...and the partial file is gone


def test_a_compare_file_with_malformed_rows_is_refused_up_front(tmp_path):
    row = {"case": "a", "fbnops_ms": 1.0}
    bad_rows = [{"case": "a"}], [1], [{**row, "fbnops_ms": "x"}], [{**row, "ratio_floor": None}]
    for rows in bad_rows:
        (tmp_path / "old.json").write_text(json.dumps({"rows": rows}))
        r = subprocess.run([*CLI, "bench", "--quick", "--compare", "old.json"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120)  # fmt: skip
        assert r.returncode == 2 and "rows[0] is not a benchmark row" in r.stderr and r.stdout == "", r.stderr


@pytest.mark.parametrize("value", [str(2**64), str(10**400), "lots"])
def test_the_output_pool_variable_out_of_range_is_an_error_naming_it(value):
    env = dict(os.environ, FBNOPS_OUTPUT_POOL_BYTES=value)
    r = subprocess.run([*CLI, "info"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.startswith("fbnops: error: FBNOPS_OUTPUT_POOL_BYTES"), r.stderr
    assert len(r.stderr.splitlines()) == 1
    ok = dict(os.environ, FBNOPS_OUTPUT_POOL_BYTES=str(2**64 - 1))
    assert subprocess.run([*CLI, "info"], env=ok, capture_output=True, timeout=120).returncode == 0
