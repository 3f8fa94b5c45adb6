"""Typing a parsed protobuf text message against a schema given as data.

:func:`type_message` checks a :class:`~fbnops.framework._pbtxt.Message` against a schema
(message type -> field -> value type, repeated): unknown fields, repeated singular fields,
messages where scalars belong (and back) and literals out of their type's range are
errors, each located at its line and column like the parser's own.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

import numpy as np

from ._pbtxt import Message, Scalar, located_error
from .errors import InvalidArgumentError

__all__ = ["Schema", "OPAQUE", "Typed", "type_message"]

Schema = dict[str, dict[str, tuple[str, bool]]]  # message type -> field -> (value type, repeated)
OPAQUE = "*"  # a message kept as parsed, unchecked
_INT_RANGE = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_SPECIAL_FLOATS = {"inf": float("inf"), "infinity": float("inf"), "nan": float("nan")}


class Typed:
    """A message checked against a schema: field -> list of (value, line, col)."""

    def __init__(self, type_name: str, line: int, col: int, source: str):
        self.type_name, self.line, self.col, self.source = type_name, line, col, source
        self.values: dict[str, list[tuple[Any, int, int]]] = {}

    def error(self, message: str, at: tuple[int, int] | None = None, cls: type = InvalidArgumentError):
        line, col = at or (self.line, self.col)
        return located_error(self.source, line, col, message, cls)

    def get(self, name: str, default: Any = None) -> Any:
        got = self.values.get(name)
        return got[-1][0] if got else default

    def all(self, name: str) -> list[Any]:
        return [v for v, _, _ in self.values.get(name, [])]

    def where(self, name: str) -> tuple[int, int]:
        got = self.values.get(name)
        return (got[0][1], got[0][2]) if got else (self.line, self.col)

    def require(self, name: str) -> Any:
        if name not in self.values:
            raise self.error(f"{self.type_name} is missing the required field '{name}'")
        return self.get(name)


_INT_TEXT = re.compile(r"([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")


def _int(text: str) -> int:
    m = _INT_TEXT.fullmatch(text)
    if not m:
        raise ValueError(text)
    sign, body = m.groups()
    value = int(body, 16) if body[:2] in ("0x", "0X") else int(body, 8) if body[:1] == "0" else int(body)
    return -value if sign == "-" else value


def _float(text: str, kind: str) -> float:
    word = text.lower().lstrip("+-")
    if word in _SPECIAL_FLOATS:
        return -_SPECIAL_FLOATS[word] if text.startswith("-") else _SPECIAL_FLOATS[word]
    body = text[:-1] if text[-1] in "fF" and "x" not in text.lower() else text
    value = float(body)
    if kind == "float" and abs(value) > _FLOAT32_MAX:
        raise OverflowError(f"value {text} does not fit in a float (largest {_FLOAT32_MAX:.9g})")
    if abs(value) == float("inf"):
        raise OverflowError(f"value {text} does not fit in a double")
    return value


def _scalar(kind: str, s: Scalar, name: str, source: str, enums: dict[str, dict[str, Any]]) -> Any:
    def bad(why: str) -> Exception:
        return located_error(source, s.line, s.col, f"field '{name}': {why}")

    if kind in ("string", "bytes"):
        if s.kind != "string":
            raise bad(f"expected a quoted string, found {s.text!r}")
        try:
            return s.data if kind == "bytes" else s.data.decode("utf-8")
        except UnicodeDecodeError:
            raise bad("string is not valid UTF-8") from None
    if s.kind != "ident":
        raise bad(f"expected a {kind} value, found a string")
    text = s.text
    try:
        value = _int(text) if kind in _INT_RANGE else _float(text, kind) if kind in ("float", "double") else None
    except ValueError:
        raise bad(f"expected a{'n integer' if kind in _INT_RANGE else ' number'}, found {text!r}") from None
    except OverflowError as e:
        raise bad(str(e)) from None
    if kind in _INT_RANGE:
        lo, hi = _INT_RANGE[kind]
        if not lo <= value <= hi:
            raise bad(f"integer {text} is out of range for {kind}")
        return value
    if kind in ("float", "double"):
        return value
    if kind == "bool":
        if text in ("true", "True", "t", "1", "false", "False", "f", "0"):
            return text in ("true", "True", "t", "1")
        raise bad(f"expected true or false, found {text!r}")
    table = enums[kind]  # an enum: by name or by number
    by_number = {v: k for k, v in table.items()}
    value = by_number.get(int(text)) if text.isdigit() and len(text) < 10 else text
    if value not in table:
        raise bad(f"unknown or unsupported {kind} {text!r}; expected one of {sorted(table)}")
    return value


def type_message(
    msg: Message, type_name: str, schema: Schema, source: str, enums: dict[str, dict[str, Any]] | None = None
) -> Typed:
    """Check ``msg`` and its sub-messages (iteratively) against ``schema``; enum values by name."""
    enums = enums or {}
    root = Typed(type_name, msg.line, msg.col, source)
    work = deque([(msg, root)])
    while work:
        raw, typed = work.popleft()
        fields = schema[typed.type_name]
        for name, value, line, col in raw.fields:
            if name not in fields:
                raise typed.error(f'message type "{typed.type_name}" has no field named "{name}"', (line, col))
            kind, repeated = fields[name]
            if not repeated and name in typed.values:
                raise typed.error(f'non-repeated field "{name}" is specified more than once', (line, col))
            is_message = isinstance(value, Message)
            if is_message != (kind in schema or kind == OPAQUE):
                want = "a message in braces" if not is_message else f"a {kind} value, not a message"
                raise typed.error(f"field '{name}' expects {want}", (line, col))
            if kind == OPAQUE:
                item: Any = value
            elif is_message:
                item = Typed(kind, line, col, source)
                work.append((value, item))
            else:
                item = _scalar(kind, value, name, source, enums)
            typed.values.setdefault(name, []).append((item, line, col))
    return root
