"""The framework's three op-keyed tables, and backend selection.

* **op definitions** (:class:`OpDef`): how a graph builds and runs an op type;
* **kernels**, keyed by (op type, backend): ``cython`` is the default, ``numba`` is
  optional, ``reference`` is the NumPy teaching version.  A backend whose module
  cannot be imported is simply not available; asking for it raises a clear error
  naming the extra to install.  The backends (this module's ``_BACKEND_MODULES``, the
  one list: :func:`known_backends`) also register their *stages* (partial sums, finish,
  apply: :mod:`fbnops.kernels.stages`) with :func:`register_stage`;
* **gradients**: TensorFlow's ``RegisterGradient`` table, used by ``gradients()``.

The tables are filled by import: ``fbnops/__init__.py`` imports the op modules
(``fbnops.ops.*``, the support ops' ``fbnops.ops.array_ops`` among them).
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .errors import NotFoundError

__all__ = [
    "OpDef",
    "register_op_def",
    "get_op_def",
    "registered_op_types",
    "register_gradient",
    "get_gradient_function",
    "has_gradient",
    "register_kernel",
    "register_stage",
    "get_stage",
    "known_backends",
    "check_backend",
    "get_kernel",
    "available_backends",
    "backend_states",
    "set_backend",
    "get_backend",
    "backend",
]

# ---------------------------------------------------------------------------------------
# Op definitions
# ---------------------------------------------------------------------------------------


class OpDef:
    """How the framework builds and runs one op type.

    ``attr_kinds`` maps each attr to its GraphDef value kind (``type``, ``f``,
    ``b``, ``s``, ``i``, ``shape``, ``tensor``); ``variadic`` ops (AddN) take
    any number of inputs.
    """

    name: str = ""
    input_names: tuple[str, ...] = ()
    output_names: tuple[str, ...] = ()
    attr_kinds: dict[str, str] = {}
    variadic: bool = False

    def build(self, inputs: Sequence[Any], attrs: dict[str, Any]):
        """Return ``(attrs, output_dtypes, output_shapes)`` for graph ``inputs`` (Outputs) or raise an OpError."""
        raise NotImplementedError

    def compute(self, arrays: list, attrs: dict[str, Any], backend: str | None):
        """The output arrays of one execution."""
        raise NotImplementedError


_OP_DEFS: dict[str, OpDef] = {}


def register_op_def(op_def: OpDef) -> OpDef:
    _OP_DEFS[op_def.name] = op_def
    return op_def


def get_op_def(op_type: str) -> OpDef:
    try:
        return _OP_DEFS[op_type]
    except KeyError:
        raise NotFoundError(f"Op type not registered '{op_type}'") from None


def registered_op_types() -> tuple[str, ...]:
    return tuple(_OP_DEFS)


# ---------------------------------------------------------------------------------------
# Gradients
# ---------------------------------------------------------------------------------------

_GRADIENTS: dict[str, Callable] = {}


def register_gradient(op_type: str):
    """Decorator: ``@register_gradient("FusedBatchNormV3")`` (TensorFlow's ``ops.RegisterGradient``).

    The function receives ``(scope, op, grads)`` - the forward op and the gradients
    flowing into its outputs - builds ops in ``scope`` and returns one gradient per
    input (``None`` for inputs that get none).
    """

    def deco(fn):
        _GRADIENTS[op_type] = fn
        return fn

    return deco


def get_gradient_function(op_type: str) -> Callable:
    try:
        return _GRADIENTS[op_type]
    except KeyError:
        raise NotFoundError(f"No gradient defined for operation of type '{op_type}'") from None


def has_gradient(op_type: str) -> bool:
    return op_type in _GRADIENTS


# ---------------------------------------------------------------------------------------
# Kernels and backends
# ---------------------------------------------------------------------------------------

# backend name -> (module that registers its kernels, how to get it)
_BACKEND_MODULES = {
    "cython": ("fbnops.kernels.cython_backend", "reinstall fbnops with a C compiler: pip install ."),
    "numba": ("fbnops.kernels.numba_backend", "pip install 'fbnops[numba]'"),
    "reference": ("fbnops.kernels.reference", "(always available)"),
}
DEFAULT_BACKEND = "cython"

_KERNELS: dict[tuple[str, str], Callable] = {}
_LOAD_ERRORS: dict[str, str] = {}


class _ThreadState(threading.local):
    """Per thread: the stack of ``with backend(...)`` blocks (a class attribute until a thread
    pushes one: a missing attribute would cost a raised AttributeError on every op call)."""

    stack: list[str] | None = None


_state = _ThreadState()
_global = {"backend": None}


def register_kernel(op_type: str, backend_name: str):
    """Decorator: ``@register_kernel("FusedBatchNormGradV3", "reference")``."""

    def deco(fn: Callable) -> Callable:
        _KERNELS[(op_type, backend_name)] = fn
        return fn

    return deco


_LOADED: set[str] = set()


def _ensure_loaded(name: str) -> bool:
    if name in _LOADED:
        return True
    if name in _LOAD_ERRORS or name not in _BACKEND_MODULES:
        return False
    try:
        importlib.import_module(_BACKEND_MODULES[name][0])
    except ImportError as e:  # missing optional dependency or unbuilt extension
        _LOAD_ERRORS[name] = str(e)
        return False
    _LOADED.add(name)
    return True


def known_backends() -> tuple[str, ...]:
    """Every backend fbnops knows, installed or not, default first."""
    return tuple(_BACKEND_MODULES)


def available_backends() -> list[str]:
    """Backends that work in this install, default first."""
    return [name for name in _BACKEND_MODULES if _ensure_loaded(name)]


def backend_states() -> dict[str, str]:
    """Every known backend, default first: ``"available"``, or ``"missing (why)"``."""
    available = available_backends()
    return {
        name: "available" if name in available else f"missing ({_LOAD_ERRORS.get(name, '?')})"
        for name in _BACKEND_MODULES
    }


def check_backend(name: str) -> str:
    """``name`` if that backend works here, else NotFoundError saying how to get it."""
    if name in _LOADED:
        return name
    if not isinstance(name, str) or name not in _BACKEND_MODULES:
        raise NotFoundError(f"Unknown backend {name!r}; expected one of {sorted(_BACKEND_MODULES)}")
    if not _ensure_loaded(name):
        module, hint = _BACKEND_MODULES[name]
        raise NotFoundError(
            f"Backend {name!r} is not available in this install "
            f"({_LOAD_ERRORS.get(name, 'not built')}); to get it: {hint}"
        )
    return name


def _default_backend() -> str:
    if _global["backend"] is None:
        _global["backend"] = DEFAULT_BACKEND if _ensure_loaded(DEFAULT_BACKEND) else "reference"
    return _global["backend"]


def set_backend(name: str) -> None:
    """Select the backend used by every op call in this process."""
    _global["backend"] = check_backend(name)


def get_backend() -> str:
    """The backend in force here: a ``with backend(...)`` block's, else the global one."""
    stack = _state.stack
    if stack:
        return stack[-1]
    return _global["backend"] or _default_backend()


class _BackendBlock(contextlib.ContextDecorator):
    """One ``with backend(name)`` block (or a function decorated with it).  A plain class, not a
    generator-based context manager: entering and leaving one took half the time (10 us against
    22, right after a pass over 20 MB had left the interpreter's memory out of cache), and a loop
    of op calls pays it on every call."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> str:
        check_backend(self.name)
        stack = _state.stack
        if stack is None:
            stack = _state.stack = []
        stack.append(self.name)
        return self.name

    def __exit__(self, *exc_info: object) -> None:
        _state.stack.pop()


def backend(name: str) -> contextlib.AbstractContextManager[str]:
    """``with fbnops.backend("numba"): ...`` - a backend for one block (per thread)."""
    return _BackendBlock(name)


def get_kernel(op_type: str, backend_name: str | None = None) -> Callable:
    name = backend_name or get_backend()
    kernel = _KERNELS.get((op_type, name))
    if kernel is not None:
        return kernel
    name = check_backend(name)
    try:
        return _KERNELS[(op_type, name)]
    except KeyError:
        raise NotFoundError(f"No registered '{op_type}' kernel for backend '{name}'") from None


# The stages of the kernels (fbnops.kernels.stages): the same backends, keyed by (stage, backend).
STAGES = ("reduce_totals", "finish", "apply")
_STAGES: dict[tuple[str, str], Callable] = {}


def register_stage(stage: str, backend_name: str):
    """Decorator: ``@register_stage("reduce_totals", "numba")``; ``stage`` is one of :data:`STAGES`."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; expected one of {STAGES}")

    def deco(fn: Callable) -> Callable:
        _STAGES[(stage, backend_name)] = fn
        return fn

    return deco


def get_stage(stage: str, backend_name: str | None = None) -> Callable:
    """The ``stage`` function of a backend (default: the one in force)."""
    name = check_backend(backend_name or get_backend())
    try:
        return _STAGES[(stage, name)]
    except KeyError:
        raise NotFoundError(f"No registered stage '{stage}' for backend '{name}'") from None
