"""The oneDNN Graph mirror against real oneDNN, case by case (tests/oracles/onednn).

Each case of the table (random and edge cases) runs in its own process on the real library, through
``harness.cpp`` (compiled once and cached), and on the mirror.  They must agree on what is accepted
or rejected, at which stage, with which status, the inferred output dims and the numbers.  The
mirror follows oneDNN 3.13; the expected differences are named, never silent:

* ``crash``: the real library crashes, aborts or throws a non-dnnl exception; the mirror refuses.
* ``choice``: a documented mirror decision (a case's ``mirror_choice``).
* ``isa``: bf16/f16 partitions that the real library does not offer on this CPU (fidelity point O14).
* ``version``: oneDNN 3.2 behaves differently from 3.13 (a case's ``versions``).

Needs real oneDNN: ``pip install 'fbnops[onednn]'`` (3.2), and/or ``FBNOPS_ONEDNN_PREFIX`` pointing at a
prefix with the 3.13 wheels (``onednn``/``onednn-devel`` 2026.1.0).  Without them the tests skip.
"""

from __future__ import annotations

import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "oracles" / "onednn"))

import onednn_cases as oc  # noqa: E402
import onednn_oracle as oracle  # noqa: E402
import onednn_table as table  # noqa: E402

TOLERANCE = {oc.F32: 2e-6, oc.BF16: 2e-2, oc.F16: 2e-3}
STAGES = ("add_op", "supported", "compile", "execute")


def _install(version: str) -> oracle.Install:
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed: the real-oneDNN oracle harness cannot be compiled")
    found = oracle.installs()
    if version not in found:
        pytest.skip(
            f"real oneDNN {version} not found (have {sorted(found) or 'none'}): pip install 'fbnops[onednn]' "
            "for 3.2, or FBNOPS_ONEDNN_PREFIX=<prefix with the onednn 2026.1.0 wheels> for 3.13"
        )
    return found[version]


def summary(outcome: oracle.Outcome) -> str:
    """The stages reached, e.g. 'add_op 0, supported 1, compile 2'; or 'crash'."""
    if outcome.crashed or -1 in outcome.stages.values():
        return "crash"
    return ", ".join(f"{k} {outcome.stages[k]}" for k in STAGES if k in outcome.stages)


def _numbers_differ(case: oc.Case, real: oracle.Outcome, mirror: oracle.Outcome) -> str | None:
    if real.out_dims != mirror.out_dims:
        return f"output dims {real.out_dims} vs mirror {mirror.out_dims}"
    dtypes = {lt.tid: lt.dt for lt in case.outs}
    for tid, raw in real.outputs.items():
        r, m = oc.decode(raw, dtypes[tid]), oc.decode(mirror.outputs.get(tid, b""), dtypes[tid])
        if r.shape != m.shape:
            return f"output {tid}: {r.size} values vs mirror {m.size}"
        scale = max(1.0, float(np.nanmax(np.abs(r), initial=0.0)))
        err = np.abs(r - m) / scale
        bad = ~((np.isnan(r) & np.isnan(m)) | (err <= TOLERANCE[dtypes[tid]]))
        if bad.any():
            return f"output {tid}: scaled error {np.nanmax(err):.3g} at {np.flatnonzero(bad)[:4]}"
    return None


def classify(case: oc.Case, version: str, real: oracle.Outcome, mirror: oracle.Outcome) -> tuple[str, str]:
    """('agree'|'crash'|'choice'|'isa'|'version'|'DISAGREE', detail)."""
    got, want = summary(mirror), summary(real)
    mirror_refused = not mirror.accepted
    if want == "crash":
        return ("crash", want) if mirror_refused else ("DISAGREE", f"real crashes, the mirror runs ({got})")
    if case.mirror_choice:
        ok = mirror.accepted if case.mirror_accepts else mirror_refused
        return ("choice", case.mirror_choice) if ok else ("DISAGREE", f"mirror: {got}, against its documented choice")
    data_dt = case.ins[0].dt
    if data_dt in (oc.BF16, oc.F16) and (real.stages.get("supported") == 0 or real.stages.get("compile") == 3):
        return "isa", f"real: {want} (no {'bf16' if data_dt == oc.BF16 else 'f16'} kernel on this CPU)"
    if version in case.versions:
        ok = want == case.versions[version]
        return ("version", f"{version}: {want}") if ok else ("DISAGREE", f"expected {case.versions[version]}")
    if got != want:
        return "DISAGREE", f"real: {want}; mirror: {got}"
    if real.accepted:
        detail = _numbers_differ(case, real, mirror)
        if detail:
            return "DISAGREE", detail
    return "agree", want


@pytest.mark.parametrize("version", ["3.13", "3.2"])
def test_mirror_agrees_with_real_onednn(version, capsys):
    install = _install(version)
    binary = oracle.build(install)
    cases = table.table()
    with ThreadPoolExecutor(2) as pool:  # one process per case
        reals = list(pool.map(lambda c: oracle.run(binary, install, c.harness_text()), cases))
    tally: dict[str, int] = {}
    disagreements = []
    for case, real in zip(cases, reals, strict=True):
        kind, detail = classify(case, version, real, oc.run_mirror(case))
        tally[kind] = tally.get(kind, 0) + 1
        if kind == "DISAGREE":
            disagreements.append(f"{case.name}: {detail}")
    with capsys.disabled():
        print(f"\noneDNN {install.name}: {len(cases)} cases compared; {tally}")
    assert not disagreements, "\n".join(disagreements)
    assert tally.get("agree", 0) >= len(cases) * 2 // 3  # the table is mostly cases both run


def test_table_covers_the_fidelity_points():
    names = " ".join(c.name for c in table.table())
    for point in ("positional strides", "bf16 statistics", "momentum on backward", "two outputs", "rank 6", "rank 3"):
        assert point in names, point
    assert len(table.table()) >= 100
