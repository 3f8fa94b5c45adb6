"""The ``tf-java`` export target: the plan as a Java program on tf-java 1.1.0 (``tensorflow-core-api``).

The program is written as a tf-java user writes it: a ``Graph``, the ``Ops`` facade
(``tf.withName("bn").nn.fusedBatchNorm(...)``, ``tf.nn.fusedBatchNormGrad(...)`` with the
op class's static option setters), then ``Session.runner().feed(...).fetch(...).run()``
returning a ``Result``. In tf-java 1.1.0 the V3 ops have classes (``org.tensorflow.op.nn.
FusedBatchNorm``/``FusedBatchNormGrad``, whose ``OP_NAME`` is ``FusedBatchNormV3``/
``FusedBatchNormGradV3``); the V1/V2 ops have none, so they are built with the generic
``scope.opBuilder(type, name)`` that the generated classes themselves use.

Files: ``src/main/java/<Main>.java``, ``src/main/java/Npy.java`` (``java_support/``), ``pom.xml``
and ``run.sh`` (``javac``/``java`` on the jars in ``~/.m2``; see ``java_support/run.sh``).
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import numpy as np

from fbnops.framework import dtypes
from fbnops.framework.errors import UnimplementedError
from fbnops.framework.graph import Operation, Output

from ._plan import ExportPlan, identifier

__all__ = ["JARS", "MAIN_CLASS", "classpath", "render"]

MAIN_CLASS = "FbnopsExport"
SEED = (
    'TensorFlow Java API, "FusedBatchNormGradV3" '
    "(https://www.tensorflow.org/jvm/api_docs/java/org/tensorflow/op/core/FusedBatchNormGradV3)"
)
# tf-java 1.1.0 and what it needs at run time, in Maven's repository layout ("{platform}": the
# native classifier, e.g. linux-x86_64); run.sh and the tests build the class path from this list
JARS = (
    "org/tensorflow/tensorflow-core-api/1.1.0/tensorflow-core-api-1.1.0.jar",
    "org/tensorflow/tensorflow-core-native/1.1.0/tensorflow-core-native-1.1.0.jar",
    "org/tensorflow/tensorflow-core-native/1.1.0/tensorflow-core-native-1.1.0-{platform}.jar",
    "org/tensorflow/ndarray/1.0.0/ndarray-1.0.0.jar",
    "org/bytedeco/javacpp/1.5.11/javacpp-1.5.11.jar",
    "com/google/protobuf/protobuf-java/3.21.9/protobuf-java-3.21.9.jar",
)
_SPLIT = 120  # ops per build method in a large graph (a Java method's bytecode is limited to 64 KiB)

# dtype -> (tensor class, org.tensorflow.proto.DataType constant)
_JAVA_TYPES = {
    np.dtype(np.float32): ("TFloat32", "DT_FLOAT"),
    dtypes.float16: ("TFloat16", "DT_HALF"),
    dtypes.bfloat16: ("TBfloat16", "DT_BFLOAT16"),
    np.dtype(np.float64): ("TFloat64", "DT_DOUBLE"),
    np.dtype(np.int32): ("TInt32", "DT_INT32"),
    np.dtype(np.int64): ("TInt64", "DT_INT64"),
    np.dtype(np.bool_): ("TBool", "DT_BOOL"),
}
# op type -> (class, Ops endpoint, output accessors, attrs set through the class's static options)
_OP_CLASSES = {
    "FusedBatchNormV3": (
        "FusedBatchNorm",
        "nn.fusedBatchNorm",
        ("y", "batchMean", "batchVariance", "reserveSpace1", "reserveSpace2", "reserveSpace3"),
        ("epsilon", "exponential_avg_factor", "data_format", "is_training"),
    ),
    "FusedBatchNormGradV3": (
        "FusedBatchNormGrad",
        "nn.fusedBatchNormGrad",
        ("xBackprop", "scaleBackprop", "offsetBackprop", "reserveSpace4", "reserveSpace5"),
        ("epsilon", "data_format", "is_training"),
    ),
}
# single-output ops (Operands): op type -> (class, Ops endpoint)
_OPERANDS = {
    "Identity": ("Identity", "identity"),
    "OnesLike": ("OnesLike", "onesLike"),
    "ZerosLike": ("ZerosLike", "zerosLike"),
    "Transpose": ("Transpose", "linalg.transpose"),
    "AddN": ("AddN", "math.addN"),
}
# op type -> where its line comes from on the seed page (SEED), shown above the line
_SEED_NOTES = {
    "FusedBatchNormGradV3": "seed page: FusedBatchNormGradV3.create(scope, yBackprop, x, scale, reserveSpace1, "
    "reserveSpace2, reserveSpace3, options) and its epsilon/dataFormat/isTraining Options",
    "FusedBatchNormV3": "the forward whose reserveSpace1..3 the seed page's op takes (OP_NAME FusedBatchNormV3)",
    "Placeholder": "fed from inputs/ by Session.runner().feed(...) below",
}
_GENERIC_NOTE = "no tf-java class: scope().opBuilder(type, name), as the seed page's create() builds its op"
_FORWARD_OPS = ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
_OPERANDS_ALL = (*_OPERANDS, "Placeholder", "Const")
_PACKAGES = {
    "Identity": "core",
    "OnesLike": "core",
    "ZerosLike": "core",
    "Transpose": "linalg",
    "AddN": "math",
    "FusedBatchNorm": "nn",
    "FusedBatchNormGrad": "nn",
}


def render(plan: ExportPlan) -> dict[str, str]:
    """``{relative path: text}``: the Java source, ``Npy.java``, ``pom.xml`` and ``run.sh``."""
    support = resources.files(__package__) / "java_support"

    def template(name: str) -> str:
        text = (support / name).read_text(encoding="utf-8")
        jars = "\n".join(f'  "{j.replace("{platform}", "$platform")}"' for j in JARS)
        return text.replace("@MAIN@", MAIN_CLASS).replace("@ARTIFACT@", "fbnops-export").replace("@JARS@", jars)

    return {
        f"src/main/java/{MAIN_CLASS}.java": _Program(plan).source(),
        "src/main/java/Npy.java": (support / "Npy.java").read_text(encoding="utf-8"),
        "pom.xml": template("pom.xml"),
        "run.sh": template("run.sh"),
    }


def classpath(repo: str | Path | None = None, platform: str = "linux-x86_64") -> str | None:
    """tf-java's class path from Maven's local repository (``$M2_REPO`` or ``~/.m2/repository``); None if incomplete."""
    root = Path(repo or os.environ.get("M2_REPO") or Path.home() / ".m2" / "repository")
    paths = [root / j.format(platform=platform) for j in JARS]
    return os.pathsep.join(map(str, paths)) if all(p.is_file() for p in paths) else None


def java_type(dtype: np.dtype, what: str) -> tuple[str, str]:
    """``(tensor class, DataType constant)`` of ``dtype``; a dtype tf-java lacks is an UnimplementedError."""
    try:
        return _JAVA_TYPES[np.dtype(dtype)]
    except KeyError:
        raise UnimplementedError(f"{what}: no tf-java tensor type for {np.dtype(dtype)}") from None


def float_literal(value: float) -> str:
    """A Java ``float`` literal that reads back as exactly ``np.float32(value)``."""
    v = np.float32(value)
    if np.isnan(v):
        return "Float.NaN"
    if np.isinf(v):
        return "Float.POSITIVE_INFINITY" if v > 0 else "Float.NEGATIVE_INFINITY"
    if v != 0 and not 1e-4 <= abs(v) < 1e7:
        return np.format_float_scientific(v, unique=True, trim="0").replace("e+", "e") + "f"
    return np.format_float_positional(v, unique=True, trim="0") + "f"


def _attr_literal(op: Operation, name: str, value) -> str:
    """An attr value as the argument of ``OperationBuilder.setAttr`` (or of an option setter)."""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (float, np.floating)):
        return float_literal(value)
    if isinstance(value, (int, np.integer)):
        return f"{int(value)}L"
    if isinstance(value, np.dtype):
        return "DataType." + java_type(value, f"attr '{name}' of '{op.name}'")[1]
    raise UnimplementedError(f"attr '{name}' of '{op.name}' ({op.type}): no tf-java form for {value!r}")


def _local(name: str, taken: set[str]) -> str:
    """A program variable: ``name`` itself unless a node's identifier already is ``name``."""
    if name in taken:
        return identifier(name, taken)
    taken.add(name)
    return name


def _camel(attr: str) -> str:
    head, *rest = attr.split("_")
    return head + "".join(w.capitalize() for w in rest)


class _Program:
    """One Java class for one plan: declarations, statements, the session run and the writes."""

    def __init__(self, plan: ExportPlan):
        self.plan = plan
        for op in plan.ops:  # checked before any text is made
            if op.type == "FusedBatchNormGradGrad":
                raise UnimplementedError(
                    f"'{op.name}' is a second-order batch-norm gradient: TensorFlow builds it in Python "
                    "(_FusedBatchNormGradGradV3), and tf-java has no gradient for FusedBatchNormGrad; "
                    "export it with --target tf-python",
                    op.type,
                )
        self.taken = set(plan.idents.values())
        self.local = {n: _local(n, self.taken) for n in ("graph", "tf", "session", "result", "e", "config")}
        self.scopes: dict[str, str] = {}  # name scope ("a/b") -> the Ops variable for it
        self.imports = {"org.tensorflow.Graph", "org.tensorflow.Result", "org.tensorflow.Session"}
        self.imports.add("org.tensorflow.op.Ops")
        self.large = len(plan.ops) > _SPLIT

    # --- names and types -------------------------------------------------------------------
    def ident(self, op: Operation) -> str:
        return self.plan.idents[op.name]

    def tensor_class(self, dtype, what: str) -> str:
        cls = java_type(dtype, what)[0]
        self.imports.add(f"org.tensorflow.types.{cls}")
        return cls

    def ops_for(self, name: str, lines: list[str]) -> str:
        """``tf.withSubScope("a").withSubScope("b").withName("x")`` for node ``a/b/x`` (scopes made once)."""
        *path, leaf = name.split("/")
        ops = self.local["tf"]
        for depth in range(1, len(path) + 1):
            prefix = "/".join(path[:depth])
            if prefix not in self.scopes:
                var = identifier(prefix + "_scope", self.taken)
                lines.append(f'Ops {var} = {ops}.withSubScope("{path[depth - 1]}");  // name scope "{prefix}/"')
                self.scopes[prefix] = var
            ops = self.scopes[prefix]
        return f'{ops}.withName("{leaf}")'

    def operand(self, t: Output) -> str:
        """The Java expression for input/fetch ``t``."""
        op, i = t.op, t.index
        if op.type in _OP_CLASSES:
            return f"{self.ident(op)}.{_OP_CLASSES[op.type][2][i]}()"
        if op.type in _OPERANDS or op.type in ("Placeholder", "Const"):
            return self.ident(op)
        return f"{self.ident(op)}.<{self.tensor_class(t.dtype, t.name)}>output({i})"

    # --- one statement per op -------------------------------------------------------------
    def declare(self, op: Operation, lines: list[str]) -> tuple[str, str]:
        """``(Java type, statement lines after the declaration)``; appends scope declarations to ``lines``."""
        ops = self.ops_for(op.name, lines)
        var = self.ident(op)
        if op.type == "Placeholder":
            self.imports.add("org.tensorflow.op.core.Placeholder")
            cls = self.tensor_class(op.attrs["dtype"], op.name)
            shape = op.attrs.get("shape")
            option = ""
            if shape is not None:
                self.imports.add("org.tensorflow.ndarray.Shape")
                dims = ", ".join("-1" if d is None else str(d) for d in shape)
                option = f", Placeholder.shape(Shape.of({dims}))" if shape else ", Placeholder.shape(Shape.scalar())"
            return f"Placeholder<{cls}>", f"{var} = {ops}.placeholder({cls}.class{option});"
        if op.type == "Const":
            self.imports.add("org.tensorflow.op.core.Constant")
            cls = self.tensor_class(op.attrs["dtype"], op.name)
            value = identifier(var + "_value", self.taken)
            file = self.plan.consts[op.name]
            return f"Constant<{cls}>", (
                f'try ({cls} {value} = Npy.read("{file}", {cls}.class)) {{\n  {var} = {ops}.constantOf({value});\n}}'
            )
        if op.type in _OP_CLASSES:
            cls, endpoint, _, options = _OP_CLASSES[op.type]
            self.imports.add(f"org.tensorflow.op.nn.{cls}")
            t = self.tensor_class(op.attrs["T"], op.name)
            u = self.tensor_class(op.attrs["U"], op.name)
            args = [self.operand(i) for i in op.inputs]
            args += [f"{cls}.{_camel(a)}({_attr_literal(op, a, op.attrs[a])})" for a in options if a in op.attrs]
            return f"{cls}<{t}, {u}>", f"{var} = {ops}.{endpoint}(\n    " + ",\n    ".join(args) + ");"
        if op.type in _OPERANDS:
            cls, endpoint = _OPERANDS[op.type]
            self.imports.add(f"org.tensorflow.op.{_PACKAGES[cls]}.{cls}")
            t = self.tensor_class(op.outputs[0].dtype, op.name)
            args = [self.operand(i) for i in op.inputs]
            if op.type == "AddN":
                self.imports.update({"java.util.List", "org.tensorflow.Operand"})
                args = [f"List.<Operand<{t}>>of({', '.join(args)})"]
            return f"{cls}<{t}>", f"{var} = {ops}.{endpoint}({', '.join(args)});"
        return self.generic(op, ops, var)

    def generic(self, op: Operation, ops: str, var: str) -> tuple[str, str]:
        """An op without a tf-java class: ``scope.opBuilder(type, name)``, inputs, every attr."""
        self.imports.add("org.tensorflow.Operation")
        chain = [f'{var} = {ops}.scope().opBuilder("{op.type}", "{op.type}")']
        for t in op.inputs:  # an Operand gives its Output; the op classes' accessors already are Outputs
            chain.append(f".addInput({self.operand(t)}{'.asOutput()' if t.op.type in _OPERANDS_ALL else ''})")
        for name, value in op.attrs.items():
            if isinstance(value, np.dtype):
                self.imports.add("org.tensorflow.proto.DataType")
            chain.append(f'.setAttr("{name}", {_attr_literal(op, name, value)})')
        chain.append(".build();")
        return "Operation", "\n    ".join(chain)

    # --- the program ----------------------------------------------------------------------
    def build_parts(self) -> tuple[list[str], list[list[str]]]:
        """``(field declarations, statement blocks)``: one block, or several of ``_SPLIT`` ops when large."""
        fields: list[str] = []
        blocks: list[list[str]] = [[]]
        for k, op in enumerate(self.plan.ops):
            if self.large and k and k % _SPLIT == 0:
                blocks.append([])
            lines = blocks[-1]
            if op.control_inputs:
                raise UnimplementedError(f"'{op.name}': control dependencies are not exported to tf-java")
            before = len(lines)
            jtype, statement = self.declare(op, lines)
            note = _SEED_NOTES.get(op.type, "" if op.type in _OPERANDS_ALL else _GENERIC_NOTE)
            lines.insert(before, f"// {op.name}: {op.type}" + (f" - {note}" if note else ""))
            if self.large:
                fields.append(f"private static {jtype} {self.ident(op)};")
                lines.extend(statement.splitlines())
            elif statement.startswith(f"{self.ident(op)} = "):
                lines.extend(f"{jtype} {statement}".splitlines())
            else:  # a constant: declared, then assigned inside its try block
                lines.append(f"{jtype} {self.ident(op)};")
                lines.extend(statement.splitlines())
        if self.large:  # the scope variables are fields too
            for block in blocks:
                for i, line in enumerate(block):
                    if line.startswith("Ops ") and "withSubScope" in line:
                        name = line.split()[1]
                        fields.append(f"private static Ops {name};")
                        block[i] = line[len("Ops ") :]
        return fields, blocks

    def run_lines(self) -> list[str]:
        """Feeds read from ``inputs/``, the fetches, each result written to ``outputs/``."""
        graph, session, result = self.local["graph"], self.local["session"], self.local["result"]
        lines = self.no_remapper()
        config = f", {self.local['config']}" if lines else ""
        resources_ = [f"Session {session} = new Session({graph}{config});"]
        feeds = []
        for name, file in self.plan.feeds.items():
            op = self.plan.graph.get_operation(name)
            cls = self.tensor_class(op.attrs["dtype"], name)
            value = identifier(self.ident(op) + "_value", self.taken)
            resources_.append(f'{cls} {value} = Npy.read("{file}", {cls}.class);')
            feeds.append(f".feed({self.ident(op)}, {value})")
        fetches = [f".fetch({self.operand(self.plan.graph.get_output(t))})  // {t}" for t in self.plan.fetches]
        lines.append("// Session.runner(): feed each placeholder, fetch each output, run() -> Result")
        lines.append("try (" + resources_[0])
        lines += ["     " + r for r in resources_[1:]]
        lines.append(f"     Result {result} = {session}.runner()")
        lines += [f"         {line}" for line in feeds + fetches]
        lines.append("         .run()) {")
        for k, (tensor, file) in enumerate(self.plan.output_files().items()):
            lines.append(f'  Npy.write("{file}", {result}.get({k}));  // {tensor}')
        lines.append("}")
        return lines

    def no_remapper(self) -> list[str]:
        """A session config without Grappler's remapper, when the plan has an inference forward."""
        if not any(op.type in _FORWARD_OPS and not op.attrs["is_training"] for op in self.plan.ops):
            return []
        self.imports.update(f"org.tensorflow.proto.{c}" for c in ("ConfigProto", "GraphOptions", "RewriterConfig"))
        return [
            "// Grappler's remapper turns an inference FusedBatchNorm into Mul and Add even when batch_mean or",
            '// batch_variance is fetched, and the run fails with "does not have output 1"',
            "// (https://github.com/tensorflow/tensorflow/issues/21328): this graph runs without that rewrite.",
            f"ConfigProto {self.local['config']} = ConfigProto.newBuilder()",
            "    .setGraphOptions(GraphOptions.newBuilder()",
            "        .setRewriteOptions(RewriterConfig.newBuilder().setRemapping(RewriterConfig.Toggle.OFF)))",
            "    .build();",
        ]

    def source(self) -> str:
        fields, blocks = self.build_parts()
        run = self.run_lines()
        graph, tf, e = self.local["graph"], self.local["tf"], self.local["e"]
        body = [f"try (Graph {graph} = new Graph()) {{", f"  Ops {tf} = Ops.create({graph});"]
        if self.large:
            body += [f"  build{k}({tf});" for k in range(len(blocks))]
        else:
            body += [f"  {line}" for line in blocks[0]]
        body += [f"  {line}" for line in run]
        body += [
            f"}} catch (RuntimeException {e}) {{  // tf-java reports failures as unchecked exceptions",
            f'  System.err.println({e}.getClass().getName() + ": " + {e}.getMessage());',
            "  System.exit(1);",
            "}",
        ]
        out = self.header()
        out += [f"public final class {MAIN_CLASS} {{"]
        out += [f"  {f}" for f in fields] + ([""] if fields else [])
        out += ["  public static void main(String[] args) throws IOException {"]
        out += [f"    {line}" if line else "" for line in body] + ["  }"]
        for k, block in enumerate(blocks if self.large else []):
            out += ["", f"  private static void build{k}(Ops {tf}) throws IOException {{"]
            out += [f"    {line}" for line in block] + ["  }"]
        return "\n".join(out) + "\n}\n"

    def header(self) -> list[str]:
        renamed = self.plan.renamed()
        lines = [
            f"// {MAIN_CLASS}.java - generated by `fbnops export --target tf-java` from {self.plan.source}.",
            "// The graph as a tf-java 1.1.0 user builds and runs it (org.tensorflow:tensorflow-core-api):",
            "//   Graph, Ops tf = Ops.create(graph), tf.withName(...).nn.fusedBatchNorm(...) / fusedBatchNormGrad(...)",
            "//   with the op class's static options (FusedBatchNormGrad.epsilon(...), .dataFormat, .isTraining),",
            "//   then session.runner().feed(...).fetch(...).run() returning a Result.",
            f"// Seed page: {SEED}.",
            "// tf-java 1.1.0 names that op class org.tensorflow.op.nn.FusedBatchNormGrad (OP_NAME",
            '// "FusedBatchNormGradV3"; the forward is nn.FusedBatchNorm, OP_NAME "FusedBatchNormV3"). The',
            "// V1/V2 ops have no class in tf-java and are built with scope().opBuilder(type, name).",
            "// Inputs are read from inputs/*.npy; fetched tensors are written to outputs/<op>_<index>.npy.",
            "// bfloat16 crosses the files as float32: Npy.read narrows, Npy.write widens (exactly).",
        ]
        if renamed:
            lines.append("// Node names that are not Java identifiers, and the variables that hold them:")
            lines += [f'//   "{name}" -> {ident}' for name, ident in sorted(renamed.items())]
        lines += ["", "import java.io.IOException;"]
        lines += [f"import {i};" for i in sorted(self.imports)]
        return lines + [""]
