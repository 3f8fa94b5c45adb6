"""``fbnops exercise``: every exercise accepts its solution and rejects the typical wrong answers.

The solutions live in ``tests/exercise_solutions/`` (not in the package). Each wrong answer is
the solution with one typical mistake edited in; the grade must name the step (or output) where
it first shows, and the hint must say which mistake it is.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fbnops.tools import exercise

SOLUTIONS = Path(__file__).parent / "exercise_solutions"


@pytest.mark.parametrize("name", sorted(exercise.EXERCISES))
def test_each_exercise_accepts_its_solution(name):
    report = exercise.check(SOLUTIONS / f"{name}.py")
    assert report.ok, str(report)
    assert len(report.checked) >= 1


# (exercise, text in the solution, the mistake put in its place, what the grade must name, words of the hint)
WRONG_ANSWERS = [
    ("forward", "return (xc**2).mean(axis=_others(x, data_format))",
     "return (xc**2).sum(axis=_others(x, data_format)) / (count(x, data_format) - 1)",
     "channel_variance()", "Bessel-corrected"),
    ("forward", "return 1 if data_format.startswith(\"NC\") else ndim - 1", "return ndim - 1",
     "count()", "data_format says where the channels are"),
    ("forward", "return x.size // x.shape[_axis(data_format, x.ndim)]", "return x.size", "count()", "every value"),
    ("forward", "return variance * n / max(n - 1, 1)", "return variance * n / (n - 1)", "bessel()", "max(n - 1, 1)"),
    ("forward", "return 1 / np.sqrt(variance + epsilon)", "return 1 / np.sqrt(variance)", "rstd()", "epsilon"),
    ("forward", "x.astype(np.float64).mean(axis=_others(x, data_format))",
     "np.nanmean(x.astype(np.float64), axis=_others(x, data_format))", "channel_mean()", "NaN"),
    ("training_gradient",
     "dx = dx + dx_via_mean(x, scale, r, s1, n, data_format) + dx_via_variance(x, mean, scale, r, s2, n, data_format)",
     "dx = dx + dx_via_variance(x, mean, scale, r, s2, n, data_format)",
     "gradient() -> x_backprop", "through the mean is missing"),
    ("training_gradient",
     "dx = dx + dx_via_mean(x, scale, r, s1, n, data_format) + dx_via_variance(x, mean, scale, r, s2, n, data_format)",
     "dx = dx + dx_via_mean(x, scale, r, s1, n, data_format)",
     "gradient() -> x_backprop", "through the variance is missing"),
    ("training_gradient", "return dy.astype(np.float64).sum(axis=_others(dy, data_format))",
     "return dy.astype(np.float64).mean(axis=_others(dy, data_format))", "sum_dy()", "mean of dy"),
    ("training_gradient", "return 1 if data_format.startswith(\"NC\") else ndim - 1", "return ndim - 1",
     "sum_dy()", "data_format says where the channels are"),
    ("frozen_gradient", "scale_backprop(dy, x, mean, r, data_format)",
     "scale_backprop(dy, x, x.astype(np.float64).mean(axis=_others(x, data_format)), r, data_format)",
     "gradient() -> scale_backprop", "given (running) mean"),
    ("running_stats", "variance = xf.var(axis=others) * n / max(n - 1, 1)", "variance = xf.var(axis=others)",
     "update() -> batch_variance", "biased batch variance"),
    ("running_stats", "return (1 - factor) * np.asarray(running, np.float64) + factor * np.asarray(batch, np.float64)",
     "return factor * np.asarray(running, np.float64) + (1 - factor) * np.asarray(batch, np.float64)",
     "blend()", "reversed"),
    ("layout", "return np.moveaxis(x, 1, -1) if data_format.startswith(\"NC\") else x",
     "return np.transpose(x, (0, 3, 1, 2)) if data_format.startswith(\"NC\") else x",
     "to_channels_last()", "the other way"),
    ("layout", "return 1 if data_format.startswith(\"NC\") else ndim - 1", "return ndim - 1",
     "channel_axis()", "data_format says where the channels are"),
    ("cc_builder", "cc.ops.FusedBatchNormV3.Epsilon(0.001)", "cc.ops.FusedBatchNormV3.Epsilon(0.01)",
     "node 'bn'", "Attrs"),
    ("cc_builder", "bn.reserve_space_3,", "bn.y,", "node 'bn_grad'", "reserve spaces"),
    ("java_builder", 'tf.withName("dy")', 'tf.withName("dY")', "node 'dy'", "name each node"),
]  # fmt: skip


@pytest.mark.parametrize("name, right, wrong, where, hint", WRONG_ANSWERS)
def test_each_typical_wrong_answer_is_rejected_where_it_first_shows(tmp_path, name, right, wrong, where, hint):
    source = (SOLUTIONS / f"{name}.py").read_text()
    assert right in source, f"the solution of {name} changed: update this test's edit"
    answer = tmp_path / f"{name}.py"
    answer.write_text(source.replace(right, wrong))
    report = exercise.check(answer)
    assert not report.ok
    assert report.mismatch.what == where, str(report)
    assert hint in report.mismatch.hint, str(report)
    assert "expected" in report.mismatch.detail  # the values, not only a verdict


def test_the_grade_never_shows_the_solution(tmp_path):
    """Every hint and detail is about values and mistakes: no line of any solution appears in a report."""
    lines = {ln.strip() for p in SOLUTIONS.glob("*.py") for ln in p.read_text().splitlines() if "return" in ln}
    for name, right, wrong, *_ in WRONG_ANSWERS:
        answer = tmp_path / f"{name}.py"
        answer.write_text((SOLUTIONS / f"{name}.py").read_text().replace(right, wrong))
        text = str(exercise.check(answer))
        assert not any(ln in text for ln in lines if len(ln) > 12), text


def fbnops(*args, cwd):
    return subprocess.run([sys.executable, "-m", "fbnops.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)  # fmt: skip


def test_the_command_lists_starts_and_checks(tmp_path):
    listed = fbnops("exercise", "list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert [ln.split()[0] for ln in listed.stdout.splitlines()] == list(exercise.EXERCISES)

    started = fbnops("exercise", "start", "forward", cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    template = (tmp_path / "forward.py").read_text()
    assert "def channel_variance(x, mean, data_format):" in template and "NotImplementedError" in template

    unfinished = fbnops("exercise", "check", "forward.py", cwd=tmp_path)
    assert unfinished.returncode == 1
    assert "count() is not written yet" in unfinished.stdout

    again = fbnops("exercise", "start", "forward", cwd=tmp_path)
    assert again.returncode == 2 and again.stderr.startswith("fbnops: error: ") and "exists" in again.stderr
    assert (tmp_path / "forward.py").read_text() == template  # never overwritten

    (tmp_path / "forward.py").write_text((SOLUTIONS / "forward.py").read_text())
    solved = fbnops("exercise", "check", "forward.py", cwd=tmp_path)
    assert solved.returncode == 0, solved.stdout + solved.stderr
    assert "all" in solved.stdout and "pass" in solved.stdout

    unknown = fbnops("exercise", "start", "backward", cwd=tmp_path)
    assert unknown.returncode == 2 and "forward" in unknown.stderr  # the list of names


def test_each_template_is_the_solutions_interface():
    """The functions a learner fills in are exactly those the solution defines (publicly)."""
    import ast

    for name, ex in exercise.EXERCISES.items():

        def public(text):
            return {n.name for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name[0] != "_"}

        assert public(ex.template()) == public((SOLUTIONS / f"{name}.py").read_text()), name
