"""Shared fixtures: the golden vectors, the float64 oracle, backend parametrization."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import fbnops

DATA = Path(__file__).parent / "data"
GOLDEN_FILE = DATA / "tf_fused_batch_norm_v3.npz"

BACKENDS = fbnops.available_backends()


def pytest_addoption(parser):
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="rewrite tests/golden/*.txt from the current public API instead of comparing",
    )


@pytest.fixture(params=BACKENDS)
def backend(request):
    """Run the test once per available backend (cython, numba, reference)."""
    with fbnops.backend(request.param):
        yield request.param


class Golden:
    """The TensorFlow 2.21 CPU golden cases (tests/data/GOLDEN_README.md)."""

    def __init__(self, path: Path = GOLDEN_FILE):
        self._npz = np.load(path)
        self.meta = json.loads(bytes(self._npz["__meta__"]).decode())
        self.tf_version = bytes(self._npz["__tf_version__"]).decode()

    def __len__(self) -> int:
        return len(self.meta)

    def get(self, i: int, name: str) -> np.ndarray:
        a = self._npz[f"{i}/{name}"]
        if f"{i}/{name}__bf16" in self._npz.files:
            a = a.view(ml_dtypes.bfloat16)
        return a

    def has(self, i: int, name: str) -> bool:
        return f"{i}/{name}" in self._npz.files


GOLDEN = Golden()


def rel_err(got, want) -> float:
    """max |got - want| / max |want| in float64 (0 when both are all zero)."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.size == 0:
        return 0.0
    scale = np.max(np.abs(want))
    err = np.max(np.abs(got - want))
    return float(err / scale) if scale > 0 else float(err)


# Tolerances TensorFlow itself meets against float64 (golden README), per dtype of T.
X_TOL = {"float32": 1e-6, "float16": 5e-4, "bfloat16": 3e-3}
STAT_TOL = 1e-6  # float32 per-channel outputs
