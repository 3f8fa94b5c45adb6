"""The attack record and its helpers (:mod:`.attacks` has the table and the runner)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Attack", "CLASSES", "PRELUDE", "TYPED", "attack"]

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
TYPED = ("fbnops.", "bindings_mirror.")


@dataclass(frozen=True)
class Attack:
    cls: int
    name: str
    code: str
    expect: str = "error"  # "error" | "ok" | "either"
    timeout: float = 120.0
    env: tuple = ()  # (name, value) pairs set in the attack's process


PRELUDE = "from fbnops.testing.attack_helpers import *  # noqa: F403\n"


def attack(cls: int, name: str, code: str, expect: str = "error", timeout: float = 120.0, env: tuple = ()) -> Attack:
    return Attack(cls, name, code.strip(), expect, timeout, env)
