"""``fbnops check``: finite-difference gradient checks per backend, and backend agreement.

Each backend's gradient of ``L = sum(y * w)`` is compared with central differences of the
float64 forward (:func:`fbnops.testing.gradcheck.gradient_error`), then with the reference
backend's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fbnops import raw_ops
from fbnops.framework import dtypes, registry
from fbnops.framework.layouts import channel_axis
from fbnops.testing.gradcheck import gradient_error

TOLERANCE = {"float32": 1e-3, "float16": 2e-2, "bfloat16": 1e-1}


@dataclass(frozen=True)
class Result:
    backend: str
    training: bool
    what: str  # "finite differences" | "agreement with reference"
    error: float
    tolerance: float

    @property
    def ok(self) -> bool:
        return bool(self.error < self.tolerance)

    def line(self) -> str:
        mode = "training" if self.training else "frozen  "
        return (
            f"  {self.backend:9s} {mode}  {self.what:26s} max rel err {self.error:.1e}  {'OK' if self.ok else 'FAILED'}"
        )


def run_checks(shape, data_format, dtype, backends, points, seed, advance: Callable[[], None] = lambda: None):
    """Every backend x mode: gradient vs finite differences, then agreement with the reference."""
    rng = np.random.default_rng(seed)
    axis = channel_axis(data_format, len(shape))
    c = shape[axis]
    dt = dtypes.from_user_name(dtype)
    x, w = rng.standard_normal(shape).astype(dt), rng.standard_normal(shape).astype(dt)
    scale, offset = (rng.random(c) + 0.5).astype(np.float32), rng.standard_normal(c).astype(np.float32)
    mean, var = (rng.standard_normal(c) * 0.1).astype(np.float32), (rng.random(c) + 0.5).astype(np.float32)
    tol, eps = TOLERANCE[dtype], 1e-3
    results, grads = [], {}
    for backend in backends:
        with registry.backend(backend):
            for training in (True, False):
                common = dict(epsilon=eps, data_format=data_format, is_training=training)
                fwd = raw_ops.FusedBatchNormV3(x=x, scale=scale, offset=offset, mean=mean, variance=var, **common)
                g = raw_ops.FusedBatchNormGradV3(
                    y_backprop=w, x=x, scale=scale, reserve_space_1=fwd.reserve_space_1,
                    reserve_space_2=fwd.reserve_space_2, reserve_space_3=fwd.reserve_space_3, **common,
                )  # fmt: skip
                grads[(backend, training)] = g
                err = gradient_error(x, w, scale, offset, mean, var, eps, data_format, training, g[:3], points, rng)
                results.append(Result(backend, training, "gradient vs finite diffs", err, tol))
                advance()
    for (backend, training), g in grads.items():
        base = grads.get(("reference", training))
        if base is None or backend == "reference":
            continue
        ref = base.x_backprop.astype(np.float64)
        err = float(np.max(np.abs(g.x_backprop.astype(np.float64) - ref)) / max(np.max(np.abs(ref)), 1e-30))
        results.append(Result(backend, training, "agreement with reference", err, tol))
    return results
