"""Browser tests of the built site (`_build/html`), in headless Chromium.

Every page of the table of contents is opened from a server on 127.0.0.1 with every
other host blocked (as for a reader who downloaded the site), and checked as a reader
would see it: no console errors, every formula typeset by MathJax, no raw TeX anywhere a reader can see text (page
text, navigation, link text, captions, titles, alt and aria-label attributes, explorer
captions), every image loaded and described by alternative text, no serious or critical
accessibility violation found by axe-core, the chapter's Colab button pointing at that
chapter's notebook in the configured repository, dark mode working, and each explorer
answering its controls, from the keyboard too, with a visible focus ring.
A screenshot of each page is saved under _build/screenshots/ for a person to look at.
"""

from __future__ import annotations

import re
from urllib.parse import urlparse

import pytest
import yaml

from tests.conftest import ROOT, serve_directory

pytestmark = pytest.mark.browser

HTML = ROOT / "_build" / "html"
SHOTS = ROOT / "_build" / "screenshots"
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())


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

# Raw TeX that must never be visible once MathJax has run: any backslash command
# (\\sqrt, \\mathbf, a site macro such as \\lse), the delimiters \\( \\) \\[ \\], and $...$
# or $$ (maths that was never parsed as maths).
RAW_TEX = re.compile(r"\\[A-Za-z]+|\\[()\[\]]|\$\$|\$[^$\n]+\$")

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"


@pytest.fixture(scope="module")
def site():
    if not (HTML / "index.html").exists():
        pytest.fail("no built site in _build/html: run `make book` first")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with serve_directory(HTML) as url:
        yield url


class PageRecord:
    def __init__(self):
        self.console_errors: list[str] = []
        self.external: list[str] = []
        self.failed: list[str] = []


def open_page(browser, site: str, doc: str, *, color_scheme: str = "light"):
    """Open `doc` with every non-local request blocked and recorded."""
    context = browser.new_context(
        viewport={"width": 1280, "height": 900}, color_scheme=color_scheme
    )
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


def raw_tex(chunks: list[list[str]]) -> list[str]:
    """Each raw TeX match, with where it was and 40 characters either side."""
    found = []
    for where, text in chunks:
        for match in RAW_TEX.finditer(text):
            start, end = max(match.start() - 40, 0), match.end() + 40
            found.append(f"{where}: ...{' '.join(text[start:end].split())}...")
    return found


def test_raw_tex_pattern_catches_what_it_must():
    """The pattern is broad: any command, either delimiter, a site macro; not plain text."""
    for bad in ["divided by \\sqrt{d_k}", "\\lse(z)", "$x$", "$$", "\\(x\\)", "\\[x\\]"]:
        assert raw_tex([["t", bad]]), bad
    for good in ["τ = 0.5, √d_k, d_model", "costs $5", "50% of a \\ b"]:
        assert not raw_tex([["t", good]]), good


@pytest.mark.parametrize("doc", PAGES)
def test_no_raw_tex_anywhere_on_the_page(browser, site, doc):
    context, page, _ = open_page(browser, site, doc)
    try:
        wait_for_mathjax(page)
        chunks = page.evaluate(TEXT_JS)
    finally:
        context.close()
    assert len(chunks) > 10 and len(chunks[0][1]) > 200, f"{doc}: no text found"
    found = raw_tex(chunks)
    assert not found, f"{doc}: raw TeX visible ({len(found)}):\n" + "\n".join(found[:20])


def run_axe(page) -> list[dict]:
    """axe-core's violations on the page, each with the nodes it found."""
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


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("doc", PAGES)
def test_no_serious_accessibility_violations(browser, site, doc, scheme):
    """axe-core on the finished page (formulas typeset, explorers wired), in both themes."""
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
    finally:
        page.close()
    assert {"image-alt", "label", "color-contrast"} <= set(found), sorted(found)
    assert "image-alt" in describe_violations([found["image-alt"]])


# Sphinx gives an image without alt text its file name as alt: that describes nothing.
FILE_NAME_ALT = re.compile(r"\.(png|jpe?g|svg|gif|webp)$|_images/|^data:", re.IGNORECASE)


@pytest.mark.parametrize("doc", PAGES)
def test_every_image_has_alternative_text(browser, site, doc):
    context, page, _ = open_page(browser, site, doc)
    try:
        images = page.evaluate(
            """() => [...document.images].map(img => ({
                 src: (img.getAttribute('src') || '').slice(0, 60),
                 alt: img.getAttribute('alt'),
                 explorer: !!img.closest('.explorer'),
               }))"""
        )
    finally:
        context.close()
    bad = [
        i
        for i in images
        if i["alt"] is None or not i["alt"].strip() or FILE_NAME_ALT.search(i["alt"].strip())
    ]
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


@pytest.mark.parametrize("doc", CHAPTERS)
def test_explorers_work_from_the_keyboard(browser, site, doc):
    """Tab reaches every control of every explorer, shows a focus ring drawn by
    explorer.css (not the browser's default), and the arrow keys change the figure;
    every control has an accessible name."""
    context, page, record = open_page(browser, site, doc)
    try:
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
                inside = focused.evaluate(
                    "(el, root) => root.contains(el)", explorer.element_handle()
                )
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
    finally:
        context.close()
    assert not record.console_errors, record.console_errors


@pytest.mark.parametrize("doc", PAGES)
def test_page_loads_typesets_and_shows_images(browser, site, doc):
    context, page, record = open_page(browser, site, doc)
    try:
        mathjax = wait_for_mathjax(page)
        images = page.evaluate(
            """async () => Promise.all([...document.images].map(async img => {
                 try { await img.decode(); } catch (e) {}
                 return {src: img.currentSrc.slice(0, 80), ok: img.complete && img.naturalWidth > 0};
               }))"""
        )
        page.screenshot(path=SHOTS / f"{doc.replace('/', '__')}.png", full_page=True)
    finally:
        context.close()
    assert not record.console_errors, f"{doc}: console errors: {record.console_errors}"
    assert not record.external, f"{doc}: the page asked for other hosts: {record.external}"
    assert not record.failed, f"{doc}: requests failed: {record.failed}"
    assert not mathjax["errors"], f"{doc}: MathJax errors: {mathjax['errors']}"
    assert not mathjax["untypeset"], f"{doc}: formulas left untypeset: {mathjax['untypeset']}"
    assert mathjax["containers"] >= mathjax["math"]
    broken = [i["src"] for i in images if not i["ok"]]
    assert not broken, f"{doc}: images that did not load: {broken}"


def test_pages_have_formulas():
    """The MathJax checks above mean something: the pages do contain maths."""
    for doc in ("book/notation", *CHAPTERS):
        html = (HTML / f"{doc}.html").read_text()
        assert html.count('class="math') >= 5, f"{doc} has almost no formulas"


@pytest.mark.parametrize("doc", CHAPTERS)
def test_colab_button_points_at_this_chapter(browser, site, doc):
    """The Colab and Binder buttons open the chapter's Colab edition (editions/colab/)."""
    repo = urlparse(CONFIG["repository"]["url"]).path.strip("/")
    branch = CONFIG["repository"]["branch"]
    edition = f"editions/colab/{doc.removeprefix('notebooks/')}.ipynb"
    expected = f"https://colab.research.google.com/github/{repo}/blob/{branch}/{edition}"
    binder = f"https://mybinder.org/v2/gh/{repo}/{branch}?urlpath=tree/{edition}"
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
    assert links == [expected]
    assert binder_links == [binder]
    assert (ROOT / edition).exists()


def test_dark_mode(browser, site):
    doc = CHAPTERS[0] if CHAPTERS else PAGES[0]
    context, page, record = open_page(browser, site, doc, color_scheme="dark")
    try:
        wait_for_mathjax(page)
        theme = page.evaluate("() => document.documentElement.dataset.theme")
        background = page.evaluate(
            "() => getComputedStyle(document.body).backgroundColor.match(/\\d+/g).slice(0, 3).map(Number)"
        )
        page.screenshot(path=SHOTS / f"{doc.replace('/', '__')}__dark.png", full_page=False)
    finally:
        context.close()
    assert theme == "dark"
    luminance = sum(background) / (3 * 255)
    assert luminance < 0.3, f"dark mode background is light: rgb{tuple(background)}"
    assert not record.console_errors


@pytest.mark.parametrize("doc", CHAPTERS)
def test_explorers_respond_to_their_controls(browser, site, doc):
    """Every control of every explorer changes the figure: each slider between its ends,
    each radio group and menu between its first and last option."""
    context, page, record = open_page(browser, site, doc)
    stem = doc.replace("/", "__")
    try:
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
                assert img.get_attribute("src") != first, (
                    f"explorer {k}: a radio group does nothing"
                )
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
    finally:
        context.close()
    assert not record.console_errors, record.console_errors


def test_the_site_serves_the_current_static_files():
    static = ROOT / "book" / "_static"
    for source in static.rglob("*"):
        if source.is_file():
            built = HTML / "_static" / source.relative_to(static)
            assert built.read_bytes() == source.read_bytes(), f"{built} is stale"
