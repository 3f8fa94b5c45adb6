"""Shared fixtures: backend parametrization (every known backend; absent ones skip with a reason)
and the --update-goldens option.  Helpers live in :mod:`fbnops.testing`."""

from __future__ import annotations

import pytest

import fbnops
from fbnops.testing.params import backend_params


def pytest_addoption(parser):
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="rewrite tests/golden/*.txt from the current public API instead of comparing",
    )


@pytest.fixture(params=backend_params())
def backend(request):
    """Run the test once per known backend (cython, numba, reference); a missing one is skipped."""
    with fbnops.backend(request.param):
        yield request.param
