"""Shared fixtures: backend parametrization (every known backend; absent ones skip with a reason)
and the --update-goldens option.  Helpers live in :mod:`fbnops.testing`."""

from __future__ import annotations

import os

import pytest

# TensorFlow as the oracle is its default CPU kernels (Eigen), on every machine.  Its oneDNN
# rewrites are on by default on CPUs with AVX512-VNNI/BF16 or AMX (and off on others): they
# change what some ops return (FusedBatchNormGrad's reserve_space_3 came back as shape () on a
# Sapphire Rapids host, not (0,)).  Set here, before any test module imports TensorFlow.
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"

import fbnops
from fbnops.framework import threads
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


@pytest.fixture(autouse=True)
def thread_setting_unchanged():
    """Every test leaves the kernels' thread setting as it found it, the default (adaptive to the
    load) included, which later tests rely on; one that changes it restores it (threads.setting_kept)."""
    threads.get_num_threads()  # (the default, read on first use, is not a change)
    before = (threads._num_threads[0], threads._from_cores[0])
    with threads.setting_kept():
        yield
        after = (threads._num_threads[0], threads._from_cores[0])
    assert after == before, f"the test left the thread setting (count, adaptive) at {after}, not {before}"
