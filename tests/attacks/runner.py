"""The attack record, the decorator that makes an attack a test, and the runner.

An attack is a function in one of this package's ``test_attack_*.py`` modules, decorated with
:func:`attack`: its class (issue 15's eight), a name, and how it must end:

* ``"error"``  - the input is hostile: the call must raise the documented error class ``raises``
  (``InvalidArgumentError``, ``ResourceExhaustedError``, ``RunFileError``, DirectML's ``HRESULTError``,
  dnnl's ``error``, a tf-java exception ...), or a subclass of it;
* ``"ok"``     - the call must finish, and the function's own assertions check the numbers (an
  ``AssertionError`` is a wrong result);
* ``"either"`` - the documented error, or a finish that passes the function's assertions (a clamp).

A family of attacks is one function with :class:`Variant` arguments.  The decorated name is a pytest
test, parametrized by its :class:`Attack` records; each run calls the function in a fresh process
(:func:`fbnops.testing.run_isolated`), so a segfault or a hang is a verdict, not a dead test run.
:func:`run_attack` classifies the outcome: ``pass``, ``crash``, ``hang``, ``untyped`` (not one of the
project's error classes), ``wrong type`` (one of them, but not the documented one) or ``wrong``.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from fbnops.testing import extras
from fbnops.testing.isolated import Outcome, run_isolated
from fbnops.tools.bench.attack_report import CLASSES, VERDICTS

__all__ = ["Attack", "Variant", "attack", "all_attacks", "run_attack", "CLASSES", "VERDICTS"]

TYPED = ("fbnops.", "bindings_mirror.")  # the project's error classes (the mirrors raise their APIs' own)

# The documented error classes the attacks name (their defining module and name, as the isolated
# process reports an exception's classes).
INVALID_ARGUMENT = "fbnops.framework.errors.InvalidArgumentError"
RESOURCE_EXHAUSTED = "fbnops.framework.errors.ResourceExhaustedError"
NOT_FOUND = "fbnops.framework.errors.NotFoundError"
RUN_FILE_ERROR = "fbnops.tools.runfile.RunFileError"  # names the file, line:column and field
RUN_FILE_TOO_BIG = "fbnops.tools.runfile.RunFileResourceError"  # a RunFileError and a ResourceExhaustedError
HRESULT_ERROR = "bindings_mirror.directml.HRESULTError"  # E_INVALIDARG, E_OUTOFMEMORY ...
DNNL_ERROR = "bindings_mirror.onednn_graph.error"  # dnnl::error with its status
JAVA_ILLEGAL_ARGUMENT = "bindings_mirror.java.exceptions.IllegalArgumentException"  # TFInvalidArgumentException too

RELIABILITY_JSON = Path(__file__).resolve().parents[2] / "docs" / "assets" / "reliability.json"


@dataclass(frozen=True)
class Attack:
    """One hostile input: its class, a name, the function (and arguments) that makes the call, how it must end."""

    cls: int
    name: str
    module: str
    function: str
    args: tuple = ()
    expect: str = "error"  # "error" | "ok" | "either"
    raises: str = ""  # "error"/"either": the documented error class ("module.Class"); a subclass passes too
    timeout: float = 120.0
    env: tuple = ()  # (name, value) pairs set in the attack's process; a value of None unsets one
    extra: str = ""  # the optional extra the attack needs (absent: the test skips with its reason)

    def raises_match(self, mro: list[str]) -> bool:
        """True if an exception whose classes are ``mro`` ("module.Class" names) is the documented error."""
        return self.raises in mro


@dataclass(frozen=True)
class Variant:
    """One member of a family of attacks: the name's fill, the function's arguments, its process's variables."""

    label: str
    args: tuple = ()
    env: tuple = ()
    extra: str = ""
    raises: str = ""  # this member's documented error, when it is not the family's


def call_attack(module: str, function: str, args: tuple):
    """Run in the attack's own process: import the attack's module and call its function."""
    target = getattr(importlib.import_module(module), function)
    return getattr(target, "body", target)(*args)


def run_attack(attack: Attack, timeout: float | None = None) -> tuple[str, Outcome]:
    """``(verdict, outcome)``: ``pass`` or one of :data:`VERDICTS`."""
    outcome = run_isolated(
        call_attack,
        attack.module,
        attack.function,
        attack.args,
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


def committed_verdicts() -> dict[tuple[int, str], str]:
    """What the docs page's figures (the committed run) say of each attack."""
    doc = json.loads(RELIABILITY_JSON.read_text())
    return {(e["class"], e["name"]): e["verdict"] for e in doc["attacks"]}


def check_attack(record: Attack) -> None:
    """The test of one attack: it ends as documented, and the committed run says the same of it."""
    if record.extra and not extras.have(record.extra):
        pytest.skip(extras.reason(record.extra))
    verdict, outcome = run_attack(record)
    assert verdict == "pass", f"{verdict} (expected {record.expect} {record.raises}): {outcome}"
    assert committed_verdicts().get((record.cls, record.name)) == verdict, (
        "docs/assets/reliability.json is stale: refresh it with benchmarks/reliability.py --json"
    )


def attack(
    cls: int,
    name: str,
    *,
    expect: str = "error",
    raises: str = "",
    timeout: float = 120.0,
    env: tuple = (),
    variants: Sequence[Variant] | None = None,
) -> Callable:
    """Make ``body`` an attack test.  ``variants``: a family, ``name`` a format string with ``{label}``;
    an attack that may raise must name the error class it documents."""
    if cls not in CLASSES:
        raise ValueError(f"attack {name!r}: class {cls} is not one of {sorted(CLASSES)}")
    if expect not in ("error", "ok", "either"):
        raise ValueError(f"attack {name!r}: expect must be 'error', 'ok' or 'either', got {expect!r}")
    if (expect == "ok") == bool(raises):
        raise ValueError(f"attack {name!r}: name the documented error (raises=...) exactly when it may raise")

    def wrap(body: Callable) -> Callable:
        records = [
            Attack(cls, name.format(label=v.label), body.__module__, body.__name__, v.args, expect,
                   v.raises or raises, timeout, env + v.env, v.extra)
            for v in (variants or [Variant("")])
        ]  # fmt: skip

        @pytest.mark.parametrize("record", records, ids=[r.name for r in records])
        def test(record: Attack) -> None:
            check_attack(record)

        # not functools.wraps: pytest would read the body's signature through __wrapped__
        test.__name__, test.__qualname__, test.__module__ = body.__name__, body.__qualname__, body.__module__
        test.__doc__ = body.__doc__
        test.body = body  # what runs in the attack's process
        test.attacks = records
        return test

    return wrap


def all_attacks() -> list[Attack]:
    """Every attack of the ``test_attack_*`` modules, by class, in the order each module defines them."""
    found: list[Attack] = []
    for path in sorted(Path(__file__).parent.glob("test_attack_*.py")):
        module = importlib.import_module(f"{__package__}.{path.stem}")
        for value in vars(module).values():
            found.extend(getattr(value, "attacks", ()))
    return sorted(found, key=lambda a: a.cls)  # stable: a module's own order within its class
