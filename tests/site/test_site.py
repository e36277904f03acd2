"""Browser tests of the built site (`_build/html`), in headless Chromium.

Every page of the table of contents is loaded once in light and once in dark mode, by
tests/site/pages.py (see there how a page is opened and what is extracted, and where a
new page-level check goes), and checked as a reader would see it: no console errors, no
outside or failed request, every formula typeset by MathJax, no raw TeX anywhere a reader
can see text (page text, navigation, link text, captions, titles, alt and aria-label
attributes, explorer captions), every image loaded and described by alternative text, no
serious or critical accessibility violation found by axe-core in either theme, the
chapter's Colab button pointing at that chapter's notebook in the configured repository,
and dark mode working. Each explorer answers its controls, from the keyboard too, with a
visible focus ring (those two tests move the controls of the chapter's light page once
the page-level checks have read it: the page stays open for them).
A screenshot of each page's first screen is saved under _build/screenshots/ for a person
to look at (whole pages, and on a phone: `make screenshots`).
"""

from __future__ import annotations

import io
import json
import re
from urllib.parse import urlparse

import pytest

from tests.site.conftest import COLLECTED, group_of
from tests.site.pages import (
    BOOKS,
    CHAPTERS,
    COLOUR_RULES,
    CONFIG,
    FIGURES_JS,
    FIT_JS,
    HTML,
    LABEL_TOKEN,
    MAX_PAGE_BYTES,
    OPEN_DROPDOWNS_JS,
    OPENED,
    PAGES,
    ROOT,
    SCHEMES,
    SHOTS,
    book_labels,
    check_figure_text,
    describe_violations,
    figure_text_px,
    images_without_alt,
    internal_labels,
    phone_figure_problems,
    raw_tex,
    run_axe,
    small_figure_text,
)

pytestmark = pytest.mark.browser


def pytest_generate_tests(metafunc):
    """Every page-level check runs on the English edition and on its Korean edition."""
    if "edition" in metafunc.fixturenames:
        metafunc.parametrize("edition", BOOKS)


SHOTS = SHOTS["book"]


def test_each_test_of_a_page_goes_where_that_page_is_loaded(request):
    """The scheduler of tests/site/conftest.py puts every test that takes a page (`doc`,
    either edition, either theme) in that page's work unit, and any other test in its
    file's: every browser test collected (-k or not)."""
    tests = request.config.stash[COLLECTED]
    assert len(tests) > 4 * len(PAGES)
    for nodeid, file, doc in tests:
        expected = f"page:{doc}" if doc in PAGES else f"file:{file}"
        assert group_of(nodeid) == expected, nodeid


def test_raw_tex_pattern_catches_what_it_must():
    """The pattern is broad: any command, either delimiter, a site macro; not plain text."""
    for bad in ["divided by \\sqrt{d_k}", "\\lse(z)", "$x$", "$$", "\\(x\\)", "\\[x\\]"]:
        assert raw_tex([["t", bad]]), bad
    for good in ["τ = 0.5, √d_k, d_model", "costs $5", "50% of a \\ b"]:
        assert not raw_tex([["t", good]]), good


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("doc", PAGES)
def test_no_raw_tex_anywhere_on_the_page(loaded, edition, doc, scheme):
    chunks = loaded(edition, doc, scheme).text
    assert len(chunks) > 10 and len(chunks[0][1]) > 200, f"{doc}: no text found"
    found = raw_tex(chunks)
    assert not found, f"{doc}: raw TeX visible ({len(found)}):\n" + "\n".join(found[:20])


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("doc", PAGES)
def test_no_serious_accessibility_violations(loaded, edition, doc, scheme):
    """axe-core on the finished page (formulas typeset, explorers wired) with every
    collapsed solution open, so that the code and outputs inside are checked too (a box
    that scrolls sideways needs keyboard focus), in both themes for the English book (in
    the dark one the rules a theme can change, pages.COLOUR_RULES: the DOM is the one read
    in light); the Korean book, whose styles are the same, in the light theme."""
    if edition != "book" and scheme == "dark":
        pytest.skip("axe-core runs on the Korean book in the light theme (the same styles)")
    page = loaded(edition, doc, scheme)
    serious = [v for v in page.axe if v["impact"] in ("serious", "critical")]
    assert not serious, f"{doc} ({scheme}): axe-core found:\n{describe_violations(serious)}"
    if doc in CHAPTERS:
        assert page.dropdowns >= 1, f"{doc}: no solution to open"


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("doc", PAGES)
def test_what_frames_the_text(loaded, edition, doc, scheme):
    """No empty output block (a bar under an explorer), one search field, a favicon that
    is served, and no response of status 400 or above (a 404) while the page loads."""
    page = loaded(edition, doc, scheme)
    furniture = page.furniture
    assert not furniture["empty_outputs"], (
        f"{doc}: empty output blocks {furniture['empty_outputs']}"
    )
    assert furniture["search_fields"] == 1, f"{doc}: {furniture['search_fields']} search fields"
    assert furniture["favicon"] and furniture["favicon_status"] == 200, furniture
    assert not page.http_errors, f"{doc}: {page.http_errors}"


@pytest.mark.parametrize("doc", PAGES)
def test_every_display_equation_fits_a_laptop_and_scrolls_on_a_phone(loaded, edition, doc):
    """At 1366 wide no display equation is wider than its box (long ones are broken over
    aligned lines), solutions open included; on a 390-wide phone a wider one scrolls
    sideways and is reachable from the keyboard."""
    page = loaded(edition, doc, "light")
    assert not page.wide_equations, f"{doc}: equations cut at 1366 wide: {page.wide_equations}"
    stuck = [e for e in page.phone_equations if not (e["scrollable"] and e["focusable"])]
    assert not stuck, f"{doc}: on a phone, equations that cannot be scrolled to: {stuck}"


@pytest.mark.parametrize("doc", PAGES)
def test_no_output_runs_off_the_edge(loaded, edition, doc):
    """Code cell outputs wrap to the column at 1366 wide, solutions open (as in Jupyter and
    Colab); there and on a 390-wide phone no output or `pre` is wider than its box unless
    that box scrolls sideways and takes keyboard focus (a long line of code does)."""
    page = loaded(edition, doc, "light")
    for width, fit in ((1366, page.fit), (390, page.phone_fit)):
        assert fit["boxes"] > 0 or doc not in CHAPTERS, f"{doc}: no output found"
        off = [r for r in fit["runs_off"] if r["kind"] != "table"]
        assert not off, f"{doc} at {width} wide: running off the edge: {off}"
    scrolled = [r for r in page.fit["scrolled"] if r["kind"] == "output"]
    assert not scrolled, f"{doc}: outputs cut at 1366 wide (scroll to read): {scrolled}"


@pytest.mark.parametrize("doc", PAGES)
def test_every_table_fits_or_scrolls_and_no_caption_is_cut(loaded, edition, doc):
    """At 1366 wide and on a 390-wide phone every table fits its column or scrolls
    sideways in a box that takes keyboard focus, and every caption is whole in view."""
    page = loaded(edition, doc, "light")
    for width, fit in ((1366, page.fit), (390, page.phone_fit)):
        tables = [r for r in fit["runs_off"] if r["kind"] == "table"]
        assert not tables, f"{doc} at {width} wide: tables cut: {tables}"
        assert not fit["captions"], f"{doc} at {width} wide: captions cut: {fit['captions']}"


@pytest.mark.parametrize("doc", PAGES)
def test_no_punctuation_alone_at_the_start_of_a_line(loaded, edition, doc):
    """A full stop or comma after an inline formula stays on the formula's line, at 1366
    wide (solutions open) and on a 390-wide phone."""
    page = loaded(edition, doc, "light")
    for width, fit in ((1366, page.fit), (390, page.phone_fit)):
        assert not fit["punctuation"], f"{doc} at {width} wide: {fit['punctuation']}"


@pytest.mark.parametrize("doc", PAGES)
def test_no_inline_formula_or_code_is_cut(loaded, edition, doc):
    """An inline formula wider than its line (on a phone) scrolls sideways in its box and
    takes keyboard focus, instead of being clipped; inline code longer than a line (a
    self-check call in an exercise) breaks instead of running past the exercise's box."""
    page = loaded(edition, doc, "light")
    for width, fit in ((1366, page.fit), (390, page.phone_fit)):
        assert not fit["formulas"], f"{doc} at {width} wide: formulas cut: {fit['formulas']}"
        assert not fit["inline_code"], f"{doc} at {width} wide: code cut: {fit['inline_code']}"


# A page made to fail every check of FIT_JS, each box named by its id, beside one that
# passes each: what the checks above find on the book's pages they find here.
MISFITS = """<!doctype html><html lang="en"><head><title>t</title><style>
  body { margin: 0; font: 16px/1.5 sans-serif; }
  .bd-article { width: 300px; margin-left: 20px; }
  pre { font: 14px monospace; margin: 0; }
  mjx-container { display: inline-block; }
</style></head><body><main><article class="bd-article">
<section id="clipped"><pre style="overflow: hidden">LONG</pre></section>
<section id="scrolls-without-focus"><pre style="overflow: auto">LONG</pre></section>
<section id="scrolls-with-focus"><pre style="overflow: auto" tabindex="0">LONG</pre></section>
<section id="spills"><div class="cell_output"><div class="output"><pre
  style="overflow: visible">LONG</pre></div></div></section>
<section id="wraps"><div class="cell_output"><div class="output"><pre
  style="white-space: pre-wrap; overflow-wrap: anywhere">LONG</pre></div></div></section>
<section id="table-alone"><table><tr><td style="white-space: nowrap">LONG</td></tr></table>
</section>
<section id="table-scrolls"><div style="overflow-x: auto" tabindex="0"><table>
  <caption>A caption centred over a table much wider than the column it sits in</caption>
  <tr><td style="white-space: nowrap">LONG</td></tr></table></div></section>
<section id="stop-alone"><p><span class="math"><mjx-container
  style="width: 300px">x</mjx-container></span>. Then more.</p></section>
<section id="stop-kept"><p>a <span class="math"><mjx-container
  style="width: 30px">x</mjx-container></span>, then more.</p></section>
<section id="formula-clipped"><p><span class="math" style="display: inline-flex;
  max-width: 100%; overflow: hidden"><mjx-container style="width: 400px; flex-shrink: 0"
  >x</mjx-container></span></p></section>
<section id="code-cut"><div style="overflow: hidden"><p>run <code class="literal"
  style="white-space: nowrap">helpers.checks.check_something_long(my_something_long)</code
  ></p></div></section>
<section id="code-breaks"><div style="overflow: hidden"><p>run <code class="literal"
  style="overflow-wrap: anywhere">helpers.checks.check_something_long(my_something_long)</code
  ></p></div></section>
<section id="formula-scrolls"><p><span class="math" tabindex="0" style="display: inline-flex;
  max-width: 100%; overflow-x: auto"><mjx-container style="width: 400px; flex-shrink: 0"
  >x</mjx-container></span></p></section>
</article></main></body></html>""".replace("LONG", "0123456789 " * 8)


def test_fit_checks_find_what_they_must(browser):
    """FIT_JS finds a line cut by its box, a box that scrolls but not from the keyboard, an
    output spilling over the margin, a table wider than its column with no box around
    it, a caption cut, a full stop alone on a line, an inline formula clipped and inline
    code cut; it passes a box that scrolls and takes focus, an output that wraps, a comma
    that stays by its formula, a formula that scrolls with focus and code that breaks."""
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    try:
        page.set_content(MISFITS)
        fit = page.evaluate(FIT_JS)
    finally:
        page.close()
    off = {r["where"]: r for r in fit["runs_off"]}
    assert set(off) == {"clipped", "scrolls-without-focus", "spills", "table-alone"}, off
    assert off["clipped"]["box"] == "pre." and not off["clipped"]["scrolls"]
    assert off["scrolls-without-focus"]["scrolls"] and not off["scrolls-without-focus"]["focusable"]
    assert off["spills"]["kind"] == "output" and off["spills"]["box"] is None
    assert off["table-alone"]["kind"] == "table"
    scrolled = {(r["where"], r["kind"]) for r in fit["scrolled"]}
    assert scrolled == {("scrolls-with-focus", "code"), ("table-scrolls", "table")}, scrolled
    assert [c["where"] for c in fit["captions"]] == ["table-scrolls"], fit["captions"]
    assert [p["where"] for p in fit["punctuation"]] == ["stop-alone"], fit["punctuation"]
    assert [f["where"] for f in fit["formulas"]] == ["formula-clipped"], fit["formulas"]
    assert [c["where"] for c in fit["inline_code"]] == ["code-cut"], fit["inline_code"]
    assert fit["tables"] == 2


@pytest.mark.parametrize("doc", PAGES)
def test_every_figure_text_is_legible_at_1366(loaded, edition, doc):
    """Every figure's smallest text, computed from the figure's width in inches and its
    smallest font size (recorded in each PNG when it was made, every explorer frame
    included) and the width the image is shown at in the 686 px column at 1366 wide, is
    at least MIN_TEXT_PX (9) CSS pixels tall, solutions open included."""
    check_figure_text(loaded(edition, doc, "light"))


def _figure_img(font_pt: float, explorer: bool = False, record: bool = True) -> str:
    """An <img> of a 7.2 in figure whose smallest text is `font_pt`, as the site shows it."""
    import base64

    from matplotlib.figure import Figure

    from helpers.figures import figure_png

    fig = Figure(figsize=(7.2, 2.4), dpi=100)
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1])
    ax.tick_params(labelsize=10)
    ax.set_xlabel("key", fontsize=font_pt)
    png, _ = figure_png(fig)
    if not record:  # the same picture as a plain PNG, without the record
        from PIL import Image

        out = io.BytesIO()
        Image.open(io.BytesIO(png)).save(out, format="PNG")
        png = out.getvalue()
    uri = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    img = f"<img src='{uri}' alt='a figure' style='width: 100%'>"
    if not explorer:
        return img
    frames = json.dumps({"frames": [uri]})
    return f"<div class='explorer'>{img}<script class='explorer-data'>{frames}</script></div>"


def test_figure_text_check_finds_what_it_must(browser):
    """The legibility check can fail: in a 686 px column, a 7.2 in figure's 5 pt label is
    shown under 9 px tall (about 7.8 px: the picture is cropped to what is drawn, 6.1 in)
    and is reported, in a plain figure and in an explorer frame, and so is a picture that
    records nothing; a 9 pt label (about 14 px) passes."""
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    try:
        page.set_content(
            "<!doctype html><html lang='en'><body><div class='bd-article' style='width: 686px'>"
            + _figure_img(9)
            + _figure_img(5)
            + _figure_img(5, explorer=True)
            + _figure_img(9, record=False)
            + "</div></body></html>"
        )
        figures = page.evaluate(FIGURES_JS)
    finally:
        page.close()
    measured = [px for _, px in figure_text_px(figures)]
    assert [f["shown"] for f in figures] == [686] * 4
    width_in = figures[0]["records"][0]["width_in"]  # cropped to what is drawn: < 7.2 in
    assert measured[0] == pytest.approx(686 / width_in * 9 / 72) and measured[0] > 11.9
    assert measured[1] == measured[2] == pytest.approx(measured[0] * 5 / 9)
    assert measured[1] < 9
    assert measured[3] is None
    problems = small_figure_text(figures)
    assert len(problems) == 3 and "not measurable" in problems[2], problems


def test_axe_finds_what_it_must(browser):
    """The accessibility test can fail: axe reports an unlabelled control, an image
    without alt text and low contrast on a page made to have them."""
    page = browser.new_page()
    try:
        page.set_content(
            "<!doctype html><html lang='en'><head><title>t</title></head><body><main>"
            "<img src='data:,'><input type='range'>"
            "<p style='color:#bbb;background:#fff'>faint text</p></main></body></html>"
        )
        found = {v["id"]: v for v in run_axe(page)}
        colours = {v["id"] for v in run_axe(page, rules=COLOUR_RULES)}
    finally:
        page.close()
    assert {"image-alt", "label", "color-contrast"} <= set(found), sorted(found)
    assert colours == {"color-contrast"}, colours  # the dark theme's run: colours only
    assert "image-alt" in describe_violations([found["image-alt"]])


def test_axe_with_solutions_open_audits_what_opening_revealed(browser):
    """The second audit of a page runs on what OPEN_DROPDOWNS_JS opened, and finds there
    what was hidden while it was closed: a faint text, a box that scrolls sideways and
    cannot be reached from the keyboard."""
    page = browser.new_page()
    try:
        page.set_content(
            "<!doctype html><html lang='en'><head><title>t</title></head><body><main>"
            "<p>Intro</p><details><summary>Solution</summary>"
            "<p style='color:#bbb;background:#fff'>faint text</p>"
            "<div style='overflow-x:auto;width:100px'><pre>" + "x" * 400 + "</pre></div>"
            "</details></main></body></html>"
        )
        closed = {v["id"] for v in run_axe(page)}
        assert page.evaluate(OPEN_DROPDOWNS_JS) == 0  # no toggle button: details only
        opened = {v["id"] for v in run_axe(page, include=OPENED)}
    finally:
        page.close()
    assert not {"color-contrast", "scrollable-region-focusable"} & closed, closed
    assert {"color-contrast", "scrollable-region-focusable"} <= opened, opened


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("doc", PAGES)
def test_every_image_has_alternative_text(loaded, edition, doc, scheme):
    images = loaded(edition, doc, scheme).images
    bad = images_without_alt(images)
    assert not bad, f"{doc}: images without alternative text: {bad}"
    if doc in CHAPTERS:
        content = [i for i in images if not i["explorer"] and "_images/" in i["src"]]
        assert content, f"{doc}: no figure found"
        assert all(len(i["alt"].split()) >= 8 for i in content), content


def accessible_name(control) -> str:
    """The control's accessible name as Chromium's accessibility tree computes it."""
    snapshot = control.aria_snapshot()  # e.g. '- slider "τ": "1"'
    match = re.search(r'^- \w+ "([^"]*)"', snapshot)
    return match.group(1) if match else ""


def live_chapter(loaded, doc: str):
    """(page, record): the chapter's light page of the book, left open at 1366 wide once
    the page-level checks have read it (tests/site/pages.py, `keep_open`), for the two
    tests that move its explorers' controls (neither needs them where they start)."""
    page = loaded("book", doc, "light")
    assert page.live is not None, f"{doc}: the page was not kept open"
    _, live, record = page.live
    return live, record


@pytest.mark.parametrize("doc", CHAPTERS)
def test_explorers_work_from_the_keyboard(loaded, doc):
    """Tab reaches every control of every explorer, shows a focus ring drawn by
    explorer.css (not the browser's default), and the arrow keys change the figure;
    every control has an accessible name."""
    page, record = live_chapter(loaded, doc)
    explorers = page.locator(".explorer")
    assert explorers.count() >= 1
    for k in range(explorers.count()):
        explorer = explorers.nth(k)
        explorer.scroll_into_view_if_needed()
        img = explorer.locator("img.explorer-image")
        # a focusable element just before the controls, then Tab into them
        explorer.evaluate(
            """root => {
              const b = document.createElement('button');
              b.id = 'before-explorer'; b.textContent = 'before';
              root.prepend(b);
            }"""
        )
        page.focus("#before-explorer")
        stops = explorer.locator("input[type=range], fieldset, select")
        for s in range(stops.count()):
            page.keyboard.press("Tab")
            focused = page.evaluate_handle("document.activeElement").as_element()
            assert focused is not None
            inside = focused.evaluate("(el, root) => root.contains(el)", explorer.element_handle())
            assert inside, f"explorer {k}: Tab left the explorer at stop {s}"
            kind = focused.evaluate("el => el.tagName.toLowerCase() + ':' + (el.type || '')")
            ring = focused.evaluate(
                """el => ({visible: el.matches(':focus-visible'),
                          style: getComputedStyle(el).outlineStyle,
                          width: parseFloat(getComputedStyle(el).outlineWidth)})"""
            )
            assert ring["visible"] and ring["style"] == "solid" and ring["width"] >= 2, (
                f"explorer {k}, {kind}: no focus ring from explorer.css: {ring}"
            )
            target = page.locator(":focus")
            name = accessible_name(target)
            if kind == "input:radio":
                group = stops.nth(s).locator("legend").inner_text().strip()
                assert group and name, f"explorer {k}: a radio group without names"
            else:
                assert name.strip(), f"explorer {k}, {kind}: no accessible name"
            before = img.get_attribute("src")
            key = "ArrowDown" if kind.startswith("select") else "ArrowRight"
            if kind == "input:range" and target.evaluate("el => el.value === el.max"):
                key = "ArrowLeft"
            page.keyboard.press(key)
            assert img.get_attribute("src") != before, (
                f"explorer {k}, {kind}: {key} did not change the figure"
            )
        explorer.evaluate("root => root.querySelector('#before-explorer').remove()")
    assert not record.console_errors, record.console_errors


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("doc", PAGES)
def test_page_loads_typesets_and_shows_images(loaded, edition, doc, scheme):
    page = loaded(edition, doc, scheme)
    mathjax = page.mathjax
    assert not page.console_errors, f"{doc}: console errors: {page.console_errors}"
    assert not page.external, f"{doc}: the page asked for other hosts: {page.external}"
    assert not page.failed, f"{doc}: requests failed: {page.failed}"
    assert not mathjax["errors"], f"{doc}: MathJax errors: {mathjax['errors']}"
    assert not mathjax["untypeset"], f"{doc}: formulas left untypeset: {mathjax['untypeset']}"
    assert mathjax["containers"] >= mathjax["math"]
    broken = [i["url"] for i in page.images if not i["ok"]]
    assert not broken, f"{doc}: images that did not load: {broken}"


def test_pages_have_formulas():
    """The MathJax checks above mean something: the pages do contain maths."""
    for doc in ("book/notation", *CHAPTERS):
        html = (HTML / f"{doc}.html").read_text()
        assert html.count('class="math') >= 5, f"{doc} has almost no formulas"


@pytest.mark.parametrize("doc", CHAPTERS)
def test_colab_button_points_at_this_chapter(loaded, edition, doc):
    """The Colab and Binder buttons open the chapter's Colab edition (editions/colab/; the
    Korean book's, editions/ko/colab/)."""
    repo = urlparse(CONFIG["repository"]["url"]).path.strip("/")
    branch = CONFIG["repository"]["branch"]
    folder = {"book": "editions/colab", "ko": "editions/ko/colab"}[edition]
    notebook = f"{folder}/{doc.removeprefix('notebooks/')}.ipynb"
    expected = f"https://colab.research.google.com/github/{repo}/blob/{branch}/{notebook}"
    binder = f"https://mybinder.org/v2/gh/{repo}/{branch}?urlpath=tree/{notebook}"
    page = loaded(edition, doc)
    assert page.colab_links == [expected]
    assert page.binder_links == [binder]
    assert (ROOT / notebook).exists()


@pytest.mark.parametrize("doc", PAGES)
def test_dark_mode(loaded, edition, doc):
    """A dark page, on which every figure keeps its own colours on white: not dimmed by a
    filter (which turned chapter 8's grey training-loss line faint), not on a grey panel."""
    page = loaded(edition, doc, "dark")
    assert page.theme == "dark"
    luminance = sum(page.background) / (3 * 255)
    assert luminance < 0.3, f"{doc}: dark mode background is light: rgb{tuple(page.background)}"
    assert not page.dark_figures, f"{doc}: figures dimmed or on a grey panel: {page.dark_figures}"


@pytest.mark.parametrize("doc", PAGES)
def test_page_weight_before_the_reader_does_anything(loaded, edition, doc):
    """Loaded at 1366x900 and left alone (MathJax started), a page transfers under
    MAX_PAGE_BYTES (2 MB): explorer frames wait until the explorer is used, pictures until
    they come near the screen, formulas are typeset as they do. Printed for the README."""
    page = loaded(edition, doc, "light")
    weight = page.weight
    largest = ", ".join(
        f"{name.split('?')[0]} {size / 1e3:.0f} kB" for name, size in weight["largest"][:3]
    )
    print(
        f"{doc}: {weight['bytes'] / 1e6:.2f} MB in {weight['requests']} requests, "
        f"MathJax started in {page.mathjax_start_s:.1f} s; largest: {largest}"
    )
    with open(ROOT / "_build" / "page-weight.txt", "a") as f:  # one line per page and run
        f.write(f"book {doc}: {weight['bytes']} bytes, {weight['requests']} requests\n")
    assert weight["requests"] > 5
    assert weight["bytes"] < MAX_PAGE_BYTES, f"{doc}: {weight['bytes']} bytes: {weight['largest']}"
    assert not any(
        "fontawesome.js" in name or "searchindex.js" in name for name, _ in weight["largest"]
    )


@pytest.mark.parametrize("doc", PAGES)
def test_ids_are_unique_and_every_proof_ends_with_its_mark(loaded, edition, doc):
    """No id is used twice on a page (sphinx-proof gave every proof id="proof",
    sphinx-exercise every body "exercise-content"), solutions open included; every proof
    ends with the end-of-proof mark ∎."""
    ids = loaded(edition, doc, "light").ids
    assert not ids["repeated"], f"{doc}: ids used more than once: {ids['repeated']}"
    unmarked = [p for p in ids["proofs"] if "\u220e" not in p["mark"]]
    assert not unmarked, f"{doc}: proofs without their end mark: {unmarked}"
    if doc == "notebooks/09_theory":
        assert len(ids["proofs"]) >= 5


@pytest.mark.parametrize("doc", PAGES)
def test_the_sidebar_starts_at_its_top(loaded, edition, doc):
    """At 1366x900 the sidebar does not scroll itself on load when the current page's
    entry is in view at its top (the theme's scroll cut the book's title on chapters 7 to
    9); an entry further down (the back matter's last pages) is scrolled into view."""
    sidebar = loaded(edition, doc, "light").sidebar
    if sidebar is None:
        assert doc == PAGES[0], f"{doc}: no sidebar or no current entry"
        return
    if sidebar["fits_at_top"]:
        assert sidebar["scroll"] == 0, f"{doc}: the sidebar scrolled itself {sidebar['scroll']} px"
    assert sidebar["entry_in_view"], f"{doc}: the current entry is out of view: {sidebar}"


@pytest.mark.parametrize("doc", PAGES)
def test_every_figure_is_legible_on_a_phone(loaded, edition, doc):
    """On a 390-wide phone every figure either shows its smallest text at MIN_TEXT_PX (9)
    CSS pixels or more, or has an "Enlarge" button that the keyboard reaches and that opens
    it in a modal viewer where its text is that size (then Escape gives the focus back)."""
    page = loaded(edition, doc, "light")
    problems = phone_figure_problems(page)
    assert not problems, f"{doc} on a phone:\n" + "\n".join(problems)
    enlarged = [f for f in page.phone_figures if f.get("viewer")]
    print(f"{doc}: {len(page.phone_figures)} pictures, {len(enlarged)} open in the viewer")


@pytest.mark.parametrize("doc", PAGES)
def test_long_formulas_show_they_go_on(loaded, edition, doc):
    """On a phone, every equation, inline formula or code line that scrolls sideways and is
    cut at the edge fades out there (a visible cue that it goes on)."""
    cues = loaded(edition, doc, "light").phone_cues
    assert not cues, f"{doc}: cut on a phone with no cue: {cues}"


@pytest.mark.parametrize("doc", PAGES)
def test_no_internal_label_in_code_outputs_or_messages(loaded, edition, doc):
    """No code cell, printed output, self-check report or explorer caption shows one of the
    book's internal labels (eq-..., thm-..., sec-..., fig-..., ex-...): a reader sees
    "(9.10)" or words."""
    page = loaded(edition, doc, "light")
    found = internal_labels(page.reader_code, book_labels())
    assert not found, f"{doc}: internal labels shown:\n" + "\n".join(found[:20])


def test_the_label_check_finds_labels_and_nothing_else():
    """Bare labels of the book are found; longer words, paths, addresses and anchors, and
    tokens that are no label of the book are not."""
    labels = book_labels()
    assert {"thm-softmax-jacobian", "ex-mha-layer"} <= labels, sorted(labels)[:10]
    shown = [
        ["output", "see eq-softmax-def and (thm-softmax-jacobian)."],
        ["code cell", "# as in ex-mha-layer: check"],
    ]
    found = internal_labels(shown, labels | {"eq-softmax-def"})
    assert [f.split(": ")[1] for f in found] == [
        "eq-softmax-def",
        "thm-softmax-jacobian",
        "ex-mha-layer",
    ]
    quiet = [
        [
            "output",
            "complex-valued index-1 https://x.org/a/thm-softmax-jacobian.html "
            "page.html#thm-softmax-jacobian fig-999-not-a-label sec-",
        ]
    ]
    assert not internal_labels(quiet, labels), internal_labels(quiet, labels)
    assert LABEL_TOKEN.search("ex-mha-layer")


@pytest.mark.parametrize("doc", CHAPTERS)
def test_explorers_respond_to_their_controls(loaded, doc):
    """Every control of every explorer changes the figure: each slider between its ends,
    each radio group and menu between its first and last option."""
    page, record = live_chapter(loaded, doc)
    stem = doc.replace("/", "__")
    explorers = page.locator(".explorer")
    assert explorers.count() >= 1, f"{doc} has no explorer"
    for k in range(explorers.count()):
        explorer = explorers.nth(k)
        explorer.scroll_into_view_if_needed()
        img = explorer.locator("img").first
        explorer.screenshot(path=SHOTS / f"{stem}__explorer{k}_before.png")
        controls = 0
        for s in range(explorer.locator("input[type=range]").count()):
            slider = explorer.locator("input[type=range]").nth(s)
            label = slider.locator("xpath=following-sibling::output[1]")
            slider.focus()
            page.keyboard.press("Home")
            low = (img.get_attribute("src"), label.inner_text())
            page.keyboard.press("End")
            high = (img.get_attribute("src"), label.inner_text())
            assert low[0] != high[0], f"explorer {k}: slider {s} does not change the figure"
            assert low[1] != high[1], f"explorer {k}: slider {s} does not change its label"
            controls += 1
        for group in explorer.locator("fieldset").all():
            radios = group.locator("input[type=radio]")
            radios.first.check()
            first = img.get_attribute("src")
            radios.last.check()
            assert img.get_attribute("src") != first, f"explorer {k}: a radio group does nothing"
            controls += 1
        for menu in explorer.locator("select").all():
            values = menu.locator("option").evaluate_all("os => os.map(o => o.value)")
            menu.select_option(values[0])
            first = img.get_attribute("src")
            menu.select_option(values[-1])
            assert img.get_attribute("src") != first, f"explorer {k}: a menu does nothing"
            controls += 1
        assert controls >= 1, f"explorer {k} has no controls"
        explorer.screenshot(path=SHOTS / f"{stem}__explorer{k}_after.png")
        assert img.evaluate("i => i.complete && i.naturalWidth > 0")
    assert not record.console_errors, record.console_errors


def test_the_site_serves_the_current_static_files():
    static = ROOT / "book" / "_static"
    for source in static.rglob("*"):
        if source.is_file():
            built = HTML / "_static" / source.relative_to(static)
            assert built.read_bytes() == source.read_bytes(), f"{built} is stale"
