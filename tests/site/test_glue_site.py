"""The code the built site shows computes: no code cell of a chapter page only glues values,
and each page shows at most VISIBLE_GLUE_LINES_ALLOWED ``glue(`` lines (scripts/glue_cells.py;
tests/test_glue_cells.py checks the same on the notebooks).

Read from the built HTML of both editions (no browser needed): the code of a cell is the
text of the ``pre`` blocks in its ``cell_input`` container, which is all the site shows of
a code cell's code (a ``remove-cell`` cell is not in the page at all); on the book, those
are exactly the chapter's visible code cells. The counts per page are printed before
anything is asserted.
"""

from __future__ import annotations

import html
import sys
from html.parser import HTMLParser

import nbformat
import pytest

from tests.conftest import ROOT
from tests.site.pages import CHAPTERS, HTML, STUDENT

sys.path.insert(0, str(ROOT / "scripts"))
from glue_cells import VISIBLE_GLUE_LINES_ALLOWED, glue_lines, is_glue_only, is_visible


class CodeCells(HTMLParser):
    """The code of every cell_input container of a page, in order."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.cells: list[str] = []
        self._depth = 0  # open divs inside the current cell_input (0: outside one)
        self._pre = 0
        self._text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        if tag == "div" and self._depth:
            self._depth += 1
        elif tag == "div" and "cell_input" in classes:
            self._depth, self._text = 1, []
        elif tag == "pre" and self._depth:
            self._pre += 1

    def handle_endtag(self, tag):
        if tag == "pre" and self._pre:
            self._pre -= 1
        elif tag == "div" and self._depth:
            self._depth -= 1
            if not self._depth:
                self.cells.append(html.unescape("".join(self._text)))

    def handle_data(self, data):
        if self._pre:
            self._text.append(data)


def test_the_parser_reads_a_cell_as_the_site_writes_it():
    page = (
        '<div class="cell docutils container"><div class="cell_input docutils container">'
        '<div class="highlight-ipython3 notranslate"><div class="highlight"><pre><span></span>'
        '<span class="n">glue</span><span class="p">(</span><span class="s2">&quot;x&quot;'
        '</span><span class="p">,</span> <span class="s2">&quot;1&quot;</span>'
        '<span class="p">)</span>\n</pre></div></div></div>'
        '<div class="cell_output docutils container"><pre>not code</pre></div></div>'
    )
    assert CodeCells(page).cells == ['glue("x", "1")\n']
    assert is_glue_only(CodeCells(page).cells[0])


@pytest.mark.parametrize("site", [HTML, STUDENT], ids=["book", "student"])
def test_no_code_cell_on_a_chapter_page_only_glues(site, capsys):
    if not (site / "index.html").exists():
        pytest.fail(f"no built site in {site}: run `make html` first")
    rows, problems = [], []
    for doc in CHAPTERS:
        cells = CodeCells((site / f"{doc}.html").read_text(encoding="utf-8")).cells
        count = sum(glue_lines(c) for c in cells)
        rows.append(f"{doc:45} {count:4d} glue( lines in {len(cells):3d} code cells shown")
        problems += [
            f"{doc}: a code cell shown only glues values: {c[:80]!r}"
            for c in cells
            if is_glue_only(c)
        ]
        if count > VISIBLE_GLUE_LINES_ALLOWED:
            problems.append(f"{doc}: {count} glue( lines shown")
        if not cells:
            problems.append(f"{doc}: no code cell found: has the page's markup changed?")
    with capsys.disabled():  # printed even when the test passes (and before it asserts)
        print(f"\n{site.relative_to(ROOT)}:\n" + "\n".join(rows))
    assert not problems, "\n".join(problems)


def test_the_book_shows_the_visible_code_cells_and_no_other():
    """What the parser reads is what the chapters show: each page's code cells are exactly
    the chapter's visible code cells (the glue cells, tagged remove-cell, are not there)."""
    if not (HTML / "index.html").exists():
        pytest.fail(f"no built site in {HTML}: run `make html` first")
    for doc in CHAPTERS:
        nb = nbformat.read(ROOT / f"{doc}.ipynb", as_version=4)
        visible = [c.source.strip() for c in nb.cells if is_visible(c) and c.source.strip()]
        shown = [c.strip() for c in CodeCells((HTML / f"{doc}.html").read_text("utf-8")).cells]
        assert shown == visible, f"{doc}: the page's code cells are not the visible cells"
        hidden = [c for c in nb.cells if c.cell_type == "code" and not is_visible(c)]
        assert len(hidden) >= 2, f"{doc}: the install cell and at least one glue cell"
