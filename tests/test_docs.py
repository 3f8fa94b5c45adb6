"""The teaching material cannot rot.

Every ```python block in docs/ runs; the site builds strictly (with ``fbnops docs --build-only``);
every built page, opened in a real headless browser, shows rendered math, logs no console error
and asks nothing of the network; opened from ``file://`` too, search finds pages, no page is wider
than a 1280 px window, and no link opens a directory; the API reference documents every public name.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from test_docs_api import public_objects

from fbnops.testing import extras

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted([*DOCS.rglob("*.md"), *DOCS.rglob("*.md.in")])  # pages, and templates of generated ones
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
# TeX that survived the build: delimiters or commands as visible text
RAW_TEX = re.compile(r"\\\(|\\\)|\\\[|\\\]|\\frac|\\sum|\\mu\b|\\hat|\\sqrt")

needs_docs_extra = pytest.mark.skipif(
    shutil.which("mkdocs") is None or importlib.util.find_spec("mkdocs_gen_files") is None,
    reason=extras.reason("docs"),
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
    """The site as a user builds it: ``fbnops docs --build-only``, into $XDG_CACHE_HOME/fbnops/site."""
    if shutil.which("mkdocs") is None or importlib.util.find_spec("mkdocs_gen_files") is None:
        pytest.skip(extras.reason("docs"))
    cache = tmp_path_factory.mktemp("cache")
    result = subprocess.run(
        [sys.executable, "-m", "fbnops.cli", "docs", "--build-only"],
        cwd=cache,
        env={**os.environ, "XDG_CACHE_HOME": str(cache)},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = cache / "fbnops" / "site"
    assert f"open as a file: {(out / 'index.html').as_uri()}" in result.stdout
    return out


@needs_docs_extra
def test_site_builds_strictly(site):
    page = (site / "ops" / "FusedBatchNormGradV3.html").read_text()
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
    page = (site / "math.html").read_text()
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
    """The site served as ``fbnops docs`` serves it (its server, on 127.0.0.1, any free port)."""
    from fbnops.tools.docs import make_server

    server = make_server(site, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium)")
    sync_api = extras.require("playwright.sync_api", "docs")
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
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html") if "search" not in p.parts)


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
        # the article, and its table of contents (a heading's TeX shows there as text)
        text = page.inner_text("article") + page.evaluate(
            "document.querySelector('.md-sidebar--secondary')?.textContent || ''"
        )
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


# ------------------------------------------------------------------------------ the site offline, at 1280 px

WINDOW = {"width": 1280, "height": 900}
# every internal link of a page: its href as written, and where the browser resolves it
LINKS = """[...document.querySelectorAll('a[href]')].map(a => [a.getAttribute('href'), a.href])
  .filter(([raw, url]) => url.startsWith(location.protocol) && !raw.startsWith('#'))"""
# elements of the article whose right edge passes the window's, and code blocks that scroll sideways
OVERFLOW = """[document.documentElement.scrollWidth, innerWidth,
  [...document.querySelectorAll('article pre > code')].filter(c => c.scrollWidth > c.clientWidth + 1).length,
  [...document.querySelectorAll('.md-typeset__scrollwrap')].filter(t => t.scrollWidth > t.clientWidth + 1).length]"""


# What the search box shows, for a failure message: whether the search index loaded (the result
# header reads "Initializing search" until it has), whether the results panel is open, and so on
# (from file://, the vendored shim runs the search worker in an iframe).
SEARCH_STATE = """(() => {
    const q = s => document.querySelector(s);
    return {url: location.href, ready: document.readyState, query: q('input.md-search__input')?.value,
            panel_open: q('[data-md-toggle=search]')?.checked, header: q('.md-search-result__meta')?.textContent,
            items: document.querySelectorAll('.md-search-result__item').length,
            focus: document.activeElement?.className, iframes: document.querySelectorAll('iframe').length};
})()"""


def _search(browser, url: str, query: str) -> list[str]:
    """The texts of the results listed for ``query`` typed into the search box of ``url``, opened in
    a page of its own: a page that showed another query's results would still show them at first."""
    timeout = extras.require("playwright.sync_api", "docs").TimeoutError
    page = browser.new_page(viewport=WINDOW)
    try:
        page.goto(url)
        page.fill("input.md-search__input", query)
        try:
            page.wait_for_selector(".md-search-result__item", timeout=30_000)
        except timeout as e:  # say what the page shows: the cause, if it ever happens again
            state = page.evaluate(SEARCH_STATE)
            raise AssertionError(f"no search result shown for {query!r} in 30 s: {state}") from e
        return page.locator(".md-search-result__item").all_inner_texts()
    finally:
        page.close()


@needs_docs_extra
def test_site_from_file_urls_at_1280_px(site, browser):
    """Opened from the file system: no page wider than the window, no code line hidden past its block,
    no table wider than the text, and every internal link names a page (.html) or a file, never a
    folder a file:// browser would list."""
    problems = []
    page = browser.new_page(viewport=WINDOW)
    for rel in built_pages(site):
        if rel == "404.html":  # only a server shows it (for a URL it does not have): its links are absolute
            continue
        page.goto((site / rel).as_uri())
        width, window, scrolling_code, scrolling_tables = page.evaluate(OVERFLOW)
        if width > window:
            problems.append(f"{rel}: {width} px wide in a {window} px window")
        if scrolling_code:
            problems.append(f"{rel}: {scrolling_code} code block(s) hide part of a line")
        if scrolling_tables:
            problems.append(f"{rel}: {scrolling_tables} table(s) wider than the text column")
        for raw, url in page.evaluate(LINKS):
            target = Path(unquote(urlsplit(url).path))
            # a page (.html), or a file offered for download (a notebook, a figure): never a folder
            if not target.is_file() or target.suffix in ("", ".md"):
                problems.append(f"{rel}: link {raw!r} opens {target}, not a page or a file")
    page.close()
    assert not problems, "\n".join(problems)


@needs_docs_extra
def test_search_works_from_file_and_served(site, served, browser):
    for start in ((site / "index.html").as_uri(), f"{served}/index.html"):
        found = _search(browser, start, "reserve space")
        assert len(found) >= 3 and all("reserve" in text.lower() for text in found[:3]), (start, found[:3])
        found = _search(browser, start, "to_pbtxt")  # the API reference is indexed
        assert any("to_pbtxt" in text for text in found), (start, found[:3])


@needs_docs_extra
def test_display_sums_and_plots_are_readable(site, browser):
    from fbnops.tools.bench.report import PLOT_DPI, PLOT_FONT_PT

    page = browser.new_page(viewport=WINDOW)
    page.goto((site / "math.html").as_uri())
    # a display sum is drawn taller than the text around it (at text size it is about 1 em)
    sizes = page.evaluate("""[...document.querySelectorAll('div.arithmatex mo.large-operator')].map(
        m => m.getBoundingClientRect().height / parseFloat(getComputedStyle(document.body).fontSize))""")
    assert sizes and min(sizes) >= 1.4, sizes
    page.goto((site / "performance.html").as_uri())
    shown = page.evaluate("""[...document.images].filter(i => i.src.endsWith('perf.png'))
        .map(i => [i.clientWidth, i.naturalWidth])""")
    assert shown, "the performance page shows no benchmark plot"
    for width, natural in shown:  # the plot's labels at the size the page shows them
        assert PLOT_FONT_PT * PLOT_DPI / 72 * width / natural >= 12, (width, natural)
    page.close()


@needs_docs_extra
def test_every_page_of_the_docs_is_in_the_nav(site):
    """Each Markdown page (written or generated) is reachable from the navigation."""
    nav = (site / "index.html").read_text()
    pages = [p.relative_to(site).as_posix() for p in site.rglob("*.html") if p.name != "404.html"]
    missing = [p for p in pages if f'href="{p}"' not in nav and p != "index.html"]
    assert not missing, missing


# ------------------------------------------------------------------------------ the API reference


@needs_docs_extra
def test_api_reference_documents_every_public_name(site):
    page = (site / "api.html").read_text()
    assert "str(object=" not in page  # str's help text, once rendered for every string attribute
    ids = set(re.findall(r'id="([^"]+)"', page))
    missing = []
    for path, obj in public_objects():
        home = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"
        if path not in ids and home not in ids:
            missing.append(path)
    assert not missing, missing
    assert "fbnops.Graph.to_pbtxt" in ids and "fbnops.raw_ops.FusedBatchNormGradV3" in ids


@needs_docs_extra
def test_reliability_page_shows_the_committed_run(site):
    run = json.loads((ROOT / "docs" / "assets" / "reliability.json").read_text())
    page = (site / "reliability.html").read_text()
    assert "{{" not in page and f"Run of {len(run['attacks'])} attacks" in page
