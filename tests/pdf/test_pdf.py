"""The book's PDFs (`make pdf`: scripts/pdf.py), read back and compared with the site.

Each edition's PDF (_build/pdf/) against the same edition's built HTML: every chapter and
section title and its number, every numbered equation, figure, table, theorem and exercise
with the site's number at its place (a named destination scripts/pdf.js put there), the
bookmarks, the contents' page numbers, links that resolve, formulas that are text, no
"??", no raw TeX or MyST, nothing past the margins, figures of at least 200 pixels to the
inch, every font embedded, A4 throughout, and no solution in the student edition. Text,
its position and images are read with pdfium (pypdfium2), the structure with pypdf.

Run `make pdf` first (make test's pdf step does).
"""

from __future__ import annotations

import collections
import functools
import html
import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("book_pdf", ROOT / "scripts" / "pdf.py")
builder = sys.modules["book_pdf"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(builder)

EDITIONS = list(builder.EDITIONS)
A4 = (595.28, 841.89)  # points
MIN_DPI = 200
CSS = builder.PRINT_CSS.read_text(encoding="utf-8")
TOP_MARGIN, LEFT_MARGIN, _BOTTOM_MARGIN = builder.page_margins(CSS)
COLUMN_PT = builder.column_px(CSS) * 72 / 96

# Raw TeX (a formula MathJax never typeset, or a MathJax error showing its source), and
# MyST that was never parsed: roles, directives, targets, glue, substitutions.
RAW_TEX = re.compile(r"\\[A-Za-z]+|\\[()\[\]]|\$\$|\$[^$\n]+\$")
RAW_MYST = re.compile(
    r"\{(?:eq|ref|numref|doc|cite|glue|math|prf:[a-z]+)[:}]|`{3}|:::|\(\w[\w-]*\)=|\{\{"
)
UNRESOLVED = re.compile(r"\?\?")


# --------------------------------------------------------------------------- the site


def slug(doc: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "-", doc)


def text_of(markup: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", markup)).split())


@functools.cache
def site(edition: str) -> dict:
    """What the site of the edition shows: per page (in reading order) its headings, its
    numbered items, its solutions, its explorers and the text of its code."""
    ed = builder.EDITIONS[edition]
    pages = []
    for _part, doc in builder.toc_files(ed.toc):
        text = (ed.html / f"{doc}.html").read_text(encoding="utf-8")
        text = builder.EXPLORER_DATA.sub("", text)
        article = text[text.find('<article class="bd-article">') : text.find("</article>")]
        article = re.sub(r'<a class="headerlink"[^>]*>.*?</a>', "", article)
        headings = [
            (int(m.group(1)), text_of(m.group(2)))
            for m in re.finditer(r"<h([123])>(.*?)</h\1>", article, re.S)
        ]
        numbered = []
        for m in re.finditer(
            r'<div class="math notranslate nohighlight" id="([^"]+)">\s*'
            r'<span class="eqno">(\([^)]+\))',
            article,
        ):
            numbered.append((m.start(), m.group(1), m.group(2)))
        owners = list(
            re.finditer(r'<(figure|table|div)\b([^>]*?)\bid="([^"]+)"', article),
        )
        for m in re.finditer(r'<span class="caption-number">([^<]+?)\s*</span>', article):
            owner = [o for o in owners if o.start() < m.start()][-1]
            if owner.group(1) == "div" and "admonition" not in owner.group(2):
                raise AssertionError(f"{doc}: {m.group(1)} is in no figure, table or box")
            numbered.append((m.start(), owner.group(3), m.group(1).strip()))
        numbered.sort()
        # Each solution's longest run of words without a formula (its formulas are TeX in
        # the HTML), to look for in the PDFs.
        solutions = []
        for m in re.finditer(
            r'<div class="solution[^"]*admonition"[^>]*>\s*<p class="admonition-title">'
            r"[^<]*</p>\s*<section[^>]*>(.*?)</section>",
            article,
            re.S,
        ):
            body = re.sub(
                r'<(span|div) class="math[^"]*"[^>]*>.*?</\1>', "\0", m.group(1), flags=re.S
            )
            body = re.sub(r"<(pre|code)\b.*?</\1>", "\0", body, flags=re.S)
            body = re.sub(r"</?(p|li|ol|ul|div|dt|dd|table|tr|td|th)\b[^>]*>", "\0", body)
            solutions.append(max(text_of(body).split("\0"), key=len).strip())
        code = "\n".join(
            text_of(m.group(1)) for m in re.finditer(r"<pre>(.*?)</pre>", article, re.S)
        )
        pages.append(
            {
                "doc": doc,
                "headings": headings,
                "numbered": [(ident, label) for _, ident, label in numbered],
                "solutions": solutions,
                "solution_boxes": len(re.findall(r'class="solution[^"]*admonition"', article)),
                "explorers": article.count('class="explorer"'),
                "code": code,
            }
        )
    return {"pages": pages}


# --------------------------------------------------------------------------- the PDF


@functools.cache
def book(edition: str) -> dict:
    """The edition's PDF: its pages' text (pdfium), named destinations, outline, links."""
    import pypdf
    import pypdfium2 as pdfium

    path = builder.OUT / builder.EDITIONS[edition].pdf
    if not path.exists():
        pytest.fail(f"{path.relative_to(ROOT)} is missing: run `make pdf` first")
    reader = pypdf.PdfReader(path)
    document = pdfium.PdfDocument(path)
    texts = [document[i].get_textpage().get_text_range() for i in range(len(document))]
    dests = {}
    for name, dest in reader.named_destinations.items():
        dests[name.lstrip("/")] = (
            reader.get_destination_page_number(dest),
            float(dest["/Left"] or 0),
            float(dest["/Top"] or 0),
        )
    labels = reader.page_labels
    front = labels.index("1")
    return {
        "path": path,
        "reader": reader,
        "pdfium": document,
        "texts": texts,
        "text": "\n".join(texts),
        "dests": dests,
        "labels": labels,
        "front": front,
    }


def outline(reader) -> list[tuple[int, str, int]]:
    """(depth, title, page index) of every bookmark, in order."""
    out = []

    def walk(items, depth):
        for item in items:
            if isinstance(item, list):
                walk(item, depth + 1)
            else:
                out.append((depth, item.title, reader.get_destination_page_number(item)))

    walk(reader.outline, 0)
    return out


def band_text(pdf: dict, page: int, top: float) -> str:
    """The text on one page in a band of a line or two from `top` down."""
    textpage = pdf["pdfium"][page].get_textpage()
    return " ".join(textpage.get_text_bounded(0, top - 20, A4[0], top + 3).split())


# --------------------------------------------------------------------------- the tests


@pytest.mark.parametrize("edition", EDITIONS)
def test_every_page_is_a4(edition):
    pdf = book(edition)
    sizes = collections.Counter(
        (round(float(p.mediabox.width), 1), round(float(p.mediabox.height), 1))
        for p in pdf["reader"].pages
    )
    assert len(sizes) == 1, f"pages of several sizes: {sizes}"
    (width, height), _ = sizes.popitem()
    assert abs(width - A4[0]) < 1 and abs(height - A4[1]) < 1, (width, height)


@pytest.mark.parametrize("edition", EDITIONS)
def test_every_font_is_embedded(edition):
    from pypdf.generic import DictionaryObject

    missing, seen = set(), set()

    def fonts(resources):
        resources = resources.get_object() if resources is not None else DictionaryObject()
        for font in (resources.get("/Font") or DictionaryObject()).get_object().values():
            yield font.get_object()
        for xobject in (resources.get("/XObject") or DictionaryObject()).get_object().values():
            xobject = xobject.get_object()
            if xobject.get("/Subtype") == "/Form":
                yield from fonts(xobject.get("/Resources"))

    for page in book(edition)["reader"].pages:
        for font in fonts(page.get("/Resources")):
            name = str(font.get("/BaseFont", font.get("/Name", "?")))
            seen.add(name)
            if font.get("/Subtype") == "/Type3":
                continue  # its glyphs are drawn by the PDF itself
            descendant = (
                font["/DescendantFonts"][0].get_object() if "/DescendantFonts" in font else font
            )
            descriptor = descendant.get("/FontDescriptor")
            descriptor = descriptor.get_object() if descriptor is not None else {}
            if not any(k in descriptor for k in ("/FontFile", "/FontFile2", "/FontFile3")):
                missing.add(name)
    assert seen, "no font found at all"
    assert not missing, f"fonts not embedded: {sorted(missing)}"


@pytest.mark.parametrize("edition", EDITIONS)
def test_bookmarks_are_the_sites_headings_with_their_numbers(edition):
    """Every chapter, section and subsection of the site, with its number, in the site's
    order and nesting (Contents first)."""
    pdf = book(edition)
    marks = outline(pdf["reader"])
    assert marks[0][1] == "Contents" and marks[0][2] < pdf["front"]
    expected = [
        (level - 1, title) for page in site(edition)["pages"] for level, title in page["headings"]
    ]
    assert [(depth, title) for depth, title, _ in marks[1:]] == expected
    chapters = [t for p in site(edition)["pages"] for lv, t in p["headings"] if lv == 1]
    assert len(chapters) == len(site(edition)["pages"])
    # Each bookmark goes to a page where its title is (the first words of it, at least).
    for _depth, title, page in marks[1:]:
        words = " ".join(title.split()[1:4] if re.match(r"\d", title) else title.split()[:3])
        assert words in " ".join(pdf["texts"][page].split()), (title, page + 1)


@pytest.mark.parametrize("edition", EDITIONS)
def test_every_chapter_opens_with_its_title_and_number(edition):
    pdf = book(edition)
    text = " ".join(pdf["text"].split())
    for page in site(edition)["pages"]:
        level, title = page["headings"][0]
        assert level == 1
        number = re.match(r"(\d+)\. (.*)", title)
        if number:
            assert f"Chapter {number.group(1)} {number.group(2)}" in text, title
        else:
            assert title in text, title


@pytest.mark.parametrize("edition", EDITIONS)
def test_every_number_of_the_site_is_at_its_place(edition):
    """Each numbered equation, figure, table, theorem and exercise of the site: its
    number is printed where the PDF's named destination for it points, and in the
    site's order."""
    pdf = book(edition)
    found, order = [], []
    for page in site(edition)["pages"]:
        for ident, label in page["numbered"]:
            dest = f"pdfn-{slug(page['doc'])}--{ident}"
            assert dest in pdf["dests"], f"{label} ({page['doc']}#{ident}) has no place in the PDF"
            index, _left, top = pdf["dests"][dest]
            around = band_text(pdf, index, top)
            assert label in around, (
                f"{label} ({page['doc']}#{ident}): page {index + 1} shows {around!r}"
            )
            found.append(label)
            order.append((index, -top))
    assert order == sorted(order), "the numbers are not in the site's order"
    kinds = collections.Counter(
        label.split()[0] if label[0] != "(" else "equation" for label in found
    )
    assert kinds["equation"] >= 50 and kinds["Fig."] >= 30 and kinds["Exercise"] >= 40, kinds


@pytest.mark.parametrize("edition", EDITIONS)
def test_equations_are_text(edition):
    """Every numbered equation has the letters and digits of its formula as text on its
    line: MathJax's CHTML output, not a picture (an SVG or bitmap formula has none)."""
    pdf = book(edition)
    for page in site(edition)["pages"]:
        for ident, label in page["numbered"]:
            if not label.startswith("("):
                continue
            index, _left, top = pdf["dests"][f"pdfn-{slug(page['doc'])}--{ident}"]
            textpage = pdf["pdfium"][index].get_textpage()
            # The formula's line (a tall formula: its middle), left of the number.
            formula = textpage.get_text_bounded(LEFT_MARGIN, top - 60, A4[0] - 120, top + 40)
            assert len(re.findall(r"\w", formula)) >= 3, f"{label}: no text: {formula!r}"


@pytest.mark.parametrize("edition", EDITIONS)
def test_the_contents_give_each_chapters_page(edition):
    """Each line of the contents ends with the page (as numbered in the book) where its
    bookmark goes."""
    pdf = book(edition)
    contents = "\n".join(pdf["texts"][1 : pdf["front"]]).replace("\r", "")
    entries = [
        (" ".join(m.group(1).split()), m.group(2))
        for m in re.finditer(r"^(.*\S) +(\d+)$", contents, re.M)
    ]
    pages = {title: pdf["labels"][page] for _d, title, page in outline(pdf["reader"])[1:]}
    chapters = [t for p in site(edition)["pages"] for lv, t in p["headings"] if lv == 1]
    listed = dict(entries)
    for chapter in chapters:
        assert listed.get(chapter) == pages[chapter], (chapter, listed.get(chapter), pages[chapter])
    assert len(entries) > len(chapters) * 4, "the contents list sections too"
    for title, number in entries:
        assert pages.get(title) == number, (title, number, pages.get(title))


def prose(pdf: dict, k: int) -> str:
    """The text of page k but its code (listings, outputs, inline code: the monospaced
    font), which may hold what is raw markup elsewhere (a plot label r"$\\tau$")."""
    import ctypes

    import pypdfium2 as pdfium

    textpage = pdf["pdfium"][k].get_textpage()
    text = textpage.get_text_range()
    name, flags = ctypes.create_string_buffer(256), ctypes.c_int()
    kept = []
    for i in range(textpage.count_chars()):
        pdfium.raw.FPDFText_GetFontInfo(textpage.raw, i, name, 256, flags)
        kept.append("\n" if b"Mono" in name.value else text[i] if i < len(text) else "")
    return "".join(kept)


@pytest.mark.parametrize("edition", EDITIONS)
def test_no_unresolved_reference_or_raw_markup(edition):
    """No "??", raw TeX or MyST anywhere but in code (the pages where the patterns match
    at all are read again without their code)."""
    pdf = book(edition)
    found = []
    for k, text in enumerate(pdf["texts"]):
        if not any(p.search(text) for p in (UNRESOLVED, RAW_TEX, RAW_MYST)):
            continue
        words = prose(pdf, k)
        for pattern in (UNRESOLVED, RAW_TEX, RAW_MYST):
            for match in pattern.finditer(words):
                around = " ".join(words[max(match.start() - 40, 0) : match.end() + 40].split())
                found.append(f"page {pdf['labels'][k]}: {match.group()!r} in ...{around}...")
    assert not found, found[:10]


@pytest.mark.parametrize("edition", EDITIONS)
def test_links_resolve(edition):
    """Every link inside the PDF goes to a named place that exists; every other link is
    a web address (never the local server the book was printed from)."""
    pdf = book(edition)
    internal, external = 0, 0
    bad = []
    for k, page in enumerate(pdf["reader"].pages):
        for annot in page.get("/Annots") or []:
            annot = annot.get_object()
            if annot.get("/Subtype") != "/Link":
                continue
            if "/Dest" in annot:
                internal += 1
                name = str(annot["/Dest"]).lstrip("/")
                if name not in pdf["dests"]:
                    bad.append((pdf["labels"][k], name))
            else:
                external += 1
                uri = str(annot["/A"].get("/URI", ""))
                if not uri.startswith(("https://", "http://")) or ".invalid" in uri:
                    bad.append((pdf["labels"][k], uri))
    assert not bad, bad[:10]
    assert internal > 200 and external > 20, (internal, external)


@pytest.mark.parametrize("edition", EDITIONS)
def test_explorers_are_figures_with_a_note(edition):
    pdf = book(edition)
    explorers = sum(page["explorers"] for page in site(edition)["pages"])
    notes = re.findall(r"Interactive on the website", pdf["text"])
    assert explorers >= 9 and len(notes) == explorers, (explorers, len(notes))


def pages_with_images(pdf) -> list[int]:
    from pypdf.generic import DictionaryObject

    out = []
    for k, page in enumerate(pdf["reader"].pages):
        resources = page.get("/Resources") or DictionaryObject()
        xobjects = (resources.get_object().get("/XObject") or DictionaryObject()).get_object()
        if any(x.get_object().get("/Subtype") == "/Image" for x in xobjects.values()):
            out.append(k)
    return out


@pytest.mark.parametrize("edition", EDITIONS)
def test_figures_are_sharp_and_inside_the_column(edition):
    import pypdfium2 as pdfium

    pdf = book(edition)
    raw, found, problems = pdfium.raw, 0, []
    for k in pages_with_images(pdf):
        page = pdf["pdfium"][k]
        for j in range(raw.FPDFPage_CountObjects(page.raw)):
            obj = raw.FPDFPage_GetObject(page.raw, j)
            if raw.FPDFPageObj_GetType(obj) != raw.FPDF_PAGEOBJ_IMAGE:
                continue
            image = pdfium.PdfImage(obj, page=page, pdf=pdf["pdfium"])
            left, bottom, right, top = image.get_bounds()
            width, height = image.get_px_size()
            dpi = min(width / ((right - left) / 72), height / ((top - bottom) / 72))
            found += 1
            if dpi < MIN_DPI:
                problems.append(f"page {pdf['labels'][k]}: {width}x{height} px at {dpi:.0f} dpi")
            if left < LEFT_MARGIN - 1 or right > LEFT_MARGIN + COLUMN_PT + 1:
                problems.append(f"page {pdf['labels'][k]}: an image at x {left:.0f}-{right:.0f}")
    assert found >= 40, found
    assert not problems, problems


@pytest.mark.parametrize("edition", EDITIONS)
def test_nothing_runs_off_the_page(edition):
    """Nothing in the margins left and right of the column: a code line, an output, a
    formula or a table that did not fit would be there, or cut at the page's edge. (Text
    found there is looked at: MathJax draws a long brace from a clipped row of glyphs
    whose invisible part reaches into the margins, so the margins are rendered and must
    be blank.)"""
    pdf = book(edition)
    right = LEFT_MARGIN + COLUMN_PT
    problems = []
    for k in range(len(pdf["pdfium"])):
        page = pdf["pdfium"][k]
        textpage = page.get_textpage()
        outside = textpage.get_text_bounded(right + 1.5, 0, A4[0], A4[1]).strip()
        outside += textpage.get_text_bounded(0, 0, LEFT_MARGIN - 1.5, A4[1]).strip()
        if not outside:
            continue
        width, _height = page.get_size()
        for crop in ((right + 1.5, 0, 0, 0), (0, 0, width - LEFT_MARGIN + 1.5, 0)):
            strip = page.render(scale=2, crop=crop).to_pil().convert("L")
            if strip.getextrema()[0] < 200:
                problems.append(f"page {pdf['labels'][k]}: {outside[:60]!r}")
    assert not problems, problems[:10]


@pytest.mark.parametrize("edition", EDITIONS)
def test_the_text_fills_the_column(edition):
    """Justified lines reach the column's right edge on many pages (three in four in the
    book; one in fifteen in a book shrunk to fit a code line that did not wrap). Chromium
    shrinks the whole book to fit when one thing (a code line that does not wrap, a
    formula, a table) is wider than the page: nothing runs off, everything is smaller."""
    pdf = book(edition)
    right = LEFT_MARGIN + COLUMN_PT
    body = range(pdf["front"], len(pdf["pdfium"]))
    full = [
        k
        for k in body
        if pdf["pdfium"][k].get_textpage().get_text_bounded(right - 4, 60, right + 1.5, 780).strip()
    ]
    assert len(full) >= 0.5 * len(body), (
        f"only {len(full)} of {len(body)} pages have text up to the column's right edge: "
        "the book was shrunk to fit something too wide"
    )


def test_the_book_has_every_solution_and_the_student_edition_none():
    book_site, student_site = site("book"), site("student")
    solutions = [s for page in book_site["pages"] for s in page["solutions"] if len(s) > 30]
    assert len(solutions) >= 35, len(solutions)
    book_text = " ".join(book("book")["text"].split())
    student_text = " ".join(book("student")["text"].split())
    # Each solution's first words: in the book, nowhere in the student edition.
    for solution in solutions:
        start = " ".join(solution.split()[:6])
        assert start in book_text, f"a solution of the site is not in the book's PDF: {start!r}"
        assert start not in student_text, f"a solution is in the student PDF: {start!r}"
    titles = len(re.findall(r"^Solution\r?$", book("book")["text"], re.M))
    assert titles == sum(page["solution_boxes"] for page in book_site["pages"])
    assert not re.findall(r"^Solution\r?$", book("student")["text"], re.M)
    assert sum(page["solution_boxes"] for page in student_site["pages"]) == 0


@pytest.mark.parametrize("edition", EDITIONS)
def test_title_page_and_metadata(edition):
    pdf = book(edition)
    meta = pdf["reader"].metadata
    config_title = builder.yaml.safe_load(builder.EDITIONS[edition].config.read_text())["title"]
    assert meta.title == config_title
    first = " ".join(pdf["texts"][0].split())
    assert config_title.removesuffix(" (student edition)") in first
    assert ("Student edition" in first) == (edition == "student")
    assert pdf["labels"][: pdf["front"]] == ["i", "ii", "iii", "iv", "v"][: pdf["front"]]
    assert str(pdf["reader"].trailer["/Root"]["/Lang"]) == "en"
