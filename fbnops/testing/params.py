"""pytest parameters over every known backend: unavailable ones are skipped with the reason."""

from __future__ import annotations

__all__ = ["backend_params", "compiled_backend_params"]


def backend_params(exclude: tuple[str, ...] = ()) -> list:
    """``pytest.param(name)`` per known backend; a backend that is not installed carries a skip mark
    whose reason says why and how to get it (shown by ``pytest -rs``)."""
    import pytest

    from ..framework import registry
    from ..framework.errors import NotFoundError

    params = []
    for name in registry.known_backends():
        if name in exclude:
            continue
        try:
            registry.check_backend(name)
            marks = ()
        except NotFoundError as e:
            marks = pytest.mark.skip(reason=f"backend {name!r} unavailable: {e.message}")
        params.append(pytest.param(name, marks=marks, id=name))
    return params


def compiled_backend_params() -> list:
    """The backends that run compiled kernels (all but the NumPy reference)."""
    return backend_params(exclude=("reference",))
