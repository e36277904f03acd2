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
    at = next((k + 1 for k, b in enumerate(buttons) if b.get("label") == "book-pdf-button"), 0)
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


def setup(app):
    app.add_config_value("book_language", "en", "html", types=[str])
    _glue_from_the_page()
    app.connect("html-page-context", _language_switch, priority=601)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
