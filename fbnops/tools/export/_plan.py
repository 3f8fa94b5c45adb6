"""What every export target renders: the graph cut down to what the fetches need, in order.

An :class:`ExportPlan` is the one description each target (``tf_python``, ``tf_cc``, ``tf_java``,
``onednn_graph``, ``directml``) turns into source files. It knows no target: it holds the core
graph's operations in dependency order, the arrays the program reads from ``inputs/``, the files
it writes to ``outputs/``, and identifiers that are valid in C++ and Java for every node name.

Contract of a target module: ``render(plan: ExportPlan) -> dict[str, str]``, relative path ->
file text, ``run.sh`` included (made executable by the writer). The writer (``_write.write``) adds
``inputs/*.npy`` from ``plan.arrays`` and writes the directory atomically.

Values the program reads: every fed ``Placeholder`` (``feeds``) **and every ``Const``**
(``consts``) has a file ``inputs/<identifier>.npy`` (``arrays``), so a target renders a constant
as "read this file, make a constant of it", the same way for a 3-element scale and a 100 KB ``x``.
The op's own dtype (``op.attrs["dtype"]``) is the dtype the program must give it.

**bfloat16 crosses the files as float32** (``.npy`` has no bfloat16; every bfloat16 is exactly
a float32): the writer widens bfloat16 arrays, the program narrows them to bfloat16 in memory
(:func:`file_dtype` says what a file holds), and widens bfloat16 outputs to float32 when it
writes ``outputs/*.npy``; checkers compare after rounding back to bfloat16. float16 and
float32 are stored as such.

A ``FusedBatchNormGradGrad`` node (fbnops' second-order gradient; TensorFlow has no such op)
is the gradient of a first-order ``FusedBatchNormGrad*`` op: :func:`needed_ops` brings that op
along (:func:`differentiated_op` finds it), so a target can express the node as the real
library's gradient of it (TF Python: ``tf.gradients``), or refuse it with
``UnimplementedError`` naming the node.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, field

import numpy as np

from fbnops.framework import dtypes
from fbnops.framework.graph import Graph, Operation
from fbnops.framework.tensor import parse_tensor_name

# Words no generated identifier may be (C++ and Java keywords, and names the templates use).
_RESERVED = frozenset(
    """alignas alignof and asm auto bool break case catch char class const constexpr continue
    default delete do double else enum explicit export extern false float for friend goto if inline
    int long mutable namespace new noexcept not nullptr operator or private protected public register
    return short signed sizeof static struct switch template this throw true try typedef typename
    union unsigned using virtual void volatile while abstract assert boolean byte extends final
    finally implements import instanceof interface native package strictfp super synchronized throws
    transient var main scope session tf ops root status args outputs inputs result""".split()
) | frozenset(keyword.kwlist)


def identifier(name: str, taken: set[str]) -> str:
    """A C++/Java/Python identifier for node ``name``, unique within ``taken`` (which it extends)."""
    base = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if not base or base[0].isdigit():
        base = "n_" + base
    if base in _RESERVED:
        base += "_"
    ident, k = base, 1
    while ident in taken:
        ident, k = f"{base}_{k}", k + 1
    taken.add(ident)
    return ident


def output_file(tensor: str) -> str:
    """``bn:0`` -> ``outputs/bn_0.npy`` (``/`` in scoped names becomes ``__``)."""
    return "outputs/" + tensor.replace("/", "__").replace(":", "_") + ".npy"


@dataclass(frozen=True)
class ExportPlan:
    graph: Graph
    ops: tuple[Operation, ...]  # every op the fetches need, each after its inputs
    fetches: tuple[str, ...]  # canonical "op:index" names, in the order asked
    feeds: dict[str, str] = field(default_factory=dict)  # placeholder op name -> "inputs/<ident>.npy"
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # "inputs/<ident>.npy" -> value
    idents: dict[str, str] = field(default_factory=dict)  # op name -> identifier
    source: str = ""  # where the graph came from, one line (for the files' headers)
    consts: dict[str, str] = field(default_factory=dict)  # Const op name -> "inputs/<ident>.npy"
    expected: dict[str, np.ndarray] = field(default_factory=dict)  # fetch -> fbnops' own value (its dtype)

    def output_files(self) -> dict[str, str]:
        return {t: output_file(t) for t in self.fetches}

    def renamed(self) -> dict[str, str]:
        """Node names whose identifier differs (shown in a comment of the generated source)."""
        return {n: i for n, i in self.idents.items() if n != i}


def file_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype an ``inputs``/``outputs`` file holds for a tensor of ``dtype`` (bfloat16 -> float32)."""
    return np.dtype(np.float32) if np.dtype(dtype) == dtypes.bfloat16 else np.dtype(dtype)


GRAD_OPS = ("FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3")


def differentiated_op(graph: Graph, grad_grad: Operation) -> Operation | None:
    """The first-order grad op a ``FusedBatchNormGradGrad`` node is the gradient of (same inputs, attrs)."""
    wanted = {k: grad_grad.attrs[k] for k in ("epsilon", "data_format", "is_training")}
    for op in graph.operations():
        if op is grad_grad:
            return None  # the grad op comes first (gradients() builds the node from it)
        if (
            op.type in GRAD_OPS
            and op.inputs[:5] == grad_grad.inputs[:5]
            and all(op.attrs.get(k) == v for k, v in wanted.items())
        ):
            return op
    return None


def needed_ops(graph: Graph, fetches: list[str]) -> tuple[Operation, ...]:
    """The ops ``fetches`` depend on (data and control inputs), in creation order (a topological order).

    A ``FusedBatchNormGradGrad`` node also needs the grad op it differentiates (see the module doc).
    """
    want: set[str] = set()
    stack = [parse_tensor_name(f, default_index=0).op for f in fetches]
    while stack:
        name = stack.pop()
        if name in want:
            continue
        want.add(name)
        op = graph.get_operation(name)
        stack.extend(t.op.name for t in op.inputs)
        stack.extend(c.name for c in op.control_inputs)
        origin = differentiated_op(graph, op) if op.type == "FusedBatchNormGradGrad" else None
        if origin is not None:
            stack.append(origin.name)
    return tuple(op for op in graph.operations() if op.name in want)
