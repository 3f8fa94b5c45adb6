"""Hostile inputs, one per attack, in the eight classes of issue 15; each runs in its own process.

An :class:`Attack` is source code (run after :data:`PRELUDE`, which imports the helpers of
:mod:`.attack_helpers`) and what must happen:

* ``"error"``  - the input is hostile: the call must raise a *typed* error (an ``fbnops`` or
  ``bindings_mirror`` exception class: ``OpError``, ``RunFileError``, ``HRESULTError``, dnnl
  ``error``, tf-java exceptions);
* ``"ok"``     - the call must finish, and the code's own assertions check the numbers (an
  ``AssertionError`` is a wrong result);
* ``"either"`` - a typed error or a finish that passes the code's assertions (a documented clamp).

:func:`run_attack` classifies the outcome: ``pass``, ``crash``, ``hang``, ``untyped`` or ``wrong``.
"""

from __future__ import annotations

from ._attack_base import CLASSES, PRELUDE, TYPED, Attack
from ._attacks_inputs import INPUT_ATTACKS
from ._attacks_outputs import OUTPUT_ATTACKS
from .isolated import Outcome, run_isolated

__all__ = ["Attack", "ATTACKS", "CLASSES", "PRELUDE", "run_attack"]

ATTACKS: list[Attack] = [*INPUT_ATTACKS, *OUTPUT_ATTACKS]


def run_attack(attack: Attack, timeout: float | None = None) -> tuple[str, Outcome]:
    """``(verdict, outcome)``: ``pass``, ``crash``, ``hang``, ``untyped`` or ``wrong``."""
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
        return ("wrong" if attack.expect == "ok" else "pass"), outcome
    return ("wrong" if attack.expect == "error" else "pass"), outcome
