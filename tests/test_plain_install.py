"""The README's two commands on a plain install, and what a missing extra looks like.

``test_readme_commands_pass_in_a_fresh_venv`` copies this checkout (``git ls-files``: a fresh build
directory), creates a venv without the system's packages, runs ``pip install -e ".[test]" && fbnops
demo`` and then the README's test command (``python -m pytest tests -ra``, without this test): it
must pass with no FAILED/ERROR line, every skip saying which extra to install in one wording.
It builds the Cython kernels again (minutes), so it runs only in CI or when asked for.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fbnops.testing import extras

ROOT = Path(__file__).resolve().parent.parent
THIS = "tests/test_plain_install.py"
# The module each extra brings that a skip reason may name (a reason naming one must be the extra's).
EXTRA_MODULES = {
    "numba": "numba", "oracle": "tensorflow|torch|pytorch", "onednn": "onednn", "mpi": "mpi4py|mpich",
    "docs": "mkdocs|playwright|latex2mathml", "bench": "matplotlib", "cli": "rich",
}  # fmt: skip


def _skip_reasons(summary: str) -> set[str]:
    """The distinct reasons of ``SKIPPED [n] file:line: reason`` lines in a ``-ra`` summary."""
    return {m.group(1) for m in re.finditer(r"^SKIPPED \[\d+\] [^:]+:\d+: (.*)$", summary, re.M)}


def test_skip_reasons_name_each_extra_in_one_wording():
    """The check the fresh-venv test applies, on a made-up summary (it must be able to fail)."""
    good = f"SKIPPED [3] tests/a.py:4: {extras.reason('numba')}\nSKIPPED [1] tests/b.py:9: no fork() here\n"
    assert _bad_reasons(_skip_reasons(good)) == []
    bad = good + "SKIPPED [2] tests/c.py:7: numba missing\n"
    assert _bad_reasons(_skip_reasons(bad)) == ["numba missing"]


def _bad_reasons(reasons: set[str]) -> list[str]:
    """Reasons that name an extra (or an extra's module as missing) without :func:`extras.reason`'s words first.

    A reason may add a detail after those words; the summary then still names each extra one way."""
    worded = tuple(extras.reason(e) for e in _extras()) + (extras.backend_reason("cython"),)
    modules = "|".join(EXTRA_MODULES.values())
    pattern = re.compile(rf"\bextra\b|pip install|\b({modules})\b.*\b(missing|not installed|unavailable)\b", re.I)
    return sorted(r for r in reasons if pattern.search(r) and not r.startswith(worded))


def _extras() -> list[str]:
    """The optional-dependency extras pyproject.toml declares."""
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return re.findall(r"^([A-Za-z0-9_-]+)\s*=", section, re.M)


def test_sync_batch_norm_without_torch_is_one_line_naming_the_extra():
    """``from fbnops.distributed import *`` and ``fbnops.distributed.SyncBatchNorm`` with torch absent."""
    want = "ImportError: fbnops.distributed.SyncBatchNorm needs PyTorch: pip install 'fbnops[oracle]'"
    for code in ("from fbnops.distributed import *", "import fbnops.distributed as d; d.SyncBatchNorm"):
        r = subprocess.run([sys.executable, "-c", f"import sys; sys.modules['torch'] = None; {code}"],
                           capture_output=True, text=True, timeout=120)  # fmt: skip
        assert r.returncode == 1 and r.stderr.splitlines()[-1] == want, r.stderr
        assert "ModuleNotFoundError" not in r.stderr and "During handling" not in r.stderr
    ok = "import sys; sys.modules['torch'] = None; from fbnops.distributed import ThreadComm, FusedBatchNormV3"
    assert subprocess.run([sys.executable, "-c", ok], timeout=120).returncode == 0  # the rest needs no torch


def _copy_checkout(dest: Path) -> None:
    """The files git knows (tracked and new, not ignored): no build directory, no compiled kernels."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")  # fmt: skip
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():  # listed but deleted in the working tree: not copied
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(cmd)} -> {r.returncode}\n{r.stdout[-12000:]}\n{r.stderr[-4000:]}"
    return r


@pytest.mark.slow
@pytest.mark.skipif(
    not (os.environ.get("FBNOPS_PLAIN_INSTALL_TEST") == "1" or os.environ.get("CI")),
    reason="builds the Cython kernels again in a fresh venv (minutes): runs when CI or FBNOPS_PLAIN_INSTALL_TEST=1 "
    "is set",
)
@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout")
def test_readme_commands_pass_in_a_fresh_venv(tmp_path):
    readme = (ROOT / "README.md").read_text()
    assert 'pip install -e ".[test]" && fbnops demo' in readme and "python -m pytest tests -ra" in readme
    assert re.search(r"^test = \[", (ROOT / "pyproject.toml").read_text(), re.M)  # the extra the README names
    src = tmp_path / "fbnops"
    _copy_checkout(src)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)  # no system packages
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "FBNOPS_"))}
    env.update(VIRTUAL_ENV=str(venv), PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}")  # pip's cache is reused
    python = str(bindir / "python")
    _run([python, "-m", "pip", "install", "--quiet", "-e", ".[test]"], src, env, 3600)
    demo = _run(["fbnops", "demo"], src, env, 600)
    assert "OK" in demo.stdout
    tests = _run([python, "-m", "pytest", "tests", "-ra", "-x", "-p", "no:cacheprovider", "--deselect", THIS],
                 src, env, 3600)  # fmt: skip
    summary = tests.stdout
    assert not re.search(r"^(FAILED|ERROR) ", summary, re.M), summary[-4000:]
    assert re.search(r"\d+ passed", summary.splitlines()[-1]), summary[-2000:]
    assert _bad_reasons(_skip_reasons(summary)) == [], summary[-4000:]
    for extra in ("numba", "oracle"):  # not in [test]: their tests skip, with the extra's one reason
        assert extras.reason(extra) in _skip_reasons(summary)
