"""Opens the built site in headless Chromium: the math is typeset and every image loads.

Needs the built site (`mkdocs build --strict`, which CI runs first; ADVSIM_DOCS_SITE
names another folder), Playwright's Python package (the `docs` extra) and a Chromium
(Debian's package `chromium`; PLAYWRIGHT_CHROMIUM names another executable). Where one is
missing the test skips and says which.
"""

import functools
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("ADVSIM_DOCS_SITE", ROOT / "site"))

# page -> (has math, has images); the home page and two tutorials
PAGES = {
    "index.html": (True, False),
    "tutorials/flow/index.html": (True, False),
    "tutorials/sweep/index.html": (False, True),
    "gallery/index.html": (False, True),
}


def _chromium() -> str | None:
    for candidate in (os.environ.get("PLAYWRIGHT_CHROMIUM"), "chromium", "chromium-browser"):
        if candidate and (path := shutil.which(candidate)):
            return path
    return None


@pytest.fixture(scope="module")
def browser_page():
    if not (SITE / "index.html").exists():
        pytest.skip(f"no built site at {SITE}: run `mkdocs build --strict` first")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (the docs extra)"
    )
    executable = _chromium()
    if executable is None:
        pytest.skip("no Chromium found (apt-get install chromium, or set PLAYWRIGHT_CHROMIUM)")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(SITE))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=executable, headless=True)
            yield browser, f"http://127.0.0.1:{server.server_address[1]}/"
            browser.close()
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("path", sorted(PAGES))
def test_page_renders_math_and_images(browser_page, path):
    browser, base = browser_page
    has_math, has_images = PAGES[path]
    # A page of its own: requests a previous page left in flight (its search index, say)
    # are cancelled with that page and never counted against this one.
    page = browser.new_page()
    failed = []
    page.on("requestfailed", lambda request: failed.append(request.url))
    response = page.goto(base + path, wait_until="load")
    assert response is not None and response.ok, path
    # MathJax (served by the site itself) typesets every arithmatex span or block.
    page.wait_for_function("window.MathJax && MathJax.startup && MathJax.startup.promise")
    page.evaluate("MathJax.startup.promise")
    sources = page.locator(".arithmatex").count()
    typeset = page.locator(".arithmatex mjx-container").count()
    errors = page.locator("mjx-merror").count()
    if has_math:
        assert sources > 0, f"{path}: no math found"
    assert typeset == sources, f"{path}: {typeset} of {sources} formulas typeset"
    assert errors == 0, f"{path}: {errors} MathJax errors"
    # Every image is loaded and decoded (naturalWidth > 0).
    images = page.evaluate(
        "Array.from(document.images).map(i => [i.getAttribute('src').slice(0, 60),"
        " i.complete && i.naturalWidth > 0])"
    )
    if has_images:
        assert images, f"{path}: no images found"
    assert [src for src, ok in images if not ok] == [], f"{path}: images not loaded"
    assert failed == [], f"{path}: requests failed: {failed}"
    page.close()
