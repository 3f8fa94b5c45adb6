"""``tensorflow::AddSymbolicGradients`` (tensorflow/cc/framework/gradients.h)."""

from __future__ import annotations

from fbnops.framework import errors as _errors
from fbnops.framework.gradients import gradients as _gradients

from .framework import Operation, Output, Scope, as_output
from .status import Status, StatusCode

__all__ = ["AddSymbolicGradients", "NoGradient"]


def NoGradient() -> Output:  # noqa: N802
    """The Output C++ uses for "no gradient" (``Output(nullptr, -1)``)."""
    return Output(Operation(), -1)


def _outputs(values, what: str) -> list | Status:
    found = []
    for v in values:
        out = as_output(v)
        if out is None or out._core is None:
            return Status(StatusCode.kInvalidArgument, f"{what}: {v!r} is not an Output of a built op")
        found.append(out._core)
    return found


def AddSymbolicGradients(scope: Scope, outputs, inputs, *rest) -> Status:  # noqa: N802
    """``(scope, outputs, inputs, grad_outputs)`` (d outputs = 1) or
    ``(scope, outputs, inputs, grad_inputs, grad_outputs)``; fills ``grad_outputs`` (a list)."""
    if len(rest) == 1:
        grad_inputs, grad_outputs = None, rest[0]
    elif len(rest) == 2:
        grad_inputs, grad_outputs = rest
    else:
        return Status(
            StatusCode.kInvalidArgument, "AddSymbolicGradients(scope, outputs, inputs, [grad_inputs,] grad_outputs)"
        )
    if not isinstance(grad_outputs, list):
        return Status(StatusCode.kInvalidArgument, "grad_outputs must be a list to fill (std::vector<Output>*)")
    if not scope.ok():
        return scope.status()
    ys, xs = _outputs(outputs, "outputs"), _outputs(inputs, "inputs")
    dys = None if grad_inputs is None else _outputs(grad_inputs, "grad_inputs")
    for checked in (ys, xs, dys):
        if isinstance(checked, Status):
            return checked
    if dys is not None and len(dys) != len(ys):
        return Status(
            StatusCode.kInvalidArgument,
            f"Must specify a gradient input for each output. Found {len(ys)} outputs and {len(dys)} gradient inputs",
        )
    try:
        grads = _gradients(ys, xs, dys, scope=scope._core)
    except _errors.OpError as e:
        return Status.from_error(e)
    grad_outputs.clear()
    grad_outputs.extend(NoGradient() if g is None else Output(Operation(g.op), g.index) for g in grads)
    return Status.OK()
