"""Fuzzed calls on every public entry, each in a crash-safe child process (tests/fuzz_harness.py).

CI runs >= 1,000 generated cases; FBNOPS_FUZZ_LONG=1 (or ``pytest --long``) runs >= 20,000.
Every case must end as 'accepted' (matching the float64 reference) or 'rejected' (the entry's
documented error type, with a message naming the argument) - never a crash, a hang, a wrong
answer or an undocumented error.
"""

from __future__ import annotations

import os

import pytest
from fuzz_harness import DTYPES, MUTATIONS, SURFACES, Runner, Tally
from helpers import PUBLISHED_CRASH_INPUTS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

LONG = os.environ.get("FBNOPS_FUZZ_LONG", "") not in ("", "0")
N_CASES = 20_000 if LONG else 1_200
TALLY = Tally()


@st.composite
def cases(draw):
    surface = draw(st.sampled_from(SURFACES))
    rank = 4 if surface in ("dml", "onednn") else draw(st.sampled_from([4, 5]))
    formats = {4: ["NHWC", "NCHW"], 5: ["NDHWC", "NCDHW"]}[rank]
    fmt = "NCHW" if surface in ("dml", "onednn") else draw(st.sampled_from(formats))
    return {
        "surface": surface,
        "shape": draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)),
        "data_format": fmt,
        "dtype": draw(st.sampled_from(DTYPES)),
        "is_training": draw(st.booleans()),
        "seed": draw(st.integers(0, 2**20)),
        "mutation": {"kind": draw(st.sampled_from(MUTATIONS)), "pick": draw(st.integers(0, 10_000))},
    }


@pytest.fixture(scope="module")
def runner():
    r = Runner(timeout=120)
    yield r
    r.close()


@settings(
    max_examples=N_CASES, deadline=None, database=None, derandomize=not LONG, suppress_health_check=list(HealthCheck)
)
@given(case=cases())
def test_fuzzed_call_is_accepted_or_rejected_properly(runner, case):
    outcome = runner.run(case)
    TALLY.add(case, outcome)
    assert outcome in ("accepted", "rejected"), (outcome, case)


def test_fuzz_volume_and_no_crash_or_hang():
    if TALLY.cases == 0:
        pytest.skip("the fuzz test did not run (deselected)")
    print(
        f"\nfuzz: {TALLY.cases} cases, {TALLY.accepted} accepted, {TALLY.rejected} rejected, "
        f"{len(TALLY.crashes)} crashes, {len(TALLY.hangs)} hangs; by surface {TALLY.by_surface}"
    )
    assert TALLY.cases >= (20_000 if LONG else 1_000)
    assert not TALLY.crashes and not TALLY.hangs and not TALLY.failures
    assert set(TALLY.by_surface) == set(SURFACES)
    assert TALLY.accepted > 100 and TALLY.rejected > 100


def test_runner_survives_a_segfault():
    """The harness itself: a child that dies is reported as a crash and replaced."""
    r = Runner(timeout=30)
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


# The published TensorFlow crash inputs (tests/helpers.py) through every TF-shaped surface.
@pytest.mark.parametrize("surface", ["raw", "graph", "java", "cc", "runfile"])
@pytest.mark.parametrize("name", list(PUBLISHED_CRASH_INPUTS))
def test_published_crash_inputs_are_rejected_on_every_surface(surface, name):
    import fuzz_harness as fh

    op_type, arg, inputs, attrs, _ = PUBLISHED_CRASH_INPUTS[name]
    built = fh.Built({k: v.copy() for k, v in inputs.items()}, dict(attrs), "reject", arg)
    run = {
        "raw": lambda: getattr(__import__("fbnops").raw_ops, op_type)(**built.inputs, **built.attrs),
        "graph": lambda: fh._run_graph(op_type, built),
        "java": lambda: fh._run_java(op_type, built),
        "cc": lambda: fh._run_cc(op_type, built),
        "runfile": lambda: fh._run_runfile(op_type, built),
    }[surface]
    try:
        out = run()
    except Exception as e:  # the surface's error model
        from bindings_mirror import java
        from fbnops.errors import OpError

        assert isinstance(e, (OpError, java.TensorFlowException, ValueError)), type(e)
        assert any(n in str(e) for n in fh._alias_names(arg)), str(e)
        return
    assert surface == "cc" and isinstance(out, str), f"{surface} accepted {name}"  # C++: a non-OK Status
    assert out.startswith("INVALID_ARGUMENT") and any(n in out for n in fh._alias_names(arg)), out
