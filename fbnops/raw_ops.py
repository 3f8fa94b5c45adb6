"""``fbnops.raw_ops``: the ``tf.raw_ops`` surface (seed 002), generated from the op specs.

Each op is a keyword-only function with TensorFlow's argument names, order and
defaults, returning a namedtuple of NumPy arrays::

    out = fbnops.raw_ops.FusedBatchNormGradV3(y_backprop=dy, x=x, scale=s,
              reserve_space_1=m, reserve_space_2=v, reserve_space_3=r3)
    out.x_backprop, out.scale_backprop

The functions are generated at import from the specs (like TensorFlow's
``gen_nn_ops.py``), so their signatures always match the specs.  Arguments are
converted as ``tf.raw_ops`` converts them (:mod:`fbnops.ops.convert`): Python lists
and numbers, arrays of another dtype, TensorFlow's ``TypeError`` for an attr of the
wrong type.
"""

from __future__ import annotations

import collections

from numpy.typing import ArrayLike

from .ops.convert import convert_attrs, convert_inputs
from .ops.execute import execute
from .specs import ATTR_TYPES, OpSpec, all_specs

__all__ = [spec.name for spec in all_specs()]


def _docstring(spec: OpSpec) -> str:
    types = {k: ", ".join(v) for k, v in spec.type_attrs.items()}

    def arg_type(t: str) -> str:
        return f"A Tensor of type `{t}`." if t not in types else f"A Tensor of type `{t}` in ({types[t]})."

    lines = [spec.summary, "", spec.description, "", "Args:"]
    for a in spec.inputs:
        lines.append(f"  {a.name}: {arg_type(a.type)} {a.doc}")
    for a in spec.attrs:
        allowed = f" From: {', '.join(map(repr, a.allowed))}." if a.allowed else ""
        kind = f"A `{a.type}`." if a.required else f"An optional `{a.type}`. Defaults to `{a.default!r}`."
        lines.append(f"  {a.name}: {kind}{allowed} {a.doc}")
    lines.append("  name: A name for the operation (optional; unused in eager mode).")
    lines += ["", "Returns:", f"  A namedtuple of arrays ({', '.join(spec.output_names)}).", ""]
    for a in spec.outputs:
        lines.append(f"  {a.name}: {arg_type(a.type)} {a.doc}")
    return "\n".join(lines)


def _convert(spec: OpSpec, inputs: dict, attrs: dict) -> tuple[dict, dict]:
    """``tf.raw_ops``' conversions, in TensorFlow's order: attr types, then inputs (allowed values later)."""
    converted_attrs = convert_attrs(spec, attrs)
    return convert_inputs(spec, inputs), converted_attrs


def _run(spec: OpSpec, inputs: dict, attrs: dict) -> tuple:
    return execute(spec.name, inputs, attrs, surface="raw_ops", convert=_convert)


def _make(spec: OpSpec):
    """Generate ``def Op(*, inputs..., attrs=defaults..., name=None)`` for one spec."""
    outputs = collections.namedtuple(spec.name, spec.output_names)
    params = (
        [f"{a.name}: ArrayLike" for a in spec.inputs]
        + [
            f"{a.name}: {ATTR_TYPES[a.type].python.__name__}" + ("" if a.required else f" = {a.default!r}")
            for a in spec.attrs
        ]
        + ["name: str | None = None"]
    )
    inputs = ", ".join(f"{a.name!r}: {a.name}" for a in spec.inputs)
    attrs = ", ".join(f"{a.name!r}: {a.name}" for a in spec.attrs)
    src = (
        f"def {spec.name}(*, {', '.join(params)}) -> {spec.name}Output:\n"
        f"    return _Outputs(*_run(_SPEC, {{{inputs}}}, {{{attrs}}}))\n"
    )
    namespace = {
        "_Outputs": outputs,
        f"{spec.name}Output": outputs,
        "_run": _run,
        "_SPEC": spec,
        "ArrayLike": ArrayLike,
    }
    exec(compile(src, f"<fbnops.raw_ops.{spec.name}>", "exec"), namespace)
    fn = namespace[spec.name]
    fn.__doc__ = _docstring(spec)
    fn.__module__ = __name__
    fn.__qualname__ = spec.name
    return fn, outputs


for _spec in all_specs():
    globals()[_spec.name], globals()[f"_{_spec.name}Output"] = _make(_spec)
del _spec
