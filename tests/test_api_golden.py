"""The public API of every surface matches tests/golden/api.txt.

A change to a name, a parameter's order or a default fails here.  If the change
is intended, run ``pytest tests/test_api_golden.py --update-goldens`` and commit
the new golden file with the change (the diff is the API review).

Names that need an optional extra (``SyncBatchNorm`` needs torch) are listed only where that
extra is installed; elsewhere the rest of the API is still compared, and their part skips with
the extra's reason.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import api_surface

from fbnops.testing import extras

GOLDEN = Path(__file__).parent / "golden" / "api.txt"
MISSING = frozenset(name for name, (module, _) in api_surface.NEEDS_EXTRA.items() if not extras.have(module))


def _drift(approved: str, current: str) -> str:
    return "".join(
        difflib.unified_diff(approved.splitlines(True), current.splitlines(True), "golden/api.txt", "current API")
    )


def test_public_api_matches_golden(request):
    if request.config.getoption("--update-goldens"):
        assert not MISSING, f"install every extra before updating the golden: {sorted(MISSING)} cannot be listed"
        GOLDEN.write_text(api_surface.dump())
        return
    approved = api_surface.without(GOLDEN.read_text(), MISSING)
    diff = _drift(approved, api_surface.dump(MISSING))
    assert not diff, "public API drifted (update with --update-goldens if intended):\n" + diff


def test_names_that_need_an_extra_are_in_the_golden():
    for name, (module, extra) in api_surface.NEEDS_EXTRA.items():
        extras.require(module, extra)
        assert f"\n{name}: class" in GOLDEN.read_text(), name
