"""Node names and paths inside generated C++: as string literals, and inside ``//`` comments.

Node names come from users (and GraphDef files): whatever they hold, they must not end a comment
or a string literal early and so become code.
"""

from __future__ import annotations

import json


def c_string(text: str) -> str:
    """``text`` as a C++ string literal (quotes, backslashes and control characters escaped)."""
    return json.dumps(text)


def comment(text: str) -> str:
    """``text`` safe inside a ``//`` comment: one line, control characters escaped."""
    return text.encode("unicode_escape").decode("ascii")


def renamed_comment(renamed: dict[str, str]) -> list[str]:
    """The C++ header line that maps node names to the identifiers holding them (none when none differ)."""
    if not renamed:
        return []
    pairs = ", ".join(f"{c_string(n)} -> {i}" for n, i in renamed.items())
    return [f"// Node names mapped to identifiers: {comment(pairs)}"]
