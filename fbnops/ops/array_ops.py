"""The support ops and their gradients, TensorFlow's ``array_ops`` and ``array_grad`` for what a
graph of batch-norm ops needs: feeds and constants (``Placeholder``, ``Const``), and what
``gradients()`` adds (``OnesLike`` for the default ``grad_ys``, ``AddN`` to sum gradients,
``Identity``, ``Transpose`` for channels-first inference, and the filler ``ZerosLike`` for
outputs that get no gradient).  TensorFlow's names and attrs, so an exported GraphDef runs in
TensorFlow unchanged.  Registered like every other op, by ``fbnops/__init__.py``; the framework
asks the registry for them by name.

Their gradients, as TensorFlow registers them (``array_grad.py``, ``math_grad.py``):

* ``Identity``: the incoming gradient;
* ``OnesLike``/``ZerosLike``: not differentiable (``ops.NotDifferentiable``);
* ``AddN``: the incoming gradient, once per input;
* ``Transpose``: the gradient transposed by the inverse permutation (the permutation must be
  a ``Const``, as every ``Transpose`` fbnops builds is).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..framework import dtypes, memory
from ..framework.errors import InvalidArgumentError, UnimplementedError
from ..framework.graph import Operation, Output
from ..framework.registry import OpDef, register_gradient, register_op_def
from ..framework.scope import Scope
from ..framework.tensor import shape_str

__all__ = ["Placeholder", "Const", "Identity", "OnesLike", "ZerosLike", "AddN", "Transpose", "zeros_like"]

_FLOATS = (dtypes.float32, dtypes.float16, dtypes.bfloat16, np.dtype(np.float64))


def _check_output(like: np.ndarray, op: str) -> None:
    """An output as large as ``like``: refuse it before allocating (``like`` may be a broadcast view)."""
    memory.check_fits(like.size * like.dtype.itemsize, f"an output of shape {shape_str(like.shape)}", op)


def _required(attrs: dict, name: str, op: str):
    if name not in attrs:
        raise InvalidArgumentError(f"NodeDef missing attr '{name}' from Op<name={op}>")
    return attrs[name]


def _same_dtype(inputs, op: str):
    dt = inputs[0].dtype
    for i, t in enumerate(inputs[1:], 1):
        if t.dtype != dt:
            raise InvalidArgumentError(
                f"cannot compute {op} as input #{i}(zero-based) was expected to be a {dtypes.tf_name(dt)} "
                f"tensor but is a {dtypes.tf_name(t.dtype)} tensor"
            )
    return dt


class Placeholder(OpDef):
    name = "Placeholder"
    output_names = ("output",)
    attr_kinds = {"dtype": "type", "shape": "shape"}

    def build(self, inputs, attrs):
        if inputs:
            raise InvalidArgumentError("Placeholder takes no inputs")
        dt = dtypes.graph_dtype(_required(attrs, "dtype", "Placeholder"), "Placeholder")
        shape = attrs.get("shape")
        if isinstance(shape, (str, bytes)):  # a sequence, but of characters, not dims
            raise InvalidArgumentError(f"Placeholder shape must be a list of dims, got {shape!r:.40}")
        shape = None if shape is None else tuple(None if d is None or d < 0 else int(d) for d in shape)
        if shape is not None and any(d is not None and d >= 1 << 63 for d in shape):
            raise InvalidArgumentError(f"Placeholder shape {list(shape)!r:.80}: a dimension does not fit int64")
        return {"dtype": dt, "shape": shape}, [dt], [shape]

    def compute(self, arrays, attrs, backend):
        raise InvalidArgumentError(
            f"You must feed a value for placeholder tensor with dtype {dtypes.tf_name(attrs['dtype'])}"
        )


class Const(OpDef):
    name = "Const"
    output_names = ("output",)
    attr_kinds = {"dtype": "type", "value": "tensor"}

    def build(self, inputs, attrs):
        given = np.asarray(_required(attrs, "value", "Const"))
        dtypes.graph_dtype(given.dtype, "Const")  # int8, string, object...: refused here, not when written
        memory.check_fits(given.size * given.dtype.itemsize, f"constant of shape {list(given.shape)}", "Const")
        value = np.array(given, copy=True)
        if not value.dtype.isnative:  # same values, native byte order (as raw_ops does for its inputs)
            value = value.astype(value.dtype.newbyteorder("="))
        value.flags.writeable = False
        dt = dtypes.graph_dtype(attrs.get("dtype", value.dtype), "Const")
        if value.dtype != dt:
            raise InvalidArgumentError(f"Const value dtype {value.dtype} does not match dtype {dt}")
        return {"dtype": dt, "value": value}, [dt], [value.shape]

    def compute(self, arrays, attrs, backend):
        return (attrs["value"],)


class Identity(OpDef):
    name = "Identity"
    input_names = ("input",)
    input_types = ("T",)
    output_names = ("output",)
    attr_kinds = {"T": "type"}

    def build(self, inputs, attrs):
        return {"T": inputs[0].dtype}, [inputs[0].dtype], [inputs[0].shape]

    def compute(self, arrays, attrs, backend):
        return (arrays[0],)


class OnesLike(OpDef):
    name = "OnesLike"
    input_names = ("x",)
    input_types = ("T",)
    output_names = ("y",)
    attr_kinds = {"T": "type"}

    def build(self, inputs, attrs):
        return {"T": inputs[0].dtype}, [inputs[0].dtype], [inputs[0].shape]

    def compute(self, arrays, attrs, backend):
        _check_output(arrays[0], "OnesLike")
        return (np.ones(arrays[0].shape, arrays[0].dtype),)


def _merge_shapes(inputs) -> tuple | None:
    """TensorFlow's shape-function ``Merge`` over all inputs (AddN): equal ranks, equal known dims."""
    merged = None
    for t in inputs:
        if t.shape is None:
            continue
        if merged is None:
            merged = list(t.shape)
            continue
        if len(t.shape) != len(merged):
            raise InvalidArgumentError(f"Shapes must be equal rank, but are {len(merged)} and {len(t.shape)}")
        for i, (a, b) in enumerate(zip(merged, t.shape, strict=True)):
            if a is not None and b is not None and a != b:
                raise InvalidArgumentError(
                    f"Dimension {i} in both shapes must be equal, but are {a} and {b}. Shapes are "
                    f"{shape_str(tuple(merged))} and {shape_str(t.shape)}.\n\tFrom merging shape 0 with other shapes."
                )
            merged[i] = a if a is not None else b
    return None if merged is None else tuple(merged)


class AddN(OpDef):
    name = "AddN"
    output_names = ("sum",)
    attr_kinds = {"N": "i", "T": "type"}
    variadic = True

    def build(self, inputs, attrs):
        if not inputs:
            raise InvalidArgumentError("AddN needs at least one input")
        dt = _same_dtype(inputs, "AddN")
        return {"N": len(inputs), "T": dt}, [dt], [_merge_shapes(inputs)]

    def compute(self, arrays, attrs, backend):
        first = arrays[0]
        for i, a in enumerate(arrays[1:], 1):  # never broadcast (TensorFlow's kernel check)
            if a.shape != first.shape:
                raise InvalidArgumentError(
                    "Inputs to operation AddN of type AddN must have the same size and shape.  "
                    f"Input 0: {shape_str(first.shape)} != input {i}: {shape_str(a.shape)}",
                    "AddN",
                )
        _check_output(first, "AddN")
        total = first.astype(np.float32) if first.dtype in _FLOATS[1:3] else first.copy()
        for a in arrays[1:]:
            total += a.astype(total.dtype)
        return (total.astype(first.dtype),)


class Transpose(OpDef):
    name = "Transpose"
    input_names = ("x", "perm")
    input_types = ("T", "Tperm")
    output_names = ("y",)
    attr_kinds = {"T": "type", "Tperm": "type"}

    def build(self, inputs, attrs):
        x, perm = inputs
        if perm.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
            raise InvalidArgumentError(f"Transpose perm must be int32 or int64, got {perm.dtype}")
        shape = None
        if perm.op.type == "Const" and x.shape is not None:
            value = np.asarray(perm.op.attrs["value"])
            if value.ndim != 1:
                raise InvalidArgumentError(f"transpose perm must be a vector, got shape {shape_str(value.shape)}")
            p = [int(i) for i in value]
            if sorted(p) != list(range(len(x.shape))):
                raise InvalidArgumentError(f"transpose expects a permutation of 0..{len(x.shape) - 1}, got {p}")
            shape = tuple(x.shape[i] for i in p)
        return {"T": x.dtype, "Tperm": perm.dtype}, [x.dtype], [shape]

    def compute(self, arrays, attrs, backend):
        x, perm = arrays
        if perm.shape != (x.ndim,) or sorted(int(p) for p in perm) != list(range(x.ndim)):
            raise InvalidArgumentError(f"transpose expects a permutation of 0..{x.ndim - 1}, got {perm.tolist()}")
        _check_output(x, "Transpose")
        return (np.ascontiguousarray(np.transpose(x, perm)),)


class ZerosLike(OnesLike):
    name = "ZerosLike"

    def compute(self, arrays, attrs, backend):
        _check_output(arrays[0], self.name)
        return (np.zeros(arrays[0].shape, arrays[0].dtype),)


for _cls in (Placeholder, Const, Identity, OnesLike, ZerosLike, AddN, Transpose):
    register_op_def(_cls())


def zeros_like(scope: Scope, like: Output) -> Output:
    return scope.add_op("ZerosLike", [like], {}).output(0)


# ------------------------------------------------------------------------------------------- gradients


@register_gradient("Identity")
def _identity_grad(scope: Scope, op: Operation, grads: Sequence[Output | None]) -> list[Output | None]:
    return [grads[0]]


@register_gradient("OnesLike")
@register_gradient("ZerosLike")
def _not_differentiable(scope: Scope, op: Operation, grads: Sequence[Output | None]) -> list[None]:
    return [None] * len(op.inputs)


@register_gradient("AddN")
def _add_n_grad(scope: Scope, op: Operation, grads: Sequence[Output | None]) -> list[Output | None]:
    return [grads[0]] * len(op.inputs)


@register_gradient("Transpose")
def _transpose_grad(scope: Scope, op: Operation, grads: Sequence[Output | None]) -> list[Output | None]:
    perm = op.inputs[1]
    if perm.op.type != "Const":
        raise UnimplementedError(f"the gradient of Transpose '{op.name}' needs a constant permutation")
    inverse = np.argsort(np.asarray(perm.op.attrs["value"])).astype(perm.dtype)
    back = scope.constant(inverse, name="perm")
    return [scope.add_op("Transpose", [grads[0], back], {}).output(0), None]
