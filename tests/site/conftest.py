"""Fixtures of the browser tests: the built sites served, and each page loaded once.

`loaded(edition, doc, scheme)` returns the `LoadedPage` of tests/site/pages.py, loading
the page the first time it is asked for and keeping it for the session, so the raw-TeX,
console, image, alt-text, link, theme and axe-core checks of a page share one load.

`make browser` spreads the tests over both cores (pytest-xdist, each worker its own
Chromium) by file (`--dist loadfile`): every test of test_site.py (the book) runs in one
worker and every test of test_student_site.py (the student edition) in one worker, so
each page of each edition is loaded once.
"""

from __future__ import annotations

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
    """loaded(edition, doc, scheme) -> LoadedPage, each loaded once per session."""
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

    return get
