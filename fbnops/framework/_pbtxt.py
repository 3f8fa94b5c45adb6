"""The protobuf text format, the subset GraphDefs use: a tokenizer and a recursive-descent grammar.

The parser knows messages, not schemas: ``parse(text)`` returns a :class:`Message`
whose fields hold :class:`Scalar` tokens (identifiers, numbers, decoded strings) or
nested messages, each with the line and column where it starts.  What a field means
(its type, whether it may repeat) is checked by the schema in ``graphdef.py``.

:func:`type_message` then checks a parsed message against a schema given as data
(field -> value type, repeated): unknown fields, repeated singular fields, messages
where scalars belong (and back) and literals out of their type's range are errors.

Every malformed input raises one :class:`InvalidArgumentError` whose message starts
with ``<file>:<line>:<column>:``.  Nesting is limited to :data:`MAX_DEPTH` (the
protobuf library's own default recursion limit), so deep input cannot exhaust the
Python stack.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from .errors import InvalidArgumentError

__all__ = ["MAX_DEPTH", "Scalar", "Message", "Typed", "parse", "type_message", "located_error", "escape"]

MAX_DEPTH = 100
_TOKEN = re.compile(
    r"(?:\s|#[^\n]*)*"  # whitespace and comments, then one token:
    r"(?P<t>([{}<>\[\]:,;])"  # punctuation
    r"|(\"(?:[^\"\\\n]|\\[^\n])*\"|'(?:[^'\\\n]|\\[^\n])*')"  # a string on one line
    r"|([A-Za-z0-9_.+\-]+)"  # an identifier or a number
    r"|(\S)"  # anything else: an error
    r"|$)"  # the end of the input
)
_SIMPLE_ESCAPES = {"n": 10, "t": 9, "r": 13, "\\": 92, "'": 39, '"': 34, "a": 7, "b": 8, "f": 12, "v": 11, "?": 63}
_OCT = "01234567"
_HEX = "0123456789abcdefABCDEF"


def located_error(source: str, line: int, col: int, message: str, cls: type = InvalidArgumentError) -> Exception:
    """``cls("<source>:<line>:<col>: message")``; the one error format of GraphDef text."""
    return cls(f"{source}:{line}:{col}: {message}")


class _Token(NamedTuple):
    kind: str  # "punct" | "ident" | "string" | "end"
    text: str  # punctuation or identifier text; for strings the raw quoted text
    line: int
    col: int
    data: bytes = b""  # decoded string bytes


@dataclass(frozen=True)
class Scalar:
    """A field's scalar value: an identifier/number (``text``) or a string (``data``)."""

    kind: str  # "ident" | "string"
    text: str
    data: bytes
    line: int
    col: int


@dataclass
class Message:
    """A message: ``(name, value, line, col)`` fields in text order; value is a Scalar or a Message."""

    line: int
    col: int
    fields: list[tuple[str, Scalar | Message, int, int]] = field(default_factory=list)


def escape(data: bytes) -> str:
    """Bytes as the body of a double-quoted text-format string (octal for non-printables)."""
    out = []
    for b in data:
        c = chr(b)
        if c in "\"'\\":
            out.append("\\" + c)
        elif 32 <= b < 127:
            out.append(c)
        else:
            out.append(f"\\{b:03o}")
    return "".join(out)


class _Lexer:
    def __init__(self, text: str, source: str):
        self.text, self.source = text, source
        self.pos, self.line, self.line_start = 0, 1, 0

    def error(self, pos: int, message: str) -> Exception:
        line = self.text.count("\n", 0, pos) + 1
        col = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        return located_error(self.source, line, col, message)

    def _where(self, pos: int) -> tuple[int, int]:
        while True:  # advance the line counter to pos (tokens come in order)
            nl = self.text.find("\n", self.line_start, pos)
            if nl < 0:
                return self.line, pos - self.line_start + 1
            self.line += 1
            self.line_start = nl + 1

    def tokens(self):
        text = self.text
        pos = 0
        while True:
            m = _TOKEN.match(text, pos)  # never fails: the last alternative is the end of the input
            punct, string, ident, other = m.group(2, 3, 4, 5)
            start, pos = m.start("t"), m.end()
            line, col = self._where(start)
            if punct:
                yield _Token("punct", punct, line, col)
            elif ident:
                yield _Token("ident", ident, line, col)
            elif string:
                data = self._string(start)[1] if "\\" in string else string[1:-1].encode("utf-8", "surrogatepass")
                yield _Token("string", string, line, col, data)
            elif other in ("'", '"'):
                self._string(start)  # raises the precise error (unterminated, bad escape, newline)
                raise self.error(start, "malformed string")
            elif other:
                raise self.error(start, f"unexpected character {other!r}")
            else:
                yield _Token("end", "", line, col)
                return

    def _string(self, start: int) -> tuple[int, bytes]:
        text, quote = self.text, self.text[start]
        out = bytearray()
        i = start + 1
        while True:
            if i >= len(text):
                raise self.error(start, "truncated text: string not terminated")
            c = text[i]
            if c == quote:
                return i + 1, bytes(out)
            if c == "\n":
                raise self.error(start, "string not terminated before the end of the line")
            if c != "\\":
                out += c.encode("utf-8", "surrogatepass")
                i += 1
                continue
            if i + 1 >= len(text):
                raise self.error(i, "truncated text: escape at the end of the input")
            e = text[i + 1]
            if e in _SIMPLE_ESCAPES:
                out.append(_SIMPLE_ESCAPES[e])
                i += 2
            elif e in _OCT:
                j = i + 1
                while j < len(text) and j < i + 4 and text[j] in _OCT:
                    j += 1
                value = int(text[i + 1 : j], 8)
                if value > 0xFF:
                    raise self.error(i, f"bad escape \\{text[i + 1 : j]}: octal value above \\377")
                out.append(value)
                i = j
            elif e in "xX":
                j = i + 2
                while j < len(text) and j < i + 4 and text[j] in _HEX:
                    j += 1
                if j == i + 2:
                    raise self.error(i, "bad escape \\x: no hexadecimal digit follows")
                out.append(int(text[i + 2 : j], 16))
                i = j
            else:
                raise self.error(i, f"bad escape \\{e}")


class _Parser:
    def __init__(self, text: str, source: str):
        self.lexer = _Lexer(text, source)
        self.source = source
        self._tokens = self.lexer.tokens()
        self.tok = next(self._tokens)

    def error(self, tok: _Token, message: str) -> Exception:
        return located_error(self.source, tok.line, tok.col, message)

    def advance(self) -> _Token:
        tok, self.tok = self.tok, next(self._tokens, self.tok)
        return tok

    def expect(self, text: str, context: str) -> _Token:
        if self.tok.kind == "end":
            raise self.error(self.tok, f"truncated text: expected '{text}' {context}")
        if self.tok.text != text or self.tok.kind != "punct":
            raise self.error(self.tok, f"expected '{text}' {context}, found {self._show(self.tok)}")
        return self.advance()

    @staticmethod
    def _show(tok: _Token) -> str:
        return "the end of the input" if tok.kind == "end" else repr(tok.text)

    def message(self, close: str | None, start: _Token | None, depth: int) -> Message:
        if depth > MAX_DEPTH:
            raise self.error(start, f"message nested deeper than {MAX_DEPTH} levels")
        msg = Message(start.line if start else 1, start.col if start else 1)
        while True:
            tok = self.tok
            if close is not None and tok.kind == "punct" and tok.text == close:
                self.advance()
                return msg
            if tok.kind == "end":
                if close is None:
                    return msg
                why = f"unbalanced braces, '{start.text}' is never closed by '{close}'"
                raise self.error(start, f"truncated text: {why}")
            self.field(msg, depth)

    def field(self, msg: Message, depth: int) -> None:
        name_tok = self.advance()
        if name_tok.kind != "ident" or not (name_tok.text[0].isalpha() or name_tok.text[0] == "_"):
            raise self.error(name_tok, f"expected a field name, found {self._show(name_tok)}")
        name = name_tok.text
        colon = self.tok.kind == "punct" and self.tok.text == ":"
        if colon:
            self.advance()
        tok = self.tok
        if tok.kind == "punct" and tok.text in "{<":
            self.advance()
            value = self.message("}" if tok.text == "{" else ">", tok, depth + 1)
            msg.fields.append((name, value, name_tok.line, name_tok.col))
        elif not colon:
            raise self.error(tok, f"expected ':' or '{{' after field '{name}', found {self._show(tok)}")
        elif tok.kind == "punct" and tok.text == "[":
            self.list_values(msg, name, name_tok, depth)
        else:
            msg.fields.append((name, self.scalar(name), name_tok.line, name_tok.col))
        if self.tok.kind == "punct" and self.tok.text in ",;":
            self.advance()

    def list_values(self, msg: Message, name: str, name_tok: _Token, depth: int) -> None:
        open_tok = self.advance()
        first = True
        while not (self.tok.kind == "punct" and self.tok.text == "]"):
            if self.tok.kind == "end":
                raise self.error(open_tok, "truncated text: '[' is never closed by ']'")
            if not first:
                self.expect(",", f"between the values of '{name}'")
            first = False
            tok = self.tok
            if tok.kind == "punct" and tok.text in "{<":
                self.advance()
                value = self.message("}" if tok.text == "{" else ">", tok, depth + 1)
            else:
                value = self.scalar(name)
            msg.fields.append((name, value, tok.line, tok.col))
        self.advance()

    def scalar(self, name: str) -> Scalar:
        tok = self.tok
        if tok.kind == "end":
            raise self.error(tok, f"truncated text: field '{name}' has no value")
        if tok.kind == "string":
            data = b""
            while self.tok.kind == "string":  # adjacent strings concatenate
                data += self.advance().data
            return Scalar("string", "", data, tok.line, tok.col)
        if tok.kind == "ident":
            self.advance()
            return Scalar("ident", tok.text, b"", tok.line, tok.col)
        raise self.error(tok, f"field '{name}' expects a value, found {self._show(tok)}")


def parse(text: str, source: str = "<pbtxt>") -> Message:
    """Parse protobuf text into an untyped :class:`Message` tree (raises on malformed text)."""
    if not isinstance(text, str):
        raise InvalidArgumentError(f"{source}: GraphDef text must be a str, got {type(text).__name__}")
    return _Parser(text, source).message(None, None, 0)


# ------------------------------------------------------------------------------------ typing a message

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
