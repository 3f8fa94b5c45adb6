"""The attack record and its helpers (:mod:`.attacks` has the table and the runner)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Attack", "CLASSES", "PRELUDE", "TYPED", "attack"]  # and the error-class names below

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


# The documented error classes the attacks name (their defining module and name, as the
# isolated process reports an exception's classes).
INVALID_ARGUMENT = "fbnops.framework.errors.InvalidArgumentError"
RESOURCE_EXHAUSTED = "fbnops.framework.errors.ResourceExhaustedError"
NOT_FOUND = "fbnops.framework.errors.NotFoundError"
RUN_FILE_ERROR = "fbnops.tools.runfile.RunFileError"  # names the file, line:column and field
RUN_FILE_TOO_BIG = "fbnops.tools.runfile.RunFileResourceError"  # a RunFileError and a ResourceExhaustedError
HRESULT_ERROR = "bindings_mirror.directml.HRESULTError"  # E_INVALIDARG, E_OUTOFMEMORY ...
DNNL_ERROR = "bindings_mirror.onednn_graph.error"  # dnnl::error with its status
JAVA_ILLEGAL_ARGUMENT = "bindings_mirror.java.exceptions.IllegalArgumentException"  # TFInvalidArgumentException too


@dataclass(frozen=True)
class Attack:
    """One hostile input: its class, a name, the code, and how it must end."""

    cls: int
    name: str
    code: str
    expect: str = "error"  # "error" | "ok" | "either"
    timeout: float = 120.0
    env: tuple = ()  # (name, value) pairs set in the attack's process
    raises: str = ""  # "error"/"either": the documented error class ("module.Class"); a subclass passes too

    def raises_match(self, mro: list[str]) -> bool:
        """True if an exception whose classes are ``mro`` ("module.Class" names) is the documented error."""
        return self.raises in mro


PRELUDE = "from fbnops.testing.attack_helpers import *  # noqa: F403\n"


def attack(
    cls: int, name: str, code: str, expect: str = "error", timeout: float = 120.0, env: tuple = (), raises: str = ""
) -> Attack:
    """An :class:`Attack`; one that may raise must name the error class it documents."""
    if expect not in ("error", "ok", "either"):
        raise ValueError(f"attack {name!r}: expect must be 'error', 'ok' or 'either', got {expect!r}")
    if (expect == "ok") == bool(raises):
        raise ValueError(f"attack {name!r}: name the documented error (raises=...) exactly when it may raise")
    return Attack(cls, name, code.strip(), expect, timeout, env, raises)
