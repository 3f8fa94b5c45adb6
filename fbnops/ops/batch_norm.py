"""FusedBatchNormV3 / FusedBatchNormGradV3: shape checks, canonical view, dispatch.

Every surface (raw_ops, graph sessions, the language mirrors) ends up in
:func:`execute`.  It

1. converts the inputs and checks attrs and dtypes against the op spec,
2. applies TensorFlow's kernel checks (the same messages, in the same order),
3. reduces any layout to the canonical view ``(outer, C, inner)`` -
   channels-last ``(N*H*W, C, 1)``, channels-first ``(N, C, H*W)``,
4. runs the selected backend's kernel on contiguous data, and
5. finishes the per-channel bookkeeping TensorFlow does outside its kernels
   (running statistics, placeholders, empty inputs).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..framework import dtypes, memory, registry
from ..framework.errors import InvalidArgumentError
from ..specs import OpSpec, get_spec
from .validation import as_array, check_attrs, check_dtypes, shape_str

__all__ = ["execute", "CanonicalView", "canonical_view", "infer_output_shapes"]

CHANNELS_FIRST = ("NCHW", "NCDHW")


class CanonicalView(NamedTuple):
    outer: int
    channels: int
    inner: int

    @property
    def count(self) -> int:
        """Elements per channel: the ``n`` of the batch statistics."""
        return self.outer * self.inner


def canonical_view(shape: tuple[int, ...], data_format: str) -> CanonicalView:
    if data_format in CHANNELS_FIRST:
        return CanonicalView(shape[0], shape[1], math.prod(shape[2:]))
    return CanonicalView(math.prod(shape[:-1]), shape[-1], 1)


def _channels(shape: tuple[int, ...], data_format: str) -> int:
    return shape[1] if data_format in CHANNELS_FIRST else shape[-1]


def _check_tensor_rank(name: str, arr: np.ndarray, op: str) -> None:
    # TensorFlow's kernels accept 4-D or 5-D for any data_format (eager semantics).
    if arr.ndim not in (4, 5):
        raise InvalidArgumentError(f"input must be 4 or 5-dimensional{shape_str(arr.shape)} (input '{name}')", op)


def _check_vector_rank(spec_arg, arr: np.ndarray, op: str) -> None:
    if arr.ndim != 1:
        label = spec_arg.kernel_label or spec_arg.name
        raise InvalidArgumentError(f"{label} must be 1-dimensional{shape_str(arr.shape)} (input '{spec_arg.name}')", op)


def _check_channel_count(name: str, arr: np.ndarray, channels: int, op: str, prefix: str = "") -> None:
    if arr.shape[0] != channels:
        raise InvalidArgumentError(
            f"{prefix}{name} must have the same number of elements as the channels of x, "
            f"got {arr.shape[0]} and {channels}",
            op,
        )


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
    if len(tensors) == 2:  # gradient: y_backprop and x must agree exactly
        dy, x = arrays[tensors[0]], arrays[tensors[1]]
        if dy.shape != x.shape:
            raise InvalidArgumentError(
                f"x and y_backprop must have same shape, but x has shape {shape_str(x.shape)} "
                f"and y_backprop has shape {shape_str(dy.shape)}",
                op,
            )
    channels = _channels(arrays["x"].shape, attrs["data_format"])
    stats_used = not attrs["is_training"] or attrs.get("exponential_avg_factor", 1.0) != 1.0
    for arg in vectors:
        if arrays[arg.name].shape[0] == channels:
            continue
        if arg.required_when == "stats_used":
            if not stats_used:
                continue  # TF ignores mean/variance in training with factor 1
            prefix = "When is_training=false, " if not attrs["is_training"] else "When exponential_avg_factor != 1, "
            _check_channel_count(arg.name, arrays[arg.name], channels, op, prefix)
        _check_channel_count(arg.name, arrays[arg.name], channels, op)


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


def _contiguous(a: np.ndarray) -> np.ndarray:
    # One contiguous copy for any strides (negative, zero, unaligned); never a view
    # with a layout the kernels do not expect.
    flags = a.flags
    if flags.c_contiguous and flags.aligned:
        return a
    return np.array(a, order="C", copy=True)


def infer_output_shapes(spec: OpSpec, shapes: dict[str, tuple[int, ...]], attrs: dict[str, Any]):
    """Static output shapes from input shapes (used by the graph framework)."""
    x_shape = shapes["x"]
    channels = _channels(x_shape, attrs["data_format"])
    out = []
    for arg in spec.outputs:
        out.append({"tensor": x_shape, "channels": (channels,), "scalar0": (), "empty": (0,)}[arg.kind])
    return tuple(out)


# ---------------------------------------------------------------------------------------
# Per-op bodies: what TensorFlow's OpKernel::Compute does around the math kernel.
# ---------------------------------------------------------------------------------------


def _grad_v3(kernel: Callable, a: dict[str, np.ndarray], attrs: dict[str, Any]):
    x, dy = a["x"], a["y_backprop"]
    view = canonical_view(x.shape, attrs["data_format"])
    placeholder = np.zeros((0,), np.float32)
    if x.size == 0:  # TF: gradients w.r.t. scale/offset are zero for empty input
        zeros = np.zeros(view.channels, np.float32)
        return np.empty(x.shape, x.dtype), zeros, zeros.copy(), placeholder, placeholder.copy()
    dx, dscale, doffset = kernel(
        _contiguous(x).reshape(view),
        _contiguous(dy).reshape(view),
        _contiguous(a["scale"]),
        _contiguous(a["reserve_space_1"]),
        _contiguous(a["reserve_space_2"]),
        epsilon=attrs["epsilon"],
        is_training=attrs["is_training"],
    )
    return dx.reshape(x.shape), dscale, doffset, placeholder, placeholder.copy()


def _forward_v3(kernel: Callable, a: dict[str, np.ndarray], attrs: dict[str, Any]):
    x = a["x"]
    view = canonical_view(x.shape, attrs["data_format"])
    f = np.float32(attrs["exponential_avg_factor"])
    is_training = attrs["is_training"]
    rs3 = np.zeros((), np.float32)
    if x.size == 0:
        # TF: NaN running statistics, even with exponential_avg_factor != 1.
        nan = np.full(view.channels, np.nan, np.float32)
        if is_training:
            used_mean, used_var = nan.copy(), nan.copy()
        else:  # better than TF's uninitialized memory: the statistics that would be used
            used_mean, used_var = a["mean"].copy(), a["variance"].copy()
        return np.empty(x.shape, x.dtype), nan, nan.copy(), used_mean, used_var, rs3
    y, mean, var = kernel(
        _contiguous(x).reshape(view),
        _contiguous(a["scale"]),
        _contiguous(a["offset"]),
        _contiguous(a["mean"]) if not is_training else None,
        _contiguous(a["variance"]) if not is_training else None,
        epsilon=attrs["epsilon"],
        is_training=is_training,
    )
    y = y.reshape(x.shape)
    if not is_training:
        # TF copies mean/variance to the running outputs and ignores the factor; unlike TF
        # (uninitialized memory) reserve_space_1/2 carry the statistics actually used.
        m, v = a["mean"].copy(), a["variance"].copy()
        return y, m, v, m.copy(), v.copy(), rs3
    n = np.float32(view.count)
    # Bessel's correction for the running variance only: n / max(n - 1, 1), in float32.
    adjust = n / np.float32(max(view.count - 1, 1))
    if f == np.float32(1.0):
        batch_mean, batch_var = mean.copy(), var * adjust
    else:
        one_minus_f = np.float32(1.0) - f
        batch_mean = one_minus_f * a["mean"] + f * mean
        batch_var = one_minus_f * a["variance"] + (f * adjust) * var
    return y, batch_mean.astype(np.float32), batch_var.astype(np.float32), mean, var, rs3


_BODIES = {"FusedBatchNormGradV3": _grad_v3, "FusedBatchNormV3": _forward_v3}


def prepare(op_type: str, inputs: dict[str, Any], attrs: dict[str, Any]):
    """Validate a call; return ``(spec, arrays, attrs)`` ready for a kernel."""
    spec = get_spec(op_type)
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


def execute(
    op_type: str,
    inputs: dict[str, Any],
    attrs: dict[str, Any],
    backend: str | None = None,
) -> tuple[np.ndarray, ...]:
    """Run one op eagerly: validate, then dispatch to ``backend`` (default: the current one)."""
    spec, arrays, attrs = prepare(op_type, inputs, attrs)
    kernel = registry.get_kernel(op_type, backend)
    return _BODIES[op_type](kernel, arrays, attrs)
