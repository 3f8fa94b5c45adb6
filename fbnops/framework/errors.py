"""Typed errors, named as TensorFlow names its status codes.

Every rejection of bad input raises one of these before any kernel runs.  They
subclass the matching Python built-in so ordinary ``except ValueError`` works.
"""

from __future__ import annotations

__all__ = [
    "OpError",
    "InvalidArgumentError",
    "NotFoundError",
    "InternalError",
    "UnimplementedError",
    "ResourceExhaustedError",
]


class OpError(Exception):
    """Base class; ``code`` is TensorFlow's status-code name."""

    code = "UNKNOWN"

    def __init__(self, message: str, op: str | None = None):
        super().__init__(message)
        self.message = message
        self.op = op

    def __str__(self) -> str:
        if self.op:
            return f"{self.message} [Op:{self.op}]"
        return self.message


class InvalidArgumentError(OpError, ValueError):
    code = "INVALID_ARGUMENT"


class NotFoundError(OpError, LookupError):
    code = "NOT_FOUND"


class InternalError(OpError, RuntimeError):
    code = "INTERNAL"


class UnimplementedError(OpError, NotImplementedError):
    code = "UNIMPLEMENTED"


class ResourceExhaustedError(OpError, MemoryError):
    """An input or output that cannot fit in this machine's memory (TF: "OOM when allocating")."""

    code = "RESOURCE_EXHAUSTED"
