"""Hostile strides, offsets and sizes for the strided-buffer surfaces (issue 15, class 1; and class 3).

* ``fbnops.framework.strided`` is checked against brute force: the span it proves is exactly the lowest
  and highest byte any index touches, for any signs of the strides; the overlap check is exact for small
  tensors; nothing overflows (Python ints, ``2**63`` limit).
* The DirectML and oneDNN Graph mirrors get hypothesis-made strides (negative, zero, overlapping, huge),
  base offsets, binding sizes and buffer sizes.  Each batch runs in a child process, so a crash fails the
  test instead of pytest.  Every call ends accepted or refused with the API's own error (HRESULTError,
  dnnl ``error``); an accepted call writes nothing outside its output tensors and, for oneDNN, gives the
  numbers that the same data in a dense layout gives.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from attacks.helpers import dml_grad
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fbnops.framework import strided
from fbnops.testing.isolated import run_isolated

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CHILD = settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ------------------------------------------------------------------------------ strategies

small_shapes = st.lists(st.integers(0, 4), min_size=0, max_size=4)
any_stride = st.one_of(st.integers(-12, 12), st.sampled_from([2**31, -(2**31), 2**62, 2**63, -(2**64)]))
itemsizes = st.sampled_from([1, 2, 4, 8])
SMALL_STRIDE = st.integers(-12, 12)
offsets = st.one_of(st.integers(0, 64), st.sampled_from([2**63 - 1, 2**63, 2**70]))


@st.composite
def layouts(draw, stride=SMALL_STRIDE):
    shape = draw(small_shapes)
    return shape, draw(st.lists(stride, min_size=len(shape), max_size=len(shape)))


def _offsets(shape, strides):
    idx = np.zeros(1, dtype=object)
    for size, stride in zip(shape, strides, strict=True):
        idx = (idx[:, None] + np.arange(size, dtype=object) * stride).reshape(-1)
    return idx


# ------------------------------------------------------------------------------ the shared proof


@SETTINGS
@given(layouts(any_stride), itemsizes, offsets)
def test_byte_span_is_the_brute_force_span(layout, itemsize, offset):
    shape, strides = layout
    low, end = strided.byte_span(shape, strides, itemsize, offset)
    if math.prod(shape) == 0:
        assert low == end == offset
        return
    touched = _offsets(shape, strides)
    assert low == offset + min(touched) * itemsize
    assert end == offset + (max(touched) + 1) * itemsize


@SETTINGS
@given(layouts(any_stride), itemsizes, offsets, st.integers(0, 2**64))
def test_check_in_bounds_accepts_exactly_the_layouts_inside(layout, itemsize, offset, buffer_size):
    shape, strides = layout
    low, end = strided.byte_span(shape, strides, itemsize, offset)
    inside = (low == end or (0 <= low and end <= buffer_size)) and offset < 2**63 and buffer_size < 2**63
    try:
        strided.check_in_bounds(shape, strides, itemsize, offset, buffer_size)
    except strided.StridedBoundsError as e:
        assert not inside, e
    else:
        assert inside


@SETTINGS
@given(layouts(st.integers(-6, 6)), itemsizes)
def test_check_no_overlap_is_exact_for_small_tensors(layout, itemsize):
    shape, strides = layout
    touched = _offsets(shape, strides) if math.prod(shape) else []
    distinct = len(set(touched)) == len(touched)
    try:
        strided.check_no_overlap(shape, strides, itemsize)
    except strided.StridedBoundsError:
        assert not distinct
    else:
        assert distinct


def test_hostile_values_give_typed_errors_never_overflow():
    for bad in (
        lambda: strided.check_in_bounds([2, 2], [2**63, 1], 4, 0, 2**40),
        lambda: strided.check_in_bounds([3], [1], 4, -1, 100),
        lambda: strided.check_in_bounds([3], [1], 4, 2**64, 2**64),
        lambda: strided.check_in_bounds([3], [1.5], 4, 0, 100),
        lambda: strided.check_in_bounds([3, 1], [1], 4, 0, 100),
        lambda: strided.check_in_bounds([-3], [1], 4, 0, 100),
        lambda: strided.check_no_overlap([2**21, 2], [1, 1], 4),  # too big to decide exactly: refused
    ):
        with pytest.raises(strided.StridedBoundsError):
            bad()
    assert strided.check_in_bounds([0, 2**62], [2**62, 2**62], 8, 0, 0) == (0, 0)  # empty: touches nothing


# ------------------------------------------------------------------------------ the mirrors, in a child process


def run_dml_cases(cases: list[dict]) -> list[str]:
    """In the child: one BATCH_NORMALIZATION_GRAD per case with hostile InputTensor strides, output strides and
    binding; returns 'ok' / 'refused <hresult>' per case (or raises on a wrong answer)."""
    from bindings_mirror import directml as dml

    results = []
    for c in cases:
        try:
            outs = dml_grad(c["in_strides"], c["out_strides"], c["offset"], c["size"], c["resource"], c["total"],
                            guard=64)  # fmt: skip
        except dml.HRESULTError as e:
            results.append(f"refused {e.hresult}")
            continue
        dx_bytes, out_n = outs[0].Desc.SizeInBytes, outs[0].Desc.Buffer.GetDesc()["Width"]
        before = np.zeros(out_n, np.uint8)  # the buffer as filled: float32 -7s, zeros after the last whole one
        before[: out_n // 4 * 4] = np.full(out_n // 4, -7, np.float32).view(np.uint8)
        after = outs[0].Desc.Buffer.Readback(np.uint8, (out_n,))
        if not np.array_equal(after[dx_bytes:], before[dx_bytes:]):
            raise AssertionError(f"bytes written past the output tensor: {c}")
        results.append("ok")
    return results


def run_onednn_cases(cases: list[dict]) -> list[str]:
    """In the child: a BatchNormTrainingBackward per case with hostile src strides, diff_src strides and handle
    sizes; an accepted case must match the same data in a dense layout and write nothing outside diff_src."""
    from bindings_mirror import onednn_graph as dg

    LT, S = dg.logical_tensor, dg.logical_tensor.layout_type.strided
    f32 = LT.data_type.f32
    shape = [2, 3, 2, 2]
    rng = np.random.default_rng(0)
    results = []
    for c in cases:
        try:
            src = LT(0, f32, shape, c["in_strides"])
            ins = [src, LT(1, f32, shape, S), LT(2, f32, [3], S), LT(3, f32, [3], S), LT(4, f32, [3], S)]
            dst = LT(5, f32, shape, c["out_strides"])
            outs = [dst, LT(6, f32, [3], S), LT(7, f32, [3], S)]
            bn = dg.op(0, dg.op.kind.BatchNormTrainingBackward, ins, outs, "bn")
            bn.set_attr(dg.op.attr.epsilon, 1e-3).set_attr(dg.op.attr.data_format, "NCX")
            g = dg.graph(dg.engine.kind.cpu)
            g.add_op(bn)
            g.finalize()
            eng = dg.engine(dg.engine.kind.cpu, 0)
            cp = g.get_partitions()[0].compile(ins, outs, eng)
            x_buf = rng.standard_normal(c["in_elems"]).astype(np.float32)
            others = [rng.standard_normal(24).astype(np.float32), np.zeros(3, np.float32), np.ones(3, np.float32)]
            others.append(np.ones(3, np.float32))
            out_buf = np.full(c["out_elems"], -7.0, np.float32)
            t_out = [dg.tensor(dst, eng, out_buf), dg.tensor(outs[1], eng), dg.tensor(outs[2], eng)]
            cp.execute(
                dg.stream(eng), [dg.tensor(lt, eng, a) for lt, a in zip(ins, [x_buf, *others], strict=True)], t_out
            )
        except dg.error as e:
            results.append(f"refused {e.status.name}")
            continue
        # accepted: every byte it touched was inside; compare with the dense layout
        x = np.lib.stride_tricks.as_strided(x_buf, shape, [s * 4 for s in src.get_strides()])
        dense = [LT(0, f32, shape, S), *ins[1:]]
        bn2 = dg.op(0, dg.op.kind.BatchNormTrainingBackward, dense, [LT(5, f32, shape, S), *outs[1:]], "bn")
        bn2.set_attr(dg.op.attr.epsilon, 1e-3).set_attr(dg.op.attr.data_format, "NCX")
        g2 = dg.graph(dg.engine.kind.cpu)
        g2.add_op(bn2)
        g2.finalize()
        cp2 = g2.get_partitions()[0].compile(dense, bn2._outputs, eng)
        want = np.empty(shape, np.float32)
        ts = [dg.tensor(lt, eng, a) for lt, a in zip(dense, [np.ascontiguousarray(x), *others], strict=True)]
        cp2.execute(
            dg.stream(eng),
            ts,
            [dg.tensor(bn2._outputs[0], eng, want), dg.tensor(outs[1], eng), dg.tensor(outs[2], eng)],
        )
        got = np.lib.stride_tricks.as_strided(out_buf, shape, [s * 4 for s in dst.get_strides()])
        if not np.array_equal(got, want):
            raise AssertionError(f"strided result differs from the dense one: {c}")
        span = strided.byte_span(shape, dst.get_strides(), 4)[1] // 4
        touched = np.zeros(out_buf.size, bool)
        touched[
            np.unique(
                np.lib.stride_tricks.as_strided(np.arange(out_buf.size), shape, [s * 8 for s in dst.get_strides()])
            )
        ] = True
        if not np.all(out_buf[~touched] == -7.0) or span > out_buf.size:
            raise AssertionError(f"bytes written outside diff_src: {c}")
        results.append("ok")
    return results


strides4 = st.lists(
    st.one_of(st.sampled_from([0, 1, 2, 3, 6, 12, 24]), st.integers(-30, 30), st.sampled_from([2**32, 2**62, 2**63])),
    min_size=4,
    max_size=4,
)
dense4 = st.just([12, 4, 2, 1])


@st.composite
def dml_case(draw):
    return {
        "in_strides": draw(st.one_of(st.none(), dense4, strides4.map(lambda s: [abs(v) % 2**32 for v in s]), strides4)),
        "out_strides": draw(st.one_of(st.none(), dense4, strides4.map(lambda s: [abs(v) % 64 for v in s]))),
        "total": draw(st.one_of(st.none(), st.sampled_from([0, 4, 96, 2**40, 2**64]))),
        "offset": draw(st.one_of(st.sampled_from([0, 16, 32]), st.integers(-64, 2**64))),
        "size": draw(st.one_of(st.sampled_from([96, 112, 128]), st.integers(-16, 2**64))),
        "resource": draw(st.sampled_from([16, 96, 128, 256, 4096])),
    }


@st.composite
def onednn_case(draw):
    return {
        "in_strides": draw(st.one_of(dense4, strides4)),
        "out_strides": draw(st.one_of(dense4, strides4.map(lambda s: [abs(v) % 64 for v in s]))),
        "in_elems": draw(st.sampled_from([1, 23, 24, 64, 4096])),
        "out_elems": draw(st.sampled_from([1, 24, 64, 4096])),
    }


@CHILD
@given(st.lists(dml_case(), min_size=50, max_size=50))
def test_directml_hostile_layouts_and_bindings(cases):
    out = run_isolated(run_dml_cases, cases, timeout=120)
    assert out.kind == "ok", (out.kind, out.signal, out.error_type, out.message, out.stderr[-2000:])
    assert all(r == "ok" or r == "refused E_INVALIDARG" or r == "refused E_OUTOFMEMORY" for r in out.value), out.value


@CHILD
@given(st.lists(onednn_case(), min_size=50, max_size=50))
def test_onednn_hostile_strides_and_handles(cases):
    out = run_isolated(run_onednn_cases, cases, timeout=120)
    assert out.kind == "ok", (out.kind, out.signal, out.error_type, out.message, out.stderr[-2000:])
    assert all(r in ("ok", "refused invalid_arguments", "refused out_of_memory") for r in out.value), out.value


def test_known_attacks_are_refused_in_process():
    """The replayed attacks of the issue, each refused before any kernel runs (no child needed once fixed)."""
    dml_attacks = [
        {
            "in_strides": [2**32 - 1, 1, 1, 1],
            "out_strides": None,
            "total": None,
            "offset": 0,
            "size": 96,
            "resource": 96,
        },
        {"in_strides": None, "out_strides": [0, 0, 0, 0], "total": None, "offset": 0, "size": 96, "resource": 96},
        {"in_strides": None, "out_strides": None, "total": None, "offset": -16, "size": 96, "resource": 128},
        {"in_strides": None, "out_strides": None, "total": None, "offset": 2**64 - 16, "size": 96, "resource": 128},
        {"in_strides": None, "out_strides": None, "total": None, "offset": 0, "size": 2**63, "resource": 128},
    ]
    assert run_dml_cases(dml_attacks) == ["refused E_INVALIDARG"] * 5
    onednn_attacks = [
        {"in_strides": [-12, 4, 2, 1], "out_strides": [12, 4, 2, 1], "in_elems": 4096, "out_elems": 24},
        {"in_strides": [12, 4, 2, 1], "out_strides": [1, 1, 1, 1], "in_elems": 24, "out_elems": 24},
        {"in_strides": [2**62, 4, 2, 1], "out_strides": [12, 4, 2, 1], "in_elems": 24, "out_elems": 24},
        {"in_strides": [12, 4, 2, 1], "out_strides": [12, 4, 2, 1], "in_elems": 23, "out_elems": 24},
        {"in_strides": [12, 4, 2, 1], "out_strides": [12, 4, 2, 1], "in_elems": 24, "out_elems": 1},
    ]
    assert run_onednn_cases(onednn_attacks) == ["refused invalid_arguments"] * 5


@pytest.mark.parametrize("stride", [2**62, 2**63, 2**70])
def test_overlap_proof_refuses_spans_beyond_int64(stride):
    """Strides whose span does not fit in 63 bits are refused before any int64 arithmetic."""
    with pytest.raises(strided.StridedBoundsError, match="2\\*\\*63"):
        strided.check_no_overlap([2, 3, 4, 5], [stride] * 4, 4)


def test_onednn_dims_and_strides_must_fit_int64():
    from bindings_mirror import onednn_graph as dg

    LT = dg.logical_tensor
    with pytest.raises(dg.error, match="int64"):
        LT(0, LT.data_type.f32, [2, 3, 4, 5], [2**70, 1, 1, 1])
