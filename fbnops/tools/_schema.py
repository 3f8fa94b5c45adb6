"""A small JSON Schema (2020-12) validator for the keywords the run-file schema uses.

No dependency: ``jsonschema`` agrees with it on the project's test corpus (the tests
check that), but a run file must validate where only NumPy is installed.  Keywords:
``type enum properties required additionalProperties items minItems maxItems
minimum minLength oneOf $ref``; annotations (``description``, ``default``,
``examples``) are ignored.  Errors carry the instance path (a JSON pointer's parts).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

MAX_DEPTH = 64  # no run file needs more; deeper documents are refused, never recursed into


@dataclass(frozen=True)
class SchemaError:
    path: tuple[str | int, ...]
    message: str


@cache
def runfile_schema() -> dict:
    """The run-file JSON Schema shipped with the package (``fbnops/tools/runfile.schema.json``)."""
    return json.loads(resources.files("fbnops.tools").joinpath("runfile.schema.json").read_text())


_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and _fits_double(v),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def _fits_double(value: int | float) -> bool:
    """A JSON number is a double: an integer literal beyond its range (10**400) is not a number."""
    return isinstance(value, float) or abs(value) <= sys.float_info.max


def _describe(value: Any) -> str:
    text = json.dumps(value, default=repr)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_name(value: Any) -> str:
    return next((t for t in ("integer", "number", "string", "array", "object", "boolean") if _TYPES[t](value)), "null")


class _Validator:
    def __init__(self, root: dict):
        self.root = root

    def resolve(self, schema: dict) -> dict:
        while "$ref" in schema:
            extra = {k: v for k, v in schema.items() if k != "$ref"}
            node = self.root
            for part in schema["$ref"].removeprefix("#/").split("/"):
                node = node[part]
            schema = {**node, **{k: v for k, v in extra.items() if k not in node}}
        return schema

    def errors(self, value: Any, schema: dict, path: tuple) -> list[SchemaError]:
        if len(path) > MAX_DEPTH:
            return [SchemaError(path, f"nested deeper than {MAX_DEPTH} levels")]
        schema = self.resolve(schema)
        if "type" in schema and not _TYPES[schema["type"]](value):
            if schema["type"] == "number" and isinstance(value, int) and not isinstance(value, bool):
                return [SchemaError(path, f"{_describe(value)} is beyond the range of a number (a double)")]
            return [SchemaError(path, f"must be of type {schema['type']}, got {_type_name(value)} {_describe(value)}")]
        if "enum" in schema and not any(value == e and type(value) is type(e) for e in schema["enum"]):
            return [SchemaError(path, f"must be one of {schema['enum']}, got {_describe(value)}")]
        if isinstance(value, str) and len(value) < schema.get("minLength", 0):
            return [SchemaError(path, "must not be empty")]
        if _TYPES["number"](value) and value < schema.get("minimum", value):
            return [SchemaError(path, f"must be >= {schema['minimum']}, got {value}")]
        found = []
        if isinstance(value, list):
            found = self.array(value, schema, path)
        elif isinstance(value, dict):
            found = self.object(value, schema, path)
        if not found and "oneOf" in schema:
            found = self.one_of(value, schema["oneOf"], path)
        return found

    def one_of(self, value: Any, branches: list[dict], path: tuple) -> list[SchemaError]:
        results = [self.errors(value, b, path) for b in branches]
        passing = sum(not r for r in results)
        if passing == 1:
            return []
        keyed = [b.get("required", [None])[0] for b in branches]
        if all(len(b) == 1 and len(b.get("required", ())) == 1 for b in branches):  # "exactly one of these keys"
            present = [k for k in keyed if isinstance(value, dict) and k in value]
            return [SchemaError(path, f"needs exactly one of {keyed}, got {present or 'none'}")]
        typed = [r for b, r in zip(branches, results, strict=True) if self.type_matches(value, b)]
        if len(typed) == 1:  # the branch of the value's type explains best what is wrong
            return typed[0]
        kinds = [self.resolve(b).get("type", "?") for b in branches]
        return [SchemaError(path, f"must be one of the types {kinds}, got {_type_name(value)} {_describe(value)}")]

    def type_matches(self, value: Any, schema: dict) -> bool:
        t = self.resolve(schema).get("type")
        huge = isinstance(value, int) and not isinstance(value, bool)  # an integer beyond a double: still a number
        return t is not None and (_TYPES[t](value) or (t == "number" and huge))

    def array(self, value: list, schema: dict, path: tuple) -> list[SchemaError]:
        if len(value) < schema.get("minItems", 0):
            return [SchemaError(path, f"needs at least {schema['minItems']} item(s)")]
        if len(value) > schema.get("maxItems", len(value)):
            return [SchemaError(path, f"has {len(value)} items; at most {schema['maxItems']} allowed")]
        out: list[SchemaError] = []
        if "items" in schema:
            for i, item in enumerate(value):
                out += self.errors(item, schema["items"], (*path, i))
                if out:
                    break
        return out

    def object(self, value: dict, schema: dict, path: tuple) -> list[SchemaError]:
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key in value:
            if not isinstance(key, str):  # YAML allows 5: or true: as keys; JSON and the file format do not
                return [SchemaError((*path, key), f"keys are strings; got {_type_name(key)} {_describe(key)}")]
            if key not in props and extra is False:
                return [SchemaError((*path, key), f"unknown key {key!r}; expected one of {sorted(props)}")]
        missing = [k for k in schema.get("required", ()) if k not in value]
        if missing:
            return [SchemaError(path, f"missing required key(s) {missing}")]
        for key, item in value.items():
            sub = props.get(key, extra if isinstance(extra, dict) else None)
            if sub is not None:
                found = self.errors(item, sub, (*path, key))
                if found:
                    return found
        return []


def validate(doc: Any, schema: dict | None = None) -> list[SchemaError]:
    """Errors of ``doc`` against ``schema`` (default: the run-file schema); the first in document order."""
    root = runfile_schema() if schema is None else schema
    return _Validator(root).errors(doc, root, ())
