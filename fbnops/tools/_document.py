"""Read a JSON or YAML document with the line:column of every key, defensively.

``read_document(path)`` returns ``(doc, positions)``: ``positions`` maps a JSON
pointer's parts (``("ops", 1, "inputs", "scale")``) to the 1-based ``(line, column)``
of that key (or, for a list item, of the item).  Before anything is built:

- the file size is bounded (a run file is a few kB; ``MAX_BYTES`` is generous);
- nesting deeper than ``MAX_DEPTH`` is refused (no ``RecursionError``);
- duplicate keys are an error (JSON and YAML would silently keep the last one);
- YAML is composed with the safe loader and its node graph walked with aliases
  expanded against a budget (``MAX_NODES``): a "billion laughs" document is refused
  with ``ResourceExhaustedError`` before it is expanded.
"""

from __future__ import annotations

import bisect
import json
import re
from pathlib import Path
from typing import Any

from ._schema import MAX_DEPTH

MAX_BYTES = 64 << 20
MAX_NODES = 200_000

Positions = dict[tuple, tuple[int, int]]


class DocumentError(ValueError):
    """Unreadable or malformed text; ``line``/``column`` are 1-based when known."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None, path: tuple = ()):
        super().__init__(message)
        self.message, self.line, self.column, self.path = message, line, column, path[:4]


class DocumentTooLargeError(DocumentError):
    """A document whose size (in bytes, or expanded) cannot be afforded."""


def read_document(path: Path) -> tuple[Any, Positions]:
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise DocumentTooLargeError(f"{size} bytes; run files are limited to {MAX_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise DocumentError(f"cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise DocumentError(
            f"not UTF-8 text ({e.reason} at byte {e.start}): a run file is JSON or YAML, a graph is GraphDef "
            "text (.pbtxt); give .npy arrays to a graph with --feed NAME=FILE.npy"
        ) from None
    if path.suffix.lower() in (".yaml", ".yml"):
        return _read_yaml(text)
    return _read_json(text)


# ------------------------------------------------------------------ JSON

_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_SCALAR = re.compile(r"[^\s,\]\}:]+")


def _read_json(text: str) -> tuple[Any, Positions]:
    positions = _scan_json(text)  # depth and duplicate keys first: json.loads would recurse or overwrite
    try:
        return json.loads(text), positions
    except json.JSONDecodeError as e:
        raise DocumentError(f"not valid JSON: {e.msg}", e.lineno, e.colno) from None


def _scan_json(text: str) -> Positions:
    """Positions of keys and items, without recursion; stops quietly at the first syntax error
    (``json.loads`` then reports it with its own line:column)."""
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def where(offset: int) -> tuple[int, int]:
        row = bisect.bisect_right(line_starts, offset) - 1
        return row + 1, offset - line_starts[row] + 1

    positions: Positions = {}
    stack: list[list] = []  # frames: [path, kind, next index or pending key, seen keys]
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in " \t\r\n,:":
            i += 1
            continue
        frame = stack[-1] if stack else None
        if ch in "]}":
            if not stack:
                break
            stack.pop()
            i += 1
            continue
        if frame is not None and frame[1] == "obj" and frame[2] is None:  # a key is expected
            m = _STRING.match(text, i)
            if not m:
                break
            key = json.loads(m.group())
            path = (*frame[0], key)
            if key in frame[3]:
                raise DocumentError(f"duplicate key {key!r}", *where(i), path=path)
            frame[3].add(key)
            positions[path] = where(i)
            frame[2] = key
            i = m.end()
            continue
        if frame is None:
            path: tuple = ()
        elif frame[1] == "obj":
            path, frame[2] = (*frame[0], frame[2]), None
        else:
            path = (*frame[0], frame[2])
            positions[path] = where(i)
            frame[2] += 1
        if ch in "[{":
            if len(stack) >= MAX_DEPTH:
                raise DocumentError(f"nested deeper than {MAX_DEPTH} levels", *where(i), path=path)
            stack.append([path, "obj" if ch == "{" else "arr", None if ch == "{" else 0, set()])
            i += 1
            continue
        m = _STRING.match(text, i) if ch == '"' else _SCALAR.match(text, i)
        if not m:
            break
        i = m.end()
    return positions


# ------------------------------------------------------------------ YAML


def _read_yaml(text: str) -> tuple[Any, Positions]:
    try:
        import yaml
    except ImportError:
        raise DocumentError("YAML run files need PyYAML: pip install 'fbnops[yaml]'") from None
    loader = None
    try:
        loader = yaml.SafeLoader(text)
        node = loader.get_single_node()
        if node is None:
            return None, {}
        positions = _walk_yaml(node, yaml)
        return loader.construct_document(node), positions
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        problem = e.problem or e.context or "malformed"
        raise DocumentError(f"not valid YAML: {problem}", mark.line + 1, mark.column + 1) from None
    except RecursionError:  # PyYAML composes nodes recursively: refuse before the stack runs out
        raise DocumentError(f"nested deeper than {MAX_DEPTH} levels") from None
    except yaml.YAMLError as e:  # the reader's errors (unprintable characters) carry a character offset
        offset = getattr(e, "position", 0)
        line = text.count("\n", 0, offset) + 1
        reason = getattr(e, "reason", None) or "malformed"
        raise DocumentError(f"not valid YAML: {reason}", line, offset - text.rfind("\n", 0, offset)) from None
    finally:
        if loader is not None:
            loader.dispose()


def _walk_yaml(root, yaml) -> Positions:
    """Positions, depth, duplicate keys and the expanded size, iteratively (aliases followed)."""
    positions: Positions = {}
    todo = [(root, (), 0)]
    visited = 0
    while todo:
        node, path, depth = todo.pop()
        visited += 1
        if visited > MAX_NODES:
            mark = node.start_mark
            raise DocumentTooLargeError(
                f"the YAML document expands to more than {MAX_NODES} nodes (aliases of aliases: "
                "a 'billion laughs' document?)",
                mark.line + 1,
                mark.column + 1,
                path,
            )
        if depth > MAX_DEPTH:
            raise DocumentError(
                f"nested deeper than {MAX_DEPTH} levels", node.start_mark.line + 1, node.start_mark.column + 1, path
            )
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, value_node in node.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else repr(key_node.value)
                here = (*path, key)
                mark = key_node.start_mark
                if key in seen:
                    raise DocumentError(f"duplicate key {key!r}", mark.line + 1, mark.column + 1, here)
                seen.add(key)
                positions.setdefault(here, (mark.line + 1, mark.column + 1))
                todo.append((value_node, here, depth + 1))
        elif isinstance(node, yaml.SequenceNode):
            for k, item in enumerate(node.value):
                here = (*path, k)
                positions.setdefault(here, (item.start_mark.line + 1, item.start_mark.column + 1))
                todo.append((item, here, depth + 1))
    return positions
