"""Hostile inputs, one per attack, in the eight classes of issue 15; each runs in its own process.

An :class:`Attack` is source code (run after :data:`PRELUDE`, which imports the helpers of
:mod:`.attack_helpers`) and what must happen:

* ``"error"``  - the input is hostile: the call must raise the attack's documented error class
  (``raises``: ``InvalidArgumentError``, ``ResourceExhaustedError``, ``RunFileError``, DirectML's
  ``HRESULTError``, dnnl's ``error``, a tf-java exception ...), or a subclass of it;
* ``"ok"``     - the call must finish, and the code's own assertions check the numbers (an
  ``AssertionError`` is a wrong result);
* ``"either"`` - the documented error, or a finish that passes the code's assertions (a documented clamp).

:func:`run_attack` classifies the outcome: ``pass``, ``crash``, ``hang``, ``untyped`` (not one of
the project's error classes), ``wrong type`` (one of them, but not the documented one) or ``wrong``.
:func:`summary` turns the verdicts into the JSON document ``benchmarks/reliability.py --json``
writes (``docs/assets/reliability.json``), and :func:`markdown` into the docs page's figures.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence

from ._attack_base import CLASSES, PRELUDE, TYPED, Attack
from ._attacks_inputs import INPUT_ATTACKS
from ._attacks_outputs import OUTPUT_ATTACKS
from .isolated import Outcome, run_isolated

__all__ = ["Attack", "ATTACKS", "CLASSES", "PRELUDE", "VERDICTS", "markdown", "run_attack", "summary"]

ATTACKS: list[Attack] = [*INPUT_ATTACKS, *OUTPUT_ATTACKS]
VERDICTS = ("crash", "hang", "untyped", "wrong type", "wrong")  # every verdict but "pass" is a failure


def run_attack(attack: Attack, timeout: float | None = None) -> tuple[str, Outcome]:
    """``(verdict, outcome)``: ``pass`` or one of :data:`VERDICTS`."""
    outcome = run_isolated(
        PRELUDE + "\n" + attack.code,
        timeout=timeout or attack.timeout,
        typed=TYPED,
        memory_limit=16 << 30,
        env=dict(attack.env),
    )
    if outcome.kind in ("crash", "hang"):
        return outcome.kind, outcome
    if outcome.kind == "error":
        if outcome.error_type.endswith("AssertionError"):
            return "wrong", outcome
        if not outcome.typed:
            return "untyped", outcome
        if attack.expect == "ok":
            return "wrong", outcome
        return ("pass" if attack.raises_match(outcome.mro) else "wrong type"), outcome
    return ("wrong" if attack.expect == "error" else "pass"), outcome


def _outcome_line(outcome: Outcome) -> str:
    if outcome.kind == "error":
        text = f"{outcome.error_type}: {outcome.message}"
    elif outcome.kind == "crash":
        text = f"crash ({outcome.signal or 'no report'})"
    else:
        text = outcome.kind
    return " ".join(text.split())[:300]


def summary(results: Sequence[tuple[Attack, str, Outcome]], seconds: float, jobs: int) -> dict:
    """The JSON document of one run: per-class counts and every attack's verdict."""
    import fbnops

    classes: dict[str, dict] = {}
    for attack, verdict, _ in results:
        row = classes.setdefault(str(attack.cls), {"name": CLASSES[attack.cls], "tried": 0, "pass": 0,
                                                   **dict.fromkeys(VERDICTS, 0)})  # fmt: skip
        row["tried"] += 1
        row[verdict] += 1
    return {
        "fbnops": fbnops.__version__,
        "python": platform.python_version(),
        "cores": len(os.sched_getaffinity(0)),
        "jobs": jobs,
        "seconds": round(seconds, 1),
        "classes": dict(sorted(classes.items(), key=lambda kv: int(kv[0]))),
        "attacks": [
            {"class": a.cls, "name": a.name, "expect": a.expect, "raises": a.raises, "verdict": v,
             "outcome": _outcome_line(o)}
            for a, v, o in results
        ],  # fmt: skip
    }


def _expected(entry: dict) -> str:
    raises = f"`{entry['raises'].rsplit('.', 1)[-1]}`"
    return {"error": raises, "ok": "finishes; numbers checked", "either": f"{raises} or a documented clamp"}[
        entry["expect"]
    ]


def markdown(doc: dict) -> str:
    """The reliability page's figures from a :func:`summary` document."""
    head = "| # | class | tried | passed | crashes | hangs | untyped | wrong type | wrong |"
    lines = [
        f"Run of {len(doc['attacks'])} attacks at fbnops {doc['fbnops']} (Python {doc['python']}, "
        f"{doc['cores']} cores, `--jobs {doc['jobs']}`): {doc['seconds']:.0f} s.",
        "",
        head,
        "|---|---|---|---|---|---|---|---|---|",
    ]
    totals = dict.fromkeys(("tried", "pass", *VERDICTS), 0)
    for number, row in doc["classes"].items():
        lines.append(f"| {number} | {row['name']} | " + " | ".join(str(row[k]) for k in totals) + " |")
        for k in totals:
            totals[k] += row[k]
    lines.append("| | **total** | " + " | ".join(f"**{totals[k]}**" for k in totals) + " |")
    failing = [e for e in doc["attacks"] if e["verdict"] != "pass"]
    lines += ["", f"**{len(failing)} attacks fail.**" if failing else "Every attack ends as its record says.", ""]
    if failing:
        lines += ["| class | attack | verdict | outcome |", "|---|---|---|---|"]
        lines += [f"| {e['class']} | {e['name']} | {e['verdict']} | `{e['outcome']}` |" for e in failing]
        lines.append("")
    lines += ['??? note "Every attack, and what it must end with"', ""]
    lines += ["    | class | attack | must end with | verdict |", "    |---|---|---|---|"]
    lines += [
        f"    | {e['class']} | {e['name'].replace('|', chr(92) + '|')} | {_expected(e)} | {e['verdict']} |"
        for e in doc["attacks"]
    ]
    return "\n".join(lines) + "\n"
