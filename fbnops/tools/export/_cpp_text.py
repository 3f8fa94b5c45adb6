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
