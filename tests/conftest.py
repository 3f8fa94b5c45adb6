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


def _checked_last(item) -> bool:
    """A test that waits for work its module started at collection (``CHECKED_LAST``, ``start_early``)."""
    return item.name in getattr(getattr(item, "module", None), "CHECKED_LAST", ())


def pytest_collection_modifyitems(session, config, items):
    """Tests that wait for background work run last, so the rest of the suite overlaps that work."""
    items.sort(key=_checked_last)  # (a stable sort: the order is otherwise unchanged)


def pytest_collection_finish(session):
    for module in {item.module for item in session.items if _checked_last(item)}:
        module.start_early()


def pytest_sessionfinish(session, exitstatus):
    for module in {item.module for item in session.items if _checked_last(item)}:
        module.stop_early()
