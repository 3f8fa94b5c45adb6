"""The ``tf-cc`` target: the graph as a C++ program on TensorFlow's C++ API.

``render(plan)`` writes ``main.cc`` the way the TensorFlow C++ guide and the op pages show it
(``Scope::NewRootScope()``, ``ops::Placeholder``, ``ops::Const``, ``ops::FusedBatchNormGradV3(
scope.WithOpName("bn"), ..., ops::FusedBatchNormGradV3::Epsilon(...)...)``, ``ClientSession::Run``),
plus ``npy.h``/``tensor_npy.h`` (the ``.npy`` files as ``Tensor``s), ``client_session_shim.cc``
and ``run.sh``.

Why a shim: the ``tensorflow-cpu`` wheel ships ``client_session.h`` and ``libtensorflow_cc.so.2``
but the library does not export ``ClientSession``, so ClientSession code does not link.
``cc_shim/client_session_shim.cc`` (package data) defines the class over ``tensorflow::Session``;
``run.sh`` compiles it once per (shim, TensorFlow version, flags) into
``${FBNOPS_EXPORT_CACHE:-$HOME/.cache/fbnops/export}/tf-cc-<key>/shim.o`` and links every program
against that object.
"""

from __future__ import annotations

import math
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path

import numpy as np

from fbnops.framework import dtypes
from fbnops.framework.errors import UnimplementedError
from fbnops.framework.graph import Operation, Output
from fbnops.framework.registry import get_op_def

from ._npy_cpp import NPY_H
from ._plan import ExportPlan, identifier

__all__ = ["render", "support_files", "build_shim", "API_PAGES", "OP_PAGES"]

_DOCS = "https://www.tensorflow.org/api_docs/cc/class/tensorflow/"
OP_PAGES = {  # every op type main.cc can build, and its TensorFlow C++ API page
    "Placeholder": _DOCS + "ops/placeholder",
    "Const": "https://www.tensorflow.org/api_docs/cc/group/const-op",
    "Identity": _DOCS + "ops/identity",
    "OnesLike": _DOCS + "ops/ones-like",
    "ZerosLike": _DOCS + "ops/zeros-like",
    "AddN": _DOCS + "ops/add-n",
    "Transpose": _DOCS + "ops/transpose",
    "FusedBatchNorm": _DOCS + "ops/fused-batch-norm",
    "FusedBatchNormV2": _DOCS + "ops/fused-batch-norm-v2",
    "FusedBatchNormV3": _DOCS + "ops/fused-batch-norm-v3",
    "FusedBatchNormGrad": _DOCS + "ops/fused-batch-norm-grad",
    "FusedBatchNormGradV2": _DOCS + "ops/fused-batch-norm-grad-v2",
    "FusedBatchNormGradV3": _DOCS + "ops/fused-batch-norm-grad-v3",  # the seed page
}
API_PAGES = {"Scope": _DOCS + "scope", "ClientSession": _DOCS + "client-session", **OP_PAGES}
_FORWARD_ATTRS = (("epsilon", "Epsilon"), ("exponential_avg_factor", "ExponentialAvgFactor"))
_FORWARD_ATTRS += (("data_format", "DataFormat"), ("is_training", "IsTraining"))
_FORWARD = ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
_ATTR_SETTERS = {op: _FORWARD_ATTRS for op in _FORWARD}
_ATTR_SETTERS |= {
    op: (_FORWARD_ATTRS[0], *_FORWARD_ATTRS[2:])
    for op in ("FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3")
}
_UNARY = ("Identity", "OnesLike", "ZerosLike")
# names main.cc uses besides the node identifiers (a node called "Tensor" must not shadow the type)
_CPP_NAMES = frozenset(
    "Tensor Scope ClientSession Status Output Input InputList Operation TensorShape DataType CheckOk npy std "
    "tensorflow absl Eigen size_t".split()
) | {d.enum for d in dtypes.TABLE}


def render(plan: ExportPlan) -> dict[str, str]:
    """``main.cc``, ``npy.h``, ``tensor_npy.h``, ``client_session_shim.cc`` and ``run.sh`` for ``plan``."""
    return {"main.cc": _Program(plan).text(), **support_files()}


def support_files() -> dict[str, str]:
    """Every file of a tf-cc directory but ``main.cc``: the build script, the shim, the .npy headers."""
    files = {name: _resource(name) for name in ("tensor_npy.h", "client_session_shim.cc", "run.sh")}
    return {**files, "npy.h": NPY_H}


def build_shim() -> int:
    """Compile the ClientSession shim into the export cache now (CI does it once); run.sh's exit code."""
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in support_files().items():
            Path(tmp, name).write_text(text, encoding="utf-8")
        return subprocess.call(["sh", str(Path(tmp, "run.sh")), "--shim-only"])


def _resource(name: str) -> str:
    return resources.files(__package__).joinpath("cc_shim", name).read_text(encoding="utf-8")


def _float(value: float) -> str:
    """A C++ float literal that reads back as the same float32 (``1e-05f``, ``1.0f``)."""
    if math.isnan(value):
        return "std::numeric_limits<float>::quiet_NaN()"
    if math.isinf(value):
        return ("-" if value < 0 else "") + "std::numeric_limits<float>::infinity()"
    text = str(np.float32(value))
    return ("-" if value < 0 else "") + _mantissa(text.lstrip("-")) + "f"


def _mantissa(text: str) -> str:
    return text if any(c in text for c in ".e") else text + ".0"


def _string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _braced(start: str, items: list[str]) -> list[str]:
    """``start{a, b};`` on one line when short, else one item per line."""
    one = f"{start}{{{', '.join(items)}}};"
    if len(one) <= 110:
        return [one]
    return [start + "{", *(f"      {item}," for item in items), "  };"]


def _dt(dtype) -> str:
    return dtypes.enum_name(np.dtype(dtype))


class _Program:
    """main.cc for one plan: one statement per op, the identifiers unique and valid C++."""

    def __init__(self, plan: ExportPlan):
        self.plan = plan
        taken = set(plan.idents.values()) | _CPP_NAMES
        self.var = {n: (i if i not in _CPP_NAMES else identifier(i, taken)) for n, i in plan.idents.items()}
        self.value_var = {n: identifier(self.var[n] + "_value", taken) for n in [*plan.feeds, *plan.consts]}
        for op in plan.ops:
            if op.type not in OP_PAGES:
                raise UnimplementedError(
                    f"the tf-cc target cannot express node '{op.name}' ({op.type}): TensorFlow C++ has no "
                    "such op" + ("; export the first-order gradient instead" if "GradGrad" in op.type else ""),
                    op.type,
                )

    def output(self, t: Output) -> str:
        """The C++ expression for a tensor: the op's variable, or ``bn.y`` for a multi-output op."""
        if t.op.type in _UNARY + ("Placeholder", "Const", "AddN", "Transpose"):
            return self.var[t.op.name]
        return f"{self.var[t.op.name]}.{get_op_def(t.op.type).output_names[t.index]}"

    def scope_for(self, op: Operation) -> str:
        scope = "scope"
        if op.control_inputs:
            ops_of = [self.var[c.name] + (".op()" if c.type == "Const" else ".operation") for c in op.control_inputs]
            deps = ", ".join(ops_of)
            scope += f".WithControlDependencies(std::vector<Operation>{{{deps}}})"
        if op.device:
            scope += f".WithDevice({_string(op.device)})"
        return f"{scope}.WithOpName({_string(op.name)})"

    def statement(self, op: Operation) -> str:
        name, scope = self.var[op.name], self.scope_for(op)
        ins = [self.output(t) for t in op.inputs]
        if op.type == "Placeholder":
            shape = op.attrs.get("shape")
            args = f"{scope}, {_dt(op.attrs['dtype'])}"
            if shape is not None:
                dims = ", ".join("-1" if d is None else str(d) for d in shape)
                args += f", ops::Placeholder::Shape({{{dims}}})"
            return f"auto {name} = ops::Placeholder({args});"
        if op.type == "Const":
            return f"auto {name} = ops::Const({scope}, {self.value_var[op.name]});"
        if op.type == "AddN":
            return f"auto {name} = ops::AddN({scope}, std::vector<Output>{{{', '.join(ins)}}});"
        if op.type in _UNARY + ("Transpose",):
            return f"auto {name} = ops::{op.type}({scope}, {', '.join(ins)});"
        setters = _ATTR_SETTERS[op.type]
        attrs = []
        for attr, setter in setters:
            value = op.attrs[attr]
            if isinstance(value, bool):
                text = "true" if value else "false"
            elif isinstance(value, str):
                text = _string(value)
            else:
                text = _float(float(value))
            attrs.append(f"{setter}({text})")
        indent = " " * (len(f"auto {name} = ops::{op.type}("))
        attr_line = f"ops::{op.type}::" + ".".join(attrs)
        return f"auto {name} = ops::{op.type}({scope},\n{indent}{', '.join(ins)},\n{indent}{attr_line});"

    def text(self) -> str:
        plan = self.plan
        used = sorted({op.type for op in plan.ops})
        lines = [
            f"// main.cc - exported by fbnops (target tf-cc) from {plan.source or 'a graph'}.",
            "// The graph as a TensorFlow C++ user builds it (Scope, ops::..., ClientSession::Run).",
            "// Build and run: ./run.sh  (reads inputs/*.npy, writes one outputs/<op>_<index>.npy per fetch).",
            "// On an error it prints TensorFlow's Status (code and message) and exits 1.",
            "//",
            "// TensorFlow C++ API pages for the lines below:",
            *(f"//   {k}: {API_PAGES[k]}" for k in ["Scope", "ClientSession", *used]),
            '//   (ops::FusedBatchNormGradV3: "tensorflow::ops::FusedBatchNormGradV3", the seed page of fbnops)',
        ]
        renamed = {n: self.var[n] for n in plan.idents if n != self.var[n]}
        if renamed:
            lines += ["//", "// Node names that are not C++ identifiers, and the variables that hold them:"]
            lines += [f"//   {_string(n)} -> {v}" for n, v in renamed.items()]
        lines += [
            "#include <cstdlib>",
            "#include <exception>",
            "#include <iostream>",
            "#include <limits>",
            "#include <vector>",
            "",
            '#include "tensor_npy.h"  // inputs/*.npy and outputs/*.npy as tensorflow::Tensor',
            '#include "tensorflow/cc/client/client_session.h"',
            '#include "tensorflow/cc/framework/scope.h"',
            '#include "tensorflow/cc/ops/array_ops.h"  // Placeholder, Identity, OnesLike, ZerosLike, Transpose',
            '#include "tensorflow/cc/ops/const_op.h"',
            '#include "tensorflow/cc/ops/math_ops.h"  // AddN',
            '#include "tensorflow/cc/ops/nn_ops.h"  // FusedBatchNorm*, FusedBatchNormGrad*',
            '#include "tensorflow/core/protobuf/rewriter_config.pb.h"  // RewriterConfig (SessionOptions)',
            '#include "tensorflow/core/public/session_options.h"',
            "",
            "using namespace tensorflow;  // as in TensorFlow's C++ guide",
            "",
            "// A failed Status, printed as TensorFlow formats it (code and message); the program exits 1.",
            "void CheckOk(const Status& status, const char* step) {",
            "  if (status.ok()) return;",
            '  std::cerr << step << " failed: " << status.ToString() << "\\n";',
            "  std::exit(1);",
            "}",
            "",
            "int main() try {",
            "  // The values the graph is fed and its constants, each as the dtype its node has.",
        ]
        for name in [*plan.feeds, *plan.consts]:
            op = plan.graph.get_operation(name)
            file = {**plan.feeds, **plan.consts}[name]
            lines.append(f'  Tensor {self.value_var[name]} = npy::LoadTensor("{file}", {_dt(op.attrs["dtype"])});')
        lines += ["", "  Scope scope = Scope::NewRootScope();  // Scope"]
        cited: set[str] = set()
        for op in plan.ops:
            if op.type not in cited:  # each op's API page, at its first use
                cited.add(op.type)
                lines.append(f"  // ops::{op.type}: {API_PAGES[op.type]}")
            lines += ["  " + line for line in self.statement(op).split("\n")]
        feeds = [f"{{{self.var[n]}, {self.value_var[n]}}}" for n in plan.feeds]
        # TF refuses to fetch a fed tensor ("x:0 is both fed and fetched"): such a fetch is the fed value
        fed = {f for f in plan.fetches if plan.graph.get_output(f).op.name in plan.feeds}
        run_fetches = [f for f in plan.fetches if f not in fed]
        fetches = [self.output(plan.graph.get_output(f)) for f in run_fetches]
        lines += ['  CheckOk(scope.status(), "building the graph");', ""]
        if any(op.type in _FORWARD and not op.attrs["is_training"] for op in plan.ops):
            lines += [
                "  // Grappler's remapper rewrites an inference FusedBatchNorm into Mul/Add even when its",
                '  // batch_mean is fetched, and Run then fails with "does not have output 1"',
                "  // (https://github.com/tensorflow/tensorflow/issues/21328): this session runs without it.",
                "  SessionOptions options;",
                "  options.config.mutable_graph_options()->mutable_rewrite_options()"
                "->set_remapping(RewriterConfig::OFF);",
                "  ClientSession session(scope, options);  // ClientSession",
            ]
        else:
            lines += ["  ClientSession session(scope);  // ClientSession"]
        lines += _braced("  ClientSession::FeedType feeds = ", feeds)
        lines += _braced("  std::vector<Output> fetches = ", fetches)
        lines += [
            "  std::vector<Tensor> outputs;",
            f'  CheckOk(session.Run({"feeds, " if feeds else ""}fetches, &outputs), "ClientSession::Run");',
        ]
        for fetch, file in plan.output_files().items():
            if fetch in fed:
                value = self.value_var[plan.graph.get_output(fetch).op.name]
                lines.append(f'  npy::SaveTensor("{file}", {value});  // {fetch}: fed, so not fetched')
            else:
                lines.append(f'  npy::SaveTensor("{file}", outputs[{run_fetches.index(fetch)}]);  // {fetch}')
        lines += [
            "  return 0;",
            "} catch (const std::exception& e) {  // an input or output file that cannot be read or written",
            '  std::cerr << e.what() << "\\n";',
            "  return 1;",
            "}",
            "",
        ]
        return "\n".join(lines)


if __name__ == "__main__":  # python -m fbnops.tools.export.tf_cc: build the shim once
    sys.exit(build_shim())
