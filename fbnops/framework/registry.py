"""Kernel registry keyed by (op type, backend), and backend selection.

A backend registers one implementation per op.  ``cython`` is the default,
``numba`` is optional, ``reference`` is the NumPy teaching version.  A backend
whose module cannot be imported is simply not available; asking for it raises a
clear error naming the extra to install.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Callable, Iterator

from .errors import NotFoundError

__all__ = [
    "register_kernel",
    "get_kernel",
    "available_backends",
    "set_backend",
    "get_backend",
    "backend",
]

# backend name -> (module that registers its kernels, how to get it)
_BACKEND_MODULES = {
    "cython": ("fbnops.kernels.cython_backend", "reinstall fbnops with a C compiler: pip install ."),
    "numba": ("fbnops.kernels.numba_backend", "pip install 'fbnops[numba]'"),
    "reference": ("fbnops.kernels.reference", "(always available)"),
}
DEFAULT_BACKEND = "cython"

_KERNELS: dict[tuple[str, str], Callable] = {}
_LOAD_ERRORS: dict[str, str] = {}
_state = threading.local()
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


def available_backends() -> list[str]:
    """Backends that work in this install, default first."""
    return [name for name in _BACKEND_MODULES if _ensure_loaded(name)]


def _check_backend(name: str) -> str:
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
    _global["backend"] = _check_backend(name)


def get_backend() -> str:
    """The backend in force here: a ``with backend(...)`` block's, else the global one."""
    stack = getattr(_state, "stack", None)
    if stack:
        return stack[-1]
    return _global["backend"] or _default_backend()


@contextlib.contextmanager
def backend(name: str) -> Iterator[str]:
    """``with fbnops.backend("numba"): ...`` - a backend for one block (per thread)."""
    _check_backend(name)
    stack = getattr(_state, "stack", None)
    if stack is None:
        stack = _state.stack = []
    stack.append(name)
    try:
        yield name
    finally:
        stack.pop()


def get_kernel(op_type: str, backend_name: str | None = None) -> Callable:
    name = backend_name or get_backend()
    kernel = _KERNELS.get((op_type, name))
    if kernel is not None:
        return kernel
    name = _check_backend(name)
    try:
        return _KERNELS[(op_type, name)]
    except KeyError:
        raise NotFoundError(f"No registered '{op_type}' kernel for backend '{name}'") from None
