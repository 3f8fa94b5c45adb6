"""Run files in-process: the shipped JSON Schema, errors with file:line:column and key, the
guards (sizes, nesting, aliases, .npy headers), exact literals and atomic .npz output."""

from __future__ import annotations

import json
import zipfile

import ml_dtypes
import numpy as np
import pytest
from attacks.helpers import edited

import fbnops
from fbnops.framework.errors import ResourceExhaustedError
from fbnops.testing import extras
from fbnops.tools import runfile
from fbnops.tools._schema import validate

JOB = {
    "inputs": {
        "x": {"random": {"shape": [4, 3, 3, 2], "seed": 0}},
        "dy": {"random": {"shape": [4, 3, 3, 2], "seed": 1}},
        "scale": {"value": [1.0, 2.0]},
    },
    "ops": [
        {
            "name": "bn",
            "op": "FusedBatchNormV3",
            "inputs": {"x": "x", "scale": "scale", "offset": {"zeros": [2]}, "mean": {"zeros": [0]},
                       "variance": {"zeros": [0]}},
            "attrs": {"epsilon": 0.001},
        },
        {
            "name": "grad",
            "op": "FusedBatchNormGradV3",
            "inputs": {"y_backprop": "dy", "x": "x", "scale": "scale", "reserve_space_1": "bn.reserve_space_1",
                       "reserve_space_2": "bn:4", "reserve_space_3": "bn.reserve_space_3"},
        },
    ],
    "fetch": ["bn", "grad.x_backprop", "grad:1"],
}  # fmt: skip


def write(tmp_path, doc, name="job.json") -> object:
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=2) if name.endswith(".json") else doc)
    return path


def mutated(*keys_and_value):
    """JOB with the item at the keys replaced by the last argument (deleted: ``KeyError``)."""
    *keys, value = keys_and_value
    return edited(JOB, keys, value)


def test_bare_op_name_is_output_0_in_fetch_and_inputs(tmp_path):
    out = runfile.run_file(write(tmp_path, JOB))
    x = np.random.default_rng(0).standard_normal((4, 3, 3, 2)).astype(np.float32)
    e = np.zeros(0, np.float32)
    f = fbnops.raw_ops.FusedBatchNormV3(x=x, scale=np.array([1, 2], np.float32), offset=np.zeros(2, np.float32),
                                        mean=e, variance=e, epsilon=1e-3)  # fmt: skip
    np.testing.assert_array_equal(out["bn"], f.y)
    assert out["grad:1"].shape == (2,)


# (mutation, JSON pointer of the key at fault, text that must be in the message)
BAD = [
    (("ops", 1, "inputs", "scale", "scal"), "/ops/1/inputs/scale", "unknown reference 'scal'"),
    (("ops", 0, "op", "FusedBatchNormV4"), "/ops/0/op", "unknown op type 'FusedBatchNormV4'"),
    (("ops", 0, "attrs", "data_format", "NXYZ"), "/ops/0/attrs/data_format", "Value for attr 'data_format'"),
    (("ops", 0, "attrs", "epsilon", "abc"), "/ops/0/attrs/epsilon", "FusedBatchNormV3 (bn): Attr 'epsilon'"),
    (("ops", 0, "attrs", "colour", 1), "/ops/0/attrs/colour", "Unknown attr(s) ['colour']"),
    (("ops", 0, "attrs", "epsilon", 10**400), "/ops/0/attrs/epsilon", "FusedBatchNormV3 (bn)"),
    (("ops", 0, "inputs", "scale", {"value": [1.0, 2.0, 3.0]}), "/ops/0", "Dimensions must be equal"),
    (("ops", 1, "inputs", "reserve_space_2", "bn:9"), "/ops/1/inputs/reserve_space_2", "has no output '9'"),
    (("ops", 1, "inputs", "offset", "x"), "/ops/1/inputs/offset", "FusedBatchNormGradV3 has no input 'offset'"),
    (("ops", 1, "inputs", "x", KeyError), "/ops/1/inputs", "missing input(s) ['x']"),
    (("ops", 1, "name", "bn"), "/ops/1/name", "'bn' is already used"),
    (("ops", 1, "name", 7), "/ops/1/name", "must be of type string"),
    (("ops", 1, "colour", "red"), "/ops/1/colour", "unknown key 'colour'"),
    (("inputs", "x", "random", "shape", [4, -3]), "/inputs/x/random/shape/1", "must be >= 0"),
    (("inputs", "x", "random", "shape", "4,3"), "/inputs/x/random/shape", "must be of type array"),
    (("inputs", "x", "random", "seed", True), "/inputs/x/random/seed", "must be of type integer"),
    (("inputs", "scale", "dtype", "int8"), "/inputs/scale/dtype", "must be one of"),
    (("inputs", "scale", "zeros", [2]), "/inputs/scale", "needs exactly one of"),
    (("inputs", "scale", "value", None), "/inputs/scale/value", "must be one of the types"),
    (("inputs", "scale", "value", [1.0, "a"]), "/inputs/scale/value/1", "must be one of the types"),
    (("inputs", "scale", "value", [[1.0], [2.0, 3.0]]), "/inputs/scale/value", "rectangular"),
    (("inputs", "scale", "value", [1e40, 1.0]), "/inputs/scale/value", "does not fit in float"),
    (("inputs", "dy", {"npy": "missing.npy"}), "/inputs/dy/npy", "missing.npy"),
    (("fetch", []), "/fetch", "needs at least 1 item"),
    (("fetch", KeyError), "", "missing required key(s) ['fetch']"),
    (("backend", "gpu"), "/backend", "must be one of ['cython', 'numba', 'reference']"),
    (("extra", 1), "/extra", "unknown key 'extra'"),
]


@pytest.mark.parametrize("mutation,pointer,message", BAD, ids=[b[1] + ":" + b[2][:20] for b in BAD])
def test_bad_run_file_names_file_line_column_and_key(tmp_path, mutation, pointer, message):
    path = write(tmp_path, mutated(*mutation))
    with pytest.raises(runfile.RunFileError) as info:
        runfile.run_file(path)
    e = info.value
    assert e.pointer == pointer and e.file == str(path)
    assert message in str(e)
    assert str(e).startswith(f"{path}:{e.line}:{e.column}: {pointer}")
    text = path.read_text()
    if pointer:  # the position is the key's own (or, for a list item, the item's)
        last = e.key[-1]
        line = text.splitlines()[e.line - 1]
        assert (f'"{last}"' in line[e.column - 1 :]) if isinstance(last, str) else e.line > 1


def test_positions_are_exact_in_json_and_yaml(tmp_path):
    yaml = extras.require("yaml", "yaml")
    doc = mutated("ops", 1, "inputs", "scale", "scal")
    text = json.dumps(doc, indent=2)
    with pytest.raises(runfile.RunFileError) as info:
        runfile.run_file(write(tmp_path, doc))
    line, col = info.value.line, info.value.column
    assert text.splitlines()[line - 1][col - 1 :].startswith('"scale": "scal"')
    ytext = yaml.safe_dump(doc, sort_keys=False)
    with pytest.raises(runfile.RunFileError) as info:
        runfile.run_file(write(tmp_path, ytext, "job.yaml"))
    assert ytext.splitlines()[info.value.line - 1][info.value.column - 1 :].startswith("scale: scal")


@pytest.mark.parametrize(
    "text,message",
    [
        ("{ not json", "not valid JSON"),
        ('{"ops": [], "ops": []}', "duplicate key 'ops'"),
        ("[" * 100_000, "nested deeper than 64 levels"),
        ('{"inputs": ' + '{"a": ' * 200 + "1" + "}" * 201, "nested deeper than 64 levels"),
        ("[1, 2]", "must be of type object"),
        ("", "not valid JSON"),
    ],
)
def test_malformed_json_is_one_typed_error_with_line_column(tmp_path, text, message):
    with pytest.raises(runfile.RunFileError) as info:
        runfile.run_file(write(tmp_path, text, "bad.jsn"))
    assert message in str(info.value) and info.value.line is not None


def test_yaml_alias_bomb_is_refused_before_expansion(tmp_path):
    extras.require("yaml", "yaml")
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    with pytest.raises(runfile.RunFileResourceError) as info:
        runfile.run_file(write(tmp_path, "\n".join(lines) + "\n", "bomb.yaml"))
    assert isinstance(info.value, ResourceExhaustedError) and "billion laughs" in str(info.value)
    assert str(info.value).startswith(f"{tmp_path / 'bomb.yaml'}:")


@pytest.mark.parametrize(
    "text,message",
    [
        ("ops: [\n  - op: x\n", "not valid YAML"),
        ("a: 1\na: 2\n", "duplicate key 'a'"),
        ("a: &x [*x]\n", "nested deeper than 64 levels"),  # a recursive alias: an infinitely deep list
    ],
)
def test_malformed_yaml(tmp_path, text, message):
    extras.require("yaml", "yaml")
    with pytest.raises(runfile.RunFileError) as info:
        runfile.run_file(write(tmp_path, text, "bad.yaml"))
    assert message in str(info.value)
    assert info.value.line is not None


@pytest.mark.parametrize("kind", ["zeros", "ones", "random"])
def test_huge_literal_shapes_raise_resource_exhausted_before_allocating(tmp_path, kind):
    shape = [1 << 20, 1 << 20, 1 << 10]
    spec = {"random": {"shape": shape}} if kind == "random" else {kind: shape}
    with pytest.raises(runfile.RunFileResourceError) as info:
        runfile.run_file(write(tmp_path, mutated("inputs", "x", spec)))
    assert isinstance(info.value, ResourceExhaustedError) and info.value.pointer.startswith("/inputs/x/")


def _npy_header(shape, descr="<f4") -> bytes:
    header = repr({"descr": descr, "fortran_order": False, "shape": tuple(shape)}).encode()
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header


def test_npy_header_claiming_tens_of_gib_is_refused_from_the_header(tmp_path):
    (tmp_path / "dy.npy").write_bytes(_npy_header((1 << 17, 1 << 17, 4)) + b"\0" * 64)  # 256 GiB claimed
    with pytest.raises(runfile.RunFileResourceError) as info:
        runfile.run_file(write(tmp_path, mutated("inputs", "dy", {"npy": "dy.npy"})))
    assert "from its .npy header" in str(info.value) and info.value.pointer == "/inputs/dy/npy"


@pytest.mark.parametrize(
    "content,message",
    [
        (_npy_header((4, 3, 3, 2)) + b"\0" * 10, "truncated"),
        (_npy_header((2,), "|O"), "only numeric arrays"),
        (b"not an npy file at all", "not a valid .npy header"),
    ],
)
def test_bad_npy_files(tmp_path, content, message):
    (tmp_path / "dy.npy").write_bytes(content)
    with pytest.raises(runfile.RunFileError, match=message):
        runfile.run_file(write(tmp_path, mutated("inputs", "dy", {"npy": "dy.npy"})))


def test_npy_and_npz_inputs_and_exact_dtype_conversion(tmp_path):
    dy = np.random.default_rng(1).standard_normal((4, 3, 3, 2)).astype(np.float32)
    np.save(tmp_path / "dy.npy", dy)
    np.savez(tmp_path / "prev.npz", dy=dy)
    a = runfile.run_file(write(tmp_path, mutated("inputs", "dy", {"npy": "dy.npy"})))
    b = runfile.run_file(write(tmp_path, mutated("inputs", "dy", {"npz": {"file": "prev.npz", "key": "dy"}})))
    np.testing.assert_array_equal(a["grad.x_backprop"], b["grad.x_backprop"])
    with pytest.raises(runfile.RunFileError, match="do not convert exactly to bfloat16"):
        runfile.run_file(write(tmp_path, mutated("inputs", "dy", {"npy": "dy.npy", "dtype": "bfloat16"})))
    with pytest.raises(runfile.RunFileError, match=r"prev.npz has no array 'dz'; it has \['dy'\]"):
        runfile.run_file(write(tmp_path, mutated("inputs", "dy", {"npz": {"file": "prev.npz", "key": "dz"}})))


def test_bfloat16_outputs_are_plain_float32_in_the_npz_and_load_back_exactly(tmp_path):
    x = (np.random.default_rng(0).standard_normal((4, 3, 3, 2))).astype(ml_dtypes.bfloat16)
    np.save(tmp_path / "x.npy", x)  # NumPy stores bfloat16 as raw 2-byte values
    job = mutated("inputs", "x", {"npy": "x.npy", "dtype": "bfloat16"})
    job["inputs"]["dy"] = {"random": {"shape": [4, 3, 3, 2], "seed": 1, "dtype": "bfloat16"}}
    results = runfile.run_file(write(tmp_path, job))
    assert results["grad.x_backprop"].dtype == ml_dtypes.bfloat16
    runfile.save_npz(results, tmp_path / "out.npz")
    plain = np.load(tmp_path / "out.npz")  # no allow_pickle, no ml_dtypes needed
    assert plain["grad.x_backprop"].dtype == np.float32
    np.testing.assert_array_equal(plain["grad.x_backprop"], results["grad.x_backprop"].astype(np.float32))
    back = runfile.load_npz(tmp_path / "out.npz")
    assert back["grad.x_backprop"].dtype == ml_dtypes.bfloat16 and back["grad:1"].dtype == np.float32
    np.testing.assert_array_equal(back["grad.x_backprop"], results["grad.x_backprop"])
    job["inputs"]["x"] = {"npz": {"file": "out.npz", "key": "bn"}}
    again = runfile.run_file(write(tmp_path, job))
    assert again["bn"].dtype == ml_dtypes.bfloat16  # a widened bfloat16 output reads back as bfloat16


def test_save_is_atomic_and_an_interrupt_keeps_the_previous_output(tmp_path, monkeypatch):
    out = tmp_path / "out.npz"
    runfile.save_npz({"a": np.ones(3, np.float32)}, out)
    before = out.read_bytes()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", interrupted)
    with pytest.raises(KeyboardInterrupt):
        runfile.save_npz({"a": np.zeros(3, np.float32)}, out)
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.npz"]  # no temporary file left
    with zipfile.ZipFile(out) as z:
        assert z.namelist() == ["a.npy"]


@pytest.mark.parametrize("where", ["/missing/dir/out.npz", "{tmp}"])
def test_unwritable_outputs_are_refused_before_any_work(tmp_path, where):
    with pytest.raises(ValueError, match="does not exist|is a directory"):
        runfile.check_writable(type(tmp_path)(where.format(tmp=tmp_path)))


# ---------------------------------------------------------------- the schema itself


def test_schema_ships_with_the_package_and_is_valid_json_schema():
    jsonschema = extras.require("jsonschema", "test")
    schema = runfile.schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert set(schema["properties"]) == {"backend", "inputs", "ops", "fetch"}
    dtypes_in_schema = set(schema["$defs"]["dtype"]["enum"])
    for name in dtypes_in_schema:  # every name the schema allows is one the dtype table knows
        runfile._dtype(name)
    assert {"float32", "float16", "bfloat16", "float", "half"} <= dtypes_in_schema
    assert schema["$defs"]["op"]["properties"]["name"]["description"]  # the docs page needs every description


CORPUS = [JOB] + [mutated(*m) for m, _, _ in BAD] + [
    {"ops": [{"op": "X", "inputs": {}}], "fetch": ["a"]},
    {"ops": "no", "fetch": ["a"]},
    {"inputs": {"x": {"ones": [2], "dtype": "half"}}, "ops": [{"op": "Identity", "inputs": {"input": "x"}}],
     "fetch": ["Identity"]},
    {"inputs": {"x": {"npz": {"file": "a.npz"}}}, "ops": [], "fetch": []},
    {"inputs": {"x": {}}, "ops": [{"op": "a", "inputs": {"x": 3}}], "fetch": [1]},
]  # fmt: skip


@pytest.mark.parametrize("doc", CORPUS)
def test_own_validator_agrees_with_jsonschema(doc):
    jsonschema = extras.require("jsonschema", "test")
    theirs = jsonschema.Draft202012Validator(runfile.schema()).is_valid(doc)
    assert (validate(doc) == []) == theirs
