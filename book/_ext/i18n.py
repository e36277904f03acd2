"""The Korean edition: one source, translations as message catalogues (a local extension).

The English notebooks and pages are the only source. Sphinx's gettext builder extracts
their text into catalogue templates; the translations are ``locales/ko/LC_MESSAGES/**.po``
(scripts/i18n.py extracts, updates and checks them), and the Korean site is the same
source built with ``language = ko`` (scripts/book.py --lang ko).

- A translated paragraph is parsed again on its own, as a small document of its own, and
  myst-nb looks up a ``{glue:text}`` key in the notebook of the document it is in: none,
  there, so every glued number of a translated paragraph came out empty. Its keys are
  made references to the page's own notebook (``_glue_from_the_page``). Glued numbers
  therefore come from the source's stored outputs, never from a translation.
- Every page has a link to the same page in the other language, beside the download
  menu: the English book at the site's root, the Korean one under ``ko/``, and each
  student edition under its book's ``student/`` (config values ``book_language`` and
  ``book_launch_edition``).
"""

from __future__ import annotations

import re
from pathlib import Path

LANGUAGES = {"en": "English", "ko": "한국어"}
TOOLTIP = {"en": "This page in English", "ko": "이 쪽을 한국어로"}
KO = "ko"  # where the Korean book is published, beside the English one
STUDENT = "student"


_GLUE_TEXT = re.compile(r"\{glue:text\}`([^`:]+)(?::([^`]*))?`")


def _glue_from_the_page():
    """Sphinx parses each translated paragraph as a document of its own, in which myst-nb
    finds no notebook: a glued number would come out empty. In a translated paragraph of a
    notebook every ``{glue:text}`key``` becomes ``{glue:text}`page.ipynb::key:s``` (a
    reference to the page's own stored outputs, resolved after reading; the format is
    written out because myst-nb reads the last colon-part as one)."""
    from sphinx.transforms import i18n

    original = i18n.publish_msgstr

    def publish_msgstr(app, source, source_path, source_line, config, settings):
        if source_path.endswith(".ipynb"):
            name = Path(source_path).name
            source = _GLUE_TEXT.sub(
                lambda m: f"{{glue:text}}`{name}::{m.group(1)}:{m.group(2) or 's'}`", source
            )
        return original(app, source, source_path, source_line, config, settings)

    i18n.publish_msgstr = publish_msgstr


def _captions_translatable():
    """myst-nb builds a figure's caption from the cell's metadata (mystnb.figure.caption)
    without its source text, so Sphinx neither extracts nor translates it: the caption is
    given its MyST source (scripts/i18n.py extract adds captions and alt texts of the
    notebooks' metadata to each page's catalogue)."""
    from contextlib import contextmanager

    from docutils import nodes
    from myst_nb import sphinx_

    original = sphinx_.create_figure_context

    @contextmanager
    def create_figure_context(self, figure_options, line):
        with original(self, figure_options, line):
            yield
        caption = isinstance(figure_options, dict) and figure_options.get("caption")
        figures = [n for n in self.current_node.children if isinstance(n, nodes.figure)]
        if caption and figures:
            for node in figures[-1].findall(nodes.caption):
                node.rawsource = str(caption)

    sphinx_.create_figure_context = create_figure_context


def _page_catalogue(app, docname):
    """The translations of page `docname` (its catalogue in locales/), or None."""
    from sphinx.locale import init as init_locale
    from sphinx.util.i18n import docname_to_domain

    dirs = [str(Path(app.srcdir) / d) for d in app.config.locale_dirs]
    domain = docname_to_domain(docname, app.config.gettext_compact)
    catalog, found = init_locale(dirs, app.config.language, domain)
    return catalog if found else None


def _exercise_titles(app):
    """An exercise's title is its directive's argument, which Sphinx does not extract:
    scripts/i18n.py extract adds the titles to the page's catalogue, and here each is
    translated before sphinx-exercise reads it."""
    from sphinx_exercise import directive

    original = directive.ExerciseDirective.run

    def run(self):
        if self.arguments and app.config.language not in (None, "en"):
            catalog = _page_catalogue(app, self.env.docname)
            if catalog is not None:
                self.arguments[0] = catalog.gettext(self.arguments[0])
        return original(self)

    directive.ExerciseDirective.run = run


def _toctree_captions(app, doctree):
    """The parts' captions of the table of contents (_toc.yml), which sphinx-external-toc
    inserts after Sphinx has translated the page: translated from the page's catalogue."""
    if app.config.language in (None, "en"):
        return
    from sphinx import addnodes

    catalog = None
    for node in doctree.findall(addnodes.toctree):
        if node.get("caption"):
            catalog = catalog or _page_catalogue(app, app.env.docname)
            if catalog is not None:
                node["caption"] = catalog.gettext(node["caption"])


def _translate_alt_texts(app, doctree, docname):
    """The alt text of a notebook's figure (mystnb.image.alt) from the page's catalogue."""
    language = app.config.language
    if language in (None, "en"):
        return
    from docutils import nodes
    from sphinx.locale import init as init_locale
    from sphinx.util.i18n import docname_to_domain

    dirs = [str(Path(app.srcdir) / d) for d in app.config.locale_dirs]
    catalog, found = init_locale(
        dirs, language, docname_to_domain(docname, app.config.gettext_compact)
    )
    if not found:
        return
    for node in doctree.findall(nodes.image):
        alt = node.get("alt")
        if alt:
            node["alt"] = catalog.gettext(alt)


def _unique_ids(app, doctree, docname):
    """A translated paragraph is parsed as a document of its own, whose automatic ids
    (a citation's "id10") start again from 1: two of them can land on one page. The second
    of an id gets a suffix (English pages are untouched: they have none twice)."""
    if app.config.language in (None, "en"):
        return
    from docutils import nodes

    seen: set[str] = set()
    for node in doctree.findall(nodes.Element):
        ids = node.get("ids", [])
        for k, name in enumerate(ids):
            # docutils' automatic ids only: sphinx-proof's and sphinx-exercise's shared ones
            # ("proof", "exercise-content") are made unique by book_site.py, which knows them
            if name in seen and re.fullmatch(r"id\d+", name):
                n = 2
                while f"{name}-{n}" in seen:
                    n += 1
                ids[k] = f"{name}-{n}"
            seen.add(ids[k])


def switch_url(language: str, student: bool, pagename: str) -> str:
    """The same page in the other language, relative to the page `pagename`."""
    up = "../" * pagename.count("/")
    if language == "en":
        root = f"../{KO}/{STUDENT}/" if student else f"{KO}/"
    else:
        root = f"../../{STUDENT}/" if student else "../"
    return f"{up}{root}{pagename}.html"


def _language_switch(app, pagename, templatename, context, doctree):
    language = app.config.book_language
    other = "ko" if language == "en" else "en"
    buttons = context.get("header_buttons", [])
    at = next(
        (
            k + 1
            for k, b in enumerate(buttons)
            if b.get("label") in ("book-pdf-button", "download-buttons")
        ),
        0,
    )
    buttons.insert(
        at,
        {
            "type": "link",
            "url": switch_url(language, app.tags.has("student"), pagename),
            "tooltip": TOOLTIP[other],
            "icon": "fas fa-language",
            "text": LANGUAGES[other],
            "label": "language-switch",
        },
    )


# The theme's and extensions' words: locales/<language>/LC_MESSAGES/<catalogue>.po beside
# the pages' catalogues, kept by hand. Sphinx reads "sphinx" itself (before its own
# translation); the others are compiled here and put before the extension's own.
UI_CATALOGUES = ("booktheme", "exercise", "proof")
SEARCH_TEXT = {"ko": "이 책에서 검색..."}


def _ui_catalogues(app):
    language = app.config.language
    if language in (None, "en"):
        return
    import gettext

    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po
    from sphinx import locale

    folder = Path(app.srcdir) / "locales" / language / "LC_MESSAGES"
    for domain in UI_CATALOGUES:
        po = folder / f"{domain}.po"
        if not po.exists():
            continue
        mo = Path(app.doctreedir) / "ui-locales" / language / "LC_MESSAGES" / f"{domain}.mo"
        mo.parent.mkdir(parents=True, exist_ok=True)
        with po.open("rb") as source, mo.open("wb") as target:
            write_mo(target, read_po(source, locale=language))
        ours = gettext.translation(domain, str(mo.parents[2]), [language])
        theirs = locale.translators.get(("general", domain))
        if theirs is not None and type(theirs) is not gettext.NullTranslations:
            ours.add_fallback(theirs)
        locale.translators[("general", domain)] = ours


def _search_text(app, config):
    if config.language in SEARCH_TEXT:
        config.html_theme_options["search_bar_text"] = SEARCH_TEXT[config.language]


def setup(app):
    app.connect("builder-inited", _ui_catalogues)
    app.connect("config-inited", _search_text)
    app.add_config_value("book_language", "en", "html", types=[str])
    _glue_from_the_page()
    _captions_translatable()
    _exercise_titles(app)
    app.connect("doctree-read", _toctree_captions)
    app.connect("doctree-resolved", _translate_alt_texts)
    app.connect("doctree-resolved", _unique_ids)
    app.connect("html-page-context", _language_switch, priority=601)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
