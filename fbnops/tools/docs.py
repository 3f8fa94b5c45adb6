"""``fbnops docs``: build the documentation site into a cache directory and serve it on 127.0.0.1.

    fbnops docs                 build, then serve on http://127.0.0.1:8000/ until Ctrl-C
    fbnops docs --build-only    build, print where the site is, exit
    fbnops docs --port 0        any free port;  --open: also open it in a browser

The site is built from the clone fbnops is installed from (its ``mkdocs.yml`` and ``docs/``),
with mkdocs and the plugins of the ``docs`` extra, into ``$XDG_CACHE_HOME/fbnops/site`` (or
``~/.cache/fbnops/site``).  It works served and opened as files (``file://``): search is built in,
and every link names an ``.html`` page.  A failed build leaves the previous site in place.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import webbrowser
from pathlib import Path

__all__ = [
    "DocsError",
    "build",
    "buildable_root",
    "cache_dir",
    "make_server",
    "missing_docs_extra",
    "project_root",
    "run",
]

# What ``mkdocs.yml`` needs: mkdocs, its plugins and theme, the math hook's converter.
DOCS_MODULES = ("mkdocs", "material", "mkdocs_gen_files", "mkdocstrings_handlers.python", "latex2mathml", "matplotlib")
# mkdocs 1.6 plugins print a page-long notice about a future mkdocs 2 on every build
QUIET_ENV = {"NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}


class DocsError(ValueError):
    """A reason the site cannot be built or served (the CLI prints it on one line, exit 2)."""


def cache_dir() -> Path:
    """Where the built site goes: ``$XDG_CACHE_HOME/fbnops/site``, else ``~/.cache/fbnops/site``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fbnops" / "site"


def project_root() -> Path | None:
    """The clone fbnops runs from (the folder holding ``mkdocs.yml``), or None for an installed wheel."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "mkdocs.yml").is_file() and (root / "docs").is_dir() else None


def missing_docs_extra() -> list[str]:
    """The modules of the ``docs`` extra that are not installed."""
    missing = []
    for name in DOCS_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a parent package missing, or a module blocked in sys.modules
            found = False
        if not found:
            missing.append(name)
    return missing


def buildable_root(root: Path | None = None) -> Path:
    """The clone to build from; :class:`DocsError` naming what is missing if the site cannot be built."""
    missing = missing_docs_extra()
    if missing:
        raise DocsError(
            f"building the docs needs the 'docs' extra (pip install -e '.[docs]'); missing: {', '.join(missing)}"
        )
    root = root or project_root()
    if root is None:
        raise DocsError("the docs are built from a clone of fbnops (mkdocs.yml and docs/ were not found)")
    return root


def build(out: Path | None = None, root: Path | None = None) -> Path:
    """Build the site into ``out`` (default :func:`cache_dir`) and return ``out``.

    The build goes to a scratch folder beside ``out`` first and replaces ``out`` only when it
    succeeds, so a failed build never leaves half a site behind.
    """
    root = buildable_root(root)
    out = Path(out or cache_dir()).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".site-", dir=out.parent))
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "mkdocs",
                "build",
                "--strict",
                "--quiet",
                "-f",
                str(root / "mkdocs.yml"),
                "-d",
                str(scratch),
            ],
            cwd=root,
            env={**os.environ, **QUIET_ENV},
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
            raise DocsError("mkdocs build failed: " + (lines[-1] if lines else f"exit code {done.returncode}"))
        if out.exists():
            shutil.rmtree(out)
        scratch.rename(out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return out


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002  (the base class's name)
        pass


def make_server(site: Path, port: int = 8000) -> http.server.ThreadingHTTPServer:
    """An HTTP server of ``site`` on 127.0.0.1 (``port`` 0: any free port); call ``serve_forever``."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    try:
        return http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError as e:
        raise DocsError(f"--port {port}: {e.strerror or e}") from e
    except OverflowError as e:  # a port outside 0-65535
        raise DocsError(f"--port {port}: a port is a number from 0 to 65535") from e


def run(build_only: bool = False, port: int = 8000, open_browser: bool = False) -> int:
    """The ``fbnops docs`` command: build, then (unless ``build_only``) serve until Ctrl-C."""
    if not 0 <= port <= 65535:
        raise DocsError(f"--port {port}: a port is a number from 0 to 65535")
    root = buildable_root()  # before any output: a missing extra is the one line the user sees
    print(f"building the docs with mkdocs into {cache_dir()} ...", flush=True)
    site = build(root=root)
    index = site / "index.html"
    print(f"site: {site}\nopen as a file: {index.as_uri()}", flush=True)
    if build_only:
        return 0
    server = make_server(site, port)
    url = f"http://127.0.0.1:{server.server_address[1]}/index.html"
    print(f"serving on {url} (Ctrl-C stops)", flush=True)
    if open_browser:
        webbrowser.open(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped", flush=True)
    finally:
        server.server_close()
    return 0
