"""How a failure on one rank becomes the same typed error on every rank.

A rank's exception travels as a small integer (its *kind*) and a text; every rank then
raises ``error_for(kind, text)``.  The kinds are ``fbnops.errors`` types, so a caller
catches the same class on every rank whatever went wrong where:

* an ``fbnops.errors`` error keeps its class (one the list does not name: ``InternalError``);
* ``MemoryError`` is ``ResourceExhaustedError`` (TensorFlow's status for an allocation);
* ``TypeError`` (an attr or input of the wrong Python type, as ``raw_ops`` raises it) is
  an ``InvalidArgumentError`` that is also a ``TypeError``, so ``except TypeError`` still works;
* anything else is ``InternalError``.
"""

from __future__ import annotations

from ..framework import errors as _errors

__all__ = ["KINDS", "kind_of", "error_for", "describe"]


class InvalidArgumentTypeError(_errors.InvalidArgumentError, TypeError):
    """An argument of the wrong Python type on some rank (``TypeError`` in ``raw_ops``)."""


KINDS: tuple = (
    None,  # 0: no failure
    _errors.InvalidArgumentError,
    _errors.ResourceExhaustedError,
    _errors.UnimplementedError,
    _errors.InternalError,
    InvalidArgumentTypeError,
)


def kind_of(error: BaseException) -> int:
    """The kind (index into :data:`KINDS`) that ``error`` travels as."""
    if isinstance(error, _errors.OpError):
        exact = [i for i, t in enumerate(KINDS) if t is not None and type(error) is t]
        if exact:
            return exact[0]
        if isinstance(error, InvalidArgumentTypeError):
            return KINDS.index(InvalidArgumentTypeError)
        if isinstance(error, _errors.InvalidArgumentError):
            return KINDS.index(_errors.InvalidArgumentError)
        if isinstance(error, _errors.ResourceExhaustedError):
            return KINDS.index(_errors.ResourceExhaustedError)
        return KINDS.index(_errors.InternalError)
    if isinstance(error, MemoryError):
        return KINDS.index(_errors.ResourceExhaustedError)
    if isinstance(error, TypeError):
        return KINDS.index(InvalidArgumentTypeError)
    return KINDS.index(_errors.InternalError)


def describe(error: BaseException, stage: str | None = None) -> str:
    """The failing rank's own words: the original message, with its type and stage past validation."""
    message = error.message if isinstance(error, _errors.OpError) else str(error)
    if stage is None and isinstance(error, _errors.OpError):
        return message  # a validation error: already TensorFlow's message
    text = f"{type(error).__name__}: {message}"
    return f"in {stage}: {text}" if stage else text


def error_for(kind: int, message: str, op: str | None = None) -> _errors.OpError:
    """The typed error every rank raises for a failure of ``kind``."""
    cls = KINDS[kind] if 0 < kind < len(KINDS) else _errors.InternalError
    return cls(message, op)
