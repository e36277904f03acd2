"""Browser tests of the built site (`_build/html`), in headless Chromium.

Every page of the table of contents is opened from a server on 127.0.0.1 with every
other host blocked (as for a reader who downloaded the site), and checked as a reader
would see it: no console errors, every formula typeset by MathJax with no raw TeX left,
every image loaded, the chapter's Colab button pointing at that chapter's notebook in
the configured repository, dark mode working, and each explorer answering its slider.
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

# Raw TeX that must never be visible once MathJax has run.
RAW_TEX = re.compile(
    r"\\(frac|mathbf|sum|softmax|operatorname|begin|left|right|tau)\b|\$\$|\\\(|\\\["
)


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
          const clone = document.querySelector('main, article, body').cloneNode(true);
          clone.querySelectorAll('pre, code, script, style, mjx-container, .highlight, .cell_input, textarea').forEach(e => e.remove());
          return {
            math: math.length,
            containers: document.querySelectorAll('mjx-container').length,
            untypeset: untypeset.map(m => m.textContent.slice(0, 80)),
            errors: [...document.querySelectorAll('mjx-merror, [data-mjx-error]')].map(e => e.getAttribute('data-mjx-error') || e.textContent),
            text: clone.innerText,
          };
        }"""
    )


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
    raw = RAW_TEX.findall(mathjax["text"])
    assert not raw, f"{doc}: raw TeX visible in the page text: {raw[:5]}"
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
