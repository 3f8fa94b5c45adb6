"""The protobuf text format, the subset GraphDefs use: a tokenizer and a recursive-descent grammar.

The parser knows messages, not schemas: ``parse(text)`` returns a :class:`Message`
whose fields hold :class:`Scalar` tokens (identifiers, numbers, decoded strings) or
nested messages, each with the line and column where it starts.  What a field means
(its type, whether it may repeat) is checked against a schema by ``_pbtxt_schema.py``.

Every malformed input raises one :class:`InvalidArgumentError` whose message starts
with ``<file>:<line>:<column>:``.  Nesting is limited to :data:`MAX_DEPTH` (the
protobuf library's own default recursion limit), so deep input cannot exhaust the
Python stack.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

from .errors import InvalidArgumentError

__all__ = ["MAX_DEPTH", "Scalar", "Message", "parse", "located_error", "escape"]

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
