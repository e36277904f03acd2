"""The message catalogue of helpers' self-checks (the Korean edition's reports).

    python scripts/helpers_i18n.py extract   # write helpers/locales/messages.pot from the code
    python scripts/helpers_i18n.py update    # merge it into helpers/locales/ko.po
    python scripts/helpers_i18n.py check     # fail if stale, untranslated or a placeholder differs

Every message a report can show is written in English in ``helpers/checks`` and translated
when shown (``helpers/i18n.py``). What counts as a message, read from the code (no import):

* the template of every ``msg(...)`` call (its first argument, a string literal), and
* every other string literal that is prose (a space and a word of two letters or more):
  case names, hints, slips, pointers and fuller hints, wherever they are kept (a table
  of cases, a constant, an argument). Docstrings and the f-strings' pieces are not.

``helpers/checks/shortcuts.py`` is left out: its messages are for the book's developers.

The grader's messages (``scripts/grade.py`` and the scripts it uses, GRADER: what a student
or an instructor reads about a submission, in the language of the submission's edition)
are in the same catalogue: only their ``msg(...)`` templates are read there (the rest of
those scripts' strings are code, not messages).

The words of figures (``helpers/locales/figures.pot``, ``figures.ko.po``; drawn translated
by ``helpers/figures.py``) are read from the code cells of ``notebooks/*.ipynb`` and from
``helpers/*.py``: the texts given to matplotlib as titles, axis labels, legend entries,
annotations and texts (a string literal, or an f-string as a template with ``{}`` where a
value goes), when they hold a word outside their ``$...$`` mathematics.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import string
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "helpers" / "checks"
SKIPPED = {"shortcuts.py"}
GRADER = tuple(
    ROOT / "scripts" / name
    for name in ("grade.py", "grade_wire.py", "grade_copies.py", "gradescope.py")
)
LOCALES = ROOT / "helpers" / "locales"
TEMPLATE = LOCALES / "messages.pot"
LANGUAGES = ("ko",)
_PROSE = re.compile(r"[A-Za-z]{2,}")
FIGURE_TEMPLATE = LOCALES / "figures.pot"
NOTEBOOKS = ROOT / "notebooks"
_DRAWING = {
    "set_title", "set_xlabel", "set_ylabel", "suptitle", "supxlabel", "supylabel", "text",
    "annotate", "set_label", "legend", "title", "xlabel", "ylabel", "figtext", "set_text",
}  # fmt: skip
_DRAWING_KEYWORDS = {"label", "title", "xlabel", "ylabel"}
_MATH = re.compile(r"\$[^$]*\$")
FIGURES = "The words of the book's figures"

sys.path.insert(0, str(ROOT))
from helpers.i18n import read_po  # noqa: E402


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def messages_of(path: Path, templates_only: bool = False) -> list[tuple[str, int]]:
    """The messages of one module, in the order they appear: (text, line); with
    ``templates_only``, only the templates of its ``msg(...)`` calls."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _docstrings(tree)
    templates = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):  # an f-string left as it is: not a message
            skipped.update(id(part) for part in ast.walk(node) if part is not node)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "msg":
            first = node.args[0] if node.args else None
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                raise SystemExit(f"{path}:{node.lineno}: msg() needs a string literal template")
            templates.add(id(first))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            continue
        if id(node) in skipped:
            continue
        text = node.value
        if id(node) in templates or (not templates_only and " " in text and _PROSE.search(text)):
            found.append((text, node.lineno))
    return sorted(found, key=lambda item: item[1])


def extract() -> dict[str, list[str]]:
    """Every message of helpers.checks and of the grader (GRADER) -> the files it is in,
    first seen first."""
    entries: dict[str, list[str]] = {}
    sources = [(p, False) for p in sorted(SOURCES.glob("*.py")) if p.name not in SKIPPED]
    for path, templates_only in [*sources, *((p, True) for p in GRADER)]:
        for text, _ in messages_of(path, templates_only):  # where: the file, not a line
            where = entries.setdefault(text, [])
            if path.relative_to(ROOT).as_posix() not in where:
                where.append(path.relative_to(ROOT).as_posix())
    return entries


def _drawn(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        parts = [
            v.value.replace("{", "{{").replace("}", "}}") if isinstance(v, ast.Constant) else "{}"
            for v in node.values
        ]
        return ["".join(parts)]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [text for element in node.elts for text in _drawn(element)]
    if isinstance(node, ast.IfExp):
        return _drawn(node.body) + _drawn(node.orelse)
    return []


def figure_texts_of(source: str) -> list[str]:
    """The words a piece of code gives matplotlib to draw, in order."""
    source = "\n".join(
        line for line in source.split("\n") if not line.lstrip().startswith(("%", "!"))
    )
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in _DRAWING:
            for arg in node.args if name == "legend" else node.args[:1]:
                found += [(node.lineno, node.col_offset, t) for t in _drawn(arg)]
        for keyword in node.keywords:
            if keyword.arg in _DRAWING_KEYWORDS:
                found += [(node.lineno, node.col_offset, t) for t in _drawn(keyword.value)]
    found.sort(key=lambda item: item[:2])
    return [text for _, _, text in found if _PROSE.search(_MATH.sub("", text))]


def extract_figures() -> dict[str, list[str]]:
    """Every text of a figure -> where it is drawn (a notebook or a module), first seen first."""
    entries: dict[str, list[str]] = {}
    sources = []
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        sources += [(path, cell) for cell in code]
    sources += [
        (path, path.read_text(encoding="utf-8")) for path in sorted(ROOT.glob("helpers/*.py"))
    ]
    for path, source in sources:
        for text in figure_texts_of(source):
            where = entries.setdefault(text, [])
            if _shown(path).as_posix() not in where:
                where.append(_shown(path).as_posix())
    return entries


def _values(template: str) -> list[int]:
    """Which values a template shows: ``{}`` in order, or ``{1}``, ``{0}`` in any order."""
    found = re.findall(r"(?<!\{)\{(\d*)\}(?!\})", template)
    return sorted(int(k) if k else i for i, k in enumerate(found))


def figure_problems(language: str, entries: dict[str, list[str]] | None = None) -> list[str]:
    """What is wrong with the figure catalogue of `language` (as :func:`problems`): a
    template's values (``{}``, or ``{1}`` and ``{0}`` to show them in another order) and
    every ``$...$`` must be kept."""
    entries = extract_figures() if entries is None else entries
    found = []
    current = template_text(entries, FIGURES)
    if not FIGURE_TEMPLATE.exists() or FIGURE_TEMPLATE.read_text(encoding="utf-8") != current:
        found.append(f"{_shown(FIGURE_TEMPLATE)} is stale: run scripts/helpers_i18n.py extract")
    path = LOCALES / f"figures.{language}.po"
    translated = read_po(path) if path.exists() else {}
    for msgid in entries:
        if msgid not in translated:
            found.append(f"no {language} translation of a figure's text: {msgid!r}")
        elif _values(msgid) != _values(translated[msgid]) or sorted(_MATH.findall(msgid)) != sorted(
            _MATH.findall(translated[msgid])
        ):
            found.append(f"values or mathematics differ: {msgid!r} -> {translated[msgid]!r}")
    for msgid in translated:
        if msgid not in entries:
            found.append(f"obsolete {language} figure entry: {msgid!r}")
    return found


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + escaped.replace("\t", "\\t") + '"'


def _entry(msgid: str, msgstr: str, where: list[str] | None = None) -> str:
    refs = "".join(f"#: {w}\n" for w in where or [])
    return f"{refs}msgid {_quote(msgid)}\nmsgstr {_quote(msgstr)}\n"


_HEADER = (
    'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n"Language: {language}\\n"\n'
)


def template_text(entries: dict[str, list[str]], what: str = "helpers' self-check messages") -> str:
    head = f"# {what} (scripts/helpers_i18n.py extract).\n"
    body = [_entry(k, "", where) for k, where in entries.items()]
    return "\n".join([head + _HEADER.format(language=""), *body])


def catalogue_text(
    language: str,
    entries: dict[str, list[str]],
    old: dict[str, str],
    what: str = "helpers' self-check messages",
) -> str:
    head = f"# {what} in {language} (scripts/helpers_i18n.py update).\n"
    body = [_entry(k, old.get(k, "")) for k in entries]
    return "\n".join([head + _HEADER.format(language=language), *body])


def fields(text: str) -> list[str]:
    """The placeholders of a template, ``{name!r:g}`` as written, sorted."""
    try:
        parsed = string.Formatter().parse(text)
        return sorted(
            f"{{{name}{'!' + conv if conv else ''}{':' + spec if spec else ''}}}"
            for _, name, spec, conv in parsed
            if name is not None
        )
    except ValueError:
        return ["<not a template>"]


def _shown(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def problems(language: str, entries: dict[str, list[str]] | None = None) -> list[str]:
    """What is wrong with the catalogue of `language`: stale template, messages without a
    translation, translations whose placeholders differ from the English."""
    entries = extract() if entries is None else entries
    found = []
    if not TEMPLATE.exists() or TEMPLATE.read_text(encoding="utf-8") != template_text(entries):
        found.append(f"{_shown(TEMPLATE)} is stale: run scripts/helpers_i18n.py extract")
    path = LOCALES / f"{language}.po"
    translated = read_po(path) if path.exists() else {}
    for msgid in entries:
        if msgid not in translated:
            found.append(f"no {language} translation: {msgid!r}")
        elif fields(msgid) != fields(translated[msgid]):
            found.append(
                f"placeholders differ: {msgid!r} has {fields(msgid)}, the {language} "
                f"translation {fields(translated[msgid])}"
            )
    for msgid in translated:
        if msgid not in entries:
            found.append(f"obsolete {language} entry (no longer in the code): {msgid!r}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["extract", "update", "check"])
    args = parser.parse_args(argv)
    entries, figures = extract(), extract_figures()
    if args.command == "extract":
        LOCALES.mkdir(exist_ok=True)
        TEMPLATE.write_text(template_text(entries), encoding="utf-8")
        FIGURE_TEMPLATE.write_text(template_text(figures, FIGURES), encoding="utf-8")
        print(f"{len(entries)} messages -> {TEMPLATE.relative_to(ROOT)}")
        print(f"{len(figures)} texts of figures -> {FIGURE_TEMPLATE.relative_to(ROOT)}")
        return 0
    if args.command == "update":
        for language in LANGUAGES:
            for path, found, what in (
                (LOCALES / f"{language}.po", entries, "helpers' self-check messages"),
                (LOCALES / f"figures.{language}.po", figures, FIGURES),
            ):
                old = read_po(path) if path.exists() else {}
                path.write_text(catalogue_text(language, found, old, what), encoding="utf-8")
                missing = sum(1 for k in found if k not in old)
                print(f"{path.relative_to(ROOT)}: {len(found)} entries, {missing} to translate")
        return 0
    found = [p for language in LANGUAGES for p in problems(language, entries)]
    found += [p for language in LANGUAGES for p in figure_problems(language, figures)]
    for line in found:
        print(line)
    print(f"{len(entries)} messages, {len(figures)} texts of figures; {len(found)} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
