"""The student edition as published: _build/pages/student/, beside the book.

`make test` (its html step: scripts/book.py --pages) puts the two built editions together
in _build/pages exactly as the Pages workflow uploads them. Every page of the student
edition is opened from there in headless Chromium, as test_site.py opens the book's: no
console error, no failed or outside request, every formula typeset and no raw TeX
anywhere a reader can see text, images loaded with alternative text, no serious or
critical axe-core violation in light and dark mode. Each chapter's Colab and Binder
buttons open its student notebook (editions/student/), and every link of a student
notebook to the online book names a page and an anchor of the student edition.
"""

from __future__ import annotations

from urllib.parse import urlparse

import nbformat
import pytest

from tests.conftest import ROOT, serve_directory
from tests.site.test_colab_edition_site import LINK, Ids
from tests.site.test_site import (
    AXE,
    CHAPTERS,
    CONFIG,
    FILE_NAME_ALT,
    PAGES,
    TEXT_JS,
    describe_violations,
    open_page,
    raw_tex,
    run_axe,
    wait_for_mathjax,
)

pytestmark = pytest.mark.browser

SITE = ROOT / "_build" / "pages"
STUDENT = SITE / "student"
SHOTS = ROOT / "_build" / "screenshots" / "student"
NOTEBOOKS = sorted((ROOT / "editions" / "student").glob("[0-9][0-9]_*.ipynb"))


@pytest.fixture(scope="module")
def site():
    """The base URL of the student edition, served within the whole published site."""
    if not (STUDENT / "index.html").exists():
        pytest.fail("no published site in _build/pages: run `make pages` (make test does)")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with serve_directory(SITE) as url:
        yield f"{url}/student"


def test_the_published_site_has_the_book_and_the_student_edition_beside_it():
    # index.html redirects to the first page (book/intro.html) in both editions
    assert (SITE / "index.html").read_text() == (STUDENT / "index.html").read_text()
    book = (SITE / f"{PAGES[0]}.html").read_text()
    student = (STUDENT / f"{PAGES[0]}.html").read_text()
    assert "(student edition)" in student and "(student edition)" not in book
    assert (SITE / "_static" / "mathjax" / "tex-mml-chtml.js").exists()
    assert (STUDENT / "_static" / "mathjax" / "tex-mml-chtml.js").exists()
    for doc in PAGES:
        assert (SITE / f"{doc}.html").exists() and (STUDENT / f"{doc}.html").exists(), doc
    built = ROOT / "_build" / "student" / "_build" / "html"
    for doc in CHAPTERS:  # the current build, not an older copy
        assert (STUDENT / f"{doc}.html").read_bytes() == (built / f"{doc}.html").read_bytes()
    for doc in CHAPTERS:
        assert 'class="solution' not in (STUDENT / f"{doc}.html").read_text()


@pytest.mark.parametrize("doc", PAGES)
def test_page_loads_typesets_and_shows_no_raw_tex(browser, site, doc):
    context, page, record = open_page(browser, site, doc)
    try:
        mathjax = wait_for_mathjax(page)
        chunks = page.evaluate(TEXT_JS)
        images = page.evaluate(
            """async () => Promise.all([...document.images].map(async img => {
                 try { await img.decode(); } catch (e) {}
                 return {src: img.currentSrc.slice(0, 80), alt: img.getAttribute('alt'),
                         ok: img.complete && img.naturalWidth > 0};
               }))"""
        )
        page.screenshot(path=SHOTS / f"{doc.replace('/', '__')}.png", full_page=True)
    finally:
        context.close()
    assert not record.console_errors, f"{doc}: console errors: {record.console_errors}"
    assert not record.external, f"{doc}: the page asked for other hosts: {record.external}"
    assert not record.failed, f"{doc}: requests failed: {record.failed}"
    assert not mathjax["errors"] and not mathjax["untypeset"], mathjax
    assert len(chunks) > 10 and len(chunks[0][1]) > 200, f"{doc}: no text found"
    found = raw_tex(chunks)
    assert not found, f"{doc}: raw TeX visible ({len(found)}):\n" + "\n".join(found[:20])
    assert not [i["src"] for i in images if not i["ok"]], f"{doc}: images that did not load"
    bad = [i for i in images if not (i["alt"] or "").strip() or FILE_NAME_ALT.search(i["alt"])]
    assert not bad, f"{doc}: images without alternative text: {bad}"


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("doc", PAGES)
def test_no_serious_accessibility_violations(browser, site, doc, scheme):
    assert AXE.exists(), "axe-core is missing: run `npm ci` (make test does)"
    context, page, record = open_page(browser, site, doc, color_scheme=scheme)
    try:
        wait_for_mathjax(page)
        violations = run_axe(page)
    finally:
        context.close()
    serious = [v for v in violations if v["impact"] in ("serious", "critical")]
    assert not serious, f"{doc} ({scheme}): axe-core found:\n{describe_violations(serious)}"
    assert not record.console_errors, record.console_errors


@pytest.mark.parametrize("doc", CHAPTERS)
def test_colab_and_binder_buttons_open_the_student_notebook(browser, site, doc):
    repo = urlparse(CONFIG["repository"]["url"]).path.strip("/")
    branch = CONFIG["repository"]["branch"]
    notebook = f"editions/student/{doc.removeprefix('notebooks/')}.ipynb"
    colab = f"https://colab.research.google.com/github/{repo}/blob/{branch}/{notebook}"
    binder = f"https://mybinder.org/v2/gh/{repo}/{branch}?urlpath=tree/{notebook}"
    context, page, _ = open_page(browser, site, doc)
    try:
        links = page.eval_on_selector_all(
            "a[href*='colab.research.google.com']", "els => els.map(e => e.href)"
        )
        binder_links = page.eval_on_selector_all(
            "a[href*='mybinder.org']", "els => els.map(e => e.href)"
        )
    finally:
        context.close()
    assert links == [colab]
    assert binder_links == [binder]
    assert (ROOT / notebook).exists()
    student = nbformat.read(ROOT / notebook, as_version=4)
    assert "student_edition" in student.metadata


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_student_notebook_links_name_pages_and_anchors_of_the_student_edition(path):
    nb = nbformat.read(path, as_version=4)
    base = nb.metadata["student_edition"]["site"]
    assert base.endswith("/student/")
    text = "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    links = [u for u in LINK.findall(text) if u.startswith(base)]
    assert len(links) >= 10, f"{path.name}: only {len(links)} links to the site?"
    ids_of: dict[str, set[str]] = {}
    for url in links:
        page, _, anchor = url.removeprefix(base).partition("#")
        file = STUDENT / page
        assert file.is_file(), f"{path.name}: {url} names no page of the student edition"
        if anchor:
            if page not in ids_of:
                ids_of[page] = Ids(file.read_text()).ids
            assert anchor in ids_of[page], f"{path.name}: {url}: no such anchor in the edition"
