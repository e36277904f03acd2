"""The language of what helpers prints and draws (the Korean edition).

English is the default. The Korean notebooks (editions/ko/) set Korean in their first code
cell with ``set_language("ko")``; the environment variable ``ATTENTION_BOOK_LANGUAGE`` sets
it for a whole process (the Korean site's executions). The grader (scripts/grade.py) sets
it for each submission to the language of the edition the notebook comes from, and writes
its own messages through this module's catalogue too.

Translating a message
---------------------
Messages are written in English in the code and translated when they are shown, through a
message catalogue shipped inside the package (``helpers/locales/ko.po``, read by
:func:`read_po`: no gettext tooling is needed, Colab has none).

* A fixed message is a plain string; :func:`tr` returns its translation (the English
  unchanged when the language is English or the message has no translation).
* A message with parts that vary (numbers, shapes, names) is a template, made with
  :func:`msg`: ``msg("the output sums to {sums}, not 1", sums=text)``. The result is a
  ``str`` equal to the English text (so code that compares or stores messages sees the
  English, byte for byte), which remembers its template and arguments: :func:`localize`
  translates the template, then formats it with the arguments, themselves localized (a
  string argument that is a message of the catalogue is translated; numbers, shapes and
  names stay exactly as they are). :func:`join` keeps a list of messages translatable.

``scripts/helpers_i18n.py extract`` collects every message of ``helpers.checks`` into
``helpers/locales/messages.pot``; ``tests/test_helpers_i18n.py`` fails when a message has
no Korean, when a translation drops or adds a placeholder, or when the template is stale.

Examples
--------
>>> from helpers.i18n import localize, msg, set_language
>>> text = msg("the output sums to {sums}, not 1", sums="[1.2]")
>>> text == "the output sums to [1.2], not 1"
True
>>> set_language("ko")
>>> localize(text)
'출력의 합이 1이 아니라 [1.2]입니다'
>>> set_language("en")
>>> localize(text)
'the output sums to [1.2], not 1'
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterable
from functools import cache
from pathlib import Path

__all__ = [
    "LANGUAGES",
    "Msg",
    "figure_text",
    "get_language",
    "join",
    "localize",
    "msg",
    "read_po",
    "set_language",
    "tr",
    "width",
    "wrap",
]

LANGUAGES = ("en", "ko")
LOCALES = Path(__file__).parent / "locales"
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


# ---------------------------------------------------------------------------
# The catalogue
# ---------------------------------------------------------------------------

_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


def _unquote(text: str) -> str:
    """The value of one PO string literal ``"..."`` (escapes \\n \\t \\" \\\\)."""
    text = text.strip()
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        raise ValueError(f"not a quoted PO string: {text!r}")
    out, chars = [], iter(text[1:-1])
    for c in chars:
        if c == "\\":
            nxt = next(chars, "")
            if nxt not in _ESCAPES:
                raise ValueError(f"unknown escape \\{nxt} in {text!r}")
            out.append(_ESCAPES[nxt])
        else:
            out.append(c)
    return "".join(out)


def read_po(path: str | Path) -> dict[str, str]:
    """The translations of a PO file: msgid -> msgstr.

    A small reader of the subset of the format the catalogues use: ``#`` comments,
    ``msgctxt`` is not used, ``msgid``/``msgstr`` with continuation lines. Entries marked
    ``#, fuzzy``, with an empty msgstr, and the header (empty msgid) are left out.
    """
    entries: dict[str, str] = {}
    msgid: list[str] | None = None
    msgstr: list[str] | None = None
    current: list[str] | None = None
    fuzzy = next_fuzzy = False

    def flush() -> None:
        if msgid is not None and msgstr is not None:
            key, value = "".join(msgid), "".join(msgstr)
            if key and value and not fuzzy:
                entries[key] = value

    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        try:
            if not line:
                continue
            if line.startswith("#"):
                if line.startswith("#,") and "fuzzy" in line:
                    next_fuzzy = True
                continue
            if line.startswith("msgid "):
                flush()
                msgid, msgstr, fuzzy, next_fuzzy = [_unquote(line[6:])], None, next_fuzzy, False
                current = msgid
            elif line.startswith("msgstr "):
                msgstr = [_unquote(line[7:])]
                current = msgstr
            elif line.startswith('"') and current is not None:
                current.append(_unquote(line))
            else:
                raise ValueError(f"unexpected line {line!r}")
        except ValueError as err:
            raise ValueError(f"{path}, line {number}: {err}") from None
    flush()
    return entries


@cache
def catalogue(language: str) -> dict[str, str]:
    """The messages of `language` (English -> translation); {} for English."""
    if language == "en":
        return {}
    return read_po(LOCALES / f"{language}.po")


# ---------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------


class Msg(str):
    """A message: equal to its English text, translated by :func:`localize`.

    ``template`` is the English template (a :meth:`str.format` string) and ``args`` its
    arguments; a message without arguments is its template as it is (braces included).
    """

    template: str
    args: dict[str, object]

    def __new__(cls, template: str, /, **args: object) -> Msg:
        self = super().__new__(cls, template.format(**args) if args else template)
        self.template = template
        self.args = args
        return self

    def localized(self, language: str | None = None) -> str:
        """The message in `language` (by default the language set)."""
        language = language or _language
        if language == "en":
            return str.__str__(self)
        template = catalogue(language).get(self.template, self.template)
        if not self.args:
            return template
        args = {k: _localize_arg(v, language) for k, v in self.args.items()}
        return template.format(**args)

    def __str__(self) -> str:
        """Printed (``print``, ``str``) in the language set: a chapter that prints a
        self-check's finding shows it in its reader's language. It still equals, hashes,
        contains and formats (f-strings, ``str.format``: the messages made from it) as its
        English text."""
        return self.localized()

    def __format__(self, spec: str) -> str:
        return format(str.__str__(self), spec)

    def __reduce__(self) -> tuple[object, ...]:  # pickled as the English text
        return (str, (str.__str__(self),))


class _Joined(Msg):
    """Messages joined by a separator (see :func:`join`)."""

    parts: tuple[str, ...]
    sep: str

    def __new__(cls, sep: str, parts: Iterable[str]) -> _Joined:
        parts = tuple(parts)
        self = str.__new__(cls, sep.join(parts))
        self.template, self.args, self.parts, self.sep = sep.join(parts), {}, parts, sep
        return self

    def localized(self, language: str | None = None) -> str:
        language = language or _language
        if language == "en":
            return str.__str__(self)
        return tr(self.sep, language).join(localize(p, language) for p in self.parts)


def msg(template: str, /, **args: object) -> Msg:
    """A message made from an English `template` and its `args` (see the module's notes).

    Examples
    --------
    >>> msg("expected {what}, got shape {shape}", what="shape (3,)", shape=(2,))
    'expected shape (3,), got shape (2,)'
    """
    return Msg(template, **args)


def join(sep: str, parts: Iterable[str]) -> str:
    """``sep.join(parts)``, each part still translatable (see :func:`localize`)."""
    return _Joined(sep, parts)


def tr(text: str, language: str | None = None) -> str:
    """`text` in `language` (by default the language set): its translation in the
    catalogue, or `text` unchanged (English, or a text that is not a message)."""
    if isinstance(text, Msg):
        return text.localized(language)
    language = language or _language
    if language == "en":
        return str(text)
    return catalogue(language).get(text, str(text))


def localize(text: str, language: str | None = None) -> str:
    """`text` as shown in `language`: a :class:`Msg` is translated with its arguments, a
    plain string looked up in the catalogue (unchanged if it is not a message)."""
    return tr(text, language)


def _localize_arg(value: object, language: str) -> object:
    return tr(value, language) if isinstance(value, str) else value


# ---------------------------------------------------------------------------
# Text layout
# ---------------------------------------------------------------------------


def width(text: str) -> int:
    """The columns `text` takes in a monospaced font: a Hangul syllable or another wide
    (East Asian) character takes two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def wrap(text: str, columns: int, subsequent_indent: str = "") -> str:
    """Greedy word wrap counting :func:`width` columns (``textwrap.fill`` counts
    characters), never breaking a word; for text with wide characters."""
    lines: list[str] = []
    line = ""
    for token in re.findall(r"\s*\S+", text):  # a word with the spaces before it
        if line.strip() and width(line + token) > columns:
            lines.append(line)
            line = subsequent_indent + token.lstrip()
        else:
            line += token
    lines.append(line)
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Words in figures
# ---------------------------------------------------------------------------

_FIELD = re.compile(r"\{\}")


@cache
def figure_catalogue(language: str) -> tuple[dict[str, str], tuple[tuple[re.Pattern, str], ...]]:
    """The words of figures in `language`: exact texts, and templates (English texts made
    by f-strings, ``{}`` where a value goes) as (pattern, translation)."""
    if language == "en":
        return {}, ()
    entries = read_po(LOCALES / f"figures.{language}.po")
    templates = []
    for english, translated in entries.items():
        if "{}" not in english:
            continue
        parts = [re.escape(p.replace("{{", "{").replace("}}", "}")) for p in english.split("{}")]
        pattern = re.compile("(.+?)".join(parts) + r"\Z", re.S)
        templates.append((pattern, translated))
    templates.sort(key=lambda item: -len(item[0].pattern))  # the most specific first
    return entries, tuple(templates)


def figure_text(text: str, language: str | None = None) -> str:
    """A text drawn in a figure, in `language` (by default the language set): its
    translation (an exact text, or a template whose values are kept as drawn), or `text`
    unchanged.

    Examples
    --------
    >>> figure_text("temperature $\\\\tau$", "ko")
    '온도 $\\\\tau$'
    >>> figure_text("temperature $\\\\tau$", "en")
    'temperature $\\\\tau$'
    """
    language = language or _language
    if language == "en" or not text.strip():
        return text
    exact, templates = figure_catalogue(language)
    if text in exact:
        return exact[text]
    for pattern, translated in templates:
        found = pattern.match(text)
        if found:
            return translated.format(*found.groups())
    return text
