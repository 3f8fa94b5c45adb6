"""pytest parameters over every known backend: unavailable ones are skipped with the reason."""

from __future__ import annotations

__all__ = ["backend_params", "compiled_backend_params"]


def backend_params(exclude: tuple[str, ...] = ()) -> list:
    """``pytest.param(name)`` per known backend; a backend that is not installed carries a skip mark
    whose reason is the one :func:`fbnops.testing.extras.backend_reason` words (shown by ``pytest -ra``)."""
    import pytest

    from ..framework import registry
    from .extras import backend_reason

    params = []
    for name in registry.known_backends():
        if name in exclude:
            continue
        available = name in registry.available_backends()
        marks = () if available else pytest.mark.skip(reason=backend_reason(name))
        params.append(pytest.param(name, marks=marks, id=name))
    return params


def compiled_backend_params() -> list:
    """The backends that run compiled kernels (all but the NumPy reference)."""
    return backend_params(exclude=("reference",))
