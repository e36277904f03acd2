"""Small fixes to the HTML pages that Jupyter Book 1 produces (a local Sphinx extension).

- sphinx-thebe registers its inline configuration script twice under Jupyter Book 1,
  so every page threw "Identifier 'THEBE_JS_URL' has already been declared" in the
  console. Identical script entries are dropped here, once per page (an inline script
  may be registered with filename None or "", so both count as "no file").
- Docutils writes each bibliography entry as ``<div role="doc-biblioentry">`` inside a
  ``<div role="list">``. ARIA 1.3 deprecates that role, and axe-core then finds no list
  items in the list (a critical violation, aria-required-children). Entries become
  ``role="listitem"``, which is what they are.
- The Colab and Binder buttons of a chapter open its Colab edition,
  editions/colab/NN_topic.ipynb (scripts/colab_edition.py), where the MyST markup is
  rendered as plain Jupyter markdown, instead of the chapter's source notebook. The
  theme builds each launch URL from the page's path in the repository; that path is
  replaced here, after the theme (priority 501) made the buttons. The folder is the
  config value ``book_launch_edition``: the student edition of the site
  (scripts/book.py --student) sets it to editions/student, whose notebooks have
  starting cells in place of the solutions. The Korean book opens editions/ko/colab and
  its student edition editions/ko/student (``launch_folder``).
- The theme (pydata-sphinx-theme 0.17 under sphinx-book-theme 1.3) puts its search field
  both in a header bar and in the primary sidebar: two search boxes on a desktop. The
  header's persistent items are emptied (``navbar_persistent``); the sidebar keeps the
  field, and narrow screens keep the search button of the article header.
- An explorer (helpers.widgets) displays its live widget as a second output whose
  ``text/html`` is empty; the site never shows widgets, so that output rendered as an
  empty block (a light-grey bar under every explorer in dark mode). Empty HTML outputs are
  dropped from the doctree.
- arXiv identifiers in the bibliography ("arXiv:1607.06450") become links to the paper.
- The student edition (config value ``book_launch_edition`` set to editions/student, or
  any folder but the Colab edition of the book's language) builds with the Sphinx tag
  ``student``, so a page can say what differs with
  ``{only} student`` and ``{only} not student`` blocks.
- Ids are unique on a page: sphinx-proof gives every proof ``id="proof"`` and every
  theorem's body ``id="proof-content"``, sphinx-exercise every statement's and solution's
  body ``id="exercise-content"`` and ``id="solution-content"``. Each becomes its box's own
  id with a suffix (``prop-theory-jacobian-proof``, ``ex-softmax-temp-content``), and a
  proof's box gets the class ``proof-body`` (proof.css styled it by its id; book.css now
  styles the class and draws the end-of-proof mark).
- Pictures load when they come near the screen (``loading="lazy"``), and an explorer's
  frames (helpers.widgets.Explorer stores them in the notebook as base64 data URIs,
  800 kB for chapter 8's) are written to files, ``_images/explorer/SHA.png``, named by
  their content: the page carries their addresses, and explorer.js fetches a frame when
  the reader first moves the explorer's controls (an ``<img src>`` swap, which works from a
  downloaded copy of the site opened as file:// too). Nothing is re-executed.
- Every page has a button, beside the download menu, to the whole book as PDF (its
  edition's: scripts/pdf.py puts it at the root of the edition's site).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from pathlib import Path

from docutils import nodes


def _dedupe_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen = set()
    unique = []
    for script in scripts:
        attributes = getattr(script, "attributes", {}) or {}
        key = (
            getattr(script, "filename", str(script)) or "",
            tuple(sorted((k, str(v)) for k, v in attributes.items())),
        )
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique


def _biblioentries_as_list_items(app, pagename, templatename, context, doctree):
    body = context.get("body")
    if body and 'role="doc-biblioentry"' in body:
        context["body"] = body.replace('role="doc-biblioentry"', 'role="listitem"')


COLAB_EDITION = "editions/colab"


def colab_edition(language: str | None) -> str:
    """The Colab edition's folder in the book's language: editions/colab, and each
    translation's under its language (editions/ko/colab, scripts/ko_edition.py)."""
    if language in (None, "", "en"):
        return COLAB_EDITION
    return COLAB_EDITION.replace("editions/", f"editions/{language}/", 1)


def launch_folder(config) -> str:
    """The folder of the notebooks the launch buttons open (``book_launch_edition``), in
    the book's language: a translated book given an English edition's folder
    (editions/student) opens that edition's translation (editions/ko/student)."""
    folder = config.book_launch_edition.strip("/")
    language = config.language
    if language not in (None, "", "en") and not folder.startswith(f"editions/{language}/"):
        folder = folder.replace("editions/", f"editions/{language}/", 1)
    return folder


def _launch_colab_edition(app, pagename, templatename, context, doctree):
    source = f"{pagename}.ipynb"
    if not pagename.startswith("notebooks/") or not app.env.doc2path(pagename).endswith(".ipynb"):
        return
    folder = launch_folder(app.config)
    edition = f"{folder}/{pagename.removeprefix('notebooks/')}.ipynb"
    for group in context.get("header_buttons", []):
        if group.get("label") != "launch-buttons":
            continue
        for button in group.get("buttons", []):
            url = button.get("url", "")
            if button.get("text") in ("Colab", "Binder"):
                if not url.endswith(source):
                    raise ValueError(f"{pagename}: unexpected {button['text']} URL {url}")
                button["url"] = url.removesuffix(source) + edition


def _one_search_field(app, config):
    config.html_theme_options["navbar_persistent"] = []
    if launch_folder(config) != colab_edition(config.language):
        app.tags.add("student")  # the notebooks are not the Colab edition: no solutions


def _drop_empty_html_outputs(app, doctree, docname):
    for node in list(doctree.findall(nodes.raw)):
        if "text_html" in node.get("classes", []) and not node.astext().strip():
            node.parent.remove(node)


_ARXIV = re.compile(r"(?<![\w/>])arXiv:(\d{4}\.\d{4,5})(?![\w<])")


def _arxiv_links(app, pagename, templatename, context, doctree):
    body = context.get("body")
    if body and 'role="listitem"' in body and "arXiv:" in body:
        context["body"] = _ARXIV.sub(
            r'<a class="reference external" href="https://arxiv.org/abs/\1">arXiv:\1</a>', body
        )


# A box whose body gets a generic id, and those ids (the box's own id comes first).
_BOX = re.compile(
    r'<div class="([^"]*\badmonition\b[^"]*)" id="([^"]+)">'
    r'|\bid="(proof-content|exercise-content|solution-content)"'
)


def _unique_ids(app, pagename, templatename, context, doctree):
    body = context.get("body")
    generic = ("proof", "proof-content", "exercise-content", "solution-content")
    if not body or not any(f'id="{i}"' in body for i in generic):
        return
    used = set(re.findall(r'\bid="([^"]+)"', body))
    box = [pagename.replace("/", "-")]

    def unique(base: str) -> str:
        name, k = base, 1
        while name in used:
            k += 1
            name = f"{base}-{k}"
        used.add(name)
        return name

    def rename(match: re.Match) -> str:
        classes, own, inner = match.groups()
        if inner is not None:
            return f'id="{unique(box[0] + "-content")}"'
        if own == "proof" and classes.split()[:1] == ["proof"]:
            new = unique(box[0] + "-proof")  # after the theorem it proves
            return f'<div class="{classes} proof-body" id="{new}">'
        box[0] = own
        return match.group(0)

    context["body"] = _BOX.sub(rename, body)


_IMG = re.compile(r"<img (?![^>]*\bloading=)")
_EXPLORER_DATA = re.compile(
    r'(<img class="explorer-image" src=")(data:image/png;base64,[^"]+)("[^>]*>)'
    r'|(<script type="application/json" class="explorer-data">)(.*?)(</script>)',
    re.DOTALL,
)
FRAMES = "_images/explorer"


def _frame_file(app, uri: str) -> str:
    """Write a data URI's PNG to FRAMES/SHA.png in the built site; return that path."""
    data = base64.b64decode(uri.split(",", 1)[1])
    name = f"{FRAMES}/{hashlib.sha256(data).hexdigest()[:20]}.png"
    target = Path(app.outdir) / name
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return name


def _light_pictures(app, pagename, templatename, context, doctree):
    body = context.get("body")
    if not body or app.builder.format != "html":
        return
    pathto = context["pathto"]

    def frames(match: re.Match) -> str:
        if match.group(1):
            src = html.escape(pathto(_frame_file(app, match.group(2)), 1))
            return f"{match.group(1)}{src}{match.group(3)}"
        blob = match.group(5)
        data = json.loads(blob)
        data["frames"] = [
            pathto(_frame_file(app, f), 1) if f.startswith("data:") else f for f in data["frames"]
        ]
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        return f"{match.group(4)}{text}{match.group(6)}"

    if "explorer-data" in body:
        body = _EXPLORER_DATA.sub(frames, body)
    context["body"] = _IMG.sub('<img loading="lazy" ', body)


def _book_pdf_button(app, pagename, templatename, context, doctree):
    if getattr(app.config, "book_language", "en") != "en":
        return  # the PDFs are printed from the English editions only (scripts/pdf.py)
    pdf = "attention-book-student.pdf" if app.tags.has("student") else "attention-book.pdf"
    buttons = context.get("header_buttons", [])
    at = next((k + 1 for k, b in enumerate(buttons) if b.get("label") == "download-buttons"), 0)
    buttons.insert(
        at,
        {
            "type": "link",
            "url": context["pathto"](pdf, 1),
            "tooltip": "The whole book as PDF",
            "icon": "fas fa-file-pdf",
            "label": "book-pdf-button",
        },
    )


def _cache_pybtex_plugins() -> None:
    """pybtex finds a style or backend among the installed packages' entry points each time
    a citation is formatted (importlib.metadata scans every installed distribution: about
    0.1 s a call beside PyTorch and transformers, 160 calls, a sixth of a build's time).
    The installed packages do not change during a build: one look-up per plugin."""
    import functools

    import pybtex.plugin as plugin

    if not hasattr(plugin._load_entry_point, "cache_info"):
        plugin._load_entry_point = functools.cache(plugin._load_entry_point)


def setup(app):
    _cache_pybtex_plugins()
    app.add_config_value("book_launch_edition", COLAB_EDITION, "html", types=[str])
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    app.connect("html-page-context", _biblioentries_as_list_items, priority=900)
    app.connect("html-page-context", _launch_colab_edition, priority=600)
    app.connect("html-page-context", _book_pdf_button, priority=600)
    app.connect("html-page-context", _arxiv_links, priority=901)
    app.connect("html-page-context", _unique_ids, priority=902)
    app.connect("html-page-context", _light_pictures, priority=903)
    app.connect("config-inited", _one_search_field)
    app.connect("doctree-resolved", _drop_empty_html_outputs)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
