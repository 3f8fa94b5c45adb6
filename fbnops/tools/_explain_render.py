"""How an :class:`~fbnops.tools.explain.Explanation` reads: terminal text, Markdown with LaTeX, JSON."""

from __future__ import annotations

import numpy as np

_SECTIONS = (("Forward", "FusedBatchNormV3", "forward"), ("Gradient", "FusedBatchNormGradV3", "gradient"))


def _rows(value: np.ndarray, label: bool = True) -> list[str]:
    fmt = {"float_kind": lambda v: f"{v:+.5f}"}
    if value.ndim == 1:
        return [np.array2string(value, formatter=fmt, max_line_width=200)]
    return [(f"c={c}: " if label else "") + np.array2string(row, formatter=fmt, max_line_width=10_000)
            for c, row in enumerate(value)]  # fmt: skip


def _table(value: np.ndarray) -> list[str]:
    """A channel vector as one row with a column per channel; a (C, n) array as a row per channel."""
    if value.ndim == 1:
        cells = [f"{v:+.5f}" for v in value]
        head = "| c | " + " | ".join(map(str, range(value.size))) + " |"
        return [head, "|---" * (value.size + 1) + "|", "| value | " + " | ".join(cells) + " |"]
    rows = [f"| {c} | `{row}` |" for c, row in enumerate(_rows(value, label=False))]
    return ["| c | the channel's elements, in memory order |", "|---|---|", *rows]


def _check_line(c) -> str:
    return (f"  {c.output:16s} = {c.step:15s} max |diff| {c.max_abs_diff:.1e} <= {c.tolerance:.0e}  "
            f"{'OK' if c.ok else 'FAILED'}")  # fmt: skip


def to_text(e) -> str:
    lines = [e.title(), ""]
    for title, op, attr in _SECTIONS:
        lines.append(f"{title} ({op})")
        for s in getattr(e, attr):
            lines += [f"  {s.name:16s} {s.text}", f"  {'':16s} ({s.meaning})"]
            lines += [f"  {'':16s} {row}" for row in _rows(s.value)]
        lines.append("")
    lines += [f"Checked against the {e.backend} kernels:", *map(_check_line, e.checks)]
    return "\n".join(lines) + "\n"


def to_markdown(e, per_channel) -> str:
    lines = [f"*{e.title()}*", "", "### Inputs", ""]
    for name, value in e.inputs.items():
        shown = per_channel(value, e.data_format) if value.ndim > 1 else value
        lines += [f"**{name}**", "", *_table(shown.astype(np.float64)), ""]
    for title, op, attr in _SECTIONS:
        lines += [f"### {title}: `{op}`", ""]
        for s in getattr(e, attr):
            lines += [f"**{s.name}**: {s.meaning}.", "", "$$", s.latex, "$$", ""]
            lines += [f"$n = {s.value[0]:.0f}$" if s.value.size == 1 else "\n".join(_table(s.value)), ""]
    lines += [f"### Checked against the `{e.backend}` kernels", "",
              "| kernel output | step | max abs diff | tolerance | |", "|---|---|---|---|---|"]  # fmt: skip
    lines += [f"| `{c.output}` | {c.step} | {c.max_abs_diff:.1e} | {c.tolerance:.0e} | {'OK' if c.ok else 'FAILED'} |"
              for c in e.checks]  # fmt: skip
    return "\n".join(lines) + "\n"


def to_dict(e) -> dict:
    def steps(ss):
        return [{"name": s.name, "formula": s.text, "latex": s.latex, "meaning": s.meaning, "value": s.value.tolist()}
                for s in ss]  # fmt: skip

    checks = [{"output": c.output, "step": c.step, "max_abs_diff": c.max_abs_diff, "tolerance": c.tolerance,
               "ok": c.ok} for c in e.checks]  # fmt: skip
    return {"shape": list(e.shape), "data_format": e.data_format, "dtype": e.dtype, "epsilon": e.epsilon,
            "is_training": e.is_training, "backend": e.backend, "inputs": {k: v.tolist() for k, v in e.inputs.items()},
            "forward": steps(e.forward), "gradient": steps(e.gradient), "checks": checks, "ok": e.ok}  # fmt: skip
