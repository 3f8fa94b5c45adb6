"""Optional parts of the suite: one skip reason per extra, worded once.

``require("tensorflow", "oracle")`` imports and returns the module, or skips the calling test
with ``the 'oracle' extra is not installed (pip install -e '.[oracle]')`` - the same words for
every test that needs that extra, so the summary of a plain ``[test]`` install lists each
missing extra once per reason, not in six spellings.

``skip_unless("numba", "numba")`` is the same as a mark (module level, classes, parameters), and
``require_backend("numba")`` / ``backend_reason("numba")`` do it for a kernel backend: the
Numba backend is the ``numba`` extra; the Cython kernels come with the install itself.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["reason", "require", "have", "skip_unless", "backend_reason", "require_backend"]

# A backend that is not installed -> the extra that brings it (None: it comes with the build).
_BACKEND_EXTRAS = {"numba": "numba", "cython": None, "reference": None}
_NOT_BUILT = "the Cython kernels are not built in this install (reinstall fbnops with a C compiler: pip install .)"


def reason(extra: str) -> str:
    """The skip reason for a missing ``extra``."""
    return f"the '{extra}' extra is not installed (pip install -e '.[{extra}]')"


def have(module: str) -> bool:
    """True when ``module`` imports (for ``skipif`` marks and parametrization)."""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or skip the current test, naming the extra that brings it."""
    import pytest

    try:
        return importlib.import_module(module)
    except ImportError:
        pytest.skip(reason(extra), allow_module_level=True)  # also at a test module's top


def skip_unless(module: str, extra: str):
    """A ``pytest.mark.skipif`` that skips unless ``module`` imports, with the extra's reason."""
    import pytest

    return pytest.mark.skipif(not have(module), reason=reason(extra))


def backend_reason(name: str) -> str:
    """The skip reason for a kernel backend that is not available here."""
    extra = _BACKEND_EXTRAS.get(name)
    return reason(extra) if extra else _NOT_BUILT


def require_backend(name: str) -> None:
    """Skip the current test unless backend ``name`` works in this install."""
    import pytest

    from ..framework import registry

    if name not in registry.available_backends():
        pytest.skip(backend_reason(name), allow_module_level=True)
