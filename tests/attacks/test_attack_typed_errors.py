"""Class 7, typed errors: wrong calls on every surface end in the surface's own documented error (or a
non-OK ``Status`` in C++), never in a crash, a SIGFPE or an untyped exception."""

from __future__ import annotations

import numpy as np

from bindings_mirror import cc, java
from fbnops.framework import registry
from fbnops.framework.graph import Graph
from fbnops.framework.session import Session
from fbnops.kernels import _plan

from .helpers import F, dnnl_grad, grad_inputs, raw_grad
from .runner import DNNL_ERROR, INVALID_ARGUMENT, JAVA_ILLEGAL_ARGUMENT, Variant, attack


@attack(7, "Session.run('bn:9')", raises=INVALID_ARGUMENT)
def test_session_run_of_a_missing_output():
    g = Graph()
    x = g.add_operation("x", "Placeholder", [], {"dtype": np.dtype(F), "shape": (2,)}).output(0)
    g.add_operation("bn", "Identity", [x], {})
    Session(g).run("bn:9")


@attack(7, "Session.run(3)", raises=INVALID_ARGUMENT)
def test_session_run_of_a_number():
    Session(Graph()).run(3)


@attack(7, "C++ mirror: a string where a tensor goes (a Status, no exception)", expect="ok")
def test_cc_mirror_string_as_a_tensor():
    root = cc.Scope.NewRootScope()
    v = np.ones(3, F)
    cc.ops.FusedBatchNormGradV3(root, "x", np.ones((2, 2, 2, 3), F), v, v, v, v)
    assert not root.ok()
    return root.status().ToString()


@attack(7, "C++ mirror: a rank-3 x (a Status, no exception)", expect="ok")
def test_cc_mirror_rank_3_x():
    root = cc.Scope.NewRootScope()
    v = np.ones(3, F)
    x = np.ones((2, 2, 3), F)
    cc.ops.FusedBatchNormGradV3(root, x, x, v, v, v, v)
    assert not root.ok()
    return root.status().ToString()


@attack(7, "Java mirror: None as an operand", raises=JAVA_ILLEGAL_ARGUMENT)
def test_java_mirror_none_as_an_operand():
    g = java.Graph()
    s = g.baseScope()
    v = java.Constant.create(s.withName("v"), np.ones(3, F))
    java.FusedBatchNormGradV3.create(s, None, None, v, v, v, v)


@attack(7, "zero sizes in every layout and backend (no SIGFPE)", expect="ok")
def test_zero_sizes_in_every_layout_and_backend():
    for shape, fmt in [
        ((0, 2, 2, 3), "NHWC"),
        ((2, 0, 2, 2), "NCHW"),
        ((0, 0, 0, 0), "NHWC"),
        ((1, 3, 0, 0, 0), "NCDHW"),
    ]:
        for b in registry.available_backends():
            with registry.backend(b):
                raw_grad(**grad_inputs(shape, fmt))
    return "ok"


def _cython_plan(*args):
    from fbnops.kernels._cython import _tools

    return _tools.plan(*args)


_PLANS = {"Python": _plan.plan, "Cython": _cython_plan}


@attack(
    7,
    "kernel plan helper {label}",
    expect="either",
    raises=INVALID_ARGUMENT,
    variants=[
        Variant(f"({where}) with zero sizes {args}", (where, args))
        for where in _PLANS
        for args in ((0, 0, 0, 4), (1, 3, 0, 4))
    ],  # fmt: skip
)
def test_kernel_plan_helper_with_zero_sizes(where: str, args: tuple):
    return _PLANS[where](*args)


@attack(7, "oneDNN output into a read-only array", raises=DNNL_ERROR)
def test_onednn_output_into_a_read_only_array():
    out = np.full(24, -7.0, F)
    out.flags.writeable = False
    dnnl_grad(out_buf=out)


@attack(7, "oneDNN two outputs in one array", raises=DNNL_ERROR)
def test_onednn_two_outputs_in_one_array():
    stat = np.empty(3, F)
    dnnl_grad(stats_out=(stat, stat))


@attack(7, "oneDNN output aliasing its input (refused, or the same numbers)", expect="either", raises=DNNL_ERROR)
def test_onednn_output_aliasing_its_input():
    x = np.random.default_rng(1).standard_normal(24).astype(F)
    want = dnnl_grad(src_buf=x.copy(), out_buf=np.empty(24, F))
    buf = x.copy()
    got = dnnl_grad(src_buf=buf, out_buf=buf)
    assert np.array_equal(got, want)
    return "same numbers"


class _RaisingDLPack:
    def __dlpack__(self, *args, **kwargs):
        raise RuntimeError("boom")

    def __dlpack_device__(self):
        return (1, 0)


@attack(7, "raw_ops with a DLPack object that raises", raises=INVALID_ARGUMENT)
def test_raw_ops_with_a_dlpack_object_that_raises():
    raw_grad(x=_RaisingDLPack())
