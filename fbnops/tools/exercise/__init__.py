"""``fbnops exercise``: exercises that grade themselves.

    fbnops exercise list            one exercise a line, its name first
    fbnops exercise start NAME      writes NAME.py here: the functions to fill in, with docstrings
    fbnops exercise check FILE      0 when right; 1 with the first intermediate that differs

A NumPy exercise is graded step by step (the intermediates ``fbnops explain`` prints, each
called with the right inputs) and then end to end against the real op, on a grid of cases:
layouts, 16-bit dtypes, N = 1, a large offset, a NaN and an empty batch. A builder exercise
is graded by the graph it builds. A failure names what differs, where, the values and a hint:
never the solution (the solutions live in the project's tests, not in this package).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from . import _builders, _numeric
from ._grading import GRID, AnswerError, Mismatch, Report, load_answer, tolerance_for
from ._steps import Outputs, Step, context

__all__ = ["EXERCISES", "Exercise", "Report", "check", "start"]


@dataclass(frozen=True)
class Exercise:
    name: str
    summary: str
    steps: tuple[Step, ...] = ()
    outputs: Outputs | None = None
    training: bool = True
    extend: Callable[[dict, int], dict] | None = None  # adds an exercise's own expected values to a case
    grade_builder: Callable | None = None  # builder exercises: (module, path) -> Mismatch | None

    def template(self) -> str:
        text = resources.files(__package__).joinpath("templates", f"{self.name}.py.tmpl").read_text()
        return text.replace("{statement}", _builders.statement())

    def grade(self, path: Path) -> Report:
        report = Report(self.name)
        try:
            module = load_answer(path)
            if self.grade_builder:
                report.mismatch = self.grade_builder(module, path)
                report.checked.append("graph")
                return report
            for index, case in enumerate(GRID):
                ctx = context(case, self.training)
                ctx = self.extend(ctx, index) if self.extend else ctx
                for step in self.steps:
                    report.mismatch = step.grade(module, case, ctx, path)
                    report.checked.append(f"{step.function} / {case.name}")
                    if report.mismatch:
                        return report
            for case_index, case in enumerate(GRID):  # the whole function, once every step is right
                if self.outputs is None:
                    break
                ctx = context(case, self.training)
                ctx = self.extend(ctx, case_index) if self.extend else ctx
                report.mismatch = self.outputs.grade(module, case, ctx, path, tolerance_for(case.dtype))
                report.checked.append(f"{self.outputs.function} / {case.name}")
                if report.mismatch:
                    return report
        except AnswerError as e:
            report.mismatch = Mismatch(path.name, "-", f"  {e}", "fix this first; then check again")
        return report


EXERCISES = {
    e.name: e
    for e in (
        Exercise("forward", "batch norm's training forward: mean, biased variance, rstd, x_hat, y",
                 _numeric.FORWARD, _numeric.FORWARD_OUTPUTS),
        Exercise("training_gradient", "the gradient in training: the direct term and the two through the statistics",
                 _numeric.TRAINING_GRADIENT, _numeric.TRAINING_OUTPUTS),
        Exercise("frozen_gradient", "the gradient with frozen (running) statistics, is_training=False",
                 _numeric.FROZEN_GRADIENT, _numeric.FROZEN_OUTPUTS, training=False),
        Exercise("running_stats", "the running mean and variance update with exponential_avg_factor",
                 _numeric.RUNNING_STATS, _numeric.RUNNING_OUTPUTS, extend=_numeric.running_context),
        Exercise("layout", "channels-first to channels-last, and the kernels' (outer, C, inner) canonical view",
                 _numeric.LAYOUT, extend=_numeric.layout_context),
        Exercise("cc_builder", "build a forward + gradient graph with the TensorFlow C++ mirror",
                 grade_builder=_builders.grade_cc),
        Exercise("java_builder", "build the same graph with the TensorFlow Java mirror",
                 grade_builder=_builders.grade_java),
    )
}  # fmt: skip


class ExerciseError(Exception):
    """A usage mistake: an unknown exercise, a file that exists or cannot be read."""


def _exercise(name: str) -> Exercise:
    if name not in EXERCISES:
        raise ExerciseError(f"no exercise named {name!r}; the exercises are: {', '.join(EXERCISES)}")
    return EXERCISES[name]


def start(name: str, directory: Path = Path(".")) -> Path:
    """Write ``NAME.py`` (the template) into ``directory``; an existing file is never overwritten."""
    path = Path(directory) / f"{name}.py"
    text = _exercise(name).template()
    try:
        with open(path, "x", encoding="utf-8") as f:
            f.write(text)
    except FileExistsError:
        raise ExerciseError(f"{path} exists already: check it with 'fbnops exercise check {path}'") from None
    return path


def exercise_of(path: Path) -> Exercise:
    """The exercise a file answers: its ``EXERCISE = "name"`` line (the template has it)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ExerciseError(f"cannot read {path}: {e}") from None
    for line in text.splitlines():
        if line.startswith("EXERCISE = "):
            return _exercise(line.split("=", 1)[1].strip().strip("\"'"))
    return _exercise(Path(path).stem)


def check(path: Path) -> Report:
    """Grade the learner's file; ``report.ok`` and ``str(report)`` say the result."""
    return exercise_of(Path(path)).grade(Path(path))
