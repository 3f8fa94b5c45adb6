"""``directml`` export: checked structurally, and walked through the DirectML mirror.

DirectML.h is in no registry reachable from Linux, so the exported C++ cannot be compiled or run
here (``run.sh`` says so and exits 3). Instead, for one program holding every float32 prototype
(V1/V2/V3 forward and gradient, training and frozen, NHWC/NCHW/NDHWC/NCDHW):

- the source is balanced C++ (braces, parentheses, brackets outside comments and strings);
- every ``DML_*`` name it uses exists in ``bindings_mirror.directml``, and every value it pins with
  ``static_assert`` is the mirror's (so a build against the real header checks the mirror too);
- every tensor desc's Sizes/Strides are DirectML's view of the TF tensor (N, C, spatial; channels-last
  memory as strides; statistics ``[1, C, 1...]``) and its TotalTensorSizeInBytes is the mirror's
  ``DMLCalcBufferTensorSize``; each node's operator type is the right ``DML_OPERATOR_*``;
- the program's statements are executed in order, each ``Dispatch`` by the mirror's own call sequence
  (CreateOperator, CompileOperator, initializer, binding tables, RecordDispatch, ExecuteCommandLists,
  Readback), and the fetched results equal fbnops' (``float_tolerance``; the mirror computes in
  float64 like fbnops, so they agree to float32 rounding).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from export_helpers import EPSILON, assert_close, batch, float_tolerance, prototypes

from bindings_mirror import directml as dml
from fbnops.framework.errors import UnimplementedError
from fbnops.framework.graph import Graph
from fbnops.framework.scope import Scope
from fbnops.tools.export import build_plan, export, write_plan

TARGET = "directml"
BLOCK = re.compile(r'    \{  // node "(?P<node>[^"]+)": (?P<type>\w+) -> (?P<operator>\w+)\n(?P<body>.*?)\n    \}',
                   re.S)  # fmt: skip
SIZES = re.compile(r"const UINT (\w+)_(sizes|strides)\[(\d+)\] = \{([^}]*)\};")
BUFFER = re.compile(r"DML_BUFFER_TENSOR_DESC (\w+)_buffer = \{(\w+), (\w+), (\d+), \w+, (\w+), (\d+), (\d+)\};")
MEMBER = re.compile(r"\w+_desc\.(\w+) = (&?\w+|[\d.e+-]+f|TRUE);")
DISPATCH = re.compile(r"Dispatch\(context, (\w+)_op, \{([^}]*)\}, \{([^}]*)\}\);")
ASSIGN = re.compile(r'buffers\["([^"]+)"\] = (\w+)\((.*)\);|buffers\["([^"]+)"\] = buffers\.at\("([^"]+)"\);')
SAVE = re.compile(r'SaveNpy\("([^"]+)", buffers\.at\("([^"]+)"\)\);')


def directml_prototypes():
    """Everything DirectML expresses here: float32 forward and gradient, training and frozen."""
    return [p for p in prototypes(dtypes=("float32",)) if p.kind != "second_order"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    graph, feeds, fetches = batch(directml_prototypes())
    plan = build_plan(graph, feeds=feeds, fetches=fetches, source="tests/export/test_directml.py")
    directory = write_plan(plan, TARGET, tmp_path_factory.mktemp("dml") / "out")
    return plan, directory, (directory / "main.cpp").read_text()


def _code_only(text: str) -> str:
    """The source without comments and string/char literals."""
    text = re.sub(r'"(\\.|[^"\\])*"', '""', text)
    text = re.sub(r"'(\\.|[^'\\])*'", "''", text)
    return re.sub(r"//[^\n]*", "", text)


def test_source_is_balanced_cpp(exported):
    _, _, source = exported
    code = _code_only(source)
    stack = []
    for ch in code:
        if ch in "([{":
            stack.append(ch)
        elif ch in ")]}":
            assert stack and stack.pop() == {")": "(", "]": "[", "}": "{"}[ch], "unbalanced source"
    assert not stack
    assert "#include <DirectML.h>" in source and "int main() try {" in source


def test_every_dml_name_and_value_is_the_mirrors(exported):
    _, _, source = exported
    names = set(re.findall(r"\bDML_[A-Z0-9_]+\b", _code_only(source)))
    missing = sorted(n for n in names if not hasattr(dml, n))
    assert not missing, f"DML names the mirror does not have: {missing}"
    pinned = {name: int(value, 16) for name, value in re.findall(r"static_assert\((DML_\w+) == (0x[0-9a-f]+)", source)}
    assert pinned and all(getattr(dml, n) == v for n, v in pinned.items()), pinned
    values = {n for n in names if isinstance(getattr(dml, n), int)}
    assert values <= set(pinned), f"values used but not pinned by static_assert: {sorted(values - set(pinned))}"
    for struct in names - values:  # the structs exist as the mirror's classes
        assert isinstance(getattr(dml, struct), type), struct


def _expected_view(shape, data_format, rank):
    """DirectML's Sizes/Strides for a TF tensor of ``shape`` (written independently of the exporter)."""
    if len(shape) == 1:
        return [1, shape[0]] + [1] * (rank - 2), None
    if data_format.startswith("NC"):
        return list(shape), None
    packed = np.cumprod([1, *shape[::-1]])[::-1][1:]  # element strides of the packed TF tensor
    return [shape[0], shape[-1], *shape[1:-1]], [int(packed[0]), int(packed[-1]), *map(int, packed[1:-1])]


def _operator_for(op) -> str:
    training = op.attrs.get("is_training", True)
    if op.type.startswith("FusedBatchNormGrad"):
        return "DML_OPERATOR_BATCH_NORMALIZATION_" + ("TRAINING_GRAD" if training else "GRAD")
    return "DML_OPERATOR_BATCH_NORMALIZATION" + ("_TRAINING" if training else "")


def _descs(body: str) -> dict[str, dml.DML_TENSOR_DESC]:
    arrays = {(name, kind): [int(v) for v in values.split(",")] for name, kind, _, values in SIZES.findall(body)}
    descs = {}
    for name, data_type, flags, count, strides, total, align in BUFFER.findall(body):
        buffer = dml.DML_BUFFER_TENSOR_DESC(getattr(dml, data_type), getattr(dml, flags), int(count),
                                            arrays[(name, "sizes")], arrays.get((name, "strides")),
                                            int(total), int(align))  # fmt: skip
        assert (strides == "nullptr") == ((name, "strides") not in arrays)
        descs[name] = dml.DML_TENSOR_DESC(dml.DML_TENSOR_TYPE_BUFFER, buffer)
    return descs


def _refs(text: str) -> list[str | None]:
    return [None if r.strip() == "nullptr" else re.search(r'"([^"]+)"', r).group(1) for r in text.split(",")]


def _dispatch_through_mirror(block: re.Match, host: dict[str, np.ndarray], graph) -> None:
    """The block's descs, operator and Dispatch, as the mirror's calls; outputs read back into ``host``."""
    body = block["body"]
    descs = _descs(body)
    op = graph.get_operation(block["node"])
    assert block["operator"] == _operator_for(op), block["node"]
    struct_name = re.search(r"(DML_\w+_OPERATOR_DESC) \w+_desc = \{\};", body).group(1)
    members = {}
    for member, value in MEMBER.findall(body):
        if value.startswith("&"):
            members[member] = descs[value[1:]]
        elif value == "TRUE":
            members[member] = True
        else:
            members[member] = None if value == "nullptr" else float(value.rstrip("f"))
    assert members.get("Epsilon") == float(np.float32(EPSILON))
    desc = getattr(dml, struct_name)(**members)
    op_type = re.search(r"DML_OPERATOR_DESC \w+_op = \{(DML_OPERATOR_\w+), &\w+_desc\};", body).group(1)
    assert op_type == block["operator"]
    in_refs, out_refs = (_refs(t) for t in DISPATCH.search(body).groups()[1:])
    schema = dml.SCHEMAS[getattr(dml, op_type)]
    fmt = op.attrs.get("data_format", "NHWC")
    rank = len(desc.InputTensor.Desc.Sizes)
    for member, ref in zip((*schema.inputs, *schema.outputs), (*in_refs, *out_refs), strict=True):
        if ref is None:
            assert getattr(desc, member) is None and member in schema.optional
            continue
        b = getattr(desc, member).Desc
        sizes, strides = _expected_view(host[ref].shape, fmt, rank)
        assert (b.Sizes, b.Strides) == (sizes, strides), f"{block['node']}.{member}"
        assert b.TotalTensorSizeInBytes == dml.DMLCalcBufferTensorSize(b.DataType, rank, b.Sizes, b.Strides)
    device = dml.DMLCreateDevice(dml.D3D12CreateDevice())
    compiled = device.CompileOperator(device.CreateOperator(dml.DML_OPERATOR_DESC(getattr(dml, op_type), desc)),
                                      dml.DML_EXECUTION_FLAG_NONE)  # fmt: skip
    initializer = device.CreateOperatorInitializer([compiled])
    d3d = device.GetParentDevice()
    recorder, cmd = device.CreateCommandRecorder(), d3d.CreateCommandList()
    recorder.RecordDispatch(cmd, initializer, device.CreateBindingTable(dml.DML_BINDING_TABLE_DESC(initializer)))
    props = compiled.GetBindingProperties()
    table = device.CreateBindingTable(dml.DML_BINDING_TABLE_DESC(compiled, None, None, props.RequiredDescriptorCount))

    def bind(ref, upload: bool):
        if ref is None:
            return dml.DML_BINDING_DESC(dml.DML_BINDING_TYPE_NONE), None
        value = np.ascontiguousarray(host[ref], np.float32)
        resource = d3d.CreateCommittedResource(max(value.nbytes, 4))
        if upload:
            resource.Upload(value.ravel())
        binding = dml.DML_BUFFER_BINDING(resource, 0, value.nbytes)
        return dml.DML_BINDING_DESC(dml.DML_BINDING_TYPE_BUFFER, binding), resource

    table.BindInputs([bind(r, True)[0] for r in in_refs])
    outs = [bind(r, False) for r in out_refs]
    table.BindOutputs([b for b, _ in outs])
    recorder.RecordDispatch(cmd, compiled, table)
    cmd.Close()
    d3d.CreateCommandQueue().ExecuteCommandLists([cmd])
    for ref, (_, resource) in zip(out_refs, outs, strict=True):
        host[ref] = resource.Readback(np.float32, host[ref].shape)


def walk(plan, directory: Path, source: str) -> dict[str, np.ndarray]:
    """Run main()'s statements in order: host statements in NumPy, each Dispatch through the mirror."""
    host: dict[str, np.ndarray] = {}
    saved: dict[str, np.ndarray] = {}
    main = source[source.index("int main() try {") :]
    blocks = {m.start(): m for m in BLOCK.finditer(main)}
    pos, dispatched = 0, 0
    while pos < len(main):
        if pos in blocks:
            _dispatch_through_mirror(blocks[pos], host, plan.graph)
            pos, dispatched = blocks[pos].end(), dispatched + 1
            continue
        end = main.find("\n", pos)
        line = main[pos : end if end >= 0 else len(main)].split("  //")[0].strip()
        pos = len(main) if end < 0 else end + 1
        if m := ASSIGN.fullmatch(line):
            target, fn, args, alias_target, alias_source = m.groups()
            if alias_target:
                host[alias_target] = host[alias_source].copy()
            elif fn == "LoadNpy":
                host[target] = np.load(directory / args.strip('"'))
            elif fn == "Zeros":
                host[target] = np.zeros([int(d) for d in re.findall(r"\d+", args)], np.float32)
            elif fn == "Transpose":
                source_name, perm = re.fullmatch(r'buffers\.at\("([^"]+)"\), \{([^}]*)\}', args).groups()
                host[target] = np.ascontiguousarray(np.transpose(host[source_name], [int(p) for p in perm.split(",")]))
            elif fn == "Bessel":
                source_name, n = re.fullmatch(r'buffers\.at\("([^"]+)"\), (\d+)', args).groups()
                n = int(n)
                host[target] = host[source_name] * (np.float32(n) / np.float32(max(n - 1, 1)))
            else:
                raise AssertionError(f"unknown host statement: {line}")
        elif m := SAVE.fullmatch(line):
            saved[m.group(2)] = host[m.group(2)]
            assert m.group(1) == plan.output_files()[m.group(2)]
    assert dispatched == sum(op.type.startswith("FusedBatchNorm") for op in plan.ops)
    return saved


def test_the_program_walked_through_the_mirror_gives_fbnops_results(exported, capsys):
    plan, directory, source = exported
    actual = walk(plan, directory, source)
    assert set(actual) == set(plan.fetches)
    worst = assert_close(actual, plan.expected, float_tolerance)
    operators = sorted(set(re.findall(r"-> (DML_OPERATOR_\w+)", source)))
    with capsys.disabled():
        print(f"\n{TARGET}: 1 program, {len(directml_prototypes())} prototypes, {len(plan.fetches)} fetches, "
              f"{source.count('Dispatch(context')} dispatches ({', '.join(operators)}), "
              f"max |diff| {worst:.2e}")  # fmt: skip
    assert len(operators) == 4  # forward, training forward, frozen grad, training grad


def test_run_sh_says_it_cannot_run_here(exported):
    _, directory, source = exported
    done = subprocess.run(["sh", str(directory / "run.sh")], capture_output=True, text=True, timeout=30)
    assert done.returncode == 3 and done.stdout.count("\n") == 1 and "DirectML.h" in done.stdout
    assert "NOT BUILT OR RUN BY FBNOPS" in source


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_graphs_are_refused_at_export(tmp_path, dtype):
    proto = next(p for p in prototypes(versions=("V3",), dtypes=(dtype,), layouts=("NHWC",)) if p.kind == "forward")
    graph, feeds, fetches = proto.graph()
    with pytest.raises(UnimplementedError, match="directml export: 'bn'"):
        export(graph, TARGET, tmp_path / "out", feeds=feeds, fetches=fetches)
    assert not (tmp_path / "out").exists()


def test_exponential_avg_factor_is_refused_at_export(tmp_path):
    scope = Scope(Graph())
    x = scope.placeholder(np.float32, (2, 2, 2, 3), name="x")
    c = [scope.constant(np.ones(3, np.float32), name=k) for k in ("scale", "offset", "mean", "variance")]
    attrs = {"epsilon": EPSILON, "is_training": True, "exponential_avg_factor": 0.25}
    bn = scope.with_op_name("bn").add_op("FusedBatchNormV3", [x, *c], attrs)
    with pytest.raises(UnimplementedError, match="exponential_avg_factor 0.25"):
        feeds = {x: np.ones((2, 2, 2, 3), np.float32)}
        export(scope.graph, TARGET, tmp_path / "out", feeds=feeds, fetches=[bn.outputs[1]])
