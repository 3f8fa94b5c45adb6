"""The public API of every surface matches tests/golden/api.txt.

A change to a name, a parameter's order or a default fails here.  If the change
is intended, run ``pytest tests/test_api_golden.py --update-goldens`` and commit
the new golden file with the change (the diff is the API review).
"""

from __future__ import annotations

import difflib
from pathlib import Path

import api_surface

GOLDEN = Path(__file__).parent / "golden" / "api.txt"


def test_public_api_matches_golden(request):
    current = api_surface.dump()
    if request.config.getoption("--update-goldens"):
        GOLDEN.write_text(current)
        return
    approved = GOLDEN.read_text()
    diff = "".join(
        difflib.unified_diff(approved.splitlines(True), current.splitlines(True), "golden/api.txt", "current API")
    )
    assert not diff, "public API drifted (update with --update-goldens if intended):\n" + diff
