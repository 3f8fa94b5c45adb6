"""``fbnops demo``: FusedBatchNormV3 and its gradient built with the graph builders, run, and checked.

The first thing a new user runs (the README's first command): a small NHWC batch through the
forward op, the gradient that :func:`fbnops.gradients` adds, a :class:`~fbnops.Session` run,
every output summarized, and a finite-difference check of the gradient.
"""

from __future__ import annotations

import time

import numpy as np

from fbnops._version import __version__
from fbnops.framework import dtypes, registry
from fbnops.framework.gradients import gradients
from fbnops.framework.graph import Graph
from fbnops.framework.scope import Scope
from fbnops.framework.session import Session
from fbnops.framework.threads import get_num_threads
from fbnops.testing.gradcheck import gradient_error


def summary(name: str, a: np.ndarray) -> str:
    """One line: name, shape, dtype, and the values (a vector) or their statistics (a tensor)."""
    a = np.asarray(a)
    head = f"  {name:20s} {str(list(a.shape)):14s} {dtypes.tf_name(a.dtype):8s}"
    if a.size == 0:
        return head + " (empty)"
    if a.ndim <= 1:
        return head + " " + np.array2string(np.asarray(a, np.float32).reshape(-1), precision=5)
    f = a.astype(np.float64)
    return head + f" mean {f.mean():+.5f}  std {f.std():.5f}  min {f.min():+.4f}  max {f.max():+.4f}"


def run(backend_label: str | None = None) -> bool:
    """Build, run and check the demo graph (on ``backend_label``'s kernels if given); True when the check passes."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(0)
    shape = (4, 5, 5, 3)  # NHWC: a small batch with a visible per-channel offset and spread
    x = (rng.standard_normal(shape) * [1.0, 2.0, 0.5] + [0.0, 3.0, -1.0]).astype(np.float32)
    w = rng.standard_normal(shape).astype(np.float32)  # the upstream gradient dL/dy
    scale = np.array([1.0, 0.5, 2.0], np.float32)
    offset = np.array([0.0, 0.1, -0.2], np.float32)

    scope = Scope(Graph())
    if backend_label:
        scope = scope.with_kernel_label(backend_label)
    xp = scope.placeholder(np.float32, shape, name="x")
    empty = scope.constant(np.zeros(0, np.float32), name="empty")
    bn = scope.with_op_name("bn").add_op(
        "FusedBatchNormV3",
        [xp, scope.constant(scale, name="scale"), scope.constant(offset, name="offset"), empty, empty],
        {"epsilon": 1e-3},
    )
    params = [bn.inputs[1], bn.inputs[2]]
    dx, _, _ = gradients(bn.outputs[0], [xp, *params], grad_ys=[scope.constant(w, name="dy")])
    grad_op = dx.op
    values = Session(scope.graph).run([*bn.outputs, *grad_op.outputs], {xp: x})

    backend = backend_label or registry.get_backend()
    print(f"fbnops {__version__} demo   backend: {backend}   threads: {get_num_threads()}")
    print(f"graph: {len(scope.graph)} ops, e.g. {bn.name} ({bn.type}) -> {grad_op.name} ({grad_op.type})")
    print(f"FusedBatchNormV3  x {list(shape)} float NHWC, is_training=True, epsilon=0.001")
    fwd_names = "y batch_mean batch_variance reserve_space_1 reserve_space_2 reserve_space_3".split()
    for out, v in zip(bn.outputs, values[:6], strict=True):
        print(summary(f"{bn.name}.{fwd_names[out.index]}", v))
    print("FusedBatchNormGradV3  (added by fbnops.gradients; fed the forward's reserve spaces)")
    names = "x_backprop scale_backprop offset_backprop reserve_space_4 reserve_space_5".split()
    for name, v in zip(names, values[6:], strict=True):
        print(summary(name, v))
    worst = gradient_error(x, w, scale, offset, None, None, 1e-3, "NHWC", True, values[6:9], 8, rng)
    ok = worst < 1e-3
    print(
        f"finite-difference check of d(sum(y*dy)) / d(x, scale, offset): max rel err {worst:.1e}  "
        f"{'OK' if ok else 'FAILED'}"
    )
    print(f"done in {time.perf_counter() - t0:.2f} s")
    return ok
