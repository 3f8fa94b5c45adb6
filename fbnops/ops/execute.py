"""Eager execution of any spec'd op: every surface (raw_ops, graph sessions, the mirrors) ends here.

:func:`execute`

1. converts the inputs and checks attrs and dtypes against the op spec,
2. applies TensorFlow's kernel checks (the same messages, in the same order),
3. refuses a call whose copies and outputs cannot fit in memory,
4. hands the selected backend's kernel to the op's eager body (``fbnops.ops.<op>``),
   which reduces the layout to the canonical view ``(outer, C, inner)``, runs the
   kernel on contiguous data and finishes the per-channel bookkeeping TensorFlow
   does outside its kernels (running statistics, placeholders, empty inputs).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..framework import dtypes, memory, registry
from ..framework.errors import InvalidArgumentError
from ..framework.layouts import channel_axis, is_channels_first
from ..framework.tensor import as_array, shape_str
from ..specs import ArgSpec, OpSpec
from .validation import check_attrs, check_dtypes, is_required

__all__ = ["prepare", "execute", "execute_checked", "call_signature", "contiguous"]


def _check_tensor_rank(name: str, arr: np.ndarray, op: str) -> None:
    # TensorFlow's kernels accept 4-D or 5-D for any data_format (eager semantics).
    if arr.ndim not in (4, 5):
        raise InvalidArgumentError(f"input must be 4 or 5-dimensional{shape_str(arr.shape)} (input '{name}')", op)


def _check_vector_rank(arg: ArgSpec, arr: np.ndarray, op: str) -> None:
    if arr.ndim != 1:
        label = arg.tf_message_label or arg.name
        raise InvalidArgumentError(f"{label} must be 1-dimensional{shape_str(arr.shape)} (input '{arg.name}')", op)


def _check_channel_count(name: str, arr: np.ndarray, channels: int, op: str, prefix: str = "", hint: str = "") -> None:
    if arr.shape[0] != channels:
        raise InvalidArgumentError(
            f"{prefix}{name} must have the same number of elements as the channels of x, "
            f"got {arr.shape[0]} and {channels}{hint}",
            op,
        )


def _layout_hint(x_shape: tuple[int, ...], data_format: str, count: int) -> str:
    """TensorFlow's message, plus the likely fix when the count fits the other layout's channel axis."""
    other = "NC" + data_format[1:-1] if not is_channels_first(data_format) else "N" + data_format[2:] + "C"
    if count != x_shape[channel_axis(other, len(x_shape))]:
        return ""
    return f" (data_format is '{data_format}': if x is {other} data, pass data_format='{other}')"


_ARG_KINDS: dict[str, tuple[tuple[str, ...], tuple]] = {}  # per spec: tensor input names, channel-vector args


def _arg_kinds(spec: OpSpec) -> tuple[tuple[str, ...], tuple]:
    kinds = _ARG_KINDS.get(spec.name)
    if kinds is None:
        tensors = tuple(a.name for a in spec.inputs if a.kind == "tensor")
        vectors = tuple(a for a in spec.inputs if a.kind == "channels")
        kinds = _ARG_KINDS[spec.name] = (tensors, vectors)
    return kinds


def _check_shapes(spec: OpSpec, arrays: dict[str, np.ndarray], attrs: dict[str, Any]) -> None:
    """TensorFlow's kernel validation (tf_semantics.md section 1.6), spec-driven."""
    op = spec.name
    tensors, vectors = _arg_kinds(spec)
    for name in tensors:
        _check_tensor_rank(name, arrays[name], op)
    for arg in vectors:
        _check_vector_rank(arg, arrays[arg.name], op)
    x = arrays["x"]
    for name in tensors:  # gradients: y_backprop (and any other data tensor) must have x's shape exactly
        if name != "x" and arrays[name].shape != x.shape:
            raise InvalidArgumentError(
                f"x and {name} must have same shape, but x has shape {shape_str(x.shape)} "
                f"and {name} has shape {shape_str(arrays[name].shape)}",
                op,
            )
    x_shape = arrays["x"].shape
    channels = x_shape[channel_axis(attrs["data_format"], len(x_shape))]
    for arg in vectors:
        if arrays[arg.name].shape[0] == channels:
            continue
        if arg.required_when is not None:
            if not is_required(arg, attrs):
                continue  # TF ignores mean/variance in training with factor 1
            prefix = "When is_training=false, " if not attrs["is_training"] else "When exponential_avg_factor != 1, "
            _check_channel_count(arg.name, arrays[arg.name], channels, op, prefix)
        count = arrays[arg.name].shape[0]
        _check_channel_count(
            arg.name, arrays[arg.name], channels, op, "", _layout_hint(x_shape, attrs["data_format"], count)
        )


def _check_memory(spec: OpSpec, arrays: dict[str, np.ndarray]) -> None:
    """Refuse a call whose copies and outputs cannot fit in memory, before allocating anything.

    A zero-stride (broadcast) view can claim any shape without owning the bytes; the
    contiguous copy the kernels need and the outputs would need them all.
    """
    if 2 * sum(a.nbytes for a in arrays.values()) <= memory.SMALL:
        return  # copies + outputs are at most twice the inputs: nothing to check
    need, named = 0, []
    for arg in spec.inputs:
        a = arrays[arg.name]
        nbytes = a.size * a.dtype.itemsize
        if not (a.flags.c_contiguous and a.flags.aligned):
            need += nbytes  # one contiguous copy
            named.append(arg.name)
        if arg.kind == "tensor" and arg.name == "x":
            need += nbytes  # the output of the same shape
            named.append("x") if "x" not in named else None
    x = arrays["x"]
    memory.check_fits(
        need,
        f"tensor with shape{shape_str(x.shape)} and type {dtypes.tf_name(x.dtype)} on CPU (outputs and contiguous "
        f"copies of inputs {', '.join(repr(n) for n in named)})",
        spec.name,
    )


def contiguous(a: np.ndarray) -> np.ndarray:
    """``a`` itself if C-contiguous and aligned, else one contiguous copy (any strides: negative, zero,
    unaligned) - never a view with a layout the kernels do not expect."""
    flags = a.flags
    if flags.c_contiguous and flags.aligned:
        return a
    return np.array(a, order="C", copy=True)


def prepare(op_type: str, inputs: dict[str, Any], attrs: dict[str, Any]) -> tuple[OpSpec, dict[str, np.ndarray], dict]:
    """Validate a call; return ``(spec, arrays, attrs)`` ready for a kernel."""
    spec = registry.get_op_def(op_type).spec
    attrs = check_attrs(spec, attrs)
    arrays = {}
    for arg in spec.inputs:
        if arg.name not in inputs:
            raise InvalidArgumentError(f"Missing input '{arg.name}'", op_type)
        arrays[arg.name] = as_array(inputs[arg.name], arg.name, op_type)
    check_dtypes(spec, arrays)
    _check_shapes(spec, arrays, attrs)
    _check_memory(spec, arrays)
    return spec, arrays, attrs


# The fast path of a repeated call.  Every check above depends on the inputs' types,
# shapes and dtypes and on the attrs, never on the inputs' values (the memory check
# reads the machine's free memory, so calls that need it are not remembered).  A call
# with the signature of one that passed is that call again: it skips the checks and
# runs with the attrs the checks produced.  Literal inputs, ndarray subclasses and
# unhashable attrs have no signature and always take the full path.
_PASSED: dict[tuple, dict[str, Any]] = {}
MAX_REMEMBERED = 1024


def call_signature(surface: str, op_type: str, inputs: dict[str, Any], attrs: dict[str, Any]) -> tuple | None:
    """What the validation of this call on ``surface`` (whose conversions come first) depends
    on, or None if it cannot be remembered."""
    key: list = [surface, op_type, *inputs, *attrs]
    for value in inputs.values():
        if type(value) is not np.ndarray:
            return None
        key += (value.shape, value.dtype)
    for value in attrs.values():
        kind = type(value)
        key += (kind, value)
        if kind is float:  # -0.0 == 0.0 but can give other results (NaN never matches itself)
            key.append(math.copysign(1.0, value))
    signature = tuple(key)
    try:
        hash(signature)
    except TypeError:  # an unhashable attr value: the full path judges it
        return None
    return signature


def remember(
    signature: tuple | None, inputs: dict[str, Any], arrays: dict[str, np.ndarray], checked_attrs: dict[str, Any]
) -> None:
    """Record that calls with this signature pass validation with these attrs, if validation
    passed the inputs on unchanged (no conversion, no copy) and did not need the memory check."""
    if signature is None or len(arrays) != len(inputs) or any(arrays[k] is not v for k, v in inputs.items()):
        return
    if 2 * sum(a.nbytes for a in arrays.values()) > memory.SMALL:
        return
    if len(_PASSED) >= MAX_REMEMBERED:
        _PASSED.clear()
    _PASSED[signature] = checked_attrs


def checked_attrs_for(signature: tuple | None) -> dict[str, Any] | None:
    """The checked attrs of a call with this signature that passed before (None: validate it)."""
    return _PASSED.get(signature) if signature is not None else None


def execute_checked(
    op_type: str, arrays: dict[str, np.ndarray], attrs: dict[str, Any], backend: str | None = None
) -> tuple[np.ndarray, ...]:
    """Run a validated call (the arrays and attrs that :func:`prepare` returned)."""
    op_def = registry.get_op_def(op_type)
    if op_def.kernel:
        kernel = registry.get_kernel(op_def.kernel, backend)
    else:  # a closed-form NumPy body; an unknown or missing backend is still refused
        if backend:
            registry.check_backend(backend)
        kernel = None
    return op_def.body(kernel, arrays, attrs)


def execute(
    op_type: str,
    inputs: dict[str, Any],
    attrs: dict[str, Any],
    backend: str | None = None,
) -> tuple[np.ndarray, ...]:
    """Run one op eagerly: validate, then dispatch to ``backend`` (default: the current one)."""
    signature = call_signature("execute", op_type, inputs, attrs)
    checked = checked_attrs_for(signature)
    if checked is not None:
        return execute_checked(op_type, inputs, checked, backend)
    _, arrays, checked = prepare(op_type, inputs, attrs)
    remember(signature, inputs, arrays, checked)
    return execute_checked(op_type, arrays, checked, backend)
