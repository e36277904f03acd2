"""Build the book as PDF (`make pdf`): _build/pdf/attention-book.pdf (every solution in its
place, after its exercise, as on the site) and attention-book-student.pdf (no solution).

The route: the HTML that `make book` and `make student` already built is printed by
Chromium (the browser the tests already install), with the print styles of
book/_static/print.css. Every chapter page of an edition is put into one document (ids
made unique per page, links between pages made links inside the document), MathJax
typesets it as on the site (CHTML: every formula is text, selectable and searchable), and
Chromium prints it in one go. A second, small document holds the title page and the table
of contents, printed once the page of every heading is known; pypdf puts the two
together, points the table of contents and the bookmarks at the headings, and numbers the
front pages i, ii, ... and the book from 1. Numbers of chapters, sections, equations,
figures, theorems and exercises are the site's own: they are in the HTML it prints.

Explorers (helpers.widgets.Explorer) become figures: their initial frame, their caption
and a note with the address of the page on the website where the figure is interactive.
Solutions stay in their place, after their exercise, as on the site: the book's PDF is
the reader's and the instructor's reference, where a solution is read beside its
exercise (and its code goes on from the chapter's); a class gets the student PDF.

Why this route and not Sphinx's LaTeX builder with XeLaTeX (measured on the 2-core
machine of `make test`, shared and busy): the HTML exists before the PDF is made and
Chromium is installed for the browser tests already, so printing costs about 36 s of CPU
for the book (331 pages) and 30 s for the student edition (289), one edition per core,
and installs 5 MB (fonts-lmodern; the pypdf and pypdfium2 wheels). The LaTeX route needs
TeX Live (37 Debian packages, 92 MB: 6 min 48 s to install here) and texlive-fonts-extra
(509 MB) for the bbm package that jupyter-book's LaTeX class loads; its Sphinx build took
24 s of CPU and each XeLaTeX pass 19 s (three for the references), and its PDF loses every
explorer (their output is HTML, which the LaTeX builder cannot show) and the site's
MathJax macros (\\softmax, \\R, \\lse: undefined control sequences). Printing the site
keeps what the reader of the site sees, numbers included.

Usage: python scripts/pdf.py [--edition book|student ...] [--out DIR] [--keep-html]
(every edition whose HTML is built by default; both are, after `make book student`).
"""

from __future__ import annotations

import argparse
import dataclasses
import html as html_lib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from urllib.parse import urlparse

import yaml

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "_build" / "pdf"
PRINT_CSS = ROOT / "book" / "_static" / "print.css"

# A4, the size every page of every edition has (tests/pdf checks it).
PAPER = {"format": "A4"}
# The fonts the print styles name, from Debian's packages (installed when missing).
FONT_PACKAGES = {"Latin Modern Roman": "fonts-lmodern", "DejaVu Sans Mono": "fonts-dejavu-core"}
# Korean is set in Noto CJK (Debian's fonts-noto-cjk) in a Korean edition.
CJK_FONT_PACKAGES = {"Noto Serif CJK KR": "fonts-noto-cjk"}
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
LOAD_MS = 180_000  # typesetting a whole book beside other work on two cores


@dataclasses.dataclass(frozen=True)
class Edition:
    key: str  # book, student
    html: Path  # the built site of the edition
    config: Path  # its _config.yml (the student edition's is staged by scripts/book.py)
    toc: Path
    pdf: str  # the file name in OUT, and on the published site
    site_path: str  # where the edition is published, relative to the site's root
    student: bool


EDITIONS = {
    "book": Edition(
        "book",
        ROOT / "_build" / "html",
        ROOT / "_config.yml",
        ROOT / "_toc.yml",
        "attention-book.pdf",
        "",
        False,
    ),
    "student": Edition(
        "student",
        ROOT / "_build" / "student" / "_build" / "html",
        ROOT / "_build" / "student" / "source" / "_config.yml",
        ROOT / "_build" / "student" / "source" / "_toc.yml",
        "attention-book-student.pdf",
        "student/",
        True,
    ),
}


# --------------------------------------------------------------------------- installs


def _apt_install(packages: list[str]) -> None:
    if not packages:
        return
    if not shutil.which("apt-get"):
        sys.exit(f"missing {packages}: install them (Debian package names)")
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    print(f"installing Debian's {' '.join(packages)}", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # make test's other lane may be installing a package too: wait for dpkg's lock.
    wait = ["-o", "DPkg::Lock::Timeout=600"]
    subprocess.run([*sudo, "apt-get", *wait, "update", "-qq"], check=True)
    cmd = [*sudo, "apt-get", *wait, "install", "-y", "-qq", "--no-install-recommends", *packages]
    subprocess.run(cmd, check=True, env=env)


def font_installed(family: str) -> bool:
    found = subprocess.run(["fc-list", family], capture_output=True, text=True, check=False)
    return bool(found.stdout.strip())


def ensure_pdf_tools(korean: bool = False) -> str:
    """Chromium and the fonts of the print styles (Debian packages, installed when missing,
    as root or with sudo); return Chromium's path."""
    missing = []
    chromium = os.environ.get("CHROMIUM") or next(
        (p for n in CHROMIUM_NAMES if (p := shutil.which(n))), None
    )
    if not chromium:
        missing += ["chromium", "fonts-dejavu-core"]
    fonts = {**FONT_PACKAGES, **(CJK_FONT_PACKAGES if korean else {})}
    if not shutil.which("fc-list"):
        missing += ["fontconfig", *fonts.values()]
    else:
        missing += [package for family, package in fonts.items() if not font_installed(family)]
    _apt_install(sorted(set(missing)))
    chromium = chromium or next((p for n in CHROMIUM_NAMES if (p := shutil.which(n))), None)
    if not chromium:
        sys.exit("no Chromium found: install Debian's chromium or set CHROMIUM")
    return chromium


# --------------------------------------------------------------------------- the pages


def toc_files(toc_path: Path) -> list[tuple[str | None, str]]:
    """(part caption, document) of _toc.yml, in reading order."""
    toc = yaml.safe_load(toc_path.read_text())
    files: list[tuple[str | None, str]] = [(None, toc["root"])]

    def walk(caption, entries):
        for entry in entries:
            if "file" in entry:
                files.append((caption, entry["file"]))
            walk(caption, entry.get("sections", []))

    for part in toc.get("parts", []):
        walk(part.get("caption"), part.get("chapters", []))
    return files


def site_url(config: dict) -> str:
    """The online book's address, ending in "/" (as the Colab edition's links)."""
    base = ((config.get("sphinx") or {}).get("config") or {}).get("html_baseurl") or ""
    base = base or (config.get("html") or {}).get("baseurl") or ""
    if base.strip():
        return base.strip().rstrip("/") + "/"
    repo = (config.get("repository") or {}).get("url", "")
    parts = urlparse(repo).path.strip("/").split("/")
    if urlparse(repo).netloc != "github.com" or len(parts) != 2:
        sys.exit(f"cannot derive the site's address from repository url {repo!r}")
    return f"https://{parts[0]}.github.io/{parts[1]}/"


EXPLORER_DATA = re.compile(
    r'<script type="application/json" class="explorer-data">.*?</script>', re.S
)
PREPARE_JS = (Path(__file__).parent / "pdf.js").read_text(encoding="utf-8")


@dataclasses.dataclass
class Heading:
    doc: str
    level: int  # 1 chapter (or front or back matter page), 2 section, 3 subsection
    text: str
    html: str
    dest: str  # its named destination in the PDF


# An inline formula and the punctuation after it, which print.css keeps on one line (as
# the site's punctuation.js does): a full stop never starts a line on its own.
FORMULA_AND_PUNCTUATION = re.compile(
    r'(<span class="math notranslate nohighlight">(?:(?!</span>).)*</span>)'
    r"([.,;:!?)\]\u2019\u201d]+)",
    re.S,
)


def article_of(path: Path) -> str:
    """The page's article, without the explorers' frames (the first stays, as an <img>)."""
    text = EXPLORER_DATA.sub("", path.read_text(encoding="utf-8"))
    start, end = text.find('<article class="bd-article">'), text.find("</article>")
    if start < 0 or end < 0:
        sys.exit(f"{path}: no <article class='bd-article'>: is it a page of the book?")
    article = text[start + len('<article class="bd-article">') : end]
    return FORMULA_AND_PUNCTUATION.sub(r'<span class="math-and-punctuation">\1\2</span>', article)


def templates(edition: Edition) -> tuple[str, dict[str, str | None]]:
    """Every page's article in a <template> (scripts/pdf.js makes one book of them), and
    the part of the table of contents each page belongs to."""
    parts, out = {}, []
    for part, doc in toc_files(edition.toc):
        path = edition.html / f"{doc}.html"
        if not path.exists():
            sys.exit(
                f"{path.relative_to(ROOT)} is missing: build the HTML first (make book student)"
            )
        out.append(f'<template data-doc="{html_lib.escape(doc)}">{article_of(path)}</template>')
        parts[doc] = part
    return "".join(out), parts


def mathjax_config(edition: Edition) -> dict:
    """The site's MathJax configuration (its macros), for print: no menu, no hidden copy of
    each formula for screen readers (it would be extracted as text a second time)."""
    for _, doc in toc_files(edition.toc):
        text = (edition.html / f"{doc}.html").read_text(encoding="utf-8")
        found = re.search(r"<script>window\.MathJax = (\{.*?\})</script>", text)
        if found:
            break
    else:
        sys.exit(f"{edition.key}: no page of the site configures MathJax")
    config = json.loads(found.group(1))
    # The site loads its components one by one, typesetting lazily what comes into view
    # (ui/lazy) with a hidden copy for screen readers (a11y/assistive-mml): the print loads
    # the combined tex-mml-chtml.js and typesets the whole (hidden) book at once, so a lazy
    # loader would typeset nothing and the print would wait for it.
    config.pop("loader", None)
    options = config.setdefault("options", {})
    options["enableMenu"] = False
    options.setdefault("menuOptions", {}).setdefault("settings", {})["assistiveMml"] = False
    options["enableAssistiveMml"] = False
    return config


def column_px(css: str) -> float:
    """The width of the text column (print.css gives it in mm), in CSS pixels."""
    found = re.search(r"article\.bd-article\s*\{\s*width:\s*([\d.]+)mm", css)
    if not found:
        sys.exit("print.css must give the text column's width: article.bd-article { width: ...mm }")
    return float(found.group(1)) / 25.4 * 96


def document(title: str, lang: str, body: str, css: str, mathjax: dict | None = None) -> str:
    script, hidden = "", ""
    if mathjax is not None:  # typeset when pdf.py says so, after scripts/pdf.js, hidden
        hidden = " pdf-hidden"
        mathjax = {**mathjax, "startup": {**mathjax.get("startup", {}), "typeset": False}}
        script = (
            f"<script>window.MathJax = {json.dumps(mathjax)};</script>"
            '<script defer src="_static/mathjax/tex-mml-chtml.js"></script>'
        )
    return (
        f'<!DOCTYPE html><html lang="{lang}" data-theme="light"><head><meta charset="utf-8">'
        f"<title>{html_lib.escape(title)}</title>"
        '<link rel="stylesheet" href="_static/pygments.css">'
        f"<style>{css}</style>{script}</head>"
        f'<body><article class="bd-article{hidden}">{body}</article></body></html>'
    )


def git_commit() -> str:
    found = subprocess.run(
        ["git", "log", "-1", "--format=%h %cs"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    return f"Built from commit {found[0]} of {found[1]}." if len(found) == 2 else ""


def front_matter(
    headings: list[Heading],
    parts: dict[str, str | None],
    config: dict,
    edition: Edition,
    site: str,
    numbers: dict[str, int],
) -> str:
    """The title page and the table of contents: each page of the book, and the sections
    of each chapter, with their page numbers (those of the book, from 1)."""
    title = config["title"].removesuffix(" (student edition)")
    subtitle = "Student edition: the exercises without their solutions" if edition.student else ""
    url = html_lib.escape(site + edition.site_path)
    out = [
        '<section class="pdf-title-page">',
        f'<h1 class="pdf-title">{html_lib.escape(title)}</h1>',
        f'<p class="pdf-subtitle">{html_lib.escape(subtitle)}</p>' if subtitle else "",
        f'<p class="pdf-author">{html_lib.escape(config.get("author", ""))}</p>',
        '<div class="pdf-title-foot">',
        "<p>The interactive edition, with explorable figures and code to run in Colab: "
        f'<a href="{url}">{url}</a></p>',
        f"<p>{git_commit()} © {html_lib.escape(str(config.get('copyright', '')))}</p>",
        "</div></section>",
        '<section class="pdf-contents"><h1 class="pdf-contents-title">Contents</h1>',
    ]
    part: object = object()
    for heading in headings:
        if heading.level == 1 and parts[heading.doc] != part:
            part = parts[heading.doc]
            if part:
                out.append(f'<p class="pdf-toc-part">{html_lib.escape(part)}</p>')
        if heading.level > 2 or (heading.level == 2 and not heading.doc.startswith("notebooks/")):
            continue
        out.append(
            f'<p class="pdf-toc-{heading.level}"><a href="#{heading.dest}">{heading.html}</a>'
            f'<span class="pdf-toc-page">{numbers[heading.dest]}</span></p>'
        )
    out.append("</section>")
    # The targets of the links above, so that Chromium makes named destinations of them;
    # in the book they are replaced by the headings' own (assemble).
    out.append(
        '<div class="pdf-targets">'
        + "".join(f'<span id="{h.dest}"></span>' for h in headings)
        + "</div>"
    )
    return "".join(out)


# --------------------------------------------------------------------------- printing


BODY_PX = 11 / 72 * 96  # print.css sets the text in 11 pt

# MathJax typesets the book while it is hidden: the metrics it would measure on the screen
# (the size of an em and an ex, the column's width) are those of print.css. Latin Modern is
# the face of MathJax's TeX fonts, so formulas need no scaling to match the text (scale 1).
TYPESET_JS = """async ({em, column}) => {
  await MathJax.startup.promise;
  const STATE = MathJax._.core.MathItem.STATE;
  MathJax.startup.document.outputJax.getMetrics = function (html) {
    this.setDocument(html);
    for (const item of html.math) {
      if (item.state() < STATE.METRICS) {
        item.setMetrics(em, 0.431 * em, column, 1e6, 1);
        item.state(STATE.METRICS);
      }
    }
  };
  await MathJax.typesetPromise();
}"""

# The book shown, once MathJax's fonts and every image are loaded.
LOADED_JS = """async () => {
  // the site's pictures load lazily, which a hidden page never does: load them now
  document.querySelectorAll('img[loading=lazy]').forEach(i => { i.loading = 'eager'; });
  await Promise.all([...document.fonts].map(f => f.load().catch(() => null)));
  await Promise.all([...document.images].filter(i => !i.complete).map(
    i => new Promise(done => { i.onload = i.onerror = done; })));
  // a picture is printed at 200 dpi or finer: never wider than its pixels allow
  document.querySelectorAll('img').forEach(i => {
    if (i.naturalWidth) i.style.maxWidth = `min(100%, ${i.naturalWidth / 200}in)`;
  });
  document.querySelector('article').classList.remove('pdf-hidden');
}"""

# A display formula wider than the column is scaled down to fit it (as \\resizebox would).
# The width of each formula is MathJax's; the room it has is the column's, less its
# equation number and the padding of a box around it (a theorem's).
FIT_MATH_JS = """(column) => {
  const doc = MathJax.startup.document;
  const fitted = [];
  for (const item of doc.math) {
    if (!item.display) continue;
    const box = item.typesetRoot;
    const need = doc.outputJax.getBBox(item, doc).w * item.metrics.em;
    const number = box.parentNode.querySelector(':scope > .eqno');
    const inBox = box.closest('.admonition') ? 2.2 * item.metrics.em : 0;
    const room = column - inBox - (number ? 4 * item.metrics.em : 0);
    if (need > room) {
      box.style.zoom = (room / need).toFixed(3);
      const where = box.closest('section[id]');
      fitted.push({where: where ? where.id : '', scale: room / need});
    }
  }
  return fitted;
}"""

MATH_JS = """() => {
  const fitted = [];
  for (const c of document.querySelectorAll('mjx-container[display="true"]')) {
    const math = c.firstElementChild;
    const avail = c.clientWidth, need = math ? math.getBoundingClientRect().width : 0;
    if (need > avail + 0.5) {
      c.style.zoom = (avail / need).toFixed(3);
      const where = c.closest('section[id]');
      fitted.push({where: where ? where.id : '', scale: avail / need});
    }
  }
  return fitted;
}"""

MATH_JS = """() => {
  const math = [...document.querySelectorAll('.math')];
  const errors = [...document.querySelectorAll('mjx-merror, [data-mjx-error]')];
  return {
    math: math.length,
    untypeset: math.filter(m => !m.querySelector('mjx-container'))
                   .map(m => m.textContent.slice(0, 80)),
    errors: errors.map(e => e.getAttribute('data-mjx-error') || e.textContent),
  };
}"""


def serve(context, html_dir: Path, documents: dict[str, str]) -> str:
    """Serve the edition's site (its images, MathJax, styles) and our documents to the
    browser, from memory and disk; every other request is refused."""
    base = "http://book.pdf.invalid/"
    root = html_dir.resolve()

    def handle(route):
        url = route.request.url
        if not url.startswith(base):
            route.abort()
            return
        path = url[len(base) :].split("?")[0].split("#")[0]
        if path in documents:
            route.fulfill(body=documents[path], content_type="text/html; charset=utf-8")
            return
        target = (root / path).resolve()
        if target.is_file() and target.is_relative_to(root):
            route.fulfill(path=str(target))
        else:
            route.fulfill(status=404, body="")

    context.route("**/*", handle)
    return base


def print_pdf(page, path: Path) -> None:
    """Print with the page size, margins, page numbers and running heads of print.css."""
    page.pdf(path=str(path), print_background=True, prefer_css_page_size=True, **PAPER)


def cpu_seconds_of_children() -> float:
    """CPU time of this process's descendants that are still running (Chromium), and of
    the children they waited for."""
    stats = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[stat.parent.name] = (fields[1], sum(int(f) for f in fields[11:15]))
    total, frontier = 0, [str(os.getpid())]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, ticks) in stats.items():
            if ppid == parent:
                total += ticks
                frontier.append(pid)
    return total / os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------- assembling


def page_margins(css: str) -> tuple[float, float, float]:
    """The top, left and bottom margins of the pages (print.css's first @page rule), in
    points."""
    found = re.search(
        r"@page\s*\{[^}]*?margin:\s*([\d.]+)mm\s+[\d.]+mm\s+([\d.]+)mm\s+([\d.]+)mm", css
    )
    if not found:
        sys.exit("print.css must give the pages' margins: @page { margin: T R B L (in mm) }")
    top, bottom, left = (float(found.group(k)) / 25.4 * 72 for k in (1, 2, 3))
    return top, left, bottom


def named_destinations(
    reader, margins: tuple[float, float, float]
) -> dict[str, tuple[int, float, float]]:
    """name -> (page index, left, top) of every named destination Chromium wrote, in the
    page's coordinates: Chromium gives them from the corner of the text area, as if the
    page had no margins (a link would show its target a margin too high). A place in the
    bottom margin (an element pushed to the next page, which Chromium names where it
    would have been) is the top of the next page."""
    top_margin, left_margin, bottom_margin = margins
    out = {}
    for name, dest in reader.named_destinations.items():
        page = reader.get_destination_page_number(dest)
        left = float(dest.get("/Left") or 0) + left_margin
        top = float(dest.get("/Top") or 0) - top_margin
        if top < bottom_margin + 1 and page + 1 < len(reader.pages):
            page, top = page + 1, float(reader.pages[page + 1].mediabox.height) - top_margin
        out[name.lstrip("/")] = (page, left, top)
    return out


def assemble(
    front_path: Path,
    body_path: Path,
    headings: list[Heading],
    meta: dict,
    margins: tuple[float, float],
    target: Path,
) -> dict:
    """One PDF: the front pages, then the book; links and bookmarks to the headings."""
    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import (
        ArrayObject,
        DictionaryObject,
        Fit,
        FloatObject,
        NameObject,
        NullObject,
        TextStringObject,
    )

    front, body = PdfReader(front_path), PdfReader(body_path)
    dests = named_destinations(body, margins)
    writer = PdfWriter()
    for page in front.pages:
        writer.add_page(page)
    offset = len(writer.pages)
    for page in body.pages:
        writer.add_page(page)
    # The headings' links to themselves (they only made Chromium name their places) go.
    for page in writer.pages[offset:]:
        if "/Annots" in page:
            page[NameObject("/Annots")] = ArrayObject(
                a
                for a in page["/Annots"]
                if not re.match(r"/pdf[hn]-", str(a.get_object().get("/Dest", "")))
            )
    # The book's named destinations, on the pages of the whole PDF (the front pages' own
    # targets of the same names are dropped: the contents now link to the headings).
    table = DictionaryObject()
    for name, (index, left, top) in sorted(dests.items()):
        page_ref = writer.pages[offset + index].indirect_reference
        table[NameObject("/" + name)] = ArrayObject(
            [page_ref, NameObject("/XYZ"), FloatObject(left), FloatObject(top), NullObject()]
        )
    writer._root_object[NameObject("/Dests")] = writer._add_object(table)
    # Bookmarks: the contents, each page of the book, its sections and subsections.
    writer.add_outline_item("Contents", 1 if offset > 1 else 0)
    parents: dict[int, object] = {}
    for heading in headings:
        index, left, top = dests[heading.dest]
        item = writer.add_outline_item(
            heading.text,
            offset + index,
            parent=parents.get(heading.level - 1),
            fit=Fit.xyz(left, top),
        )
        parents = {k: v for k, v in parents.items() if k < heading.level}
        parents[heading.level] = item
    # Page labels: i, ii, ... for the title page and the contents, then 1, 2, ... as printed.
    writer.set_page_label(0, offset - 1, style="/r")
    writer.set_page_label(offset, len(writer.pages) - 1, style="/D", start=1)
    writer.add_metadata({f"/{k}": v for k, v in meta.items() if k != "Lang"})
    writer._root_object[NameObject("/Lang")] = TextStringObject(meta["Lang"])
    writer._root_object[NameObject("/PageMode")] = NameObject("/UseOutlines")
    writer.compress_identical_objects(remove_duplicates=True, remove_unreferenced=True)
    with target.open("wb") as stream:
        writer.write(stream)
    return {"front_pages": offset, "pages": len(writer.pages)}


def build(edition_key: str, out: Path, keep_html: bool = False) -> dict:
    """Print one edition to out/<its pdf>; return what happened (also in out/<name>.json)."""
    from playwright.sync_api import sync_playwright
    from pypdf import PdfReader

    edition = EDITIONS[edition_key]
    start = time.perf_counter()
    marks, cpu = {"start": start}, {"start": 0.0}

    chromium_cpu = [0.0]  # its CPU time, last read while it ran

    def mark(name: str, browser_open: bool = True) -> None:
        marks[name] = time.perf_counter()
        if browser_open:
            chromium_cpu[0] = cpu_seconds_of_children()
        cpu[name] = chromium_cpu[0] + time.process_time()

    config = yaml.safe_load(edition.config.read_text())
    lang = ((config.get("sphinx") or {}).get("config") or {}).get("language") or "en"
    chromium = ensure_pdf_tools(korean=lang == "ko")
    mark("install")
    site = site_url(config)
    css = PRINT_CSS.read_text(encoding="utf-8")
    body, parts = templates(edition)
    title = config["title"]
    documents = {"pdf-book.html": document(title, lang, body, css, mathjax_config(edition))}
    out.mkdir(parents=True, exist_ok=True)
    target = out / edition.pdf
    report: dict = {"edition": edition.key, "pdf": edition.pdf}
    mark("read")
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 900, "height": 1200})
        context.set_default_timeout(LOAD_MS)
        base = serve(context, edition.html, documents)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
        page.on("console", lambda m: m.type in ("error", "warning") and errors.append(m.text))
        page.emulate_media(media="print")
        mark("launch")
        page.goto(base + "pdf-book.html", wait_until="load")
        mark("load")
        headings = [
            Heading(**h)
            for h in page.evaluate(PREPARE_JS, {"site": site + edition.site_path, "base": base})
        ]
        mark("prepare")
        # MathJax typesets the hidden book with the print's metrics given (no layout of the
        # screen, which printing would do again), then its fonts and the images are loaded.
        page.evaluate(TYPESET_JS, {"em": BODY_PX, "column": column_px(css)})
        mark("typeset")
        report["math"] = page.evaluate(MATH_JS)
        report["fitted_math"] = page.evaluate(FIT_MATH_JS, column_px(css))
        page.evaluate(LOADED_JS)
        mark("fit")
        body_pdf = Path(tmp) / "body.pdf"
        print_pdf(page, body_pdf)
        mark("print")
        dests = named_destinations(PdfReader(body_pdf), page_margins(css))
        missing = [h.text for h in headings if h.dest not in dests]
        if missing:
            sys.exit(f"{edition.key}: no place in the PDF for the headings {missing[:5]}")
        numbers = {h.dest: dests[h.dest][0] + 1 for h in headings}
        front = front_matter(headings, parts, config, edition, site, numbers)
        math = mathjax_config(edition) if 'class="math' in front else None
        documents["pdf-front.html"] = document(title, lang, front, css, math)
        front_page = context.new_page()
        front_page.goto(base + "pdf-front.html", wait_until="load")
        if math:
            front_page.evaluate(TYPESET_JS, {"em": BODY_PX, "column": column_px(css)})
            front_page.evaluate(LOADED_JS)
        front_pdf = Path(tmp) / "front.pdf"
        print_pdf(front_page, front_pdf)
        mark("front")
        browser.close()
        report["errors"] = errors
        meta = {
            "Title": title,
            "Author": config.get("author", ""),
            "Subject": "Student edition: the exercises without their solutions"
            if edition.student
            else "With the solutions of the exercises",
            "Creator": "scripts/pdf.py: the site printed by Chromium, put together by pypdf",
            "Lang": lang,
        }
        report.update(assemble(front_pdf, body_pdf, headings, meta, page_margins(css), target))
        mark("assemble", browser_open=False)
    if keep_html:
        for name, text in documents.items():
            (out / f"{target.stem}-{name}").write_text(text, encoding="utf-8")
    names = list(marks)
    report["seconds"] = {b: round(marks[b] - marks[a], 1) for a, b in itertools.pairwise(names)}
    report["seconds"]["total"] = round(time.perf_counter() - start, 1)
    report["cpu_seconds"] = {b: round(cpu[b] - cpu[a], 1) for a, b in itertools.pairwise(names)}
    report["python_cpu_seconds"] = round(time.process_time(), 1)
    (out / f"{target.stem}.json").write_text(json.dumps(report, indent=1, ensure_ascii=False))
    return report


PAGES = ROOT / "_build" / "pages"  # the site as published (make pages, make test)


def publish(edition: Edition, pdf: Path) -> None:
    """Put the PDF beside its edition's site (the download button of every page links
    it): in the built HTML and, once it is assembled, in the site as published."""
    for site in (edition.html, PAGES / edition.site_path):
        if (site / "index.html").exists():
            shutil.copyfile(pdf, site / edition.pdf)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edition", action="append", choices=sorted(EDITIONS))
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--keep-html", action="store_true", help="keep the printed HTML too")
    args = parser.parse_args(argv)
    editions = args.edition or [k for k, e in EDITIONS.items() if (e.html / "index.html").exists()]
    if not editions:
        sys.exit("no edition is built: run `make book student` first")
    with ProcessPoolExecutor(max_workers=len(editions)) as pool:
        futures = [pool.submit(build, key, args.out.resolve(), args.keep_html) for key in editions]
        reports = [f.result() for f in futures]
    ok = True
    for report in reports:
        publish(EDITIONS[report["edition"]], args.out / report["pdf"])
        problems = report["errors"] + report["math"]["errors"]
        problems += report["math"]["untypeset"]
        print(
            f"{report['edition']}: {args.out / report['pdf']}, {report['pages']} pages "
            f"({report['front_pages']} before page 1), {report['seconds']}"
        )
        for fitted in report["fitted_math"]:
            print(f"  a display formula scaled to {fitted['scale']:.2f} to fit the column")
        for problem in problems:
            print(f"  PROBLEM: {problem}")
        ok &= not problems
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
