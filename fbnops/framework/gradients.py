"""Symbolic gradients: ``gradients(ys, xs)``.

As in TensorFlow, a gradient function (registered per op type with
:func:`~fbnops.framework.registry.register_gradient`, next to its op in
``fbnops.ops``; the support ops' in ``fbnops.ops.array_ops``) receives the forward op and the gradients flowing into its
outputs, builds ops in a scope, and returns one gradient per input (``None``
for inputs that get none).
"""

from __future__ import annotations

from collections.abc import Sequence

from .errors import InvalidArgumentError
from .graph import Operation, Output
from .registry import get_gradient_function
from .scope import Scope

__all__ = ["gradients"]


def _add_n(scope: Scope, terms: list[Output]) -> Output:
    # The support ops (OnesLike, AddN) are asked for by name: the framework knows no op.
    return terms[0] if len(terms) == 1 else scope.add_op("AddN", terms, {}).output(0)


def gradients(
    ys: Sequence[Output] | Output,
    xs: Sequence[Output] | Output,
    grad_ys: Sequence[Output | None] | None = None,
    scope: Scope | None = None,
) -> list[Output | None]:
    """Add ops computing d(sum of ys)/d(x) for each x; ``None`` where x does not reach ys."""
    ys = [ys] if isinstance(ys, Output) else list(ys)
    xs = [xs] if isinstance(xs, Output) else list(xs)
    if not ys:
        raise InvalidArgumentError("gradients() needs at least one y")
    graph = ys[0].graph
    for t in [*ys, *xs]:
        if not isinstance(t, Output) or t.graph is not graph:
            raise InvalidArgumentError("gradients(): ys and xs must be Outputs of one graph")
    if scope is None:  # "gradients", then "gradients_1", ... (as TensorFlow): a second call adds new names
        used = {op.name.split("/", 1)[0] for op in graph.operations()}
        prefix = next(p for i in range(len(used) + 1) if (p := f"gradients_{i}" if i else "gradients") not in used)
        scope = Scope(graph).sub_scope(prefix)

    # Ops on a path from some x to some y, in topological order.
    reach_y: set[Operation] = set()
    stack = [y.op for y in ys]
    while stack:
        op = stack.pop()
        if op not in reach_y:
            reach_y.add(op)
            stack.extend(t.op for t in op.inputs)
    x_ops = {x.op for x in xs}
    from_x: set[Operation] = set()
    order = [op for op in graph.operations() if op in reach_y]  # creation order is topological
    for op in order:
        if op in x_ops or any(t.op in from_x for t in op.inputs):
            from_x.add(op)
    between = [op for op in order if op in from_x]

    pending: dict[Output, list[Output]] = {}
    grad_ys = list(grad_ys) if grad_ys is not None else [None] * len(ys)
    if len(grad_ys) != len(ys):
        raise InvalidArgumentError(f"grad_ys has {len(grad_ys)} entries for {len(ys)} ys")
    for y, gy in zip(ys, grad_ys, strict=True):
        if gy is None:
            gy = scope.add_op("OnesLike", [y], {}).output(0)
        elif gy.dtype != y.dtype:
            raise InvalidArgumentError(f"grad_ys for {y.name} must be {y.dtype}, got {gy.dtype}")
        pending.setdefault(y, []).append(gy)

    for op in reversed(between):
        out_grads = [pending.get(o) for o in op.outputs]
        if not any(out_grads):
            continue
        summed = [_add_n(scope, g) if g else None for g in out_grads]
        if op in x_ops and not op.inputs:
            continue
        fn = get_gradient_function(op.type)
        in_grads = fn(scope, op, summed)
        for t, g in zip(op.inputs, in_grads, strict=True):
            if g is not None and t.op in from_x:
                pending.setdefault(t, []).append(g)
    return [_add_n(scope, pending[x]) if x in pending else None for x in xs]
