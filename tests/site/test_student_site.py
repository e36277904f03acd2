"""The student edition as published: _build/pages/student/, beside the book.

`make test` (its html step: scripts/book.py --pages) puts the two built editions together
in _build/pages exactly as the Pages workflow uploads them. Every page of the student
edition is loaded from there in headless Chromium, once in light and once in dark mode,
by tests/site/pages.py (as the book's pages are for test_site.py), and checked: no
console error, no failed or outside request, every formula typeset and no raw TeX
anywhere a reader can see text, images loaded with alternative text, no serious or
critical axe-core violation in either theme, dark mode working, and what the reader sees
fits the page (outputs, tables and their captions, punctuation after formulas). Each chapter's Colab and Binder
buttons open its student notebook (editions/student/), and every link of a student
notebook to the online book names a page and an anchor of the student edition.
"""

from __future__ import annotations

from urllib.parse import urlparse

import nbformat
import pytest

from tests.site.pages import (
    CHAPTERS,
    CONFIG,
    MAX_PAGE_BYTES,
    PAGES,
    PUBLISHED,
    ROOT,
    SCHEMES,
    STUDENT,
    STUDENTS,
    check_figure_text,
    describe_violations,
    images_without_alt,
    phone_figure_problems,
    raw_tex,
)
from tests.site.test_colab_edition_site import LINK, Ids

pytestmark = pytest.mark.browser


def pytest_generate_tests(metafunc):
    """Every page-level check runs on the English edition and on its Korean edition."""
    if "edition" in metafunc.fixturenames:
        metafunc.parametrize("edition", STUDENTS)


SITE = PUBLISHED
NOTEBOOKS = sorted((ROOT / "editions" / "student").glob("[0-9][0-9]_*.ipynb"))


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


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("doc", PAGES)
def test_page_loads_typesets_and_shows_no_raw_tex(loaded, edition, doc, scheme):
    page = loaded(edition, doc, scheme)
    assert not page.console_errors, f"{doc}: console errors: {page.console_errors}"
    assert not page.external, f"{doc}: the page asked for other hosts: {page.external}"
    assert not page.failed, f"{doc}: requests failed: {page.failed}"
    assert not page.mathjax["errors"] and not page.mathjax["untypeset"], page.mathjax
    chunks = page.text
    assert len(chunks) > 10 and len(chunks[0][1]) > 200, f"{doc}: no text found"
    found = raw_tex(chunks)
    assert not found, f"{doc}: raw TeX visible ({len(found)}):\n" + "\n".join(found[:20])
    assert not [i["url"] for i in page.images if not i["ok"]], f"{doc}: images that did not load"
    bad = images_without_alt(page.images)
    assert not bad, f"{doc}: images without alternative text: {bad}"


@pytest.mark.parametrize("doc", PAGES)
def test_no_serious_accessibility_violations(loaded, edition, doc):
    """axe-core in the light theme (the student edition's styles are the book's, which
    tests/site/test_site.py checks in both themes)."""
    page = loaded(edition, doc, "light")
    serious = [v for v in page.axe if v["impact"] in ("serious", "critical")]
    assert not serious, f"{doc}: axe-core found:\n{describe_violations(serious)}"


@pytest.mark.parametrize("doc", PAGES)
def test_what_the_reader_sees_fits(loaded, edition, doc):
    """As for the book (test_site.py): outputs wrap at 1366 wide; there and on a 390-wide
    phone no output, `pre` or table runs off the edge without a box that scrolls and takes
    keyboard focus, no caption is cut, no full stop after a formula starts a line, and no
    inline formula or code is cut."""
    page = loaded(edition, doc)
    for width, fit in ((1366, page.fit), (390, page.phone_fit)):
        assert not fit["runs_off"], (
            f"{doc} at {width} wide: running off the edge: {fit['runs_off']}"
        )
        assert not fit["captions"], f"{doc} at {width} wide: captions cut: {fit['captions']}"
        assert not fit["punctuation"], f"{doc} at {width} wide: {fit['punctuation']}"
        assert not fit["formulas"], f"{doc} at {width} wide: formulas cut: {fit['formulas']}"
        assert not fit["inline_code"], f"{doc} at {width} wide: code cut: {fit['inline_code']}"
    scrolled = [r for r in page.fit["scrolled"] if r["kind"] == "output"]
    assert not scrolled, f"{doc}: outputs cut at 1366 wide (scroll to read): {scrolled}"


@pytest.mark.parametrize("doc", PAGES)
def test_dark_mode(loaded, edition, doc):
    page = loaded(edition, doc, "dark")
    assert page.theme == "dark"
    luminance = sum(page.background) / (3 * 255)
    assert luminance < 0.3, f"{doc}: dark mode background is light: rgb{tuple(page.background)}"


@pytest.mark.parametrize("doc", CHAPTERS)
def test_colab_and_binder_buttons_open_the_student_notebook(loaded, edition, doc):
    """The student editions' buttons open the student notebooks: editions/student/, and the
    Korean student edition's editions/ko/student/."""
    repo = urlparse(CONFIG["repository"]["url"]).path.strip("/")
    branch = CONFIG["repository"]["branch"]
    folder = {"student": "editions/student", "ko_student": "editions/ko/student"}[edition]
    notebook = f"{folder}/{doc.removeprefix('notebooks/')}.ipynb"
    colab = f"https://colab.research.google.com/github/{repo}/blob/{branch}/{notebook}"
    binder = f"https://mybinder.org/v2/gh/{repo}/{branch}?urlpath=tree/{notebook}"
    page = loaded(edition, doc)
    assert page.colab_links == [colab]
    assert page.binder_links == [binder]
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


@pytest.mark.parametrize("doc", PAGES)
def test_every_figure_text_is_legible_at_1366(loaded, edition, doc):
    """As in the book (test_site.py): every figure's smallest text as shown at 1366 wide,
    from the size and fonts recorded in its PNG, is at least 9 CSS pixels tall."""
    check_figure_text(loaded(edition, doc, "light"))


@pytest.mark.parametrize("doc", PAGES)
def test_weight_ids_and_figures_on_a_phone(loaded, edition, doc):
    """As in the book (test_site.py): under MAX_PAGE_BYTES before the reader does anything,
    no id used twice, and on a phone every figure legible or opened legible by its
    Enlarge button."""
    page = loaded(edition, doc, "light")
    assert page.weight["bytes"] < MAX_PAGE_BYTES, f"{doc}: {page.weight}"
    with open(ROOT / "_build" / "page-weight.txt", "a") as f:
        f.write(
            f"student {doc}: {page.weight['bytes']} bytes, {page.weight['requests']} requests\n"
        )
    assert not page.ids["repeated"], f"{doc}: ids used more than once: {page.ids['repeated']}"
    problems = phone_figure_problems(page)
    assert not problems, f"{doc} on a phone:\n" + "\n".join(problems)
