"""The one place where the browser tests load the built pages.

Every page of the table of contents (`_toc.yml`, so a new chapter is picked up without
touching the tests) is opened ONCE per edition (the book in _build/html, the student
edition as published in _build/pages/student/) and per theme (light, dark), in headless
Chromium, from a server on 127.0.0.1 with every other host blocked (as for a reader who
downloaded the site). `load` waits for MathJax, then extracts everything the page-level
checks look at into a `LoadedPage`: console errors, outside and failed requests, what
MathJax typeset, every text a reader can see or hear, every image (loaded? its alt
text; the width it is shown at and the smallest text its pictures record), the Colab and Binder links, the theme and background, and axe-core's violations.
The tests (test_site.py, test_student_site.py) receive it from the `loaded` fixture of
tests/site/conftest.py, which keeps one per (edition, page, theme) for the session.

A NEW PAGE-LEVEL CHECK: if it needs something not yet extracted, add a field to
`LoadedPage` and fill it in `load` (one `page.evaluate`, before axe runs); then write the
check as a test that takes `loaded` and reads the field. A check that interacts with the
page (the explorers' controls) does so on `LoadedPage.live`: the chapters' light pages of
the book stay open once everything above has been read from them (`keep_open`), back at
1366 wide, for the tests that move their controls.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import yaml

from helpers.figures import MIN_TEXT_PX
from tests.conftest import ROOT

HTML = ROOT / "_build" / "html"  # the book
PUBLISHED = ROOT / "_build" / "pages"  # the site as published: the book, student/ beside it
STUDENT = PUBLISHED / "student"
KO = PUBLISHED / "ko"  # the Korean book (book/_ext/i18n.py), and its student edition below it
KO_STUDENT = KO / "student"
# The English book and its Korean edition: test_site.py runs every page-level check on both
# (test_student_site.py on both student editions).
BOOKS = ["book", "ko"]
STUDENTS = ["student", "ko_student"]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
SCHEMES = ["light", "dark"]
# The editions axe-core reads: the books in both languages (the English one in both
# themes). A student edition's page is its book's page without the solutions (the same
# templates, styles and scripts; nothing added), which axe-core reads with every solution
# open: the student pages' own checks (raw TeX, console, links, fit, figures, buttons) run
# on each of their pages, axe-core on the book's.
AXE_EDITIONS = ["book", "ko"]
DESKTOP = {"width": 1366, "height": 900}  # the laptop screen every page must fit
PHONE = {"width": 390, "height": 844}
# How long a page may take to load or typeset: generous, since `make test` runs the
# browser tests beside the other lane's steps on two cores (a long chapter takes seconds).
LOAD_MS = 90_000
# Screenshots for a person to look at: each page's first screen, in both themes (whole
# pages, and on a phone: `make screenshots`, scripts/screenshots.py).
SHOTS = {
    "book": ROOT / "_build" / "screenshots",
    "student": ROOT / "_build" / "screenshots" / "student",
    "ko": ROOT / "_build" / "screenshots" / "ko",
    "ko_student": ROOT / "_build" / "screenshots" / "ko" / "student",
}


def toc_files() -> list[str]:
    """The documents of _toc.yml, in reading order, without extensions."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]

    def walk(entries):
        for entry in entries:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections", []))

    for part in toc.get("parts", []):
        walk(part.get("chapters", []))
    return files


PAGES = toc_files()
CHAPTERS = [f for f in PAGES if f.startswith("notebooks/")]
# The pages of a student edition loaded in Chromium: its introduction and first chapter.
# Every other page of a student edition is its book's page without the solutions, with
# nothing else changed but the edition's title, launch buttons and links
# (test_student_site.py checks that on every page, from the HTML, and fails on a page that
# differs otherwise and is not loaded): so what the browser checks on each page of the book
# holds on the student's, and these pages are loaded to check each edition as its readers
# see it (the introduction has its own paragraph for students).
STUDENT_LOADED = [PAGES[0], CHAPTERS[0]]


class PageRecord:
    def __init__(self):
        self.console_errors: list[str] = []
        self.external: list[str] = []
        self.failed: list[str] = []
        self.http_errors: list[str] = []  # responses of status 400 and above (a 404)


def open_page(browser, site: str, doc: str, *, color_scheme: str = "light"):
    """Open `doc` with every non-local request blocked and recorded."""
    context = browser.new_context(viewport=DESKTOP, color_scheme=color_scheme)
    context.set_default_timeout(LOAD_MS)
    record = PageRecord()
    host = urlparse(site).netloc

    def route(r):
        url = urlparse(r.request.url)
        if url.scheme in ("data", "blob") or url.netloc == host:
            r.continue_()
        else:
            record.external.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("console", lambda m: m.type == "error" and record.console_errors.append(m.text))
    page.on("pageerror", lambda e: record.console_errors.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: record.failed.append(f"{r.url} ({r.failure})"))
    page.on(
        "response", lambda r: r.status >= 400 and record.http_errors.append(f"{r.url} ({r.status})")
    )
    page.goto(f"{site}/{doc}.html", wait_until="load")
    return context, page, record


def mathjax_started(page) -> bool:
    """Wait until MathJax has started (typeset what is near the screen: it typesets the
    rest as the reader scrolls, ui/lazy in _config.yml); whether the page has formulas."""
    has_math = page.evaluate("() => document.querySelectorAll('.math').length > 0")
    if has_math:
        page.wait_for_function(
            "() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=LOAD_MS
        )
        page.evaluate("() => MathJax.startup.promise")
        assert page.evaluate("() => MathJax.version").startswith("3."), "MathJax 3 did not load"
    return has_math


def wait_for_mathjax(page) -> dict:
    """Wait until MathJax has typeset every formula of the page (as it does before
    printing); return what it found.

    A page with formulas must load MathJax and typeset every one of them; a page with
    none (Sphinx then leaves MathJax out) must still show no raw TeX.
    """
    if mathjax_started(page):
        page.evaluate(
            "async () => { const d = MathJax.startup.document;"
            " if (d.lazyTypesetAll) await d.lazyTypesetAll(); }"
        )
    return page.evaluate(
        """() => {
          const math = [...document.querySelectorAll('.math, span.math, div.math')];
          const untypeset = math.filter(m => !m.querySelector('mjx-container'));
          return {
            math: math.length,
            containers: document.querySelectorAll('mjx-container').length,
            untypeset: untypeset.map(m => m.textContent.slice(0, 80)),
            errors: [...document.querySelectorAll('mjx-merror, [data-mjx-error]')].map(e => e.getAttribute('data-mjx-error') || e.textContent),
          };
        }"""
    )


# What the page transferred before the reader did anything (loaded, MathJax started):
# the page and every resource, in bytes (a local server sends them uncompressed), and how
# many requests; the largest resources; how long MathJax took to start.
WEIGHT_JS = """() => {
  const entries = [performance.getEntriesByType('navigation')[0],
                   ...performance.getEntriesByType('resource')].filter(Boolean);
  const size = e => e.encodedBodySize || e.transferSize || 0;
  const largest = [...entries].sort((a, b) => size(b) - size(a)).slice(0, 5)
    .map(e => [e.name.replace(location.origin, ''), size(e)]);
  return {bytes: entries.reduce((n, e) => n + size(e), 0), requests: entries.length, largest};
}"""
# The most a page may transfer before the reader does anything (README, "Page weight").
MAX_PAGE_BYTES = 2_000_000

# Every id used more than once in the page, and every proof without its end mark.
IDS_JS = """() => {
  const seen = {};
  for (const e of document.querySelectorAll('[id]')) seen[e.id] = (seen[e.id] || 0) + 1;
  const repeated = Object.entries(seen).filter(([, n]) => n > 1);
  const proofs = [...document.querySelectorAll('.bd-article div.proof.admonition')]
    .filter(d => !/(^| )(theorem|lemma|proposition|corollary|definition|remark|example|axiom|conjecture|criterion|property|observation|assumption|notation|algorithm)( |$)/.test(d.className));
  const marks = proofs.map(d => {
    const last = d.querySelector(':scope > p:last-child');
    const mark = getComputedStyle(last || d, '::after').content;
    return {id: d.id, mark};
  });
  return {repeated, proofs: marks};
}"""

# How far the sidebar scrolled itself while the page loaded, and whether the current
# chapter's entry is wholly in view there (at DESKTOP).
SIDEBAR_JS = """() => {
  const s = document.querySelector('div.bd-sidebar');
  const active = [...document.querySelectorAll('.bd-docs-nav .active')].pop();
  if (!s || !active) return null;
  const box = s.getBoundingClientRect(), entry = active.getBoundingClientRect();
  return {scroll: s.scrollTop,
          entry_in_view: entry.top >= box.top - 1 && entry.bottom <= box.top + s.clientHeight + 1,
          fits_at_top: entry.bottom + s.scrollTop <= box.top + s.clientHeight + 1};
}"""

# Dark mode: every picture of the article that is dimmed or sits on a panel that is not
# white (the theme dims pictures and sets outputs on grey).
DARK_FIGURES_JS = """() => {
  const white = c => /^rgba?\\(255, 255, 255(, 1)?\\)$/.test(c);
  const clear = c => c === 'rgba(0, 0, 0, 0)' || c === 'transparent';
  return [...document.querySelectorAll('.bd-article img')].filter(i => i.getClientRects().length)
    .map(img => {
      const filter = getComputedStyle(img).filter;
      let panel = null;  // the first background behind the picture
      for (let e = img; e && e !== document.body; e = e.parentElement) {
        const c = getComputedStyle(e).backgroundColor;
        if (!clear(c)) { panel = c; break; }
      }
      return {src: (img.getAttribute('src') || '').slice(-40), filter, panel};
    })
    .filter(f => f.filter !== 'none' || !white(f.panel || ''));
}"""

# Everything the reader reads as code, printed output or message (code cells, their
# outputs, self-check reports, explorer captions), for internal labels.
READER_CODE_JS = """() => {
  const out = [];
  for (const e of document.querySelectorAll('.bd-article .cell_input, .bd-article .cell_output')) {
    out.push([e.classList.contains('cell_input') ? 'code cell' : 'output', e.innerText || e.textContent]);
  }
  for (const s of document.querySelectorAll('script.explorer-data')) {
    const data = JSON.parse(s.textContent);
    (data.alt || []).forEach(t => out.push(['explorer caption', t]));
  }
  return out;
}"""


def book_labels() -> set[str]:
    """Every label the chapters define: `(label)=` targets, `:label:` and `:name:` options,
    figure names of cell metadata."""
    import json

    labels: set[str] = set()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            text = "".join(cell["source"])
            labels |= set(re.findall(r"^\s*\(([\w-]+)\)=", text, re.M))
            labels |= set(re.findall(r"^\s*:(?:label|name):\s*(\S+)", text, re.M))
            figure = cell.get("metadata", {}).get("mystnb", {}).get("figure", {})
            if figure.get("name"):
                labels.add(figure["name"])
    return labels


# A bare internal label in what the reader reads: a token of the book's label prefixes
# (eq-, thm-, sec-, fig-, ex-, ...) that names a label of the book. Not part of a longer
# word, a path or an address (a CSS class or a URL is never in the reader's text anyway).
LABEL_TOKEN = re.compile(
    r"(?<![\w./#-])((?:eq|thm|sec|fig|ex|lem|prop|def|cor|tab)-[a-z0-9]+(?:-[a-z0-9]+)*)(?![\w-])"
)


def internal_labels(chunks: list[list[str]], labels: set[str]) -> list[str]:
    """Each bare label of the book in the chunks, with where and 40 characters around."""
    found = []
    for where, text in chunks:
        for match in LABEL_TOKEN.finditer(text):
            if match.group(1) in labels:
                start, end = max(match.start() - 40, 0), match.end() + 40
                found.append(
                    f"{where}: {match.group(1)}: ...{' '.join(text[start:end].split())}..."
                )
    return found


# Everything a reader can see or hear as text, except code (code may hold backslashes):
# the whole body (navigation, headings, link text, captions, collapsed solutions too),
# the page title, the attributes that browsers show or screen readers read, and every
# explorer's captions, alt texts and value labels (all frames, not only the one shown).
TEXT_JS = """() => {
  const code = 'pre, code, kbd, samp, script, style, template, textarea, .highlight, .cell_input';
  const clone = document.body.cloneNode(true);
  clone.querySelectorAll(code + ', mjx-container').forEach(e => e.remove());
  const chunks = [['page text', clone.textContent], ['<title>', document.title]];
  const attrs = ['alt', 'title', 'aria-label', 'aria-description', 'aria-valuetext',
                 'aria-roledescription', 'placeholder', 'label'];
  for (const el of document.querySelectorAll('body *')) {
    if (el.closest('mjx-container, script, style')) continue;
    for (const a of attrs) {
      const v = el.getAttribute(a);
      if (v) chunks.push([el.tagName.toLowerCase() + '[' + a + ']', v]);
    }
  }
  for (const s of document.querySelectorAll('script.explorer-data')) {
    const data = JSON.parse(s.textContent);
    chunks.push(['explorer description', data.description || '']);
    (data.alt || []).forEach(t => chunks.push(['explorer caption and alt', t]));
    (data.params || []).forEach(p => p.labels.forEach(l => chunks.push(['explorer value', l])));
  }
  return chunks;
}"""

# Every image, once decoded: loaded? its alt text, inside an explorer?
IMAGES_JS = """async () => Promise.all([...document.images].map(async img => {
  try { await img.decode(); } catch (e) {}
  return {src: (img.getAttribute('src') || '').slice(0, 60), url: img.currentSrc.slice(0, 80),
          alt: img.getAttribute('alt'), explorer: !!img.closest('.explorer'),
          ok: img.complete && img.naturalWidth > 0};
}))"""

# Raw TeX that must never be visible once MathJax has run: any backslash command
# (\\sqrt, \\mathbf, a site macro such as \\lse), the delimiters \\( \\) \\[ \\], and $...$
# or $$ (maths that was never parsed as maths).
RAW_TEX = re.compile(r"\\[A-Za-z]+|\\[()\[\]]|\$\$|\$[^$\n]+\$")


def raw_tex(chunks: list[list[str]]) -> list[str]:
    """Each raw TeX match, with where it was and 40 characters either side."""
    found = []
    for where, text in chunks:
        for match in RAW_TEX.finditer(text):
            start, end = max(match.start() - 40, 0), match.end() + 40
            found.append(f"{where}: ...{' '.join(text[start:end].split())}...")
    return found


# Sphinx gives an image without alt text its file name as alt: that describes nothing.
FILE_NAME_ALT = re.compile(r"\.(png|jpe?g|svg|gif|webp)$|_images/|^data:", re.IGNORECASE)


def images_without_alt(images: list[dict]) -> list[dict]:
    return [
        i
        for i in images
        if i["alt"] is None or not i["alt"].strip() or FILE_NAME_ALT.search(i["alt"].strip())
    ]


# The reader's view of a page's furniture: empty output blocks (an output with nothing to
# show renders as a bar), the visible search fields, and the favicon the page names,
# fetched (a page without one makes the browser ask for /favicon.ico: a 404).
FURNITURE_JS = """async () => {
  const shown = e => e.getClientRects().length > 0;
  const empty = [...document.querySelectorAll('.cell_output > .output')]
    .filter(o => !o.textContent.trim() && !o.querySelector('img, svg, table, iframe, mjx-container'));
  const icon = document.querySelector('link[rel~="icon"]');
  let iconStatus = null;
  if (icon) { try { iconStatus = (await fetch(icon.href)).status; } catch (e) { iconStatus = 0; } }
  return {
    empty_outputs: empty.map(o => o.outerHTML.slice(0, 120)),
    search_fields: [...document.querySelectorAll('.search-button-field')].filter(shown).length,
    favicon: icon ? icon.getAttribute('href') : null,
    favicon_status: iconStatus,
  };
}"""

# Display equations wider than the box they sit in (a reader sees them cut, or must
# scroll), each with whether the reader can scroll it from the keyboard.
WIDE_EQUATIONS_JS = """() => [...document.querySelectorAll('mjx-container[display="true"]')]
  .filter(c => c.getClientRects().length > 0)
  .map(c => {
    const box = c.closest('.math, div.math, .scrolls-sideways') || c.parentElement;
    const math = c.querySelector('mjx-math');
    const width = math ? math.getBoundingClientRect().width : 0;
    const scroller = [c, box].find(e => e.scrollWidth > e.clientWidth + 1);
    const style = scroller ? getComputedStyle(scroller) : null;
    return {width: Math.round(width), room: box.clientWidth,
            where: (box.id || (box.closest('[id]') || {}).id || '').slice(0, 60),
            scrollable: !!scroller && ['auto', 'scroll'].includes(style.overflowX),
            focusable: !!scroller && scroller.tabIndex >= 0};
  })
  .filter(e => e.width > e.room + 1)"""

# What does not fit the page, as a reader sees it (measured at 1366 wide with every
# solution open, and again on the phone):
# - runs_off: every code cell output, `pre` and table of the article whose content is
#   wider than its box, or which is wider than the box it sits in, unless the box that
#   takes the overflow (the nearest of it and its ancestors that does not let content
#   spill out) scrolls sideways and takes keyboard focus. Without such a box the reader
#   sees the line cut (a box that clips) or running over the margin (no box at all).
#   Those that do scroll are listed in `scrolled`. Each is of a kind: output (inside a
#   code cell's output), table, or code (any other `pre`).
# - captions: every table caption whose text is not wholly in view: cut by a box that
#   clips or scrolls (a caption centred over a table wider than the screen) or off screen.
# - punctuation: a full stop, comma or closing bracket right after an inline formula that
#   the browser moved alone to the start of the next line.
# - formulas: an inline formula wider than its box (the theme's span.math, at most as wide
#   as its line, clips it) that does not scroll sideways with keyboard focus.
# - inline_code: inline code (a self-check call in an exercise) running past what the
#   reader sees of its line (an exercise's box clips it), unless a box around it scrolls
#   with keyboard focus (a wide table).
FIT_JS = """() => {
  const article = document.querySelector('.bd-article') || document.body;
  const shown = e => e.getClientRects().length > 0;
  const where = e => ((e.closest('[id]') || {}).id || '').slice(0, 50);
  const wide = e => e.scrollWidth > e.clientWidth + 1
    || e.getBoundingClientRect().width > e.parentElement.clientWidth + 1;
  const taker = e => {  // the box that takes the overflow, or null: it spills over the margin
    for (let a = e; a && a !== document.body; a = a.parentElement) {
      if (getComputedStyle(a).overflowX !== 'visible' && a.scrollWidth > a.clientWidth + 1) return a;
    }
    return null;
  };
  const boxes = [...article.querySelectorAll('.cell_output > *, pre, table')].filter(shown);
  const runs_off = [], scrolled = [];
  for (const e of boxes.filter(wide)) {
    const box = taker(e);
    const scrolls = !!box && ['auto', 'scroll'].includes(getComputedStyle(box).overflowX);
    const kind = e.closest('.cell_output') ? 'output' : e.closest('table') ? 'table' : 'code';
    const text = e.textContent.trim().slice(0, 60);
    if (scrolls && box.tabIndex >= 0) {  // the reader can scroll it: fine, but listed
      scrolled.push({kind, where: where(e), text});
      continue;
    }
    runs_off.push({kind, what: e.tagName.toLowerCase() + '.' + [...e.classList].join('.'),
                   where: where(e), text,
                   width: Math.round(e.scrollWidth), room: e.parentElement.clientWidth,
                   box: box ? box.tagName.toLowerCase() + '.' + [...box.classList].join('.') : null,
                   scrolls, focusable: !!box && box.tabIndex >= 0});
  }
  function* ancestors(e) {
    for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) yield a;
  }
  const inView = e => {  // the part of the page the reader sees of e's place
    let left = 0, right = document.documentElement.clientWidth;
    for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
      if (getComputedStyle(a).overflowX === 'visible') continue;
      const r = a.getBoundingClientRect();
      left = Math.max(left, r.left + a.clientLeft);
      right = Math.min(right, r.left + a.clientLeft + a.clientWidth);
    }
    return [left, right];
  };
  const captions = [];
  for (const c of article.querySelectorAll('table > caption')) {
    if (!shown(c)) continue;
    const [left, right] = inView(c);
    const range = document.createRange();
    range.selectNodeContents(c);
    const out = [...range.getClientRects()].filter(r => r.width > 0)
      .filter(r => r.left < left - 1 || r.right > right + 1);
    if (out.length) captions.push({where: where(c), text: c.textContent.trim().slice(0, 60),
                                    seen: [Math.round(left), Math.round(right)],
                                    text_spans: out.map(r => [Math.round(r.left), Math.round(r.right)])});
  }
  const punctuation = [];
  for (const math of article.querySelectorAll('span.math')) {
    const formula = math.querySelector('mjx-container');
    const next = math.nextSibling;
    if (!formula || !shown(formula) || !next || next.nodeType !== Node.TEXT_NODE) continue;
    if (!/^[.,;:!?)\\]]/.test(next.data)) continue;
    const range = document.createRange();
    range.setStart(next, 0);
    range.setEnd(next, 1);
    const mark = range.getBoundingClientRect();
    const lines = math.getClientRects();  // the formula's box (it may clip a wide formula)
    if (mark.left < lines[lines.length - 1].right - 1) {
      punctuation.push({where: where(math), text: (math.textContent + next.data).slice(0, 60)});
    }
  }
  const formulas = [];
  for (const math of article.querySelectorAll('span.math')) {
    const formula = math.querySelector('mjx-container');
    if (!formula || !shown(formula) || getComputedStyle(math).display === 'inline') continue;
    const width = formula.getBoundingClientRect().width;  // (a plain inline box cannot clip)
    if (width <= math.clientWidth + 1) continue;
    const scrolls = ['auto', 'scroll'].includes(getComputedStyle(math).overflowX);
    if (scrolls && math.tabIndex >= 0) continue;
    formulas.push({where: where(math), text: math.textContent.slice(0, 60),
                   width: Math.round(width), room: math.clientWidth, scrolls});
  }
  const inline_code = [];
  for (const code of article.querySelectorAll('code.literal')) {
    if (!shown(code) || code.closest('pre')) continue;
    const scroller = [...ancestors(code)].find(a => a.scrollWidth > a.clientWidth + 1
      && ['auto', 'scroll'].includes(getComputedStyle(a).overflowX) && a.tabIndex >= 0);
    if (scroller) continue;  // a wide table's call, in view by scrolling
    const [left, right] = inView(code);
    const out = [...code.getClientRects()].filter(r => r.left < left - 1 || r.right > right + 1);
    if (out.length) inline_code.push({where: where(code), text: code.textContent.slice(0, 60),
                                       right: Math.round(out[0].right), seen: Math.round(right)});
  }
  const tables = [...article.querySelectorAll('table')].filter(shown).length;
  return {runs_off, scrolled, captions, punctuation, formulas, inline_code, boxes: boxes.length,
          tables};
}"""

# Opens every collapsed solution (sphinx-togglebutton), as a reader who reads them all,
# and marks what it opened (data-opened) so that axe can audit what the opening changed:
# the rest of the page, audited just before, is the same DOM with the same styles.
OPENED = "[data-opened]"
OPEN_DROPDOWNS_JS = """() => {
  const buttons = [...document.querySelectorAll('button.toggle-button')];
  const mark = e => e && e.setAttribute('data-opened', '');
  buttons.forEach(b => {
    if (b.getAttribute('aria-expanded') !== 'true') b.click();
    mark(b.closest('.admonition, .toggle, .cell, section') || b.parentElement);
  });
  document.querySelectorAll('details').forEach(d => { d.open = true; mark(d); });
  return buttons.length;
}"""


# Every image of the article (solutions open), as shown: its width in CSS pixels and the
# record of helpers.figures that each of its pictures carries in a PNG text chunk (for an
# explorer, every frame it can show): the smallest font size and the width in inches.
FIGURES_JS = """async () => {
  const KEY = 'attention-book:figure';
  const record = async url => {
    const bytes = new Uint8Array(await (await fetch(url)).arrayBuffer());
    const view = new DataView(bytes.buffer);
    for (let at = 8; at + 8 <= bytes.length; ) {
      const length = view.getUint32(at);
      const kind = String.fromCharCode(...bytes.subarray(at + 4, at + 8));
      if (kind === 'tEXt') {
        const text = new TextDecoder('latin1').decode(bytes.subarray(at + 8, at + 8 + length));
        const cut = text.indexOf('\\0');
        if (text.slice(0, cut) === KEY) return JSON.parse(text.slice(cut + 1));
      }
      if (kind === 'IEND') break;
      at += 12 + length;
    }
    return null;
  };
  const figures = [];
  for (const img of document.querySelectorAll('.bd-article img')) {
    const explorer = img.closest('.explorer');
    const data = explorer && explorer.querySelector('script.explorer-data');
    const urls = data ? JSON.parse(data.textContent).frames : [img.currentSrc];
    const records = [];
    for (const url of urls) records.push(await record(url));
    figures.push({src: (img.getAttribute('src') || '').slice(0, 60), explorer: !!explorer,
                  shown: parseFloat(getComputedStyle(img).width), records});
  }
  return figures;
}"""


def figure_text_px(figures: list[dict]) -> list[tuple[dict, float | None]]:
    """Each figure with the height (CSS px) of its smallest text as shown, None if unknown.

    A figure ``width_in`` inches wide shown ``shown`` CSS pixels wide has its text of
    ``font_pt`` points ``shown / width_in * font_pt / 72`` pixels tall (an explorer: the
    smallest over its frames). A picture without a record, or not shown, gives None.
    """
    measured = []
    for figure in figures:
        sizes = [
            figure["shown"] / r["width_in"] * r["font_pt"] / 72 if r else None
            for r in figure["records"]
        ]
        ok = figure["shown"] > 0 and sizes and None not in sizes
        measured.append((figure, min(sizes) if ok else None))
    return measured


def small_figure_text(figures: list[dict], minimum: float = MIN_TEXT_PX) -> list[str]:
    """Every figure whose smallest text is shown under `minimum` px, or cannot be measured."""
    problems = []
    for figure, px in figure_text_px(figures):
        if px is None:
            problems.append(
                f"{figure['src']}: not measurable (shown {figure['shown']} px wide, "
                f"records {figure['records'][:2]})"
            )
        elif px < minimum:
            problems.append(
                f"{figure['src']}: smallest text {px:.1f} px < {minimum} px "
                f"(shown {figure['shown']:.0f} px wide)"
            )
    return problems


# On a phone, every box that scrolls sideways (scrollable.js marks it) and is cut at an
# edge (more of it lies beyond) shows a cue there: the edge fades (a mask), so the reader
# sees that the formula or line goes on. Those without one.
CUES_JS = """() => [...document.querySelectorAll('.bd-article .scrolls-sideways')]
  .filter(e => e.getClientRects().length > 0)
  .map(e => {
    const formula = e.matches('span.math') ? e.querySelector('mjx-container') : null;
    const width = formula ? formula.getBoundingClientRect().width : e.scrollWidth;
    const cut = e.scrollLeft + e.clientWidth < width - 1;
    return {where: ((e.closest('[id]') || {}).id || '').slice(0, 50), kind: e.tagName.toLowerCase(),
            text: e.textContent.slice(0, 50), cut,
            mask: getComputedStyle(e).maskImage || getComputedStyle(e).webkitMaskImage};
  })
  .filter(e => e.cut && (!e.mask || e.mask === 'none'))"""

# The pictures of the article at PHONE width, each as shown and its "Enlarge" button.
PHONE_PICTURES_JS = """() => [...document.querySelectorAll('.bd-article img')].map((img, k) => {
  const holder = img.closest('.figure-holder');
  const button = holder && holder.querySelector(':scope > .figure-zoom');
  if (button) button.dataset.picture = k;
  return {index: k, shown: parseFloat(getComputedStyle(img).width),
          button: !!button && button.getClientRects().length > 0,
          name: button ? (button.getAttribute('aria-label') || button.textContent).trim() : null};
})"""

VIEWER_JS = """() => {
  const dialog = document.querySelector('dialog.figure-viewer');
  const img = dialog && dialog.querySelector('.figure-viewer-stage img');
  return {open: !!dialog && dialog.open, modal: !!dialog && dialog.matches(':modal'),
          focus_inside: !!dialog && dialog.contains(document.activeElement),
          shown: img ? parseFloat(getComputedStyle(img).width) : 0,
          alt: img ? img.getAttribute('alt') : null};
}"""


def phone_figures(page, figures: list[dict]) -> list[dict]:
    """At PHONE width: each picture as shown, and for each with a visible "Enlarge" button
    whose text is under MIN_TEXT_PX as shown (those `phone_figure_problems` checks), and for
    the page's first such button in any case (the viewer works on every page), what the
    keyboard does with it: Tab to the button, Enter opens the viewer (modal, focus inside,
    the picture at its width there), Escape shuts it and focus comes back. `figures`:
    FIGURES_JS's answer at DESKTOP, one per picture, in the same order."""
    pictures = page.evaluate(PHONE_PICTURES_JS)

    def small(picture: dict) -> bool:
        records = [r for r in figures[picture["index"]]["records"] if r]
        return bool(records) and _text_px(picture["shown"], records) < MIN_TEXT_PX

    visible = [p for p in pictures if p["button"]]
    if len(figures) == len(pictures):
        visible = [p for k, p in enumerate(visible) if k == 0 or small(p)]
    for picture in visible:
        button = page.locator(f".figure-zoom[data-picture='{picture['index']}']")
        button.focus()
        page.keyboard.press("Enter")
        page.wait_for_function("() => document.querySelector('dialog.figure-viewer[open]')")
        picture["viewer"] = page.evaluate(VIEWER_JS)
        page.keyboard.press("Escape")
        picture["closed"] = page.evaluate(
            "() => !document.querySelector('dialog.figure-viewer[open]')"
            " && document.activeElement && document.activeElement.classList.contains('figure-zoom')"
        )
    return pictures


def _text_px(width: float, records: list[dict]) -> float:
    return min(width / r["width_in"] * r["font_pt"] / 72 for r in records)


def phone_figure_problems(page: LoadedPage, minimum: float = MIN_TEXT_PX) -> list[str]:
    """Every picture whose smallest text, shown on the phone, is under `minimum` px and that
    no tap or key opens at a size where it is at least that: its "Enlarge" button must show,
    have a name, open a modal viewer with the focus in it where the text is legible, and
    give the focus back when shut."""
    problems = []
    for figure, phone in zip(page.figures, page.phone_figures, strict=True):
        records = [r for r in figure["records"] if r]
        if not records:
            continue  # not measurable: check_figure_text reports it
        px = functools.partial(_text_px, records=records)
        if px(phone["shown"]) >= minimum:
            continue
        where = (
            f"{figure['src']} (text {px(phone['shown']):.1f} px at {phone['shown']:.0f} px wide)"
        )
        viewer = phone.get("viewer")
        if not phone["button"] or not phone["name"]:
            problems.append(f"{where}: no Enlarge button")
        elif not (viewer and viewer["open"] and viewer["modal"] and viewer["focus_inside"]):
            problems.append(f"{where}: the viewer did not open as a modal dialog: {viewer}")
        elif px(viewer["shown"]) < minimum:
            problems.append(f"{where}: still {px(viewer['shown']):.1f} px in the viewer")
        elif not phone["closed"]:
            problems.append(f"{where}: Escape did not close the viewer and return the focus")
    return problems


def check_figure_text(page: LoadedPage) -> None:
    """The figure-legibility check of one loaded page (both editions' tests call it):
    no figure text under MIN_TEXT_PX, and a chapter shows at least one figure."""
    problems = small_figure_text(page.figures)
    assert not problems, f"{page.doc}: figure text too small to read:\n" + "\n".join(problems)
    if page.doc in CHAPTERS:
        assert page.figures, f"{page.doc}: no figure found"
        smallest = min(px for _, px in figure_text_px(page.figures))
        print(f"{page.doc}: {len(page.figures)} figures, smallest text {smallest:.1f} px")


# Waits until what the last change set off is over: the transitions it started (an opened
# solution fades in over 0.3 s), then two frames, so that the layout is done and every
# ResizeObserver callback has run (scrollable.js marks the boxes that now overflow).
SETTLE_JS = """async () => {
  const frame = () => new Promise(r => requestAnimationFrame(r));
  await frame();  // the style change is computed and its transitions have started
  await Promise.all(document.getAnimations().map(a => a.finished.catch(() => null)));
  await frame();
  await frame();
}"""


# The axe-core rules whose verdict depends on colours: all that can change when only the
# theme changes (the DOM, the layout and the names stay the same).
COLOUR_RULES = ["color-contrast", "link-in-text-block"]


def run_axe(page, include: str | None = None, rules: list[str] | None = None) -> list[dict]:
    """axe-core's violations on the page (or on the elements matching the CSS selector
    `include` and everything inside them), each with the nodes it found; `rules`: only
    those rules (default: axe-core's default set)."""
    if not page.evaluate("() => !!window.axe"):
        page.add_script_tag(path=str(AXE))
    return page.evaluate(
        """async ([include, rules]) => {
          const context = include ? {include: [...document.querySelectorAll(include)]} : document;
          const options = {resultTypes: ['violations']};
          if (rules) options.runOnly = {type: 'rule', values: rules};
          const result = await axe.run(context, options);
          return result.violations.map(v => ({
            id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.map(n => ({
              target: n.target.join(' '), html: n.html.slice(0, 160),
              summary: (n.failureSummary || '').replace(/\\s+/g, ' ').slice(0, 300),
            })),
          }));
        }""",
        [include, rules],
    )


def describe_violations(violations: list[dict]) -> str:
    lines = []
    for v in violations:
        lines.append(f"[{v['impact']}] {v['id']}: {v['help']} ({len(v['nodes'])} nodes)")
        for node in v["nodes"]:
            lines.append(f"    {node['target']}: {node['html']}")
            lines.append(f"        {node['summary']}")
    return "\n".join(lines)


# The page's language, its link to the same page in the other language, and the prose a
# reader reads (paragraphs, headings, list items, captions, table cells, admonition and
# exercise titles of the article, maths and code left out) for the Korean pages' check
# that no English sentence is left.
LANGUAGE_JS = """() => {
  const link = document.querySelector('a.btn-language-switch');
  const skip = 'pre, code, kbd, samp, .highlight, .cell_output, .output, mjx-container, .math, ' +
               'script, style, .bibliography, .citation, .footnote, .explorer, [lang=en], ' +
               '.glossary-terms td:first-child';
  // An element's own text: its text nodes, with the parts to skip and nested lists left out
  // (walked rather than cloned: a clone copies every formula's MathJax elements).
  const own = el => {
    let text = '';
    const walk = node => {
      for (let c = node.firstChild; c; c = c.nextSibling) {
        if (c.nodeType === Node.TEXT_NODE) text += c.textContent;
        else if (c.nodeType === Node.ELEMENT_NODE && !c.matches(skip + ', ul, ol')) walk(c);
      }
    };
    walk(el);
    return text.replace(/\\s+/g, ' ').trim();
  };
  const prose = [];
  for (const el of document.querySelectorAll(
      'article p, article li, article h1, article h2, article h3, article h4, article figcaption, ' +
      'article caption, article th, article td, article dt, article .admonition-title')) {
    if (el.closest(skip)) continue;
    const text = own(el);
    if (text) prose.push(text);
  }
  // The outputs' words, read apart (tests/site/test_korean_site.py allows code and maths
  // there): each line of a printed text, each explorer's description, caption and alt
  // text, each output picture's alt text.
  const outputs = [];
  for (const out of document.querySelectorAll('article .cell_output, article .explorer')) {
    if (out.parentElement.closest('.cell_output, .explorer')) continue;
    for (const pre of out.querySelectorAll('pre')) {
      for (const line of pre.textContent.split('\\n')) if (line.trim()) outputs.push(line.trim());
    }
    for (const el of out.querySelectorAll('figcaption, .explorer-hint')) {
      const text = el.textContent.replace(/\\s+/g, ' ').trim();
      if (text) outputs.push(text);
    }
    for (const el of [out, ...out.querySelectorAll('[aria-label], img[alt]')]) {
      for (const name of ['aria-label', 'alt']) {
        const text = (el.getAttribute(name) || '').trim();
        if (text) outputs.push(text);
      }
    }
  }
  return {lang: document.documentElement.lang, switch: link ? link.href : null,
          switchTarget: link ? link.getAttribute('target') : null, prose, outputs};
}"""


def korean_fonts(page) -> list[dict]:
    """For the first elements of the page with Korean text of their own (the title, the
    sidebar's first links, the article's first paragraphs): how many Hangul syllables their
    own text holds, and the fonts Chromium drew that text with (DevTools'
    CSS.getPlatformFontsForNode: the fonts of an element's child text nodes, with the
    number of glyphs drawn in each)."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
    found = []
    for selector in ("article h1", "nav.bd-docs-nav a", "article p"):
        ids = cdp.send("DOM.querySelectorAll", {"nodeId": root, "selector": selector})["nodeIds"]
        for node in ids[:6]:
            children = cdp.send("DOM.describeNode", {"nodeId": node, "depth": 1})["node"]
            own = "".join(
                c.get("nodeValue", "")
                for c in children.get("children", [])
                if c.get("nodeType") == 3
            )
            hangul = len(HANGUL.findall(own))
            if hangul:
                fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
                found.append(
                    {"selector": selector, "text": own[:40], "hangul": hangul, "fonts": fonts}
                )
    cdp.detach()
    return found


HANGUL = re.compile("[\uac00-\ud7a3]")


@dataclass
class LoadedPage:
    """What one page (edition) showed in one theme; see `load`."""

    edition: str
    doc: str
    scheme: str
    console_errors: list[str] = field(default_factory=list)  # console errors, page errors
    external: list[str] = field(default_factory=list)  # requests to other hosts (blocked)
    failed: list[str] = field(default_factory=list)  # requests that failed
    mathjax: dict = field(default_factory=dict)  # wait_for_mathjax's answer
    text: list[list[str]] = field(default_factory=list)  # TEXT_JS: [where, text]
    images: list[dict] = field(default_factory=list)  # IMAGES_JS
    colab_links: list[str] = field(default_factory=list)
    binder_links: list[str] = field(default_factory=list)
    theme: str | None = None  # <html data-theme>
    background: list[int] = field(default_factory=list)  # the body's rgb
    axe: list[dict] = field(default_factory=list)  # run_axe, finished, every solution open
    http_errors: list[str] = field(default_factory=list)  # responses of status >= 400
    furniture: dict = field(default_factory=dict)  # FURNITURE_JS
    dropdowns: int = 0  # collapsed solutions opened before axe and the later checks
    wide_equations: list[dict] = field(default_factory=list)  # WIDE_EQUATIONS_JS, desktop
    phone_equations: list[dict] = field(default_factory=list)  # the same at PHONE width
    fit: dict = field(default_factory=dict)  # FIT_JS at DESKTOP, solutions open
    phone_fit: dict = field(default_factory=dict)  # the same at PHONE width
    figures: list[dict] = field(default_factory=list)  # FIGURES_JS, desktop, solutions open
    weight: dict = field(default_factory=dict)  # WEIGHT_JS: before the reader does anything
    mathjax_start_s: float = 0.0  # seconds from the load event to MathJax started
    ids: dict = field(default_factory=dict)  # IDS_JS
    sidebar: dict | None = None  # SIDEBAR_JS, at DESKTOP just after loading
    dark_figures: list[dict] = field(default_factory=list)  # DARK_FIGURES_JS (dark scheme)
    reader_code: list[list[str]] = field(default_factory=list)  # READER_CODE_JS
    phone_figures: list[dict] = field(default_factory=list)  # viewer checks at PHONE width
    phone_cues: list[dict] = field(default_factory=list)  # CUES_JS at PHONE width
    language: dict = field(default_factory=dict)  # LANGUAGE_JS and the fonts of Korean text
    # (context, page, record) of a page kept open (`keep_open`), closed by tests/site/conftest.py
    live: tuple | None = None


def keep_open(edition: str, doc: str) -> bool:
    """Whether `load` leaves the page open: the book's chapters, whose explorers
    tests/site/test_site.py moves once the page-level checks have read them (in the light
    theme, at 1366 wide, scrolled to the top)."""
    return edition == "book" and doc in CHAPTERS


def switch_theme(page, scheme: str) -> None:
    """Switch the open page to `scheme` as a reader's system setting does: the theme
    follows the `prefers-color-scheme` media query (its default mode, "auto")."""
    page.emulate_media(color_scheme=scheme)
    page.wait_for_function("s => document.documentElement.dataset.theme === s", arg=scheme)
    page.evaluate(SETTLE_JS)


def load(browser, site: str, edition: str, doc: str) -> dict[str, LoadedPage]:
    """Open `doc` ONCE and extract everything the page-level checks need, in both themes:
    {"light": LoadedPage, "dark": LoadedPage}.

    The page loads in the light theme; once what depends on the theme has been read, it is
    switched to dark in place (as a reader's system setting switches it: the DOM is the
    same, only the styles change) and what the theme changes is read again: the theme and
    background, the first screen, what frames the text, the figures' panels, and axe-core
    on the book's pages (the student edition has the same styles; its axe-core run is in
    the light theme). axe-core runs once per theme with every collapsed solution open: the
    page with the most content a reader can reach (a closed solution's content is hidden,
    which axe-core leaves out; the buttons are there either way). Then back to light for
    the phone (one theme is enough for widths)."""
    assert AXE.exists(), "axe-core is missing: run `npm ci` (make test does)"
    context, page, record = open_page(browser, site, doc, color_scheme="light")
    result = LoadedPage(edition, doc, "light")
    dark: LoadedPage | None = None
    try:
        started = time.monotonic()
        mathjax_started(page)
        result.mathjax_start_s = time.monotonic() - started
        page.wait_for_load_state("networkidle")
        result.weight = page.evaluate(WEIGHT_JS)
        result.sidebar = page.evaluate(SIDEBAR_JS)
        page.evaluate(
            "() => document.querySelectorAll('img[loading=lazy]')"
            ".forEach(i => { i.loading = 'eager'; })"
        )  # every check sees them all
        result.mathjax = wait_for_mathjax(page)
        result.text = page.evaluate(TEXT_JS)
        result.images = page.evaluate(IMAGES_JS)
        result.colab_links = page.eval_on_selector_all(
            "a[href*='colab.research.google.com']", "els => els.map(e => e.href)"
        )
        result.binder_links = page.eval_on_selector_all(
            "a[href*='mybinder.org']", "els => els.map(e => e.href)"
        )
        shots: Path = SHOTS[edition]
        shots.mkdir(parents=True, exist_ok=True)
        name = doc.replace("/", "__")

        def theme_dependent(view: LoadedPage, suffix: str) -> None:
            view.theme = page.evaluate("() => document.documentElement.dataset.theme")
            view.background = page.evaluate(
                "() => getComputedStyle(document.body).backgroundColor.match(/\\d+/g)"
                ".slice(0, 3).map(Number)"
            )
            # the first screen (a whole chapter takes seconds to capture: `make screenshots`)
            page.evaluate("() => window.scrollTo(0, 0)")
            page.screenshot(path=shots / f"{name}{suffix}.png", full_page=False)
            view.furniture = page.evaluate(FURNITURE_JS)

        theme_dependent(result, "")
        result.dropdowns = page.evaluate(OPEN_DROPDOWNS_JS)
        if result.dropdowns:
            page.evaluate(SETTLE_JS)  # faded in, and scrollable.js has marked what overflows
        if edition in AXE_EDITIONS:
            result.axe = run_axe(page)  # every solution open
        result.wide_equations = page.evaluate(WIDE_EQUATIONS_JS)  # solutions open too
        result.fit = page.evaluate(FIT_JS)
        result.figures = page.evaluate(FIGURES_JS)  # solutions open too, at DESKTOP width
        result.ids = page.evaluate(IDS_JS)
        result.reader_code = page.evaluate(READER_CODE_JS)
        result.language = page.evaluate(LANGUAGE_JS)
        if result.language["lang"] == "ko":
            result.language["fonts"] = korean_fonts(page)

        switch_theme(page, "dark")
        dark = dataclasses.replace(result, scheme="dark", axe=[])
        theme_dependent(dark, "__dark")
        dark.dark_figures = page.evaluate(DARK_FIGURES_JS)
        if edition == "book":  # the other editions have the book's styles: light is enough
            # only the rules a theme can change: the DOM is the one axe-core read in light
            dark.axe = run_axe(page, rules=COLOUR_RULES)
        switch_theme(page, "light")

        page.set_viewport_size(PHONE)
        page.evaluate(SETTLE_JS)  # reflowed, and scrollable.js has marked what overflows
        result.phone_equations = page.evaluate(WIDE_EQUATIONS_JS)
        result.phone_fit = page.evaluate(FIT_JS)
        result.phone_cues = page.evaluate(CUES_JS)
        result.phone_figures = phone_figures(page, result.figures)
        if keep_open(edition, doc):  # for the explorer tests, as a reader opens it
            page.set_viewport_size(DESKTOP)
            page.evaluate("() => window.scrollTo(0, 0)")
            result.live = (context, page, record)
    finally:
        if result.live is None:
            context.close()
    views = {"light": result, "dark": dark or dataclasses.replace(result, scheme="dark")}
    for view in views.values():
        view.console_errors = list(record.console_errors)
        view.external = list(record.external)
        view.failed = list(record.failed)
        view.http_errors = list(record.http_errors)
    return views
