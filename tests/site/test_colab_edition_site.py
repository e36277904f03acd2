"""The Colab edition against the built site, and rendered the way Jupyter renders markdown.

- Every link of an edition notebook to the online book names a page of the built site
  (_build/html) and an anchor that exists on it.
- Equations, theorems, exercises and figures carry the numbers the site shows.
- Each notebook, converted by nbconvert's HTML exporter (the lab template, whose
  markdown renderer is Jupyter's) and opened in headless Chromium with MathJax 3 served
  from node_modules (configured as JupyterLab configures it: $...$ and $$...$$), shows
  typeset maths, no MathJax error, no raw role or directive text and no raw TeX. A
  screenshot of each goes to _build/screenshots/colab/ for a person to look at: its first
  screen (the whole notebook under `make test-full`; a whole page took seconds each).
"""

from __future__ import annotations

import re
import shutil
from html.parser import HTMLParser
from urllib.parse import urlparse

import jinja2
import nbformat
import pytest

from tests.conftest import FULL, ROOT, serve_directory

pytestmark = pytest.mark.browser

HTML = ROOT / "_build" / "html"
EDITION = ROOT / "editions" / "colab"
SHOTS = ROOT / "_build" / "screenshots" / "colab"
NOTEBOOKS = sorted(EDITION.glob("[0-9][0-9]_*.ipynb"))
MATHJAX = ROOT / "node_modules" / "mathjax" / "es5"

LINK = re.compile(r"\]\((https?://[^)\s]+)\)")


def site_base() -> str:
    import sys

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    base = config.get("html", {}).get("baseurl", "")
    if base:
        return base.rstrip("/") + "/"
    owner, repo = urlparse(config["repository"]["url"]).path.strip("/").split("/")
    return f"https://{owner}.github.io/{repo}/"


class Ids(HTMLParser):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)


@pytest.fixture(scope="module")
def built():
    if not (HTML / "index.html").exists():
        pytest.fail("no built site in _build/html: run `make book` first")
    return HTML


def markdown(nb) -> str:
    return "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_link_to_the_site_has_its_page_and_anchor(built, path):
    base = site_base()
    links = [u for u in LINK.findall(markdown(nbformat.read(path, 4))) if u.startswith(base)]
    assert len(links) >= 10, f"{path.name}: only {len(links)} links to the site?"
    ids_of: dict[str, set[str]] = {}
    for url in links:
        page, _, anchor = url.removeprefix(base).partition("#")
        file = built / page
        assert file.is_file(), f"{path.name}: {url} names no page of the site"
        if anchor:
            if page not in ids_of:
                ids_of[page] = Ids(file.read_text()).ids
            assert anchor in ids_of[page], f"{path.name}: {url}: no such anchor on the page"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_numbers_are_the_sites(built, path):
    page = (built / "notebooks" / f"{path.stem}.html").read_text()
    text = markdown(nbformat.read(path, 4))
    site_eq = re.findall(r'class="eqno">\(([\d.]+)\)', page)
    assert re.findall(r"\\tag\{([\d.]+)\}", text) == site_eq
    site_captions = re.findall(r'<span class="caption-number">([\w.]+) ([\d.]+) </span>', page)
    ours = re.findall(r"\*\*(Theorem|Proposition|Lemma|Definition|Corollary) ([\d.]+)\*\*", text)
    ours += re.findall(r"^#+ (Exercise) ([\d.]+)", text, re.M)
    ours += [("Fig.", n) for n in re.findall(r"\*\*Fig\. ([\d.]+)\*\*", text)]
    assert sorted(ours) == sorted(site_captions)
    site_sections = re.findall(r'<h[1-6]><span class="section-number">([\d.]+) </span>', page)
    assert re.findall(r"^#+ (\d[\d.]*) ", text, re.M) == site_sections


RENDER_TEMPLATE = """\
{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js_mathjax -%}
<script>
window.MathJax = {
  tex: {
    inlineMath: [['$', '$'], ['\\\\(', '\\\\)']],
    displayMath: [['$$', '$$'], ['\\\\[', '\\\\]']],
    processEscapes: true,
    processEnvironments: true,
    tags: 'none'
  },
  options: {processHtmlClass: 'jp-RenderedMarkdown|jp-RenderedHTMLCommon'}
};
</script>
<script src="mathjax/tex-chtml-full.js"></script>
{%- endblock html_head_js_mathjax -%}
"""


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """The edition notebooks as nbconvert HTML pages, served from 127.0.0.1."""
    from nbconvert import HTMLExporter

    root = tmp_path_factory.mktemp("rendered")
    shutil.copytree(MATHJAX, root / "mathjax", ignore=shutil.ignore_patterns("sre", "*.map"))
    exporter = HTMLExporter(
        template_name="lab",
        extra_loaders=[jinja2.DictLoader({"edition.html.j2": RENDER_TEMPLATE})],
        template_file="edition.html.j2",
    )
    for path in NOTEBOOKS:
        body, _ = exporter.from_notebook_node(nbformat.read(path, 4))
        (root / f"{path.stem}.html").write_text(body, encoding="utf-8")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with serve_directory(root) as url:
        yield url


RAW_MARKUP = re.compile(
    r"\{(glue|ref|doc|eq|cite|numref|prf:ref|math)(:\w+)?\}|```\{|:::\{|^\([\w-]+\)=", re.M
)
RAW_TEX = re.compile(r"\\(frac|mathbf|sum|operatorname|begin|left|right|tau|sqrt)\b|\$\$")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_rendered_like_jupyter_it_shows_typeset_maths_and_no_markup(browser, rendered, path):
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    host = urlparse(rendered).netloc
    external: list[str] = []
    errors: list[str] = []

    def route(r):
        url = urlparse(r.request.url)
        if url.scheme in ("data", "blob") or url.netloc == host:
            r.continue_()
        else:  # the lab template names a widget manager on a CDN; nothing else may load
            external.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(f"{rendered}/{path.stem}.html", wait_until="load")
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
        page.evaluate("() => MathJax.startup.promise")
        result = page.evaluate(
            """() => {
              const md = [...document.querySelectorAll('.jp-RenderedMarkdown')];
              const clone = document.createElement('div');
              md.forEach(m => clone.appendChild(m.cloneNode(true)));
              clone.querySelectorAll('mjx-container, code, pre').forEach(e => e.remove());
              document.body.appendChild(clone);
              const text = clone.innerText;
              clone.remove();
              return {
                cells: md.length,
                math: document.querySelectorAll('.jp-RenderedMarkdown mjx-container').length,
                math_errors: [...document.querySelectorAll('mjx-merror')].map(e => e.textContent),
                text: text,
                details: document.querySelectorAll('.jp-RenderedMarkdown details').length,
              };
            }"""
        )
        page.screenshot(path=SHOTS / f"{path.stem}.png", full_page=FULL)
    finally:
        context.close()
    assert not errors, errors
    assert result["cells"] >= 10 and result["math"] >= 50, result["math"]
    assert not result["math_errors"], f"MathJax errors: {result['math_errors'][:5]}"
    raw = RAW_MARKUP.findall(result["text"])
    assert not raw, f"raw MyST markup visible: {raw[:5]}"
    tex = RAW_TEX.findall(result["text"])
    assert not tex, f"raw TeX visible: {tex[:5]}"
    assert all(not u.startswith(("http://127", "https://127")) for u in external)
