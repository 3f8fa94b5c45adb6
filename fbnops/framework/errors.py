"""Typed errors, named as TensorFlow names its status codes.

Every rejection of bad input raises one of these before any kernel runs.  They
subclass the matching Python built-in so ordinary ``except ValueError`` works.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = [
    "OpError",
    "InvalidArgumentError",
    "NotFoundError",
    "InternalError",
    "UnimplementedError",
    "ResourceExhaustedError",
    "CONVERSION_ERRORS",
    "conversion_errors_as",
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
    """An argument of the wrong type, shape, dtype or value; the message names the argument."""

    code = "INVALID_ARGUMENT"


class NotFoundError(OpError, LookupError):
    """Something named that does not exist: an op type, an op in a graph, a tensor."""

    code = "NOT_FOUND"


class InternalError(OpError, RuntimeError):
    """A failure below the API: a collective that broke, another rank that failed (TF: INTERNAL)."""

    code = "INTERNAL"


class UnimplementedError(OpError, NotImplementedError):
    """A valid request this build does not support (TensorFlow's word for it too)."""

    code = "UNIMPLEMENTED"


class ResourceExhaustedError(OpError, MemoryError):
    """An input or output that cannot fit in this machine's memory (TF: "OOM when allocating")."""

    code = "RESOURCE_EXHAUSTED"


# What Python raises when a value does not fit what it is converted to: int()/float() of a huge int
# (OverflowError), of None, bytes or an object (TypeError), np.asarray of a ragged list, zip(strict=True),
# unpacking (ValueError), a list shorter than its count (IndexError).
CONVERSION_ERRORS: tuple[type[Exception], ...] = (OverflowError, TypeError, ValueError, IndexError)


@contextmanager
def conversion_errors_as(
    make: Callable[[str], BaseException], *, keep: tuple[type[BaseException], ...] = ()
) -> Iterator[None]:
    """The one place a surface turns a Python-level conversion failure into its own error model.

    Inside the block, an exception of :data:`CONVERSION_ERRORS` is re-raised as ``make(message)``
    (``InvalidArgumentError``, an ``E_INVALIDARG`` HRESULT, Java's ``IllegalArgumentException``);
    fbnops' typed errors and the surface's own (``keep``), which may subclass ``ValueError``, pass.
    """
    try:
        yield
    except (OpError, *keep):
        raise
    except CONVERSION_ERRORS as e:
        raise make(f"{type(e).__name__}: {e}") from None
