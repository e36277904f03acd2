"""The student edition as published: _build/pages/student/, beside the book.

`make test` (its html step: scripts/book.py --pages) puts the two built editions together
in _build/pages exactly as the Pages workflow uploads them. Every page of the student
edition is its book's page without the solutions, the edition's title and buttons aside
(checked on every page, from the HTML); its first chapter (pages.STUDENT_LOADED) is
loaded from there in headless Chromium, once in light and once in dark mode, by
tests/site/pages.py (as the book's pages are for test_site.py), and checked: no
console error, no failed or outside request, every formula typeset and no raw TeX
anywhere a reader can see text, images loaded with alternative text, dark mode working,
and what the reader sees fits the page (outputs, tables and their captions, punctuation
after formulas). axe-core reads the book's pages, not these (tests/site/pages.py,
AXE_EDITIONS: a student page is its book's page without the solutions, which axe-core
reads with every solution open; nothing is added). Each chapter's Colab and Binder
buttons open its student notebook (editions/student/), and every link of a student
notebook to the online book names a page and an anchor of the student edition.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urlparse

import nbformat
import pytest

from tests.site.pages import (
    CHAPTERS,
    CONFIG,
    KO,
    KO_STUDENT,
    MAX_PAGE_BYTES,
    PAGES,
    PUBLISHED,
    ROOT,
    SCHEMES,
    STUDENT,
    STUDENT_LOADED,
    STUDENTS,
    check_figure_text,
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
@pytest.mark.parametrize("doc", STUDENT_LOADED)
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


@pytest.mark.parametrize("doc", STUDENT_LOADED)
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


@pytest.mark.parametrize("doc", STUDENT_LOADED)
def test_dark_mode(loaded, edition, doc):
    page = loaded(edition, doc, "dark")
    assert page.theme == "dark"
    luminance = sum(page.background) / (3 * 255)
    assert luminance < 0.3, f"{doc}: dark mode background is light: rgb{tuple(page.background)}"


SITES = {"student": (PUBLISHED, STUDENT), "ko_student": (KO, KO_STUDENT)}  # (book, student)


class _EditionFree(HTMLParser):
    """A page's markup with its edition's own parts left out (see `_edition_free`)."""

    VOID = frozenset(("area", "base", "br", "col", "embed", "hr", "img", "input", "link",
                      "meta", "source", "track", "wbr"))  # fmt: skip

    def __init__(self, solutions: bool):
        super().__init__(convert_charrefs=False)
        self.solutions, self.out, self.skipping = solutions, [], 0

    def left_out(self, tag: str, attrs: dict) -> bool:
        classes = (attrs.get("class") or "").split()
        href = attrs.get("href") or ""
        return (
            tag == "title"
            or (self.solutions and tag == "div" and "solution" in classes)
            or (tag == "p" and "logo__title" in classes)
            or (tag == "a" and ("mybinder.org" in href or "colab.research.google.com" in href))
            or (tag == "a" and {"btn-source-edit-button", "btn-language-switch",
                                "btn-book-pdf-button"} & set(classes))
        )  # fmt: skip

    def handle_starttag(self, tag, attrs):
        if self.skipping:
            self.skipping += tag not in self.VOID
        elif self.left_out(tag, dict(attrs)):
            self.skipping = tag not in self.VOID
        else:
            self.out.append(self.get_starttag_text())

    def handle_startendtag(self, tag, attrs):
        if not self.skipping and not self.left_out(tag, dict(attrs)):
            self.out.append(self.get_starttag_text())

    def handle_endtag(self, tag):
        if self.skipping:
            self.skipping -= tag not in self.VOID
        else:
            self.out.append(f"</{tag}>")

    def handle_data(self, data):
        if not self.skipping:
            self.out.append(data)

    def handle_entityref(self, name):
        self.handle_data(f"&{name};")

    def handle_charref(self, name):
        self.handle_data(f"&#{name};")

    def handle_comment(self, data):
        self.handle_data(f"<!--{data}-->")

    def handle_decl(self, decl):
        self.handle_data(f"<!{decl}>")


def _edition_free(html: str, solutions: bool) -> list[str]:
    """A page's markup with its edition's own parts left out (the title, the Colab, Binder,
    edit, language and PDF buttons) and, with `solutions`, its solutions (sphinx-exercise's
    div.solution, whole); one line per line of markup, blank lines and emptied list items
    dropped."""
    parser = _EditionFree(solutions)
    parser.feed(html)
    parser.close()
    text = re.sub(r"<li>\s*</li>", "", "".join(parser.out))
    return [line.strip() for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("doc", PAGES)
def test_each_student_page_is_its_books_page_without_the_solutions(edition, doc):
    """What lets a few pages per student edition stand for all of them in the browser
    (pages.STUDENT_LOADED): each page's HTML is its book's, solutions taken out, with only
    the edition's title and buttons changed, or the page is one of those loaded (the
    introduction, which has a paragraph for students); and the static files are the
    book's (the icon fonts are cut down to the icons each edition shows)."""
    book_root, student_root = SITES[edition]
    book = (book_root / f"{doc}.html").read_text(encoding="utf-8")
    student = (student_root / f"{doc}.html").read_text(encoding="utf-8")
    if doc in CHAPTERS:
        assert 'class="solution' in book and 'class="solution' not in student, doc
    expected, found = _edition_free(book, True), _edition_free(student, False)
    if found != expected and doc not in STUDENT_LOADED:  # (the intro speaks to students)
        import difflib

        diff = "\n".join(list(difflib.unified_diff(expected, found, lineterm="", n=0))[:30])
        pytest.fail(f"{edition} {doc}: not the book's page without its solutions:\n{diff}")
    assert "(student edition)" in student or "(학생판)" in student
    if doc == PAGES[0]:
        static = sorted(
            p.relative_to(book_root / "_static")
            for p in (book_root / "_static").rglob("*")
            if p.is_file() and not p.name.endswith(".book.woff")
        )
        assert static, "no static files"
        for rel in static:
            theirs = student_root / "_static" / rel
            assert theirs.exists(), f"{edition}: _static/{rel} is missing"
            assert theirs.read_bytes() == (book_root / "_static" / rel).read_bytes(), rel


@pytest.mark.parametrize("doc", CHAPTERS)
def test_colab_and_binder_buttons_of_every_page_open_the_student_notebook(edition, doc):
    """On every chapter page, from its HTML (the loaded page's links are checked below)."""
    repo = urlparse(CONFIG["repository"]["url"]).path.strip("/")
    branch = CONFIG["repository"]["branch"]
    folder = {"student": "editions/student", "ko_student": "editions/ko/student"}[edition]
    notebook = f"{folder}/{doc.removeprefix('notebooks/')}.ipynb"
    html = (SITES[edition][1] / f"{doc}.html").read_text(encoding="utf-8")
    hrefs = re.findall(r'<a [^>]*href="([^"]*)"', html)
    assert [h for h in hrefs if "colab.research.google.com" in h] == [
        f"https://colab.research.google.com/github/{repo}/blob/{branch}/{notebook}"
    ]
    assert [h for h in hrefs if "mybinder.org" in h] == [
        f"https://mybinder.org/v2/gh/{repo}/{branch}?urlpath=tree/{notebook}"
    ]
    assert (ROOT / notebook).exists()


@pytest.mark.parametrize("doc", [d for d in STUDENT_LOADED if d in CHAPTERS])
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


@pytest.mark.parametrize("doc", STUDENT_LOADED)
def test_every_figure_text_is_legible_at_1366(loaded, edition, doc):
    """As in the book (test_site.py): every figure's smallest text as shown at 1366 wide,
    from the size and fonts recorded in its PNG, is at least 9 CSS pixels tall."""
    check_figure_text(loaded(edition, doc, "light"))


@pytest.mark.parametrize("doc", STUDENT_LOADED)
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
