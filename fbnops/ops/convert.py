"""``tf.raw_ops``-style conversion of a call's Python arguments (the ``raw_ops`` surface only).

TensorFlow's eager fast path (``TFE_Py_FastPathExecute``) converts every input to
a tensor before the op sees it.  fbnops does the same, read from the op spec:

* **Inputs that share a type attr get one dtype.**  The first input of the group
  (spec order: ``y_backprop`` before ``x``; ``reserve_space_1`` first among the U
  inputs) sets it: an array keeps its dtype, a Python float gives float32, a
  Python int int32 (int64 beyond its range), a bool bool.  A dtype the attr does
  not allow raises TensorFlow's ``Value for attr 'T' of double is not in the list of
  allowed values: half, bfloat16, float``.  The other inputs are converted to it.
* **Inputs of a fixed dtype** (``scale: float`` of the grad ops) are converted to it.
* **Converting** an array casts it (any dtype, as NumPy's ``astype``: TensorFlow
  force-casts NumPy arrays too); a Python number or (nested) list becomes an array
  of the target dtype, and a value that is not a number raises TensorFlow's
  ``TypeError: Cannot convert [...] to EagerTensor of dtype float``.

Deliberate differences from TensorFlow, all on the side of failing loudly:

* fbnops has no tensor type of its own, so nothing plays the part of a ``tf.Tensor``
  (which TensorFlow never casts): any array-like (``__array__``, DLPack) is an array.
* A finite value that does not fit the target dtype (``1e40`` into float32,
  ``70000.0`` into half) raises ``InvalidArgumentError``; TensorFlow stores ``inf``.
* Every cast or copy is first checked against the memory available
  (``ResourceExhaustedError``): a zero-stride (broadcast) view, or a big-endian
  array, can claim far more elements than it owns bytes.

Attrs (:func:`convert_attrs`) follow TensorFlow's ``_MakeFloat``/``_MakeBool``/
``_MakeStr``: a value of the wrong type raises ``TypeError`` with TensorFlow's exact
message (``Expected float for argument 'epsilon' not '0.1'.``); ``None`` means the
default; ``epsilon=True`` is accepted as it is in TensorFlow, and NumPy scalars follow
TensorFlow too: ``np.float16/32/64`` and NumPy ints are floats, ``np.True_`` is *not* a
bool (``Expected bool for argument 'is_training' not np.True_.``), ``np.str_`` is a string.
One deliberate difference: a float attr beyond the float32 range raises
``InvalidArgumentError`` (TensorFlow stores ``inf``, or raises ``OverflowError`` for an int
beyond the double range).  ``tests/test_raw_ops_conversion.py`` compares these rules with
TensorFlow's on a matrix of values x attrs.

The graph surfaces (C++/Java mirrors, ``Scope``) keep their own typing; this
module is for ``fbnops.raw_ops`` only.
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

import ml_dtypes
import numpy as np

from ..framework import dtypes, memory
from ..framework.errors import InvalidArgumentError
from ..specs import OpSpec

__all__ = ["convert_inputs", "convert_attrs"]

_FLOAT32_MAX = float(np.finfo(np.float32).max)
_FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, np.dtype(np.float64))
_INT32 = np.iinfo(np.int32)
_REAL_TYPES = (numbers.Real, np.integer, np.floating)  # TensorFlow's compat.real_types


def _tf_dtype_name(dt: np.dtype) -> str:
    if dt.kind in "US":
        return "string"
    return dtypes.tf_name(dt)


# ---------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------


def _is_literal(value: Any) -> bool:
    """Python numbers and (nested) lists/tuples: values whose dtype TensorFlow infers."""
    return isinstance(value, (bool, int, float, complex, list, tuple)) and not isinstance(value, np.generic)


def _array_view(value: Any, name: str, op: str) -> np.ndarray:
    """An array-like as an ndarray, without a copy where NumPy can avoid one (no byte-order fix here)."""
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    try:
        if hasattr(value, "__array__") or hasattr(value, "__array_interface__"):
            return np.asarray(value)
        if hasattr(value, "__dlpack__"):
            return np.from_dlpack(value)
    except Exception as e:  # a foreign object whose conversion fails
        raise InvalidArgumentError(f"{name} could not be converted to an array: {e}", op) from None
    raise InvalidArgumentError(
        f"Attempt to convert a value ({value!r:.80}) with an unsupported type ({type(value)}) to a Tensor. "
        f"(input '{name}')",
        op,
    )


def _literal_array(value: Any, name: str, op: str) -> np.ndarray:
    """A Python number or nested list as NumPy sees it (dtype not yet TensorFlow's)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", np.exceptions.VisibleDeprecationWarning)
            raw = np.array(value)
    except (ValueError, np.exceptions.VisibleDeprecationWarning):
        raise InvalidArgumentError(
            f"Can't convert non-rectangular Python sequence to Tensor. (input '{name}')", op
        ) from None
    if raw.dtype.kind == "O":  # ints beyond int64, None, objects
        raise InvalidArgumentError(
            f"Can't convert Python sequence with an unsupported or out-of-range value to Tensor: {value!r:.80} "
            f"(input '{name}')",
            op,
        )
    return raw


def _inferred_dtype(raw: np.ndarray) -> np.dtype:
    """TensorFlow's dtype for a Python literal: float32, int32 (int64 beyond), bool, complex128, string."""
    kind = raw.dtype.kind
    if kind == "f":
        return dtypes.float32
    if kind in "iu":
        fits32 = raw.size == 0 or (_INT32.min <= raw.min() and raw.max() <= _INT32.max)
        return np.dtype(np.int32 if fits32 else np.int64)
    return raw.dtype


def _out_of_range(value: Any, target: np.dtype, name: str, op: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"Value {value.item()!r} of input '{name}' is out of the range of {dtypes.tf_name(target)}", op
    )


def _float_max(dt: np.dtype) -> float | None:
    """The largest finite value of a float dtype (bfloat16 included); None for other dtypes."""
    return float(ml_dtypes.finfo(dt).max) if dt in _FLOATS else None


def _check_range(src: np.ndarray, out: np.ndarray, name: str, op: str) -> None:
    """A finite value that became ``inf`` did not fit the target dtype: refuse it (TF would store inf)."""
    out_max, src_max = _float_max(out.dtype), _float_max(src.dtype)
    if out_max is None or (src_max is None and src.dtype.kind not in "iu") or out.size == 0:
        return
    if src_max is not None and src_max <= out_max:
        return  # a narrower or equal float type always fits
    with np.errstate(invalid="ignore"):
        bad = np.isinf(out) & np.isfinite(src)
    if bad.any():
        raise _out_of_range(src[bad].flat[0], out.dtype, name, op)


def _cast(arr: np.ndarray, target: np.dtype, name: str, op: str) -> np.ndarray:
    """``arr`` as ``target`` (native byte order): refused before allocating if it cannot fit."""
    if arr.dtype == target:
        return arr
    memory.check_fits(
        arr.size * target.itemsize,
        f"a {dtypes.tf_name(target)} copy of input '{name}' with {arr.size} elements",
        op,
    )
    try:
        with warnings.catch_warnings(), np.errstate(over="ignore", invalid="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            out = arr.astype(target)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(f"{name} could not be converted to {dtypes.tf_name(target)}: {e}", op) from None
    _check_range(arr, out, name, op)
    return out


def _check_literal(raw: np.ndarray, value: Any, target: np.dtype) -> None:
    """TensorFlow's ``TypeError`` for a literal its target dtype cannot hold (a float into an int...)."""
    if raw.dtype.kind not in "biuf" or (target.kind in "biu" and raw.dtype.kind == "f"):
        raise TypeError(f"Cannot convert {value!r:.200} to EagerTensor of dtype {_tf_dtype_name(target)}")


def _convert_literal(raw: np.ndarray, target: np.dtype, name: str, op: str) -> np.ndarray:
    if _float_max(target) is not None and raw.dtype.kind == "f":
        big = np.isfinite(raw) & (np.abs(raw) > _float_max(target))
        if big.any():
            raise _out_of_range(raw[big].flat[0], target, name, op)
    return _cast(raw, target, name, op)


_PLANS: dict[str, tuple] = {}  # per spec: (input, type attr, its allowed dtypes, or the fixed dtype)


def _plan(spec: OpSpec) -> tuple:
    plan = _PLANS.get(spec.name)
    if plan is None:
        allowed = {t: frozenset(dtypes.from_tf_name(n) for n in names) for t, names in spec.type_attrs.items()}
        plan = _PLANS[spec.name] = tuple(
            (a.name, a.type, allowed.get(a.type), None if a.type in allowed else dtypes.from_tf_name(a.type))
            for a in spec.inputs
        )
    return plan


def _already_converted(spec: OpSpec, inputs: dict[str, Any]) -> bool:
    """The common call: native ndarrays whose dtypes already agree (nothing to convert, nothing to check)."""
    bound: dict[str, np.dtype] = {}
    for name, attr, allowed, fixed in _plan(spec):
        v = inputs.get(name)
        if type(v) is not np.ndarray:
            return False
        dt = v.dtype
        if fixed is not None:
            if dt != fixed:
                return False
        elif attr in bound:
            if dt != bound[attr]:
                return False
        elif dt in allowed:  # native byte order only (a big-endian dtype is not in the set)
            bound[attr] = dt
        else:
            return False
    return True


def convert_inputs(spec: OpSpec, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
    """Each input as an ndarray of the dtype TensorFlow would give it (see the module doc)."""
    if _already_converted(spec, inputs):
        return inputs
    op = spec.name
    arrays: dict[str, np.ndarray] = {}
    literals: dict[str, tuple[np.ndarray, Any]] = {}
    for arg in spec.inputs:
        if arg.name not in inputs:
            raise InvalidArgumentError(f"Missing input '{arg.name}'", op)
        value = inputs[arg.name]
        if value is None:
            raise InvalidArgumentError(
                f"Attempt to convert a value (None) with an unsupported type (<class 'NoneType'>) to a Tensor. "
                f"(input '{arg.name}')",
                op,
            )
        if _is_literal(value):
            literals[arg.name] = (_literal_array(value, arg.name, op), value)
        else:
            arrays[arg.name] = _array_view(value, arg.name, op)

    # The dtype of each type attr: its first input's own (or inferred) dtype.
    bound: dict[str, np.dtype] = {}
    for arg in spec.inputs:
        if arg.type in spec.type_attrs and arg.type not in bound:
            dt = arrays[arg.name].dtype if arg.name in arrays else _inferred_dtype(literals[arg.name][0])
            bound[arg.type] = dt.newbyteorder("=")
    targets = {arg.name: bound.get(arg.type) or dtypes.from_tf_name(arg.type) for arg in spec.inputs}
    # TensorFlow's order: every input is converted (a literal that cannot be raises TypeError), then
    # the attrs are checked.  Literals are checked here; arrays cast to anything.
    for name, (raw, value) in literals.items():
        _check_literal(raw, value, targets[name])
    for attr, dt in bound.items():
        allowed = spec.type_attrs[attr]
        if _tf_dtype_name(dt) not in allowed:
            raise InvalidArgumentError(
                f"Value for attr '{attr}' of {_tf_dtype_name(dt)} is not in the list of allowed values: "
                f"{', '.join(allowed)}",
                op,
            )
    out: dict[str, np.ndarray] = {}
    for arg in spec.inputs:
        if arg.name in literals:
            out[arg.name] = _convert_literal(literals[arg.name][0], targets[arg.name], arg.name, op)
        else:
            out[arg.name] = _cast(arrays[arg.name], targets[arg.name], arg.name, op)
    return out


# ---------------------------------------------------------------------------------------
# Attrs
# ---------------------------------------------------------------------------------------


def _make_float(v: Any, name: str, op: str) -> float:
    # np.bool_ is not a numbers.Real (TensorFlow refuses it here too); bool is (epsilon=True is 1.0).
    if not isinstance(v, _REAL_TYPES) or isinstance(v, np.bool_):
        raise TypeError(f"Expected float for argument '{name}' not {v!r}.")
    try:
        f = float(v)
    except OverflowError:  # an int beyond the double range
        f = float("inf")
    if abs(f) > _FLOAT32_MAX and not (math.isinf(f) and isinstance(v, (float, np.floating))):
        # TensorFlow would store inf (or raise OverflowError); an explicit inf is the op's to judge
        raise InvalidArgumentError(f"Value for attr '{name}' of {v!r:.40} is out of the range of float", op)
    return f


def _make_bool(v: Any, name: str) -> bool:
    if not isinstance(v, bool):  # TensorFlow's _MakeBool: np.bool_ is not a bool
        raise TypeError(f"Expected bool for argument '{name}' not {v!r}.")
    return v


def _make_str(v: Any, name: str, op: str) -> str:
    if isinstance(v, bytes):
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidArgumentError(f"Value for attr '{name}' of {v!r:.40} is not valid UTF-8", op) from None
    if not isinstance(v, str):
        raise TypeError(f"Expected string for argument '{name}' not {v!r}.")
    return str(v)


def convert_attrs(spec: OpSpec, attrs: dict[str, Any]) -> dict[str, Any]:
    """Attrs as the plain Python values the ops check; TensorFlow's ``TypeError`` for a wrong type.

    ``None`` stands for the default (as in TensorFlow's generated wrappers).  The
    infinite floats TensorFlow accepts are passed on, for the op's own checks to judge.
    """
    out = {}
    for a in spec.attrs:
        v = attrs.get(a.name)
        if v is None and not a.required:  # a required attr's None is refused below, as TensorFlow does
            out[a.name] = a.default
        elif a.type == "float":
            out[a.name] = _make_float(v, a.name, spec.name)
        elif a.type == "bool":
            out[a.name] = _make_bool(v, a.name)
        elif a.type == "string":
            out[a.name] = _make_str(v, a.name, spec.name)
        else:
            out[a.name] = v
    return out
