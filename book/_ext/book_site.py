"""Small fixes to the HTML pages that Jupyter Book 1 produces (a local Sphinx extension).

- sphinx-thebe registers its inline configuration script twice under Jupyter Book 1,
  so every page threw "Identifier 'THEBE_JS_URL' has already been declared" in the
  console. Identical script entries are dropped here, once per page (an inline script
  may be registered with filename None or "", so both count as "no file").
- Docutils writes each bibliography entry as ``<div role="doc-biblioentry">`` inside a
  ``<div role="list">``. ARIA 1.3 deprecates that role, and axe-core then finds no list
  items in the list (a critical violation, aria-required-children). Entries become
  ``role="listitem"``, which is what they are.
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


def setup(app):
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    app.connect("html-page-context", _biblioentries_as_list_items, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
