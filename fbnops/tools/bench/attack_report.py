"""The reliability page's hostile-input figures: one run of the attacks as a JSON document, and its tables.

The attacks themselves are test functions under ``tests/attacks/`` (each runs in its own process);
``benchmarks/reliability.py --json docs/assets/reliability.json`` runs them all and writes the
document :func:`summary` builds; the docs build renders it with :func:`markdown`.  A verdict is
``pass`` or one of :data:`VERDICTS`.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from typing import Any

from fbnops._version import __version__

__all__ = ["CLASSES", "VERDICTS", "summary", "markdown"]

CLASSES = {
    1: "memory safety of the mirrors",
    2: "fork",
    3: "memory guard",
    4: "thread counts",
    5: "malformed files",
    6: "silent wrong answers",
    7: "typed errors",
    8: "nothing lost",
}
VERDICTS = ("crash", "hang", "untyped", "wrong type", "wrong")  # every verdict but "pass" is a failure


def _outcome_line(outcome: Any) -> str:
    if outcome.kind == "error":
        text = f"{outcome.error_type}: {outcome.message}"
    elif outcome.kind == "crash":
        text = f"crash ({outcome.signal or 'no report'})"
    else:
        text = outcome.kind
    return " ".join(text.split())[:300]


def summary(results: Sequence[tuple[Any, str, Any]], seconds: float, jobs: int) -> dict:
    """The JSON document of one run from ``(attack, verdict, outcome)`` triples: per-class counts and
    every attack's verdict (an attack has ``cls``, ``name``, ``expect``, ``raises``; an outcome is a
    :class:`fbnops.testing.Outcome`)."""
    classes: dict[str, dict] = {}
    for attack, verdict, _ in results:
        row = classes.setdefault(str(attack.cls), {"name": CLASSES[attack.cls], "tried": 0, "pass": 0,
                                                   **dict.fromkeys(VERDICTS, 0)})  # fmt: skip
        row["tried"] += 1
        row[verdict] += 1
    return {
        "fbnops": __version__,
        "python": platform.python_version(),
        "cores": len(os.sched_getaffinity(0)),
        "jobs": jobs,
        "seconds": round(seconds, 1),
        "classes": dict(sorted(classes.items(), key=lambda kv: int(kv[0]))),
        "attacks": [
            {
                "class": a.cls,
                "name": a.name,
                "expect": a.expect,
                "raises": a.raises,
                "verdict": v,
                "outcome": _outcome_line(o),
            }
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
