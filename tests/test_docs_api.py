"""The API reference and the ``fbnops docs`` command, without building the site.

Every public name has a docstring of its own (the API reference is rendered from them; the built
page is checked in tests/test_docs.py); the op modules are not top-level names; ``fbnops docs``
names the extra it needs, ``fbnops run --help`` points at the site, and the command builds then
serves the site on 127.0.0.1 until Ctrl-C.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import shutil
import signal
import subprocess
import sys

import pytest

from fbnops.testing import extras

needs_docs_extra = pytest.mark.skipif(
    shutil.which("mkdocs") is None or importlib.util.find_spec("mkdocs_gen_files") is None,
    reason=extras.reason("docs"),
)


# ------------------------------------------------------------------------------ docstrings

API_MODULES = ("fbnops", "fbnops.raw_ops", "fbnops.errors", "fbnops.distributed", "fbnops.testing")


def public_objects():
    """(dotted name, object) of every public name of the API modules, and of their classes' public members."""
    for module_name in API_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            try:
                obj = getattr(module, name)
            except ImportError:  # a name that needs an extra (SyncBatchNorm without torch)
                continue
            if inspect.ismodule(obj) or not callable(obj):
                continue
            yield f"{module_name}.{name}", obj
            if inspect.isclass(obj) and not issubclass(obj, BaseException):
                for member, value in vars(obj).items():
                    routine = callable(value) or isinstance(value, property | classmethod | staticmethod)
                    if routine and not member.startswith("_"):
                        yield f"{module_name}.{name}.{member}", getattr(obj, member)


def test_every_public_name_has_its_own_docstring():
    """Its own: a method that overrides one (``SyncBatchNorm.forward``) does not borrow the base's text."""
    missing = []
    for path, obj in public_objects():
        target = obj.fget if isinstance(obj, property) else getattr(obj, "__func__", obj)
        own = target.__doc__ if inspect.isclass(target) or inspect.isroutine(target) else inspect.getdoc(target)
        if not (own or "").strip():
            missing.append(path)
    assert not missing, missing


def test_the_op_modules_are_not_top_level_names():
    """``fbnops.fused_batch_norm_v3`` would be a module where a user expects a function: the functions
    are ``fbnops.raw_ops.*``, the modules ``fbnops.ops.*``."""
    import fbnops

    assert not [n for n in dir(fbnops) if n.startswith("fused_batch_norm")]
    assert inspect.ismodule(importlib.import_module("fbnops.ops.fused_batch_norm_v3"))


# ------------------------------------------------------------------------------ fbnops docs


def test_docs_command_without_the_docs_extra_names_it():
    blocked = "import sys; sys.modules['mkdocs'] = None; from fbnops.cli import main; sys.exit(main(['docs']))"
    done = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr  # one line; it lists every missing module (all of them on a plain install)
    assert lines[0].startswith("fbnops: error: building the docs needs the 'docs' extra (pip install -e '.[docs]')")
    assert "missing: mkdocs" in lines[0]


def test_run_help_points_at_the_site_not_a_build_product():
    done = subprocess.run([sys.executable, "-m", "fbnops.cli", "run", "--help"], capture_output=True, text=True)
    assert "docs/runfile.md" not in done.stdout and "fbnops docs" in done.stdout


@pytest.mark.slow
@needs_docs_extra
def test_docs_command_builds_then_serves_until_ctrl_c(tmp_path):
    from urllib.request import urlopen

    # stderr merged into stdout (an undrained pipe cannot fill); faulthandler: a hang shows its stack
    proc = subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-m", "fbnops.cli", "docs", "--port", "0"],
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # Ctrl-C acts even when this run was started with SIGINT ignored (a background job of a
        # script: `cmd &`), which the server would otherwise inherit and keep ignoring
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        lines = []
        while not lines or not lines[-1].startswith("serving on "):
            line = proc.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
        url = lines[-1].split()[2]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/index.html")
        with urlopen(url, timeout=30) as response:
            assert "fbnops" in response.read().decode()
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=30)  # it exits in about 0.1 s
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)  # faulthandler prints every thread's stack
            pytest.fail("no exit 30 s after Ctrl-C; its output and stacks:\n" + proc.communicate(timeout=30)[0])
        assert code == 0, proc.stdout.read()
    finally:
        proc.kill()
    assert (tmp_path / "fbnops" / "site" / "search" / "search_index.js").is_file()  # the offline search index
