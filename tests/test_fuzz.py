"""Fuzzed calls on every public entry, each in a crash-safe child process (tests/fuzzing).

CI runs 1,200 generated cases; FBNOPS_FUZZ_LONG=1 runs 20,000.  Every case must end as
'accepted' (matching the float64 reference) or 'rejected' (the entry's documented error
type, with a message naming the argument) - never a crash, a hang, a wrong answer or an
undocumented error.  The tally is computed and checked inside one test.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from fuzzing import harness as fz
from fuzzing import surfaces
from fuzzing.cases import Built

import fbnops
from fbnops.testing import PUBLISHED_CRASH_INPUTS

LONG = os.environ.get("FBNOPS_FUZZ_LONG", "") not in ("", "0")
N_CASES = 20_000 if LONG else 1_200


def test_fuzzed_calls_are_accepted_or_rejected_on_every_surface():
    rng = np.random.default_rng(20_000 if LONG else 0)
    tally, runner = fz.Tally(), fz.Runner(timeout=120)
    try:
        for _ in range(N_CASES):
            case = fz.random_case(rng)
            tally.add(case, runner.run(case))
    finally:
        runner.close()
    print(
        f"\nfuzz: {tally.cases} cases, {tally.accepted} accepted, {tally.rejected} rejected, "
        f"{len(tally.crashes)} crashes, {len(tally.hangs)} hangs; by surface {tally.by_surface}"
    )
    assert not tally.crashes, tally.crashes[:3]
    assert not tally.hangs, tally.hangs[:3]
    assert not tally.failures, tally.failures[:3]
    assert tally.cases == N_CASES
    assert set(tally.by_surface) == set(fz.SURFACES)
    assert tally.accepted > N_CASES // 12 and tally.rejected > N_CASES // 12


def test_runner_survives_a_segfault():
    """The harness itself: a child that dies is reported as a crash and replaced."""
    r = fz.Runner(timeout=30)
    try:
        assert r.run({"surface": "__segfault__"}) == "crash"
        ok = r.run(
            {
                "surface": "raw_grad",
                "shape": [2, 2, 2, 2],
                "data_format": "NHWC",
                "dtype": "float32",
                "is_training": True,
                "seed": 0,
                "mutation": {"kind": "none", "pick": 0},
            }
        )
        assert ok == "accepted"
    finally:
        r.close()


# The published TensorFlow crash inputs (fbnops.testing.crash_inputs) through every TF-shaped surface.
@pytest.mark.parametrize("surface", ["raw", "graph", "java", "cc", "runfile"])
@pytest.mark.parametrize("name", list(PUBLISHED_CRASH_INPUTS))
def test_published_crash_inputs_are_rejected_on_every_surface(surface, name):
    op_type, arg, inputs, attrs, _ = PUBLISHED_CRASH_INPUTS[name]
    built = Built({k: v.copy() for k, v in inputs.items()}, dict(attrs), "reject", arg)
    run = {
        "raw": lambda: getattr(fbnops.raw_ops, op_type)(**built.inputs, **built.attrs),
        "graph": lambda: surfaces.run_graph(op_type, built),
        "java": lambda: surfaces.run_java(op_type, built),
        "cc": lambda: surfaces.run_cc(op_type, built),
        "runfile": lambda: surfaces.run_runfile(op_type, built),
    }[surface]
    try:
        out = run()
    except Exception as e:  # the surface's error model
        from bindings_mirror import java
        from fbnops.errors import OpError

        assert isinstance(e, (OpError, java.TensorFlowException, ValueError)), type(e)
        assert any(n in str(e) for n in surfaces.alias_names(arg)), str(e)
        return
    assert surface == "cc" and isinstance(out, str), f"{surface} accepted {name}"  # C++: a non-OK Status
    assert out.startswith("INVALID_ARGUMENT") and any(n in out for n in surfaces.alias_names(arg)), out


def test_run_isolated_reports_each_way_a_call_can_end():
    from fbnops.testing import run_isolated

    assert run_isolated("result = 6 * 7").value == 42
    crash = run_isolated("import ctypes; ctypes.string_at(0)", timeout=60)
    assert crash.kind == "crash" and crash.signal == "SIGSEGV"
    assert run_isolated("import time; time.sleep(60)", timeout=2).kind == "hang"
    typed = run_isolated("from attacks.helpers import raw_grad; raw_grad(scale=None)", timeout=60)
    assert typed.kind == "error" and typed.typed, typed
    untyped = run_isolated("raise KeyError('k')", timeout=60)
    assert untyped.kind == "error" and not untyped.typed and untyped.error_type == "builtins.KeyError"
    assert run_isolated("raise KeyError('k')", typed=(KeyError,), timeout=60).typed
