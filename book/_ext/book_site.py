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
  starting cells in place of the solutions.
- The theme (pydata-sphinx-theme 0.17 under sphinx-book-theme 1.3) puts its search field
  both in a header bar and in the primary sidebar: two search boxes on a desktop. The
  header's persistent items are emptied (``navbar_persistent``); the sidebar keeps the
  field, and narrow screens keep the search button of the article header.
- An explorer (helpers.widgets) displays its live widget as a second output whose
  ``text/html`` is empty; the site never shows widgets, so that output rendered as an
  empty block (a light-grey bar under every explorer in dark mode). Empty HTML outputs are
  dropped from the doctree.
- arXiv identifiers in the bibliography ("arXiv:1607.06450") become links to the paper.
- The student edition (config value ``book_launch_edition`` set to editions/student)
  builds with the Sphinx tag ``student``, so a page can say what differs with
  ``{only} student`` and ``{only} not student`` blocks.
- Every page has a button, beside the download menu, to the whole book as PDF (its
  edition's: scripts/pdf.py puts it at the root of the edition's site).
"""

from __future__ import annotations

import re

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


def _launch_colab_edition(app, pagename, templatename, context, doctree):
    source = f"{pagename}.ipynb"
    if not pagename.startswith("notebooks/") or not app.env.doc2path(pagename).endswith(".ipynb"):
        return
    folder = app.config.book_launch_edition.strip("/")
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
    if config.book_launch_edition.strip("/") != COLAB_EDITION:
        app.tags.add("student")


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


def _book_pdf_button(app, pagename, templatename, context, doctree):
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


def setup(app):
    app.add_config_value("book_launch_edition", COLAB_EDITION, "html", types=[str])
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    app.connect("html-page-context", _biblioentries_as_list_items, priority=900)
    app.connect("html-page-context", _launch_colab_edition, priority=600)
    app.connect("html-page-context", _book_pdf_button, priority=600)
    app.connect("html-page-context", _arxiv_links, priority=901)
    app.connect("config-inited", _one_search_field)
    app.connect("doctree-resolved", _drop_empty_html_outputs)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
