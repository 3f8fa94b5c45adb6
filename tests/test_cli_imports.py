"""The CLI imports a command's code only when that command runs (every command builds the whole parser)."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("fbnops.tools.bench.__main__", "fbnops.tools.bench.timing", "fbnops.tools.bench.report",
         "fbnops.tools.export", "fbnops.tools.exercise", "fbnops.tools.docs", "fbnops.tools.explain",
         "fbnops.distributed.demo")  # fmt: skip


def test_building_the_parser_loads_no_command():
    code = (
        "import sys; from fbnops.cli import build_parser; build_parser(); "
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_backend_choices_are_the_registrys():
    from fbnops import cli
    from fbnops.framework import registry

    assert cli.BACKENDS == registry.known_backends() == ("cython", "numba", "reference")
