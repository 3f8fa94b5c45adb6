"""``tensorflow::Status`` (``absl::Status``) with ``absl::StatusCode`` numbers.

``code()`` returns the enum (``kInvalidArgument == 3``); ``str(code)`` and
``ToString()`` print it as TensorFlow does (``INVALID_ARGUMENT: ...``).
"""

from __future__ import annotations

import enum

from fbnops.framework import errors as _errors

__all__ = ["StatusCode", "error", "errors", "Status"]


class StatusCode(enum.IntEnum):
    """absl::StatusCode (and tensorflow::error::Code, which has the same values)."""

    kOk = 0
    kCancelled = 1
    kUnknown = 2
    kInvalidArgument = 3
    kDeadlineExceeded = 4
    kNotFound = 5
    kAlreadyExists = 6
    kPermissionDenied = 7
    kResourceExhausted = 8
    kFailedPrecondition = 9
    kAborted = 10
    kOutOfRange = 11
    kUnimplemented = 12
    kInternal = 13
    kUnavailable = 14
    kDataLoss = 15
    kUnauthenticated = 16

    def __str__(self) -> str:  # absl::StatusCodeToString
        return _NAMES[self]


def _upper(name: str) -> str:
    out = ""
    for ch in name[1:]:
        out += ("_" + ch) if ch.isupper() and out else ch.upper()
    return out


_NAMES = {c: _upper(c.name) for c in StatusCode}
_BY_NAME = {v: k for k, v in _NAMES.items()}


class error:  # noqa: N801  (the C++ namespace tensorflow::error)
    """``error::INVALID_ARGUMENT`` etc.: the same numbers as ``absl::StatusCode``."""


for _code, _name in _NAMES.items():
    setattr(error, _name, _code)


class Status:
    """tensorflow::Status: ``ok()``, ``code()``, ``message()``, ``ToString()``."""

    def __init__(self, code: StatusCode | int = StatusCode.kOk, message: str = ""):
        self._code = StatusCode(code)
        self._message = "" if self._code == StatusCode.kOk else message

    @staticmethod
    def OK() -> Status:
        return Status()

    @staticmethod
    def from_error(e: _errors.OpError) -> Status:
        return Status(_BY_NAME.get(e.code, StatusCode.kUnknown), e.message)

    def ok(self) -> bool:
        return self._code == StatusCode.kOk

    def code(self) -> StatusCode:
        return self._code

    def message(self) -> str:
        return self._message

    error_message = message

    def ToString(self) -> str:
        return "OK" if self.ok() else f"{self._code}: {self._message}"

    def __eq__(self, other) -> bool:
        return isinstance(other, Status) and (other._code, other._message) == (self._code, self._message)

    def __hash__(self) -> int:
        return hash((self._code, self._message))

    def __repr__(self) -> str:
        return f"<Status {self.ToString()}>"


def _invalid_argument(*parts) -> Status:
    return Status(StatusCode.kInvalidArgument, "".join(str(p) for p in parts))


class errors:  # noqa: N801  (the C++ namespace tensorflow::errors)
    """``errors::InvalidArgument(...)`` builds a Status; ``errors::IsInvalidArgument(s)`` tests one."""

    InvalidArgument = staticmethod(_invalid_argument)

    @staticmethod
    def IsInvalidArgument(s: Status) -> bool:
        return s.code() == StatusCode.kInvalidArgument

    @staticmethod
    def IsNotFound(s: Status) -> bool:
        return s.code() == StatusCode.kNotFound

    @staticmethod
    def IsResourceExhausted(s: Status) -> bool:
        return s.code() == StatusCode.kResourceExhausted

    @staticmethod
    def IsOutOfRange(s: Status) -> bool:
        return s.code() == StatusCode.kOutOfRange
