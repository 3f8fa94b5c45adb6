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

from collections.abc import Callable
from typing import Any

import numpy as np

from ..framework import dtypes, memory, registry
from ..framework.errors import InvalidArgumentError
from ..framework.layouts import channel_axis, is_channels_first
from ..framework.tensor import as_array, shape_str
from ..specs import ArgSpec, OpSpec
from . import validation
from .validation import check_attrs, check_dtypes, is_required

__all__ = ["prepare", "execute", "execute_checked", "call_signature", "contiguous"]


def _check_tensor_rank(arg: ArgSpec, arr: np.ndarray, ranks: tuple[int, ...], op: str) -> None:
    if arr.ndim not in ranks:
        label = arg.tf_message_label or "input"
        allowed = " or ".join(map(str, ranks))
        raise InvalidArgumentError(
            f"{label} must be {allowed}-dimensional{shape_str(arr.shape)} (input '{arg.name}')", op
        )


def _check_vector_rank(arg: ArgSpec, arr: np.ndarray, op: str) -> None:
    if arr.ndim != 1:
        label = arg.tf_message_label or arg.name
        raise InvalidArgumentError(f"{label} must be 1-dimensional{shape_str(arr.shape)} (input '{arg.name}')", op)


def _check_channel_count(
    name: str, data: str, arr: np.ndarray, channels: int, op: str, prefix: str = "", hint: str = ""
) -> None:
    if arr.shape[0] != channels:
        raise InvalidArgumentError(
            f"{prefix}{name} must have the same number of elements as the channels of {data}, "
            f"got {arr.shape[0]} and {channels}{hint}",
            op,
        )


def _layout_hint(spec: OpSpec, shape: tuple[int, ...], attrs: dict[str, Any], count: int) -> str:
    """The likely fix when a vector's length fits the other layout's channel axis (data_format ops only)."""
    layout_attr = spec.data.layout_attr
    if layout_attr is None:
        return ""
    data_format = attrs[layout_attr]
    other = "NC" + data_format[1:-1] if not is_channels_first(data_format) else "N" + data_format[2:] + "C"
    if count != shape[channel_axis(other, len(shape))]:
        return ""
    return f" ({layout_attr} is '{data_format}': if {spec.data.input} is {other} data, pass {layout_attr}='{other}')"


_ARG_KINDS: dict[str, tuple[tuple, tuple]] = {}  # per spec: tensor inputs, channel-vector inputs


def _arg_kinds(spec: OpSpec) -> tuple[tuple, tuple]:
    kinds = _ARG_KINDS.get(spec.name)
    if kinds is None:
        tensors = tuple(a for a in spec.inputs if a.kind == "tensor")
        vectors = tuple(a for a in spec.inputs if a.kind == "channels")
        kinds = _ARG_KINDS[spec.name] = (tensors, vectors)
    return kinds


def _check_shapes(spec: OpSpec, arrays: dict[str, np.ndarray], attrs: dict[str, Any]) -> None:
    """TensorFlow's kernel validation (tf_semantics.md section 1.6), driven by the spec's :class:`DataSpec`.

    Every ``tensor`` input has one of the data ranks and the data tensor's shape;
    every ``channels`` input is 1-D with C elements (when the op reads it).
    """
    if spec.data is None:
        return
    op, data = spec.name, spec.data.input
    tensors, vectors = _arg_kinds(spec)
    for arg in tensors:
        _check_tensor_rank(arg, arrays[arg.name], spec.data.ranks, op)
    for arg in vectors:
        _check_vector_rank(arg, arrays[arg.name], op)
    shape = arrays[data].shape
    for arg in tensors:  # gradients: y_backprop (and any other data tensor) must have x's shape exactly
        if arg.name != data and arrays[arg.name].shape != shape:
            raise InvalidArgumentError(
                f"{data} and {arg.name} must have same shape, but {data} has shape {shape_str(shape)} "
                f"and {arg.name} has shape {shape_str(arrays[arg.name].shape)}",
                op,
            )
    channels = shape[validation.channel_axis(spec, len(shape), attrs)]
    for arg in vectors:
        count = arrays[arg.name].shape[0]
        if count == channels or not is_required(arg, attrs):
            continue  # TF ignores mean/variance in training with factor 1
        prefix = validation.requirement_prefix(arg, attrs)
        hint = "" if prefix else _layout_hint(spec, shape, attrs, count)
        _check_channel_count(arg.name, data, arrays[arg.name], channels, op, prefix, hint)


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
    # the outputs: one of each output's size; a data-shaped output is the largest input's size
    largest = max(arrays.values(), key=lambda a: a.size * a.dtype.itemsize)
    need += sum(largest.size * largest.dtype.itemsize for a in spec.outputs if a.kind == "tensor")
    memory.check_fits(
        need,
        f"tensor with shape{shape_str(largest.shape)} and type {dtypes.tf_name(largest.dtype)} on CPU (outputs "
        f"and contiguous copies of inputs {', '.join(repr(n) for n in named)})",
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
# runs with the attrs the checks produced.  Literal inputs, ndarray subclasses, inputs not
# C-contiguous and aligned, and unhashable attrs have no signature: they take the full path.
_PASSED: dict[tuple, dict[str, Any]] = {}
MAX_REMEMBERED = 1024


try:  # call_signature(surface, op_type, inputs, attrs): the key of the fast path (see the .pyx)
    from ._signature import call_signature
except ImportError:  # a tree whose extensions are not built: no fast path, every call validated in full

    def call_signature(surface: str, op_type: str, inputs: dict[str, Any], attrs: dict[str, Any]) -> None:
        return None


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
    """Run a validated call (the arrays and attrs that :func:`prepare` returned).

    The op's body receives every input C-contiguous and aligned (one copy of any
    other layout, which :func:`_check_memory` counted), so no body copies its inputs.
    """
    return _run_body(op_type, {name: contiguous(a) for name, a in arrays.items()}, attrs, backend)


def _run_body(op_type: str, arrays: dict[str, np.ndarray], attrs: dict[str, Any], backend: str | None):
    """The op's body on validated, C-contiguous and aligned inputs, with its kernel for ``backend``."""
    op_def = registry.get_op_def(op_type)
    if op_def.kernel:
        kernel = registry.get_kernel(op_def.kernel, backend)
    else:  # a closed-form NumPy body; an unknown or missing backend is still refused
        if backend:
            registry.check_backend(backend)
        kernel = None
    return op_def.body(kernel, arrays, attrs)


# convert(spec, inputs, attrs) -> (inputs, attrs): a surface's own conversions (raw_ops: tf.raw_ops' rules)
Convert = Callable[[OpSpec, dict[str, Any], dict[str, Any]], tuple[dict[str, Any], dict[str, Any]]]


def execute(
    op_type: str,
    inputs: dict[str, Any],
    attrs: dict[str, Any],
    backend: str | None = None,
    *,
    surface: str = "execute",
    convert: Convert | None = None,
) -> tuple[np.ndarray, ...]:
    """Run one op eagerly: validate (after ``surface``'s ``convert``), then dispatch to ``backend``
    (default: the current one).  A call like one that passed on the same surface skips both."""
    signature = call_signature(surface, op_type, inputs, attrs)
    checked = checked_attrs_for(signature)
    if checked is not None:  # a signature's inputs are contiguous arrays already
        return _run_body(op_type, inputs, checked, backend)
    given_inputs, given_attrs = (
        (inputs, attrs) if convert is None else convert(registry.get_op_def(op_type).spec, inputs, attrs)
    )
    _, arrays, checked = prepare(op_type, given_inputs, given_attrs)
    remember(signature, inputs, arrays, checked)
    return execute_checked(op_type, arrays, checked, backend)
