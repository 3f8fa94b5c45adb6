"""Hostile run files (issue 15, classes 3, 5 and 8): whatever the bytes, ``fbnops run`` gives a
result or one typed error naming the file, the line:column and the key, allocates nothing a
file merely claims, and writes nothing on error.  Parsing is pure Python (nothing here can
crash the interpreter), so the cases run in-process; the CLI's own handling of these errors is
covered by tests/test_cli.py."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fbnops.testing import extras
from fbnops.tools import runfile

JOB = {
    "inputs": {"x": {"random": {"shape": [2, 2, 2, 3], "seed": 0}}, "scale": {"value": [1.0, 2.0, 0.5]}},
    "ops": [
        {
            "name": "bn",
            "op": "FusedBatchNormV3",
            "inputs": {"x": "x", "scale": "scale", "offset": {"zeros": [3]}, "mean": {"zeros": [0]},
                       "variance": {"zeros": [0]}},
            "attrs": {"epsilon": 0.001, "data_format": "NHWC", "is_training": True},
        },
        {
            "name": "grad",
            "op": "FusedBatchNormGradV3",
            "inputs": {"y_backprop": {"ones": [2, 2, 2, 3]}, "x": "x", "scale": "scale",
                       "reserve_space_1": "bn:3", "reserve_space_2": "bn.reserve_space_2", "reserve_space_3": "bn:5"},
        },
    ],
    "fetch": ["grad", "bn.y"],
}  # fmt: skip

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*prefix, i))


PATHS = list(_paths(JOB))[1:]


def _run(tmp_path, text: str, name: str = "job.json"):
    path = tmp_path / name
    path.write_text(text)
    try:
        return runfile.run_file(path)
    except runfile.RunFileError as e:  # the one typed error (RunFileResourceError is one too)
        assert e.file == str(path) and e.line is not None and e.line >= 1 and e.column >= 1
        assert str(e).startswith(f"{path}:{e.line}:{e.column}")
        return e


@SETTINGS
@given(path=st.sampled_from(PATHS), value=json_values)
def test_any_value_anywhere_gives_a_result_or_a_typed_error_at_its_key(tmp_path, path, value):
    doc = copy.deepcopy(JOB)
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    out = _run(tmp_path, json.dumps(doc, indent=1))
    if isinstance(out, runfile.RunFileError):  # the key it names exists in the document (but for a missing leaf)
        node = doc
        for k in out.key[:-1]:
            node = node[k]
        assert not out.key or isinstance(node, (dict, list)) and (out.key[-1] in node if isinstance(node, dict) else 1)


@SETTINGS
@given(cut=st.integers(0, len(json.dumps(JOB, indent=1))), junk=st.text(max_size=3))
def test_truncated_or_corrupted_text_gives_one_error_with_line_and_column(tmp_path, cut, junk):
    text = json.dumps(JOB, indent=1)
    _run(tmp_path, text[:cut] + junk)


@SETTINGS
@given(text=st.text(max_size=200))
def test_arbitrary_yaml_text(tmp_path, text):
    extras.require("yaml", "yaml")
    try:
        _run(tmp_path, text, "job.yaml")
    except UnicodeEncodeError:  # surrogates cannot even be written as a file
        pass


@SETTINGS
@given(
    shape=st.lists(st.integers(0, 2**40), min_size=0, max_size=5),
    descr=st.sampled_from(["<f4", "<f8", "|O", "<U3", "<V2", ">f4", "|b1", "<c8"]),
    extra=st.integers(0, 64),
)
def test_npy_headers_are_believed_only_as_far_as_they_are_true(tmp_path, shape, descr, extra):
    header = repr({"descr": descr, "fortran_order": False, "shape": tuple(shape)}).encode()
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    (tmp_path / "a.npy").write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + b"\0" * extra)
    doc = copy.deepcopy(JOB)
    doc["ops"][1]["inputs"]["y_backprop"] = {"npy": "a.npy"}
    out = _run(tmp_path, json.dumps(doc))
    if isinstance(out, runfile.RunFileError):
        assert out.pointer.startswith("/inputs") or out.pointer.startswith("/ops")
    else:  # only a file that really holds the right array can run
        assert np.dtype(descr).kind == "f" and int(np.prod(shape)) * np.dtype(descr).itemsize <= extra


@pytest.mark.parametrize("shape", [[2**31, 2**31], [2**62, 4], [1 << 20] * 3])
@pytest.mark.parametrize("kind", ["zeros", "ones", "random"])
def test_literal_shapes_that_cannot_fit_raise_resource_exhausted(tmp_path, kind, shape):
    doc = copy.deepcopy(JOB)
    doc["inputs"]["x"] = {"random": {"shape": shape}} if kind == "random" else {kind: shape}
    out = _run(tmp_path, json.dumps(doc))
    assert isinstance(out, runfile.RunFileResourceError) and out.pointer.startswith("/inputs/x/")
