"""Fixtures of the browser tests: the built sites served, and each page loaded once.

`loaded(edition, doc, scheme)` returns the `LoadedPage` of tests/site/pages.py, loading
the page the first time it is asked for and keeping it for the session, so the raw-TeX,
console, image, alt-text, link, theme and axe-core checks of a page share one load.

`make browser` spreads the tests over both cores (pytest-xdist, each worker its own
Chromium) by page (`--dist loadgroup`, groups set below): every test of a page, in either
edition and theme, runs in the worker that loads that page, so each page of each edition
is loaded once per theme, and the pages share the two cores evenly. A test of no page
runs with the other tests of its file (their module fixtures are built once).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import serve_directory
from tests.site.pages import HTML, PUBLISHED, STUDENT, LoadedPage, load


@pytest.fixture(scope="session")
def book_site():
    """The base URL of the book (_build/html)."""
    if not (HTML / "index.html").exists():
        pytest.fail("no built site in _build/html: run `make book` first")
    with serve_directory(HTML) as url:
        yield url


@pytest.fixture(scope="session")
def student_site():
    """The base URL of the student edition, served within the whole published site."""
    if not (STUDENT / "index.html").exists():
        pytest.fail("no published site in _build/pages: run `make pages` (make test does)")
    with serve_directory(PUBLISHED) as url:
        yield f"{url}/student"


@pytest.fixture(scope="session")
def loaded(request, browser):
    """loaded(edition, doc, scheme) -> LoadedPage, each loaded once per session (the pages
    that `load` keeps open for the explorer tests are closed at the end)."""
    cache: dict[tuple[str, str, str], LoadedPage | BaseException] = {}

    def get(edition: str, doc: str, scheme: str = "light") -> LoadedPage:
        key = (edition, doc, scheme)
        if key not in cache:
            site = request.getfixturevalue(f"{edition}_site")
            try:
                cache[key] = load(browser, site, edition, doc, scheme)
            except Exception as exc:  # every check of this page fails with the same error
                cache[key] = exc
        if isinstance(cache[key], BaseException):
            raise cache[key]
        return cache[key]

    yield get
    for result in cache.values():
        if isinstance(result, LoadedPage) and result.live is not None:
            result.live[0].close()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """The xdist group of each browser test: its page, or else its file."""
    here = Path(__file__).parent
    for item in items:
        if item.path.parent != here:
            continue
        params = getattr(item, "callspec", None)
        doc = params.params.get("doc") if params else None
        group = f"page:{doc}" if doc else f"file:{item.path.name}"
        item.add_marker(pytest.mark.xdist_group(group))
