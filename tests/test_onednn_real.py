"""The oneDNN Graph mirror against real oneDNN, case by case (tests/oracles/onednn).

Each case of the table (random and edge cases) runs in its own process on the real library, through
``harness.cpp`` (compiled once and cached), and on the mirror.  They must agree on what is accepted
or rejected, at which stage, with which status, the inferred output dims and the numbers.  The
mirror follows oneDNN 3.13; the expected differences are named, never silent:

* ``crash``: the real library crashes, aborts or throws a non-dnnl exception; the mirror refuses.
* ``choice``: a documented mirror decision (a case's ``mirror_choice``).
* ``isa``: bf16/f16 partitions that the real library does not offer on this CPU (fidelity point O14).
* ``version``: oneDNN 3.2 behaves differently from 3.13 (a case's ``versions``).

Where the real library cannot be compared (crash, choice, isa, version) the mirror's side is still
checked: the stages and statuses the case expects of it (``mirror_expect``), and, when it runs, its
numbers against a float64 reference of the op (:func:`reference`). ``FBNOPS_ONEDNN_TABLE=<file.md>``
writes the case / real status / mirror status / class / max difference table.

Needs real oneDNN: ``pip install 'fbnops[onednn]'`` (3.2), and/or ``FBNOPS_ONEDNN_PREFIX`` pointing at a
prefix with the 3.13 wheels (``onednn``/``onednn-devel`` 2026.1.0).  Without them the tests skip.
"""

from __future__ import annotations

import os
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from fbnops.testing import extras

sys.path.insert(0, str(Path(__file__).parent / "oracles" / "onednn"))

import onednn_cases as oc  # noqa: E402
import onednn_oracle as oracle  # noqa: E402
import onednn_table as table  # noqa: E402

TOLERANCE = {oc.F32: 2e-6, oc.BF16: 2e-2, oc.F16: 2e-3}
STAGES = ("add_op", "supported", "compile", "execute")
RUNS = "add_op 0, supported 1, compile 0, execute 0"


def _install(version: str) -> oracle.Install:
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed: the real-oneDNN oracle harness cannot be compiled")
    found = oracle.installs()
    if version not in found:
        pytest.skip(
            extras.reason("onednn")
            if version == "3.2"  # the extra's wheels; 3.13 is not on PyPI's extra
            else oracle.not_found(version)
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


def reference(case: oc.Case) -> dict[int, np.ndarray]:
    """The op's outputs in float64 from the case's inputs (oneDNN's definitions: biased statistics,
    momentum 0.5 by default, the 1-output backward ``diff_dst / sqrt(variance + eps)``)."""
    attrs = {aid: value for _, aid, value in case.attrs}
    eps, fmt, momentum = float(attrs[oc.EPS]), attrs.get(oc.DATA_FORMAT, "NXC"), float(attrs.get(oc.MOMENTUM, 0.5))
    a = {lt.tid: np.asarray(case.data[lt.tid], np.float64).reshape(lt.dims) for lt in case.ins}
    ids = [lt.tid for lt in case.ins]
    x = a[ids[0]]
    axis = 1 if fmt == "NCX" else x.ndim - 1
    red = tuple(i for i in range(x.ndim) if i != axis)
    c = x.shape[axis]

    def per_channel(v):
        return v[:c].reshape([c if i == axis else 1 for i in range(x.ndim)])

    outs = [lt.tid for lt in case.outs]
    if case.kind == oc.BWD:
        dy, mean, var = a[ids[1]], per_channel(a[ids[2]]), per_channel(a[ids[3]])
        rstd = 1 / np.sqrt(var + eps)
        if len(outs) == 1:
            return {outs[0]: dy * rstd}
        gamma = per_channel(a[ids[4]])
        xhat = (x - mean) * rstd
        m = x.size // c if c else 0
        dbeta, dgamma = dy.sum(red), (dy * xhat).sum(red)
        dx = gamma * rstd * (dy - per_channel(dbeta) / max(m, 1) - xhat * per_channel(dgamma) / max(m, 1))
        return dict(zip(outs, (dx, dgamma, dbeta), strict=True))
    if case.kind == oc.INFER:  # src, gamma, beta, mean, variance
        g, b, mean, var = (per_channel(a[i]) for i in ids[1:5])
        return {outs[0]: g * (x - mean) / np.sqrt(var + eps) + b}
    old_mean, old_var = a[ids[1]][:c], a[ids[2]][:c]  # forward training: src, mean, variance, gamma, beta
    g, b = (per_channel(a[i]) for i in ids[3:5]) if len(ids) == 5 else (1.0, 0.0)
    mean, var = x.mean(red), x.var(red)
    y = g * (x - per_channel(mean)) / np.sqrt(per_channel(var) + eps) + b
    running = (momentum * old_mean + (1 - momentum) * mean, momentum * old_var + (1 - momentum) * var)
    return dict(zip(outs, (y, *running, mean, var), strict=True))


def _mirror_numbers_differ(case: oc.Case, mirror: oracle.Outcome) -> str | None:
    """The mirror's outputs against :func:`reference`, where the real library cannot say."""
    dtypes = {lt.tid: lt.dt for lt in case.outs}
    for tid, want in reference(case).items():
        got = oc.decode(mirror.outputs.get(tid, b""), dtypes[tid])
        if got.size != want.size or mirror.out_dims.get(tid) != list(want.shape):
            return f"mirror output {tid}: dims {mirror.out_dims.get(tid)}, the op gives {list(want.shape)}"
        scale = max(1.0, float(np.abs(want).max(initial=0.0)))
        err = float(np.abs(got - want.ravel()).max(initial=0.0)) / scale
        if not err <= TOLERANCE[dtypes[tid]]:
            return f"mirror output {tid}: scaled error {err:.3g} against the float64 reference"
    return None


def _mirror_side(case: oc.Case, mirror: oracle.Outcome, expect: str | None) -> str | None:
    """Where the real library cannot be compared: the mirror's own stage, status and numbers."""
    got = summary(mirror)
    if expect is not None and got != expect:
        return f"mirror: {got}, expected {expect}"
    return _mirror_numbers_differ(case, mirror) if mirror.accepted else None


def classify(case: oc.Case, version: str, real: oracle.Outcome, mirror: oracle.Outcome) -> tuple[str, str]:
    """('agree'|'crash'|'choice'|'isa'|'version'|'DISAGREE', detail)."""
    got, want = summary(mirror), summary(real)
    mirror_refused = not mirror.accepted
    if want == "crash":
        if not mirror_refused:
            return "DISAGREE", f"real crashes, the mirror runs ({got})"
        detail = _mirror_side(case, mirror, case.mirror_expect)
        return ("DISAGREE", detail) if detail else ("crash", want)
    if case.mirror_choice:
        detail = _mirror_side(case, mirror, case.mirror_expect)
        if mirror.accepted != case.mirror_accepts:
            detail = f"mirror: {got}, against its documented choice"
        return ("DISAGREE", detail) if detail else ("choice", case.mirror_choice)
    data_dt = case.ins[0].dt
    if data_dt in (oc.BF16, oc.F16) and (real.stages.get("supported") == 0 or real.stages.get("compile") == 3):
        detail = _mirror_side(case, mirror, RUNS)  # the mirror runs every spec combination
        name = "bf16" if data_dt == oc.BF16 else "f16"
        return ("DISAGREE", detail) if detail else ("isa", f"real: {want} (no {name} kernel on this CPU)")
    if version in case.versions:
        if want != case.versions[version]:
            return "DISAGREE", f"expected {case.versions[version]}"
        detail = _mirror_side(case, mirror, case.mirror_expect)
        return ("DISAGREE", detail) if detail else ("version", f"{version}: {want}")
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
    rows = ["| case | real status | mirror status | class | max scaled diff |", "|---|---|---|---|---|"]
    for case, real in zip(cases, reals, strict=True):
        mirror = oc.run_mirror(case)
        kind, detail = classify(case, version, real, mirror)
        tally[kind] = tally.get(kind, 0) + 1
        if kind == "DISAGREE":
            disagreements.append(f"{case.name}: {detail}")
        rows.append(f"| {case.name} | {summary(real)} | {summary(mirror)} | {kind} | {_max_diff(case, real, mirror)} |")
    with capsys.disabled():
        print(f"\noneDNN {install.name}: {len(cases)} cases compared; {tally}")
    if os.environ.get("FBNOPS_ONEDNN_TABLE"):  # the fidelity page's table: FBNOPS_ONEDNN_TABLE=<file.md>
        Path(os.environ["FBNOPS_ONEDNN_TABLE"]).write_text(
            f"oneDNN {install.name}: {len(cases)} cases; {tally}\n\n" + "\n".join(rows) + "\n"
        )
    assert not disagreements, "\n".join(disagreements)
    assert tally.get("agree", 0) >= len(cases) * 2 // 3  # the table is mostly cases both run


def _max_diff(case: oc.Case, real: oracle.Outcome, mirror: oracle.Outcome) -> str:
    """The largest scaled difference of the numbers compared: real vs mirror, else mirror vs float64."""
    if not mirror.accepted:
        return "-"
    dtypes = {lt.tid: lt.dt for lt in case.outs}
    if real.accepted and real.out_dims == mirror.out_dims:
        pairs = [(oc.decode(real.outputs[t], dtypes[t]), oc.decode(mirror.outputs.get(t, b""), dtypes[t]))
                 for t in real.outputs]  # fmt: skip
    else:
        pairs = [(w.ravel(), oc.decode(mirror.outputs.get(t, b""), dtypes[t])) for t, w in reference(case).items()]
    worst = 0.0
    for want, got in pairs:
        if want.size and want.size == got.size:
            both = ~(np.isnan(want) & np.isnan(got))
            scale = max(1.0, float(np.nanmax(np.abs(want), initial=0.0)))
            worst = max(worst, float(np.nanmax(np.abs(want - got)[both], initial=0.0)) / scale)
    return f"{worst:.1e}"


def test_table_covers_the_fidelity_points():
    names = " ".join(c.name for c in table.table())
    for point in ("positional strides", "bf16 statistics", "momentum on backward", "two outputs", "rank 6", "rank 3"):
        assert point in names, point
    assert len(table.table()) >= 100
    undefined = [c.name for c in table.table() if c.mirror_choice and not c.mirror_expect]
    assert not undefined, f"choice cases without the mirror's expected stages: {undefined}"
