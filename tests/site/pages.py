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
page (the explorers' controls) opens its own page with `open_page`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import yaml

from helpers.figures import MIN_TEXT_PX
from tests.conftest import ROOT

HTML = ROOT / "_build" / "html"  # the book
PUBLISHED = ROOT / "_build" / "pages"  # the site as published: the book, student/ beside it
STUDENT = PUBLISHED / "student"
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
SCHEMES = ["light", "dark"]
DESKTOP = {"width": 1366, "height": 900}  # the laptop screen every page must fit
PHONE = {"width": 390, "height": 844}
# Screenshots for a person to look at: the whole page in light mode, the first screen dark.
SHOTS = {
    "book": ROOT / "_build" / "screenshots",
    "student": ROOT / "_build" / "screenshots" / "student",
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


class PageRecord:
    def __init__(self):
        self.console_errors: list[str] = []
        self.external: list[str] = []
        self.failed: list[str] = []
        self.http_errors: list[str] = []  # responses of status 400 and above (a 404)


def open_page(browser, site: str, doc: str, *, color_scheme: str = "light"):
    """Open `doc` with every non-local request blocked and recorded."""
    context = browser.new_context(viewport=DESKTOP, color_scheme=color_scheme)
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


def wait_for_mathjax(page) -> dict:
    """Wait until MathJax has typeset the page; return what it found.

    A page with formulas must load MathJax and typeset every one of them; a page with
    none (Sphinx then leaves MathJax out) must still show no raw TeX.
    """
    has_math = page.evaluate("() => document.querySelectorAll('.math').length > 0")
    if has_math:
        page.wait_for_function(
            "() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=20000
        )
        page.evaluate("() => MathJax.startup.promise")
        assert page.evaluate("() => MathJax.version").startswith("3."), "MathJax 3 did not load"
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

# Opens every collapsed solution (sphinx-togglebutton), as a reader who reads them all.
OPEN_DROPDOWNS_JS = """() => {
  const buttons = [...document.querySelectorAll('button.toggle-button')];
  buttons.forEach(b => { if (b.getAttribute('aria-expanded') !== 'true') b.click(); });
  document.querySelectorAll('details').forEach(d => { d.open = true; });
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


def run_axe(page) -> list[dict]:
    """axe-core's violations on the page, each with the nodes it found."""
    if not page.evaluate("() => !!window.axe"):
        page.add_script_tag(path=str(AXE))
    return page.evaluate(
        """async () => {
          const result = await axe.run(document, {resultTypes: ['violations']});
          return result.violations.map(v => ({
            id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.map(n => ({
              target: n.target.join(' '), html: n.html.slice(0, 160),
              summary: (n.failureSummary || '').replace(/\\s+/g, ' ').slice(0, 300),
            })),
          }));
        }"""
    )


def describe_violations(violations: list[dict]) -> str:
    lines = []
    for v in violations:
        lines.append(f"[{v['impact']}] {v['id']}: {v['help']} ({len(v['nodes'])} nodes)")
        for node in v["nodes"]:
            lines.append(f"    {node['target']}: {node['html']}")
            lines.append(f"        {node['summary']}")
    return "\n".join(lines)


@dataclass
class LoadedPage:
    """What one load of one page (edition, theme) showed; see `load`."""

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
    axe: list[dict] = field(default_factory=list)  # run_axe, on the finished page
    http_errors: list[str] = field(default_factory=list)  # responses of status >= 400
    furniture: dict = field(default_factory=dict)  # FURNITURE_JS
    dropdowns: int = 0  # collapsed solutions opened for axe_opened
    axe_opened: list[dict] = field(default_factory=list)  # run_axe, every solution open
    wide_equations: list[dict] = field(default_factory=list)  # WIDE_EQUATIONS_JS, desktop
    phone_equations: list[dict] = field(default_factory=list)  # the same at PHONE width
    figures: list[dict] = field(default_factory=list)  # FIGURES_JS, desktop, solutions open


def load(browser, site: str, edition: str, doc: str, scheme: str) -> LoadedPage:
    """Open `doc` once in `scheme` and extract everything the page-level checks need."""
    assert AXE.exists(), "axe-core is missing: run `npm ci` (make test does)"
    context, page, record = open_page(browser, site, doc, color_scheme=scheme)
    result = LoadedPage(edition, doc, scheme)
    try:
        result.mathjax = wait_for_mathjax(page)
        result.text = page.evaluate(TEXT_JS)
        result.images = page.evaluate(IMAGES_JS)
        result.colab_links = page.eval_on_selector_all(
            "a[href*='colab.research.google.com']", "els => els.map(e => e.href)"
        )
        result.binder_links = page.eval_on_selector_all(
            "a[href*='mybinder.org']", "els => els.map(e => e.href)"
        )
        result.theme = page.evaluate("() => document.documentElement.dataset.theme")
        result.background = page.evaluate(
            "() => getComputedStyle(document.body).backgroundColor.match(/\\d+/g).slice(0, 3).map(Number)"
        )
        shots: Path = SHOTS[edition]
        shots.mkdir(parents=True, exist_ok=True)
        name = doc.replace("/", "__")
        if scheme == "light":
            page.screenshot(path=shots / f"{name}.png", full_page=True)
        else:
            page.screenshot(path=shots / f"{name}__{scheme}.png", full_page=False)
        result.furniture = page.evaluate(FURNITURE_JS)
        result.axe = run_axe(page)
        result.dropdowns = page.evaluate(OPEN_DROPDOWNS_JS)
        if result.dropdowns:
            page.wait_for_timeout(300)  # scrollable.js marks the boxes that now overflow
            result.axe_opened = run_axe(page)
        result.wide_equations = page.evaluate(WIDE_EQUATIONS_JS)  # solutions open too
        result.figures = page.evaluate(FIGURES_JS)  # solutions open too, at DESKTOP width
        if scheme == "light":  # the same page on a phone (one theme is enough for widths)
            page.set_viewport_size(PHONE)
            page.wait_for_timeout(500)  # reflow, then scrollable.js marks what overflows
            result.phone_equations = page.evaluate(WIDE_EQUATIONS_JS)
    finally:
        context.close()
    result.console_errors = list(record.console_errors)
    result.external = list(record.external)
    result.failed = list(record.failed)
    result.http_errors = list(record.http_errors)
    return result
