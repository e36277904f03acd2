"""The words in the chapters' code, in Korean: comments, docstrings and printed or drawn text.

    python scripts/code_i18n.py update      the English of every chapter's code into
                                            locales/ko/LC_MESSAGES/code/NN_topic.po (a
                                            changed message keeps its old translation,
                                            marked fuzzy)
    python scripts/code_i18n.py check       fail on an untranslated, fuzzy or stale entry, or
                                            a translation that is not valid code (see below)
    python scripts/code_i18n.py export PO FILE [--all]
    python scripts/code_i18n.py import PO FILE
                                            the untranslated entries of PO, with the code
                                            around each, into a text file to translate in,
                                            and back (a translation `=keep` keeps a string
                                            in English: a value the code reads, not a word a
                                            reader reads)

The English notebooks stay the only source of the code. What a reader reads in it is
translated in one catalogue per chapter, and the Korean notebooks (scripts/ko_edition.py)
and the Korean book's code cells carry the translation (`translate_code`):

- a comment: a block of full-line comments at one indentation is one message (its lines
  joined by newlines; the translation's lines become the Korean block, at the same
  indentation); a comment after code is one message;
- a string literal with at least two English words (a sentence a `print` shows, a figure's
  title, a docstring, an error message), or a run of literals joined by Python (one
  message: the literals' source text, one per line). Its translation is Python source:
  string literals only, with the same replacement fields (`{x:.3f}` in an f-string, `{}`
  and `%s` in a template) as the English, so that the code computes the same thing and
  only the words change. A string that the code reads as a value (an option's name, a
  key) is kept in English, said so by the flag `keep-english`.

A message found twice in a chapter has one translation: a key written twice stays one key.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import difflib
import io
import json
import re
import sys
import tokenize
from collections import Counter
from pathlib import Path

import polib

ROOT = Path(__file__).resolve().parent.parent
CODE = ROOT / "locales" / "ko" / "LC_MESSAGES" / "code"
KEEP = "keep-english"
_WORDS = re.compile(r"[A-Za-z]{2,}[^\S\n]+[A-Za-z]{2,}")
_HANGUL = re.compile(r"[\uac00-\ud7a3]")
_PRAGMA = re.compile(r"^\s*(noqa|type:|fmt:|pragma|ruff:|pyright:|mypy:)", re.I)
_BACKTICKED = re.compile(r"`[^`]+`")
_TEMPLATE = re.compile(r"\{[^{}]*\}|%[-+#0]*\d*(?:\.\d+)?[sdrfgeEixXc%]")
# A string of one word is a reader's only where it is shown: an argument of these
# functions, or the value of these keywords (a figure's labels, a printed line).
_SHOWN = {
    "print",
    "set_title",
    "set_xlabel",
    "set_ylabel",
    "xlabel",
    "ylabel",
    "title",
    "suptitle",
    "text",
    "annotate",
    "legend",
    "label",
    "labels",
    "description",
    "set_label",
    "colorbar",
    "set_text",
    "HTML",
    "Markdown",
    "display",
    "tick_labels",
    "set_xticklabels",
    "set_yticklabels",
    "supxlabel",
    "supylabel",
    "header",
    "caption",
    "alt",
    "names",
}
# Keywords whose value the code reads (matplotlib's and numpy's options): never a message.
_OPTIONS = {
    "loc",
    "ha",
    "va",
    "horizontalalignment",
    "verticalalignment",
    "cmap",
    "color",
    "colors",
    "marker",
    "linestyle",
    "ls",
    "dtype",
    "mode",
    "kind",
    "textcoords",
    "xycoords",
    "family",
    "fontfamily",
    "weight",
    "fontweight",
    "style",
    "interpolation",
    "origin",
    "aspect",
    "norm",
    "scale",
    "method",
    "order",
    "feature_map",
    "layout",
    "bbox_inches",
    "format",
    "edgecolor",
    "facecolor",
    "mec",
    "mfc",
    "c",
    "align",
    "position",
    "rotation_mode",
    "where",
    "how",
    "side",
    "edition",
    "language",
    "variant",
    "which",
    "axis",
    "nonpositive",
}
_IDENTIFIER = re.compile(r"^[A-Za-z_][\w.\-]*$")


@dataclasses.dataclass
class Message:
    kind: str  # "comment" or "string"
    msgid: str
    start: int  # offsets into the cell's source of the text replaced
    end: int
    indent: str = ""  # a comment block's indentation; a string run's continuation
    line: str = ""  # the code line where it starts (context for a translator)


def _offsets(source: str) -> list[int]:
    starts, n = [0], 0
    for line in source.splitlines(keepends=True):
        n += len(line)
        starts.append(n)
    return starts


def _literal_text(token_source: str) -> str | None:
    """The words of a literal's source (f-string replacement fields left as they are)."""
    match = re.match(r"(?i)([rbuf]*)('''|\"\"\"|'|\")(.*)\2$", token_source, re.S)
    if not match or "b" in match.group(1).lower():
        return None
    return match.group(3)


def _string_tokens(tokens: list[tokenize.TokenInfo]) -> list[tuple[int, int]]:
    """(index of the first token, index of the last) of each literal: a STRING token, or
    an f-string's FSTRING_START ... FSTRING_END (Python 3.12+)."""
    spans, k = [], 0
    fstart = getattr(tokenize, "FSTRING_START", None)
    fend = getattr(tokenize, "FSTRING_END", None)
    while k < len(tokens):
        t = tokens[k]
        if t.type == tokenize.STRING:
            spans.append((k, k))
        elif fstart is not None and t.type == fstart:
            depth, j = 1, k + 1
            while depth:
                depth += (tokens[j].type == fstart) - (tokens[j].type == fend)
                j += 1
            spans.append((k, j - 1))
            k = j - 1
        k += 1
    return spans


def code_messages(source: str) -> list[Message]:
    """The messages of one cell's code, in order (see the module)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
    offsets = _offsets(source)
    lines = source.splitlines()

    def at(position: tuple[int, int]) -> int:
        return offsets[position[0] - 1] + position[1]

    found: list[Message] = []
    # comments
    block: list[tokenize.TokenInfo] = []

    def close_block() -> None:
        if block:
            text = "\n".join(re.sub(r"^#\s?", "", t.string).rstrip() for t in block)
            if _translatable_comment(text):
                indent = lines[block[0].start[0] - 1][: block[0].start[1]]
                found.append(
                    Message(
                        "comment",
                        text,
                        at(block[0].start),
                        at(block[-1].end),
                        indent,
                        lines[block[0].start[0] - 1],
                    )
                )
            block.clear()

    for t in tokens:
        if t.type != tokenize.COMMENT:
            if t.type not in (tokenize.NL,):
                close_block()
            continue
        own_line = not lines[t.start[0] - 1][: t.start[1]].strip()
        if not own_line:
            close_block()
            text = re.sub(r"^#\s?", "", t.string).rstrip()
            if _translatable_comment(text):
                found.append(
                    Message("comment", text, at(t.start), at(t.end), "", lines[t.start[0] - 1])
                )
            continue
        if block and (t.start[1] != block[-1].start[1] or t.start[0] != block[-1].start[0] + 1):
            close_block()
        block.append(t)
    close_block()
    # string runs
    spans = _string_tokens(tokens)
    runs: list[list[tuple[int, int]]] = []
    for span in spans:
        if runs:
            last = runs[-1][-1][1]
            between = tokens[last + 1 : span[0]]
            if all(b.type in (tokenize.NL, tokenize.COMMENT) for b in between) and not any(
                b.type == tokenize.COMMENT for b in between
            ):
                runs[-1].append(span)
                continue
        runs.append([span])
    for run in runs:
        pieces = [source[at(tokens[a].start) : at(tokens[b].end)] for a, b in run]
        words = " ".join(_literal_text(p) or "" for p in pieces).strip()
        bare = _field_text(words)
        owner = _owner(tokens, run[0][0])
        shown_word = r"[A-Za-z]{2,}" if owner in _SHOWN else r"[A-Za-z]{3,}"  # ("at" printed)
        if owner in _OPTIONS or not re.search(
            rf"{shown_word}|[A-Za-z]{{2,}}[^\S\n]+[A-Za-z]{{2,}}", bare
        ):
            continue
        named = re.sub(r"\{[^{}]*\}", "x", words)  # f"jac_norm_c{c}": a name still
        einsum = "->" in words and " " not in words.strip()
        if not _WORDS.search(bare) and (_IDENTIFIER.match(named) or einsum):
            if owner not in _SHOWN or einsum:
                continue  # a key, a dtype, an einsum: a value the code reads
        first, last = tokens[run[0][0]], tokens[run[-1][1]]
        indent = ""
        if len(run) > 1:
            second = tokens[run[1][0]]
            indent = lines[second.start[0] - 1][: second.start[1]]
        found.append(
            Message(
                "string",
                "\n".join(pieces),
                at(first.start),
                at(last.end),
                indent,
                lines[first.start[0] - 1],
            )
        )
    return sorted(found, key=lambda m: m.start)


def _owner(tokens: list[tokenize.TokenInfo], k: int) -> str | None:
    """The keyword or function a string token `k` is given to: `loc` in `loc="upper left"`,
    `set_title` in `ax.set_title("...")`, `labels` in `labels=["on", "off"]`."""
    depth, j = 0, k - 1
    while j >= 0:
        t = tokens[j]
        if t.type == tokenize.OP and t.string in ")]}":
            depth += 1
        elif t.type == tokenize.OP and t.string in "([{":
            if depth == 0:
                before = [x for x in tokens[max(0, j - 3) : j] if x.type not in (tokenize.NL,)]
                if t.string == "(" and before and before[-1].type == tokenize.NAME:
                    return before[-1].string
                if (
                    len(before) >= 2
                    and before[-1].string == "="
                    and before[-2].type == tokenize.NAME
                ):
                    return before[-2].string
                return None
            depth -= 1
        elif depth == 0 and t.type == tokenize.OP and t.string == "=" and j == k - 1:
            name = tokens[j - 1]
            if name.type != tokenize.NAME or not _in_brackets(tokens, j - 1):
                return None  # an assignment (`kind = "first copy"`), not a keyword argument
            return name.string
        elif depth == 0 and t.type == tokenize.OP and t.string == "=":
            return None
        elif t.type in (tokenize.NEWLINE,):
            return None
        j -= 1
    return None


def _field_text(text: str) -> str:
    """A literal's words: each replacement field blank, but for a field that is a string
    ({'in-context':>10s}, {f'no residuals, seed {i}':30}: a padded label), its words."""
    out, k = [], 0
    while k < len(text):
        if text[k] == "{" and text[k + 1 : k + 2] != "{":
            depth, j = 1, k + 1
            while j < len(text) and depth:
                depth += (text[j] == "{") - (text[j] == "}")
                j += 1
            inner = text[k + 1 : j - 1].strip()
            quoted = re.match(r"^f?(['\"])(.*)\1(?:[:!][^'\"]*)?$", inner, re.S)
            out.append(" " + re.sub(r"\{[^{}]*\}", " ", quoted.group(2)) + " " if quoted else " ")
            k = j
        else:
            out.append(text[k])
            k += 1
    return "".join(out)


def _in_brackets(tokens: list[tokenize.TokenInfo], k: int) -> bool:
    """Whether token `k` is inside a bracket opened on its logical line."""
    depth = 0
    for t in reversed(tokens[:k]):
        if t.type in (tokenize.NEWLINE,):
            return False
        if t.type == tokenize.OP and t.string in ")]}":
            depth += 1
        elif t.type == tokenize.OP and t.string in "([{":
            if depth == 0:
                return True
            depth -= 1
    return False


def _translatable_comment(text: str) -> bool:
    if _PRAGMA.match(text) or not re.search(r"[A-Za-z]{2,}", text):
        return False
    return len(re.findall(r"[A-Za-z]{2,}", text)) >= 2


def translate_code(source: str, catalogue: dict[str, str]) -> str:
    """`source` with every message replaced by its translation in `catalogue` ({msgid:
    msgstr}); a message missing from it raises KeyError."""
    out = source
    for m in reversed(code_messages(source)):
        msgstr = catalogue[m.msgid]
        if m.kind == "comment":
            if m.indent or source[m.start - 1 : m.start] in ("", "\n"):
                sep = "\n" + m.indent
                text = sep.join(("# " + line).rstrip() for line in msgstr.split("\n"))
            else:
                text = "# " + msgstr.replace("\n", " ")
        elif m.indent or _literals(m.msgid)[1:]:  # a run of literals: one per line
            text = ("\n" + m.indent if m.indent else " ").join(_literals(msgstr))
        else:
            text = msgstr
        out = out[: m.start] + text + out[m.end :]
    return out


def _literals(expression: str) -> list[str]:
    """The source text of each string literal of `expression` (Python source)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(expression).readline))
    except (tokenize.TokenError, SyntaxError):
        return [expression]
    offsets = _offsets(expression)

    def at(position: tuple[int, int]) -> int:
        return offsets[position[0] - 1] + position[1]

    spans = _string_tokens(tokens)
    return [expression[at(tokens[a].start) : at(tokens[b].end)] for a, b in spans] or [expression]


# ------------------------------------------------------------------ checks


def _fields(expression: str) -> Counter | None:
    """The replacement fields of a string expression's literals (None: not literals only)."""
    try:
        tree = ast.parse("(\n" + expression + "\n)", mode="eval").body
    except SyntaxError:
        return None
    if isinstance(tree, ast.Constant) and isinstance(tree.value, str):
        return Counter(_TEMPLATE.findall(tree.value))
    if isinstance(tree, ast.JoinedStr):
        found: Counter = Counter()
        for value in tree.values:
            if not isinstance(value, ast.FormattedValue):
                continue
            if isinstance(value.value, ast.Constant) and isinstance(value.value.value, str):
                # a padded word ({'in-context':>10s}): its text translates, its layout stays
                spec = ast.unparse(value.format_spec) if value.format_spec else ""
                found[f"{{<text>{spec}}}"] += 1
            elif isinstance(value.value, ast.JoinedStr):  # {f'seed {i}':30}: the same,
                spec = ast.unparse(value.format_spec) if value.format_spec else ""
                found[f"{{<text>{spec}}}"] += 1  # and the fields inside it stay
                for inner in value.value.values:
                    if isinstance(inner, ast.FormattedValue):
                        found[ast.unparse(inner)] += 1
            else:
                found[ast.unparse(value)] += 1
        return found
    return None


def problems_of(msgid: str, msgstr: str, kind: str, flags: list[str]) -> list[str]:
    """What is wrong with one translation (nothing: [])."""
    if not msgstr:
        return ["untranslated"]
    if "fuzzy" in flags:
        return ["fuzzy (its English changed): update the translation"]
    if msgstr == msgid:
        if kind == "string" and KEEP in flags:
            return []
        return [f"left in English (a string the code reads is flagged {KEEP})"]
    if kind == "comment":
        problems = []
        if Counter(_BACKTICKED.findall(msgid)) != Counter(_BACKTICKED.findall(msgstr)):
            problems.append("`code` in the comment differs from the English")
        if not _HANGUL.search(msgstr):
            problems.append("no Korean in the translation")
        return problems
    english, korean = _fields(msgid), _fields(msgstr)
    if korean is None:
        return ["the translation is not Python string literals"]
    if english != korean:
        lost, added = sorted((english - korean).elements()), sorted((korean - english).elements())
        return [f"replacement fields differ from the English (missing {lost}, extra {added})"]
    if not _HANGUL.search(msgstr):
        return ["no Korean in the translation"]
    return []


# ------------------------------------------------------------------ catalogues


def notebooks() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("*.ipynb"))


def chapter_messages(notebook: Path) -> list[Message]:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    found = []
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and source != _install_cell():
            found += code_messages(source)
    return found


def _install_cell() -> str:
    """The chapters' first code cell, which the Korean notebooks replace whole."""
    sys.path.insert(0, str(ROOT))
    from tests.notebook_bootstrap import bootstrap_source

    return bootstrap_source()


def po_path(notebook: Path) -> Path:
    return CODE / f"{notebook.stem}.po"


def kinds(entry: polib.POEntry) -> str:
    return "comment" if entry.msgctxt == "comment" else "string"


def update() -> None:
    CODE.mkdir(parents=True, exist_ok=True)
    for notebook in notebooks():
        po = po_path(notebook)
        old = polib.pofile(str(po), wrapwidth=0) if po.exists() else polib.POFile(wrapwidth=0)
        previous = {(e.msgctxt, e.msgid): e for e in old if not e.obsolete}
        new = polib.POFile(wrapwidth=0)
        new.metadata = {
            "Project-Id-Version": "attention-book",
            "Language": "ko",
            "MIME-Version": "1.0",
            "Content-Type": "text/plain; charset=UTF-8",
            "Content-Transfer-Encoding": "8bit",
        }
        seen = set()
        for m in chapter_messages(notebook):
            key = (m.kind, m.msgid)
            if key in seen:
                continue
            seen.add(key)
            entry = polib.POEntry(msgctxt=m.kind, msgid=m.msgid, msgstr="", comment=m.line.strip())
            if key in previous:
                entry.msgstr = previous[key].msgstr
                entry.flags = list(previous[key].flags)
            else:
                same_kind = [k[1] for k in previous if k[0] == m.kind and previous[k].msgstr]
                close = difflib.get_close_matches(m.msgid, same_kind, n=1, cutoff=0.6)
                if close:
                    entry.msgstr = previous[(m.kind, close[0])].msgstr
                    entry.flags = ["fuzzy"]
                    entry.previous_msgid = close[0]
            new.append(entry)
        new.save(str(po))


def check() -> list[str]:
    problems = []
    for notebook in notebooks():
        po = po_path(notebook)
        rel = po.relative_to(ROOT)
        if not po.exists():
            problems.append(f"{rel}: no catalogue (run `make translations`)")
            continue
        catalogue = polib.pofile(str(po))
        have = {(e.msgctxt, e.msgid) for e in catalogue if not e.obsolete}
        english = {(m.kind, m.msgid) for m in chapter_messages(notebook)}
        for kind, msgid in sorted(english - have):
            problems.append(f"{rel}: stale, the code has a new {kind}: {msgid[:70]!r}")
        for kind, msgid in sorted(have - english):
            problems.append(f"{rel}: stale, a {kind} the code no longer has: {msgid[:70]!r}")
        for e in catalogue:
            if e.obsolete or (e.msgctxt, e.msgid) not in english:
                continue
            for problem in problems_of(e.msgid, e.msgstr, kinds(e), e.flags):
                problems.append(f"{rel}: {e.msgid[:60]!r}: {problem}")
    return problems


class Preview(dict):
    """A catalogue in which a message missing from the catalogue reads as its English."""

    def __missing__(self, msgid: str) -> str:
        return msgid


def catalogue_of(
    notebook_name: str, directory: Path | None = None, preview: bool = False
) -> dict[str, str]:
    """{msgid: msgstr} of a chapter's code (comments and strings), every entry translated
    (else ValueError naming them). `directory`: the catalogues' folder (default
    locales/ko/LC_MESSAGES/code). With `preview` (a translation in progress, to look at),
    an untranslated, fuzzy or invalid message, or one the catalogue lacks, is its English."""
    folder = CODE if directory is None else Path(directory)
    po = folder / f"{Path(notebook_name).stem}.po"
    shown = po.relative_to(ROOT) if po.is_relative_to(ROOT) else po
    if not po.exists():
        raise ValueError(f"{notebook_name}: no catalogue {shown}")
    out: dict[str, str] = Preview() if preview else {}
    missing = []
    for e in polib.pofile(str(po)):
        if e.obsolete:
            continue
        if problems_of(e.msgid, e.msgstr, kinds(e), e.flags):
            missing.append(e.msgid)
            if preview:
                continue
        out[e.msgid] = e.msgstr
    if missing and not preview:
        listed = "\n".join(f"  {m[:100]!r}" for m in missing[:20])
        raise ValueError(
            f"{notebook_name}: {len(missing)} code message(s) untranslated, fuzzy or invalid "
            f"in {shown} (python scripts/code_i18n.py check):\n{listed}"
        )
    return out


# A text file to translate in: one block per entry,
#   === N comment|string
#   | the code line where it is (context; not read back)
#   <the English, exactly as in the catalogue: do not edit>
#   --- ko
#   <the translation: Korean comment lines, or Python string literals; =keep for a string
#    the code reads as a value>
def export_entries(po: Path, out: Path, everything: bool = False) -> int:
    catalogue = polib.pofile(str(po), wrapwidth=0)
    blocks = []
    for n, e in enumerate(catalogue):
        if e.obsolete or not (everything or not e.msgstr or "fuzzy" in e.flags):
            continue
        shown = "=keep" if KEEP in e.flags and e.msgstr == e.msgid else e.msgstr
        blocks.append(f"=== {n} {kinds(e)}\n| {e.comment}\n{e.msgid}\n--- ko\n{shown}\n")
    out.write_text("\n".join(blocks), encoding="utf-8")
    return len(blocks)


def import_entries(po: Path, path: Path) -> int:
    catalogue = polib.pofile(str(po), wrapwidth=0)
    entries = list(catalogue)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from i18n import read_blocks  # scripts/i18n.py: the same file format

    done = 0
    for n, (english, translation) in read_blocks(path, context=True).items():
        entry = entries[n]
        if entry.msgid != english:
            raise SystemExit(f"block {n}: its English is not entry {n} of {po}")
        if not translation.strip():
            continue
        if translation.strip() == "=keep":
            entry.msgstr = entry.msgid
            if KEEP not in entry.flags:
                entry.flags.append(KEEP)
        else:
            entry.msgstr = translation
            if KEEP in entry.flags:
                entry.flags.remove(KEEP)
        if "fuzzy" in entry.flags:
            entry.flags.remove("fuzzy")
        entry.previous_msgid = None
        done += 1
    catalogue.save(str(po))
    return done


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("update", "check", "export", "import", "stats"))
    parser.add_argument("po", nargs="?", type=Path)
    parser.add_argument("file", nargs="?", type=Path)
    parser.add_argument("--all", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "update":
        update()
    elif args.command == "check":
        found = check()
        for line in found:
            print(line)
        print(f"{len(found)} problem(s) in the code catalogues" if found else "code catalogues: ok")
        return 1 if found else 0
    elif args.command == "stats":
        for po in sorted(CODE.glob("*.po")):
            entries = list(polib.pofile(str(po)))
            done = sum(not problems_of(e.msgid, e.msgstr, kinds(e), e.flags) for e in entries)
            print(f"{po.name}: {len(entries)} messages, {done} translated")
    elif args.command == "export":
        print(export_entries(args.po, args.file, args.all), "entries written to", args.file)
    else:
        print(import_entries(args.po, args.file), "entries read into", args.po)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
