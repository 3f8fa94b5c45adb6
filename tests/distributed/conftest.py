"""The kernel stages for the distributed tests: the compiled ones, or (until they land) a NumPy stand-in."""

from __future__ import annotations

import sys

import pytest
from dist_helpers import REAL_STAGES


@pytest.fixture(autouse=True)
def stages(monkeypatch):
    if REAL_STAGES:
        yield sys.modules["fbnops.kernels.stages"]
        return
    import standin_stages

    import fbnops.kernels

    monkeypatch.setitem(sys.modules, "fbnops.kernels.stages", standin_stages)
    monkeypatch.setattr(fbnops.kernels, "stages", standin_stages, raising=False)
    yield standin_stages
