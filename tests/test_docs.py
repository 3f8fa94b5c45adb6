"""The teaching material cannot rot.

Every ```python block in docs/ runs; the site builds strictly; and every built page, opened in
a real headless browser, shows rendered math, logs no console error and asks nothing of the
network.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md"))
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
# TeX that survived the build: delimiters or commands as visible text
RAW_TEX = re.compile(r"\\\(|\\\)|\\\[|\\\]|\\frac|\\sum|\\mu\b|\\hat|\\sqrt")

needs_docs_extra = pytest.mark.skipif(
    shutil.which("mkdocs") is None or importlib.util.find_spec("mkdocs_gen_files") is None,
    reason="docs extra not installed (pip install -e '.[docs]')",
)


def test_every_page_has_been_found():
    names = {p.name for p in PAGES}
    assert {
        "index.md",
        "math.md",
        "modes.md",
        "reserve_spaces.md",
        "layouts.md",
        "kernels.md",
        "rosetta.md",
        "semantics.md",
        "cli.md",
    } <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_snippets_run(page, tmp_path, monkeypatch):
    blocks = BLOCK.findall(page.read_text())
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    for i, code in enumerate(blocks):
        exec(compile(code, f"{page.name}[python block {i}]", "exec"), namespace)


def test_rosetta_page_covers_all_five_apis():
    text = (DOCS / "rosetta.md").read_text()
    for api in (
        "raw_ops",
        "bindings_mirror.cc",
        "bindings_mirror.java",
        "bindings_mirror import directml",
        "bindings_mirror.onednn_graph",
    ):
        assert api in text


# research notes and folders that exist beside the repository, never in a user's clone
OUTSIDE = ("/".join(["..", "shared"]), "tf_semantics.md", "dml_onednn.md")


def test_docs_reference_nothing_outside_the_project():
    for page in PAGES:
        text = page.read_text()
        assert not any(ref in text for ref in OUTSIDE), page


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    if shutil.which("mkdocs") is None or importlib.util.find_spec("mkdocs_gen_files") is None:
        pytest.skip("docs extra not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return out


@needs_docs_extra
def test_site_builds_strictly(site):
    page = (site / "ops" / "FusedBatchNormGradV3" / "index.html").read_text()
    for generated in (
        "reserve_space_1",
        "reserve_space_2",
        "is_training",
        "DML_BATCH_NORMALIZATION_GRAD_OPERATOR_DESC",
        "fusedBatchNormGrad",
    ):
        assert generated in page


@needs_docs_extra
def test_math_is_rendered_at_build_time(site):
    page = (site / "math" / "index.html").read_text()
    assert page.count("<math") >= 5  # MathML, made by the build
    assert "mathjax" not in page.lower() and "katex" not in page.lower()


@needs_docs_extra
def test_generated_pictures_exist(site):
    pictures = sorted(p.relative_to(site).as_posix() for p in (site / "assets" / "figures").glob("*.svg"))
    assert {
        "assets/figures/layouts.svg",
        "assets/figures/dataflow.svg",
        "assets/figures/gradient_graph.svg",
        "assets/figures/modes.svg",
        "assets/figures/architecture.svg",
    } <= set(pictures)


# ------------------------------------------------------------------------------ a real browser


@pytest.fixture(scope="module")
def served(site):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *args: None  # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed (docs extra)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        yield b
        b.close()


def built_pages(site: Path) -> list[str]:
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("index.html") if "search" not in p.parts)


@needs_docs_extra
def test_every_page_in_a_browser(site, served, browser):
    """Rendered math, no console error, no request that leaves this machine."""
    problems = []
    math_pages = 0
    for rel in built_pages(site):
        page = browser.new_page()
        errors, external = [], []
        page.on("console", lambda msg, errors=errors: errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc, errors=errors: errors.append(str(exc)))
        page.on(
            "request",
            lambda req, external=external: (
                external.append(req.url)
                if urlsplit(req.url).hostname not in ("127.0.0.1", None) and not req.url.startswith("data:")
                else None
            ),
        )
        page.goto(f"{served}/{rel}", wait_until="networkidle")
        text = page.inner_text("article")
        if RAW_TEX.search(text):
            problems.append(f"{rel}: unrendered TeX near {RAW_TEX.search(text).group(0)!r}")
        math_pages += page.locator("math").count() > 0
        broken = page.evaluate("[...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src)")
        problems += [f"{rel}: console error: {e}" for e in errors]
        problems += [f"{rel}: external request: {u}" for u in external]
        problems += [f"{rel}: broken image: {u}" for u in broken]
        page.close()
    assert not problems, "\n".join(problems)
    assert math_pages >= 3  # the derivation, modes and reserve-space pages carry formulas


def test_readme_example_says_what_it_computes():
    """The README's example runs, and its comments are true."""
    block = BLOCK.findall((ROOT / "README.md").read_text())[0]
    ns: dict = {}
    exec(compile(block, "README.md[python block 0]", "exec"), ns)
    np, grad, fwd = ns["np"], ns["grad"], ns["fwd"]
    n = 32 * 4 * 4
    assert np.allclose(fwd.reserve_space_1, 5.0, atol=0.3)
    assert np.allclose(grad.offset_backprop, n * ns["offset"], atol=0.15 * n)
    assert np.allclose(grad.scale_backprop, n * ns["scale"], rtol=0.1)
    assert np.allclose(grad.x_backprop.sum(axis=(0, 1, 2)), 0.0, atol=1e-3)
