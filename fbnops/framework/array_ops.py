"""The few support ops a graph of batch-norm ops needs: feeds, constants, and what
``gradients()`` adds (OnesLike, AddN, Transpose, Identity).  TensorFlow's names and
attrs, so an exported GraphDef runs in TensorFlow unchanged."""

from __future__ import annotations

import numpy as np

from . import dtypes, memory
from .errors import InvalidArgumentError
from .graph import OpDef, register_op_def

_FLOATS = (dtypes.float32, dtypes.float16, dtypes.bfloat16, np.dtype(np.float64))


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
        dt = np.dtype(attrs["dtype"])
        shape = attrs.get("shape")
        shape = None if shape is None else tuple(None if d is None or d < 0 else int(d) for d in shape)
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
        given = np.asarray(attrs["value"])
        memory.check_fits(given.size * given.dtype.itemsize, f"constant of shape {list(given.shape)}", "Const")
        value = np.array(given, copy=True)
        if not value.dtype.isnative:  # same values, native byte order (as raw_ops does for its inputs)
            value = value.astype(value.dtype.newbyteorder("="))
        value.flags.writeable = False
        dt = np.dtype(attrs.get("dtype", value.dtype))
        if not dt.isnative:
            dt = dt.newbyteorder("=")
        if value.dtype != dt:
            raise InvalidArgumentError(f"Const value dtype {value.dtype} does not match dtype {dt}")
        return {"dtype": dt, "value": value}, [dt], [value.shape]

    def compute(self, arrays, attrs, backend):
        return (attrs["value"],)


class Identity(OpDef):
    name = "Identity"
    input_names = ("input",)
    output_names = ("output",)
    attr_kinds = {"T": "type"}

    def build(self, inputs, attrs):
        return {"T": inputs[0].dtype}, [inputs[0].dtype], [inputs[0].shape]

    def compute(self, arrays, attrs, backend):
        return (arrays[0],)


class OnesLike(OpDef):
    name = "OnesLike"
    input_names = ("x",)
    output_names = ("y",)
    attr_kinds = {"T": "type"}

    def build(self, inputs, attrs):
        return {"T": inputs[0].dtype}, [inputs[0].dtype], [inputs[0].shape]

    def compute(self, arrays, attrs, backend):
        return (np.ones_like(arrays[0]),)


class AddN(OpDef):
    name = "AddN"
    output_names = ("sum",)
    attr_kinds = {"N": "i", "T": "type"}
    variadic = True

    def build(self, inputs, attrs):
        if not inputs:
            raise InvalidArgumentError("AddN needs at least one input")
        dt = _same_dtype(inputs, "AddN")
        shape = inputs[0].shape
        for t in inputs[1:]:
            if shape is not None and t.shape is not None and len(t.shape) == len(shape):
                for a, b in zip(shape, t.shape, strict=True):
                    if a is not None and b is not None and a != b:
                        raise InvalidArgumentError(f"Dimensions must be equal, but are {a} and {b}")
        return {"N": len(inputs), "T": dt}, [dt], [shape]

    def compute(self, arrays, attrs, backend):
        total = arrays[0].astype(np.float32) if arrays[0].dtype in _FLOATS[1:3] else arrays[0].copy()
        for a in arrays[1:]:
            total = total + a.astype(total.dtype)
        return (total.astype(arrays[0].dtype),)


class Transpose(OpDef):
    name = "Transpose"
    input_names = ("x", "perm")
    output_names = ("y",)
    attr_kinds = {"T": "type", "Tperm": "type"}

    def build(self, inputs, attrs):
        x, perm = inputs
        if perm.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
            raise InvalidArgumentError(f"Transpose perm must be int32 or int64, got {perm.dtype}")
        shape = None
        if perm.op.type == "Const" and x.shape is not None:
            p = [int(i) for i in perm.op.attrs["value"]]
            if sorted(p) != list(range(len(x.shape))):
                raise InvalidArgumentError(f"transpose expects a permutation of 0..{len(x.shape) - 1}, got {p}")
            shape = tuple(x.shape[i] for i in p)
        return {"T": x.dtype, "Tperm": perm.dtype}, [x.dtype], [shape]

    def compute(self, arrays, attrs, backend):
        return (np.ascontiguousarray(np.transpose(arrays[0], arrays[1])),)


for _cls in (Placeholder, Const, Identity, OnesLike, AddN, Transpose):
    register_op_def(_cls())
