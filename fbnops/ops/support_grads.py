"""What differentiating a gradient graph needs from the support ops (TensorFlow's ``array_grad.py``).

``gradients(gradients(y, x), x)`` walks back through the ops the first call added:
``OnesLike`` (the default ``grad_ys``), ``AddN`` (sums of gradients), ``Transpose``
(channels-first inference) and, for outputs that get no gradient, TensorFlow's
filler ``ZerosLike``.  Their gradients, as TensorFlow registers them:

* ``OnesLike``/``ZerosLike``: not differentiable (``ops.NotDifferentiable``);
* ``AddN``: the incoming gradient, once per input;
* ``Transpose``: the gradient transposed by the inverse permutation (the
  permutation must be a ``Const``, as every ``Transpose`` fbnops builds is).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..framework import memory
from ..framework.array_ops import OnesLike
from ..framework.errors import UnimplementedError
from ..framework.graph import Operation, Output
from ..framework.registry import register_gradient, register_op_def
from ..framework.scope import Scope
from ..framework.tensor import shape_str

__all__ = ["ZerosLike", "zeros_like"]


class ZerosLike(OnesLike):
    name = "ZerosLike"

    def compute(self, arrays, attrs, backend):
        like = arrays[0]
        memory.check_fits(like.size * like.dtype.itemsize, f"an output of shape {shape_str(like.shape)}", self.name)
        return (np.zeros(like.shape, like.dtype),)


register_op_def(ZerosLike())


def zeros_like(scope: Scope, like: Output) -> Output:
    return scope.add_op("ZerosLike", [like], {}).output(0)


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
