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
"""

from __future__ import annotations


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


def setup(app):
    app.add_config_value("book_launch_edition", COLAB_EDITION, "html", types=[str])
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    app.connect("html-page-context", _biblioentries_as_list_items, priority=900)
    app.connect("html-page-context", _launch_colab_edition, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
