"""Java's exception classes, with tensorflow/java's hierarchy.

``java.lang``: ``RuntimeException`` and the unchecked exceptions the API throws
(``IllegalArgumentException``, ``IllegalStateException``, ...).  Each also derives
from the closest Python built-in, so ``except ValueError`` keeps working.

``org.tensorflow.exceptions``: ``AbstractTF_Status.throwExceptionIfNotOK`` maps seven
status codes to their own classes and every other code (NOT_FOUND included) to
``TensorFlowException``.  ``TFInvalidArgumentException`` is an
``IllegalArgumentException`` and ``TFUnimplementedException`` an
``UnsupportedOperationException``, not ``TensorFlowException``s.
"""

from __future__ import annotations

from fbnops.framework import errors as _errors

__all__ = [
    "RuntimeException",
    "IllegalArgumentException",
    "IllegalStateException",
    "IndexOutOfBoundsException",
    "UnsupportedOperationException",
    "NoSuchElementException",
    "NullPointerException",
    "TensorFlowException",
    "TFInvalidArgumentException",
    "TFUnauthenticatedException",
    "TFPermissionDeniedException",
    "TFResourceExhaustedException",
    "TFFailedPreconditionException",
    "TFOutOfRangeException",
    "TFUnimplementedException",
    "java_exception",
]


class RuntimeException(RuntimeError):
    """java.lang.RuntimeException: ``getMessage()`` is the message."""

    def getMessage(self) -> str:
        return str(self.args[0]) if self.args else ""


class IllegalArgumentException(RuntimeException, ValueError):
    """java.lang.IllegalArgumentException"""


class IllegalStateException(RuntimeException):
    """java.lang.IllegalStateException"""


class IndexOutOfBoundsException(RuntimeException, IndexError):
    """java.lang.IndexOutOfBoundsException"""


class UnsupportedOperationException(RuntimeException, NotImplementedError):
    """java.lang.UnsupportedOperationException"""


class NoSuchElementException(RuntimeException, LookupError):
    """java.util.NoSuchElementException"""


class NullPointerException(RuntimeException, TypeError):
    """java.lang.NullPointerException (a ``null`` where the API needs an object)."""


class TensorFlowException(RuntimeException):
    """org.tensorflow.exceptions.TensorFlowException: every status code without its own class."""


class TFInvalidArgumentException(IllegalArgumentException):
    """org.tensorflow.exceptions.TFInvalidArgumentException (extends IllegalArgumentException)"""


class TFUnauthenticatedException(TensorFlowException):
    """org.tensorflow.exceptions.TFUnauthenticatedException"""


class TFPermissionDeniedException(TensorFlowException):
    """org.tensorflow.exceptions.TFPermissionDeniedException"""


class TFResourceExhaustedException(TensorFlowException):
    """org.tensorflow.exceptions.TFResourceExhaustedException"""


class TFFailedPreconditionException(TensorFlowException):
    """org.tensorflow.exceptions.TFFailedPreconditionException"""


class TFOutOfRangeException(TensorFlowException):
    """org.tensorflow.exceptions.TFOutOfRangeException"""


class TFUnimplementedException(UnsupportedOperationException):
    """org.tensorflow.exceptions.TFUnimplementedException (extends UnsupportedOperationException)"""


# AbstractTF_Status.throwExceptionIfNotOK, in its order
_BY_CODE: dict[str, type[RuntimeException]] = {
    "INVALID_ARGUMENT": TFInvalidArgumentException,
    "UNAUTHENTICATED": TFUnauthenticatedException,
    "PERMISSION_DENIED": TFPermissionDeniedException,
    "RESOURCE_EXHAUSTED": TFResourceExhaustedException,
    "FAILED_PRECONDITION": TFFailedPreconditionException,
    "OUT_OF_RANGE": TFOutOfRangeException,
    "UNIMPLEMENTED": TFUnimplementedException,
}


def java_exception(e: _errors.OpError) -> RuntimeException:
    """The exception tensorflow/java throws for a non-OK status (message = TF_Message)."""
    return _BY_CODE.get(e.code, TensorFlowException)(e.message)
