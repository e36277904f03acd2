"""The language of what helpers prints and draws (the Korean edition).

English is the default. The Korean notebooks (editions/ko/) set Korean in their first code
cell with ``set_language("ko")``; the environment variable ``ATTENTION_BOOK_LANGUAGE`` sets
it for a whole process (the Korean site's executions, the grader of Korean notebooks).
The words themselves are translated where they are made (self-check reports, figures):
this module only keeps the setting, so that every part of helpers reads the same one.
"""

from __future__ import annotations

import os

LANGUAGES = ("en", "ko")
_language = os.environ.get("ATTENTION_BOOK_LANGUAGE", "en")
if _language not in LANGUAGES:  # an unknown setting must not stop the book from importing
    _language = "en"


def set_language(language: str) -> None:
    """Print and draw in `language`: "en" (the default) or "ko"."""
    global _language
    if not isinstance(language, str) or language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
    _language = language


def get_language() -> str:
    """The language helpers prints and draws in: "en" or "ko"."""
    return _language
