"""The Korean edition's message catalogues: extract, update, check (book/_ext/i18n.py).

    python scripts/i18n.py extract  the English text into _build/gettext/**.pot
                                    (Sphinx's gettext builder)
    python scripts/i18n.py update   extract, then merge into locales/ko/LC_MESSAGES/**.po
                                    (sphinx-intl): a changed English paragraph keeps its
                                    old translation, marked fuzzy
    python scripts/i18n.py check    fail on an untranslated, fuzzy or stale entry, or a
                                    translation that drops or changes the maths, code,
                                    glued numbers or references of its English; and the
                                    code catalogues' check (scripts/code_i18n.py check)
                                    (make test runs it)
    python scripts/i18n.py stats    messages per page
    python scripts/i18n.py export PO FILE [--all]
                                    the untranslated and fuzzy entries of a catalogue
                                    (or all of them) into a text file to translate in
    python scripts/i18n.py import PO FILE
                                    the translations written in FILE back into PO

A message with nothing to translate (a display equation, a code name, a citation alone)
is filled with its English by `update`; `check` accepts only such messages untranslated.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import polib

ROOT = Path(__file__).resolve().parent.parent
POT = ROOT / "_build" / "gettext"
LANGUAGES = ("ko",)
# The theme's and extensions' words, kept by hand (book/_ext/i18n.py): not extracted.
UI = ("sphinx", "booktheme", "exercise", "proof")


def catalogues(language: str) -> Path:
    return ROOT / "locales" / language / "LC_MESSAGES"


def extract() -> None:
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    out = ROOT / "_build" / "gettext-build"
    subprocess.run(
        [
            str(jupyter_book),
            "build",
            str(ROOT),
            "--builder",
            "custom",
            "--custom-builder",
            "gettext",
            "--path-output",
            str(out),
            "--keep-going",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    import shutil

    shutil.rmtree(POT, ignore_errors=True)
    # sphinx.pot holds the words of the book's own templates: they are in the hand-kept
    # sphinx.po with the theme's.
    shutil.copytree(
        out / "_build" / "gettext", POT, ignore=shutil.ignore_patterns("_static", "sphinx.pot")
    )
    for pot in POT.rglob("*.pot"):  # a stable header: no creation date in the diff
        catalogue = polib.pofile(str(pot))
        catalogue.metadata.pop("POT-Creation-Date", None)
        notebook = ROOT / pot.relative_to(POT).with_suffix(".ipynb")
        if notebook.exists():  # what Sphinx does not extract: figure captions, alt texts
            known = {e.msgid for e in catalogue}
            for text in figure_texts(notebook):
                if text not in known:
                    catalogue.append(polib.POEntry(msgid=text, msgstr=""))
                    known.add(text)
        catalogue.save(str(pot))


_EXERCISE = re.compile(r"^(?:`{3,}|:{3,})\{exercise\}[ \t]+(.+)$", re.M)


def figure_texts(notebook: Path) -> list[str]:
    """The captions (mystnb.figure.caption) and alt texts (mystnb.image.alt) of a notebook's
    figures, and its exercises' titles, in order: myst-nb builds the first from cell
    metadata, and a title is a directive's argument, where Sphinx's extraction does not
    look (book/_ext/i18n.py translates them)."""
    import json

    texts = []
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "markdown":  # exercises' titles: their directive's argument
            source = "".join(cell["source"])
            texts += [t.strip() for t in _EXERCISE.findall(source) if t.strip()]
            continue
        options = cell.get("metadata", {}).get("mystnb", {})
        for key, field in (("figure", "caption"), ("image", "alt")):
            text = options.get(key, {}).get(field)
            if isinstance(text, str) and text.strip():  # as Sphinx looks a message up
                texts.append(text.replace("\n", " ").strip() if field == "caption" else text)
    return texts


# The glossary's English column stays English in the Korean edition: there a term of at
# most six words may be its own translation.
KEEP_ENGLISH = {"book/glossary.po"}

# What a translation keeps exactly as its English has it: inline maths, inline code, and
# each role's target (a cross-reference may get a translated text: {doc}`글 <target>`).
_MATH = re.compile(r"(?<![\\$])\$(?!\$)(?:\\.|[^$\\])+\$")
_ROLE = re.compile(r"\{([\w:.-]+)\}`([^`]*)`")
_CODE = re.compile(r"(?<![}`])`([^`]+)`(?!`)")
_TARGET = re.compile(r"^(?:.*?<(.+)>|(.+))$", re.S)
_WORD = re.compile(r"[A-Za-z]{2,}")
# a paragraph that MyST would read as a list item or a heading
_BLOCK_START = re.compile(r"^(?:\d+[.)]|[-+*]|#{1,6})[ \t]")
_HANGUL = re.compile(r"[\uac00-\ud7a3]")


def protected(text: str) -> Counter:
    """The maths, roles (by target) and inline code of a message, as a multiset."""
    found: Counter = Counter()
    rest = text
    for match in _ROLE.finditer(text):
        name, content = match.groups()
        target = content
        if name in ("doc", "ref", "numref", "prf:ref", "download"):
            m = _TARGET.match(content.strip())
            target = (m.group(1) or m.group(2)).strip()
        found[f"{{{name}}}{target}"] += 1
    rest = _ROLE.sub(" ", rest)
    for match in _MATH.finditer(rest):
        found[match.group(0)] += 1
    rest = _MATH.sub(" ", rest)
    for match in _CODE.finditer(rest):
        found[f"`{match.group(1)}`"] += 1
    return found


def words(text: str) -> list[str]:
    """The English words of a message outside its maths, code and roles."""
    rest = _ROLE.sub(" ", text)
    rest = _MATH.sub(" ", rest)
    rest = _CODE.sub(" ", rest)
    rest = re.sub(r"\$\$.*?\$\$", " ", rest, flags=re.S)
    rest = re.sub(r"https?://\S+", " ", rest)
    return _WORD.findall(rest)


def nothing_to_translate(msgid: str) -> bool:
    """A display equation, a code name, a role alone: nothing a reader reads as prose."""
    if "$" not in msgid and re.search(r"\\[A-Za-z]+|=", msgid):
        # maths written without dollars (a display equation): prose has two words in a row
        bare = re.sub(r"\\(?:text|operatorname\*?|mathrm|mathbf)\{[^}]*\}|\\[A-Za-z]+", " ", msgid)
        if not re.search(r"[A-Za-z]{2,}\s+[A-Za-z]{2,}", bare):
            return True
    return not words(msgid)


def update() -> None:
    extract()
    for language in LANGUAGES:
        subprocess.run(
            [
                str(Path(sys.executable).parent / "sphinx-intl"),
                "update",
                "-p",
                str(POT),
                "-l",
                language,
                "-d",
                str(ROOT / "locales"),
                "-w",
                "0",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        for po in catalogues(language).rglob("*.po"):
            if po.parent == catalogues(language) and po.stem in UI:
                continue
            if po.is_relative_to(catalogues(language) / "code"):
                continue  # the chapters' code: scripts/code_i18n.py's
            catalogue = polib.pofile(str(po), wrapwidth=0)
            for entry in catalogue:
                if not entry.msgstr and nothing_to_translate(entry.msgid):
                    entry.msgstr = entry.msgid
            for entry in catalogue.obsolete_entries():
                catalogue.remove(entry)
            catalogue.metadata.pop("POT-Creation-Date", None)
            catalogue.save(str(po))


def check(only: str = "") -> list[str]:
    """Every problem of the catalogues against the extracted English, one line each
    (`only`: the catalogues whose path contains it)."""
    problems = []
    for language in LANGUAGES:
        for pot in sorted(POT.rglob("*.pot")):
            rel = pot.relative_to(POT).with_suffix(".po")
            if only not in str(rel):
                continue
            po = catalogues(language) / rel
            if not po.exists():
                problems.append(f"{language}/{rel}: no catalogue (run `make translations`)")
                continue
            english = {e.msgid for e in polib.pofile(str(pot))}
            catalogue = polib.pofile(str(po))
            have = {e.msgid for e in catalogue if not e.obsolete}
            for msgid in sorted(english - have):
                problems.append(
                    f"{language}/{rel}: stale, the English has a new message: {msgid[:70]!r}"
                )
            for msgid in sorted(have - english):
                problems.append(
                    f"{language}/{rel}: stale, a message the English no longer has: {msgid[:70]!r}"
                )
            for entry in catalogue:
                if entry.obsolete or entry.msgid not in english:
                    continue
                where = f"{language}/{rel}: {entry.msgid[:60]!r}"
                if "fuzzy" in entry.flags:
                    problems.append(f"{where}: fuzzy (its English changed): update the translation")
                elif not entry.msgstr:
                    problems.append(f"{where}: untranslated")
                elif (
                    entry.msgstr == entry.msgid
                    and not nothing_to_translate(entry.msgid)
                    and not (str(rel) in KEEP_ENGLISH and len(entry.msgid.split()) <= 6)
                ):
                    problems.append(f"{where}: left in English")
                elif _BLOCK_START.match(entry.msgstr):
                    problems.append(
                        f"{where}: the translation starts like a list item or a heading, so "
                        "Sphinx would keep the English: escape it (1\\. ...)"
                    )
                else:
                    lost = protected(entry.msgid) - protected(entry.msgstr)
                    added = protected(entry.msgstr) - protected(entry.msgid)
                    if lost or added:
                        problems.append(
                            f"{where}: maths, code or references differ from the English "
                            f"(missing {sorted(lost)}, extra {sorted(added)})"
                        )
                    elif (
                        language == "ko"
                        and entry.msgstr != entry.msgid
                        and len(words(entry.msgid)) >= 3
                        and not _HANGUL.search(entry.msgstr)
                    ):
                        problems.append(f"{where}: no Korean in the translation")
        for domain in UI:
            po = catalogues(language) / f"{domain}.po"
            if only in po.name and po.exists():
                for entry in polib.pofile(str(po)):
                    if not entry.msgstr or "fuzzy" in entry.flags:
                        problems.append(f"{language}/{po.name}: {entry.msgid!r} untranslated")
    return problems


def stats() -> None:
    for language in LANGUAGES:
        for po in sorted(catalogues(language).rglob("*.po")):
            catalogue = polib.pofile(str(po))
            entries = [e for e in catalogue if not e.obsolete]
            done = sum(1 for e in entries if e.msgstr and "fuzzy" not in e.flags)
            prose = sum(1 for e in entries if not nothing_to_translate(e.msgid))
            print(
                f"{language}/{po.relative_to(catalogues(language))}: {len(entries)} messages, "
                f"{prose} of them prose, {done} translated"
            )


# A text file to translate in: one block per entry,
#   === N            (the entry's index in the catalogue)
#   <the English, exactly as in the catalogue: do not edit>
#   --- ko
#   <the translation: it may span lines>
def export_entries(po: Path, out: Path, everything: bool = False) -> int:
    catalogue = polib.pofile(str(po), wrapwidth=0)
    blocks = [
        f"=== {n}\n{e.msgid}\n--- ko\n{e.msgstr}\n"
        for n, e in enumerate(catalogue)
        if not e.obsolete and (everything or not e.msgstr or "fuzzy" in e.flags)
    ]
    out.write_text("\n".join(blocks), encoding="utf-8")
    return len(blocks)


def read_blocks(path: Path, context: bool = False) -> dict[int, tuple[str, str]]:
    """{N: (English, translation)} of a file written by `export_entries` (or by
    scripts/code_i18n.py's, whose header may name the message's kind, `=== N string`, and
    whose first line after it, with `context`, is the code it is in, `| ...`: not read)."""
    blocks: dict[int, dict[str, list[str]]] = {}
    current, part = None, "en"
    for line in path.read_text(encoding="utf-8").split("\n"):
        head = re.match(r"^=== (\d+)(?: (?:comment|string))?$", line)
        if head:
            current, part = int(head.group(1)), "en"
            blocks[current] = {"en": [], "ko": []}
        elif line == "--- ko" and current is not None:
            part = "ko"
        elif current is not None:
            if context and part == "en" and not blocks[current]["en"] and line.startswith("| "):
                continue
            blocks[current][part].append(line)
    out = {}
    for n, block in blocks.items():
        lines = block["ko"]
        if lines and lines[-1] == "":  # the blank line between two blocks (only: a
            lines = lines[:-1]  # display equation's message ends with a line break)
        out[n] = ("\n".join(block["en"]), "\n".join(lines))
    return out


def import_entries(po: Path, path: Path) -> int:
    catalogue = polib.pofile(str(po), wrapwidth=0)
    entries = list(catalogue)
    done = 0
    for n, (english, translation) in read_blocks(path).items():
        entry = entries[n]
        if entry.msgid != english:
            raise SystemExit(f"block {n}: its English is not entry {n} of {po}")
        if translation.strip():
            entry.msgstr = translation
            if "fuzzy" in entry.flags:
                entry.flags.remove("fuzzy")
            entry.previous_msgid = None
            done += 1
    catalogue.save(str(po))
    return done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "command", choices=("extract", "update", "check", "stats", "export", "import")
    )
    parser.add_argument("files", nargs="*", type=Path, help="export/import: PO FILE")
    parser.add_argument("--all", action="store_true", help="export: every entry")
    parser.add_argument(
        "--only", default="", help="check: only the catalogues whose path contains this"
    )
    parser.add_argument(
        "--no-extract", action="store_true", help="check: against _build/gettext as it is"
    )
    args = parser.parse_args()
    if args.command in ("export", "import"):
        if len(args.files) != 2:
            parser.error(f"{args.command} takes a catalogue and a text file")
        po, text = args.files
        if args.command == "export":
            print(f"{export_entries(po, text, args.all)} entries written to {text}")
        else:
            print(f"{import_entries(po, text)} translations set in {po}")
    elif args.command == "extract":
        extract()
    elif args.command == "update":
        update()
    elif args.command == "stats":
        stats()
    else:
        if not args.no_extract:
            extract()
        problems = check(args.only)
        # the words in the chapters' code (scripts/code_i18n.py: locales/ko/LC_MESSAGES/code/)
        import code_i18n

        problems += [f"ko/code: {line}" for line in code_i18n.check() if args.only in line]
        for line in problems[:200]:
            print(line)
        if problems:
            print(f"{len(problems)} problems in the translations (scripts/i18n.py check)")
            return 1
        print("translations: complete and current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
