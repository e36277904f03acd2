"""The Korean Colab and student editions: editions/ko/{colab,student}/NN_topic.ipynb.

Usage: python scripts/ko_edition.py            write both Korean editions (a chapter whose
                                               Korean code changed is executed again)
       python scripts/ko_edition.py --execute [notebooks/NN_topic.ipynb ...]
                                               execute the Korean notebooks (all, or those
                                               named) and write both Korean editions
                                               (`make execute` runs it after the English)
       python scripts/ko_edition.py --check    exit 1 if either is stale (never executes)
       python scripts/ko_edition.py --source   write the Korean source notebooks into
                                               _build/ko-source/ (to read them; nothing else)
       ... --catalogues DIR                    the catalogues from DIR instead: DIR/notebooks/
                                               (prose) and DIR/code/ (code), a translator's
                                               work in progress, to preview: an untranslated
                                               code message stays English there (not the
                                               prose's, which still stops generation)

scripts/colab_edition.py (`make edition`, `make execute`) runs this after the English
editions. The English notebooks (notebooks/) stay the only source; their text is translated
in the page catalogues locales/ko/LC_MESSAGES/notebooks/NN_topic.po (scripts/i18n.py). For
each chapter:

1. A Korean source notebook is made in memory (`translate_notebook`): every message of the
   page's catalogue is found in the English markdown cells (whitespace-insensitively: a
   msgid is a paragraph, heading, list item, table cell, admonition or exercise title with
   its line breaks made spaces) or in the figures' cell metadata (mystnb.figure.caption,
   mystnb.image.alt), and replaced there by its translation. A message that cannot be
   placed, an untranslated or fuzzy message, or English prose left in a cell afterwards
   stops the generation with the msgid or the line (`TranslationError`): a Korean notebook
   never keeps English silently. Every code cell but the first carries the translation of
   its words from the chapter's code catalogue locales/ko/LC_MESSAGES/code/NN_topic.po
   (scripts/code_i18n.py `translate_code`: comments, docstrings, printed and drawn text);
   an untranslated, fuzzy or invalid code message stops generation too. The first code
   cell (the install cell) also sets helpers' language to Korean
   (`helpers.set_language("ko")`), so that self-checks and figures speak Korean.
2. The outputs are the Korean notebook's own (`attach_outputs`): a code cell whose Korean
   source is the one the committed Korean Colab edition has under its id keeps that
   cell's stored outputs (and a glue cell its glued values, kept beside the edition in
   editions/ko/glue/NN_topic.json, since the Colab edition shows no glue output); a chapter
   with any other code cell is executed in Korean (`execute`: scripts/execute_notebooks.py's
   executor and settings, ATTENTION_BOOK_LANGUAGE=ko), as every chapter is with
   --execute. So editing text only (`make edition`) executes nothing, and the Korean
   outputs are those of the Korean code: printed sentences, self-check reports, figures'
   words and explorers' frames in Korean. tests/test_colab_edition.py checks them against
   the English chapter's stored outputs (the same numbers, glued values and figure sizes).
3. The Korean notebooks are staged with the book's other pages and built with the same
   ``colab`` builder as the English edition (book/_ext/colab_edition.py) with
   ``language = ko``: glued numbers, equation, theorem and figure numbers, links, in
   Korean words, linking to the Korean book online (SITE/ko/...). The pages' catalogues of
   the notebooks are left out of the stage, so that nothing but step 1 translates them.
4. The student edition is derived from the Korean Colab edition by scripts/student_edition.py,
   as the English one is (its links go to SITE/ko/student/).
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

import polib
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.notebook_bootstrap
sys.path.insert(0, str(Path(__file__).resolve().parent))

import i18n  # noqa: E402  (scripts/i18n.py: what counts as English prose)

from tests.notebook_bootstrap import bootstrap_source  # noqa: E402


def _book_script():
    """scripts/book.py (the Korean edition's configuration), by its path: the name "book"
    is also the book's folder of pages."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "book_script", Path(__file__).with_name("book.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LANGUAGE = "ko"
CATALOGUES = ROOT / "locales" / LANGUAGE / "LC_MESSAGES" / "notebooks"
CODE_CATALOGUES = ROOT / "locales" / LANGUAGE / "LC_MESSAGES" / "code"
PREVIEW = False  # --catalogues: an untranslated code message reads as its English
GLUE_PREFIX = "application/papermill.record/"  # myst-nb's glue outputs
META = "ko_edition"  # a Korean notebook's metadata while its outputs are attached
EDITIONS = ROOT / "editions" / LANGUAGE
GLUE = EDITIONS / "glue"  # each Korean notebook's glued values: glue/NN_topic.json
COLAB = EDITIONS / "colab"
STUDENT = EDITIONS / "student"
COMMAND = "make edition"


class TranslationError(Exception):
    """A catalogue that does not fit its chapter (the message names chapter and msgid)."""


def install_source() -> str:
    """The Korean notebooks' first code cell: the chapter's install cell, then helpers'
    language set to Korean (self-checks' messages and figures' words)."""
    english = bootstrap_source()
    first, rest = english.split("\n", 1)
    if not first.startswith("# "):
        raise TranslationError(f"the install cell's first line is not a comment: {first!r}")
    return (
        "# Colab에서는 이 책의 `helpers` 패키지를 설치하고, 어디서나 그 언어를 한국어로 정한다.\n"
        + rest
        + "\n\nimport helpers\n\n"
        + 'helpers.set_language("ko")  # 자가 점검 메시지와 그림의 글자를 한국어로'
    )


# ------------------------------------------------------------------ the catalogue


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def messages(name: str) -> dict[str, str]:
    """{msgid: msgstr} of chapter `name`'s catalogue; every entry must be translated."""
    po = CATALOGUES / Path(name).with_suffix(".po").name
    if not po.exists():
        raise TranslationError(f"{name}: no catalogue {shown(po)}")
    out, missing = {}, []
    for entry in polib.pofile(str(po)):
        if entry.obsolete:
            continue
        if not entry.msgstr or "fuzzy" in entry.flags:
            missing.append(entry.msgid)
            continue
        out[entry.msgid] = entry.msgstr
    if missing:
        listed = "\n".join(f"  {m[:100]!r}" for m in missing[:20])
        raise TranslationError(
            f"{name}: {len(missing)} message(s) untranslated or fuzzy in {shown(po)} "
            f"(the Korean notebooks would keep English):\n{listed}"
        )
    return out


# ------------------------------------------------------- placing messages in a cell

# Where a translatable unit may start on its line: after indentation, list markers,
# a heading's hashes, a definition's colon, a table's bar, or a directive's name (its
# argument: an admonition's or exercise's title).
_BEFORE = re.compile(
    r"(?:^|\n)[ \t]*(?:(?:[-*+]|\d+[.)]|:)[ \t]+)*(?:#{1,6}[ \t]+)?"
    r"(?:(?:`{3,}|:{3,})\{[\w:.-]+\}[ \t]+)?$"
    r"|(?:^|\n)[ \t]*(?:\|[^\n]*)?\|[ \t]*$"  # a table's cell: after a bar on a table's line
)
# And where it may end: at the end of its line, or at a table cell's bar.
_AFTER = re.compile(r"^[ \t]*(?:\||\n|$)")


def pattern(msgid: str) -> re.Pattern:
    """The msgid as a pattern that matches it across line breaks and indentation."""
    return re.compile(r"\s+".join(re.escape(word) for word in msgid.split()))


def place(text: str, msgid: str, msgstr, argument: bool = False) -> tuple[str, int]:
    """`text` with every whole-unit occurrence of `msgid` replaced; (text, how many).
    With `argument`, only where it is a directive's argument (a theorem's title);
    `msgstr` may be a function of the matched text."""
    out, at, count = [], 0, 0
    for match in pattern(msgid).finditer(text):
        if match.start() < at:
            continue
        line_start = text.rfind("\n", 0, match.start()) + 1
        before = text[max(0, line_start - 1) : match.start()]
        if not _BEFORE.search(before if line_start else "\n" + before):
            continue
        if argument and not re.search(r"(?:`{3,}|:{3,})\{[\w:.-]+\}[ \t]+$", before):
            continue
        if not _AFTER.match(text[match.end() :]):
            continue
        out.append(text[at : match.start()])
        out.append(msgstr if isinstance(msgstr, str) else msgstr(match.group(0)))
        at = match.end()
        count += 1
    out.append(text[at:])
    return "".join(out), count


# ----------------------------------------------------------- English left in a cell

_FENCE = re.compile(
    r"^[ \t]*(?P<fence>`{3,}|:{3,})(?P<info>[^\n]*)\n(?P<body>.*?)^[ \t]*(?P=fence)[ \t]*$",
    re.M | re.S,
)
_DIRECTIVE = re.compile(r"^\{([\w:.-]+)\}")
_TITLED = ("admonition", "exercise", "prf:", "figure", "table", "note", "warning", "tip")
_HANGUL = re.compile(r"[\uac00-\ud7a3]")


def prose_lines(text: str) -> list[str]:
    """The lines of a MyST cell a reader reads as prose: code blocks, display maths,
    directive options, labels and comments taken out."""
    lines: list[str] = []

    def walk(block: str) -> None:
        last = 0
        for fence in _FENCE.finditer(block):
            lines.extend(block[last : fence.start()].split("\n"))
            last = fence.end()
            info = fence.group("info").strip()
            directive = _DIRECTIVE.match(info)
            if directive is None:
                continue  # a code block
            name = directive.group(1)
            if name in ("math", "code-cell", "code", "code-block", "raw", "glue:math"):
                continue
            argument = info[directive.end() :].strip()
            if argument and not name.startswith(("solution", "prf:proof")):
                lines.append(argument)
            walk(fence.group("body"))
        lines.extend(block[last:].split("\n"))

    text = re.sub(f"{KEPT[0]}\\d+{KEPT[1]}", " ", text)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    text = i18n._MATH.sub(" ", text)  # inline maths, also across lines
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    walk(text)
    out = []
    for line in lines:
        stripped = line.strip()
        if not stripped or re.match(r"^(:[\w-]+:|\(.*\)=$|%|\\begin|\\end|\\\\)", stripped):
            continue
        out.append(stripped)
    return out


_PREFIX = re.compile(r"^(?:(?:[-*+]|\d+[.)]|:|#{1,6})[ \t]+)+")


def bare(text: str) -> str:
    """A line without its maths, spaces collapsed (as prose_lines leaves it)."""
    return " ".join(i18n._MATH.sub(" ", text).split())


def english_left(text: str, translations: set[str] = frozenset()) -> list[str]:
    """The prose lines of a translated cell that have English words and no Korean (a line
    that is a translation of the catalogue as it stands is not: "RoPE: $...$")."""
    left = []
    translated = {bare(t) for t in translations}
    for line in prose_lines(text):
        if bare(_PREFIX.sub("", line)) in translated:
            continue
        cells = [c for c in line.strip("|").split("|")] if line.startswith("|") else [line]
        for cell in cells:
            if re.fullmatch(r"[\s:-]*", cell):
                continue
            if not _HANGUL.search(cell) and not i18n.nothing_to_translate(cell.strip()):
                left.append(cell.strip())
    return left


# -------------------------------------------------------------- the Korean notebook


def source_of(cell: dict) -> str:
    text = cell.get("source", "")
    return "".join(text) if isinstance(text, list) else text


def variants(msgid: str, msgstr: str) -> list[tuple[str, str]]:
    """What a message looks like in the notebook's source, with its translation.

    Sphinx extracts some messages as the extensions rewrite them: sphinx-proof puts a
    theorem's title (its directive's argument) in parentheses, and "Proof. " before the
    first paragraph of a proof; in the source they have neither (the Korean build adds
    them again, in Korean)."""
    out = [(msgid, msgstr, False)]
    title = re.fullmatch(r"\((.+)\)", msgid, re.S)
    if title:
        korean = re.fullmatch(r"\((.+)\)", msgstr, re.S)
        if korean is None:
            raise TranslationError(f"a title in parentheses translated without them: {msgstr!r}")
        out.append((title.group(1), korean.group(1), True))
    if msgid.startswith(PROOF):
        if not msgstr.startswith(PROOF_KO):
            raise TranslationError(f"a proof's translation not starting {PROOF_KO!r}: {msgstr!r}")
        out.append((msgid.removeprefix(PROOF), msgstr.removeprefix(PROOF_KO).lstrip(), False))
    return out


PROOF, PROOF_KO = "Proof. ", "증명."
KEPT = ("\ue000", "\ue001")  # around the number of a unit kept as written


def translate_notebook(
    nb: dict, catalogue: dict[str, str], name: str, code: dict[str, str] | None = None
) -> dict:
    """The Korean source notebook of chapter `name` (a copy of `nb`), its markdown from
    `catalogue` and, given `code` (the chapter's code catalogue), its code cells' words."""
    nb = copy.deepcopy(nb)
    cells = nb["cells"]
    placed: dict[str, int] = {}
    kept: list[str] = []

    def keep(matched: str) -> str:
        kept.append(matched)
        return f"{KEPT[0]}{len(kept) - 1}{KEPT[1]}"

    texts = {k: source_of(c) for k, c in enumerate(cells) if c["cell_type"] == "markdown"}
    # Longest first: a short message ("Proof") never lands inside a longer one's place.
    for msgid in sorted(catalogue, key=len, reverse=True):
        msgstr = catalogue[msgid]
        count = 0
        for source, target, argument in variants(msgid, msgstr):
            if target == source:  # nothing to translate (an equation, a name): the text is
                target = keep  # left as written, and not English left over
            for k, text in texts.items():
                texts[k], n = place(text, source, target, argument)
                count += n
            if count:
                break
        for cell in cells:
            if cell["cell_type"] != "code":
                continue
            options = cell.get("metadata", {}).get("mystnb", {})
            figure, image = options.get("figure", {}), options.get("image", {})
            caption = figure.get("caption")
            if isinstance(caption, str) and caption.replace("\n", " ").strip() == msgid:
                figure["caption"] = msgstr
                count += 1
            if image.get("alt") == msgid:
                image["alt"] = msgstr
                count += 1
        placed[msgid] = count
    unplaced = [m for m, n in placed.items() if n == 0 and catalogue[m] != m]
    if unplaced:
        listed = "\n".join(f"  {m[:100]!r}" for m in unplaced)
        raise TranslationError(
            f"{name}: {len(unplaced)} message(s) of the catalogue found nowhere in the chapter "
            f"(is the catalogue stale? run `make translations`):\n{listed}"
        )
    for k, text in texts.items():
        left = english_left(text, set(catalogue.values()))
        if left:
            listed = "\n".join(f"  {line[:100]!r}" for line in left)
            raise TranslationError(
                f"{name}, markdown cell {k}: English left after translation (no message of "
                f"the catalogue matched it; run `make translations`):\n{listed}"
            )
        cells[k]["source"] = re.sub(
            f"{KEPT[0]}(\\d+){KEPT[1]}", lambda m: kept[int(m.group(1))], text
        )
    for cell in cells:
        options = cell.get("metadata", {}).get("mystnb", {})
        for key, field in (("figure", "caption"), ("image", "alt")):
            value = options.get(key, {}).get(field)
            if isinstance(value, str) and value.strip() and not _HANGUL.search(value):
                if not i18n.nothing_to_translate(value.replace("\n", " ").strip()):
                    raise TranslationError(f"{name}: {key} {field} left in English: {value!r}")
    first_code = next(c for c in cells if c["cell_type"] == "code")
    if source_of(first_code) != bootstrap_source():
        raise TranslationError(f"{name}: the first code cell is not the install cell")
    first_code["source"] = install_source()
    if code is not None:
        translate_code_cells(nb, code, name)
    for cell in cells:  # as nbformat writes them, whether or not the notebook is executed
        if cell["cell_type"] == "code":
            cell["source"] = source_of(cell).splitlines(keepends=True)
    return nb


def code_catalogue(name: str) -> dict[str, str]:
    """{msgid: msgstr} of chapter `name`'s code catalogue (with --catalogues, a preview:
    an untranslated message reads as its English)."""
    import code_i18n

    try:
        return code_i18n.catalogue_of(name, CODE_CATALOGUES, preview=PREVIEW)
    except ValueError as err:
        raise TranslationError(str(err)) from None


def translate_code_cells(nb: dict, catalogue: dict[str, str], name: str) -> None:
    """Every code cell of `nb` but the first (the install cell) in Korean, in place."""
    import code_i18n

    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    for cell in code[1:]:
        try:
            cell["source"] = code_i18n.translate_code(source_of(cell), catalogue)
        except KeyError as err:
            raise TranslationError(
                f"{name}, code cell {cell.get('id')}: a message of its code is not in "
                f"{shown(CODE_CATALOGUES)}/{Path(name).stem}.po (is the code catalogue stale? "
                f"run `make translations`): {str(err.args[0])[:100]!r}"
            ) from None


def ruff_format(notebooks: dict[str, dict]) -> None:
    """Format the code cells of the Korean notebooks in place with ruff, as `make lint`
    checks the repository's notebooks (editions/ included): a Korean string or comment is
    longer or shorter than the English, so the translated code is laid out again."""
    import subprocess

    ruff = Path(sys.executable).parent / "ruff"
    if not ruff.exists():
        raise TranslationError(f"{ruff} is missing: `make .venv/bin/.lint-installed` installs it")
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for name, nb in notebooks.items():
            code = [
                {
                    "cell_type": "code",
                    "id": c.get("id"),
                    "metadata": {},
                    "execution_count": None,
                    "outputs": [],
                    "source": source_of(c),
                }
                for c in nb["cells"]
                if c["cell_type"] == "code"
            ]
            files[name] = Path(tmp) / name
            files[name].write_text(
                json.dumps({**nb, "cells": code}, ensure_ascii=False), encoding="utf-8"
            )
        subprocess.run(
            [str(ruff), "format", "--quiet", "--config", str(ROOT / "pyproject.toml")]
            + [str(f) for f in files.values()],
            check=True,
        )
        for name, nb in notebooks.items():
            formatted = json.loads(files[name].read_text(encoding="utf-8"))["cells"]
            by_id = {c["id"]: source_of(c) for c in formatted}
            for cell in nb["cells"]:
                if cell["cell_type"] == "code":
                    cell["source"] = by_id[cell.get("id")].splitlines(keepends=True)


def korean_code(nb: dict, name: str, catalogue: dict[str, str]) -> dict[str, str]:
    """{cell id: Korean source} of chapter `name`'s code cells (`nb`, the English notebook):
    what the Korean notebooks carry (tests/test_colab_edition.py checks it)."""
    install = {c.get("id") for c in nb["cells"] if source_of(c) == bootstrap_source()}
    nb = copy.deepcopy(nb)
    translate_code_cells(nb, catalogue, name)
    ruff_format({name: nb})
    return {  # every code cell but the install cell (install_source replaces it)
        c.get("id"): source_of(c)
        for c in nb["cells"]
        if c["cell_type"] == "code" and c.get("id") not in install
    }


def korean_notebooks() -> dict[str, dict]:
    """{file name: Korean source notebook} of every chapter (the English outputs still in
    it: `with_korean_outputs` replaces them)."""
    out = {}
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        out[path.name] = translate_notebook(
            nb, messages(path.name), path.name, code_catalogue(path.name)
        )
    ruff_format(out)
    return out


# ------------------------------------------------------------------ the outputs


def is_glue(output: dict) -> bool:
    data = output.get("data", {})
    return bool(data) and all(k.startswith(GLUE_PREFIX) for k in data)


def stored_cells(name: str) -> dict[str, dict]:
    """{cell id: code cell} of the committed Korean Colab notebook `name` ({} if none), each
    glue cell with its glued values back (the Colab edition shows no glue output: they are
    kept beside it, in editions/ko/glue/NN_topic.json, {cell id: outputs})."""
    path, glue_path = COLAB / name, GLUE / Path(name).with_suffix(".json").name
    if not path.exists():
        return {}
    stored = json.loads(path.read_text(encoding="utf-8"))
    glue = json.loads(glue_path.read_text(encoding="utf-8")) if glue_path.exists() else {}
    cells = {}
    for cell in stored["cells"]:
        if cell["cell_type"] == "code" and cell.get("id"):
            cell["outputs"] = cell.get("outputs", []) + glue.get(cell["id"], [])
            cells[cell["id"]] = cell
    return cells


EXECUTED = ROOT / "_build" / "ko-executed"  # each Korean notebook as last executed


def executed_before(name: str) -> dict | None:
    """The Korean notebook `name` as this machine last executed it (a later step that failed,
    the build say, loses no execution), or None."""
    path = EXECUTED / name
    return json.loads(path.read_text(encoding="utf-8")) if name and path.is_file() else None


def attach_outputs(nb: dict, cells: dict[str, dict]) -> list[str]:
    """Give every code cell of the Korean notebook `nb` the outputs that the committed Korean
    Colab notebook's cell under its id has (`cells`, `stored_cells`), where its source is
    the same; return the ids of the cells that have none (new, or their code changed)."""
    cached = executed_before(nb.get("metadata", {}).get(META, {}).get("name", ""))
    if cached is not None:
        ours = {c.get("id"): c for c in nb["cells"] if c["cell_type"] == "code"}
        theirs = {c.get("id"): c for c in cached["cells"] if c["cell_type"] == "code"}
        if ours.keys() == theirs.keys() and all(
            source_of(ours[k]) == source_of(theirs[k]) for k in ours
        ):  # executed as it is now: those outputs (the whole notebook, or none of it)
            cells = theirs
    missing = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        old = cells.get(cell.get("id"))
        if old is None or source_of(old) != source_of(cell):
            missing.append(cell.get("id"))
            continue
        cell["outputs"] = old.get("outputs", [])
        cell["execution_count"] = old.get("execution_count")
    return missing


def execute(nb: dict, name: str, stored: dict[str, dict]) -> float:
    """Execute the Korean notebook `nb` in place as `make execute` executes a chapter
    (scripts/execute_notebooks.py), in Korean; print what changed; return the seconds."""
    import execute_notebooks
    import nbformat

    node = nbformat.reads(json.dumps(nb), as_version=4)
    elapsed = execute_notebooks.run(node, {"ATTENTION_BOOK_LANGUAGE": LANGUAGE})
    if stored:
        old = nbformat.reads(json.dumps({**nb, "cells": list(stored.values())}), as_version=4)
        kept = execute_notebooks.keep_same_pictures(old, node)
        changes = execute_notebooks.describe_changes(old, node)
    else:
        kept, changes = 0, ["(no Korean edition stored before)"]
    nb.clear()
    nb.update(json.loads(nbformat.writes(node)))  # sources and texts as lists of lines
    EXECUTED.mkdir(parents=True, exist_ok=True)
    (EXECUTED / name).write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
    where = f"{shown(COLAB)}/{name}"
    if kept:
        print(f"{where}: {kept} figure(s) kept as stored (the same picture)")
    n = sum(line.startswith("cell ") for line in changes)
    print(f"{where}: executed in Korean in {elapsed:.1f} s; {n or 'no'} output(s) changed")
    for line in changes[:60]:
        print(f"  {line}")
    return elapsed


def with_korean_outputs(notebooks: dict[str, dict], run: str | set[str]) -> dict[str, float]:
    """Give each Korean notebook its Korean outputs, in place: the stored ones where its code
    is unchanged; `run` says what to execute: "changed" (the chapters with a code cell
    whose stored outputs cannot be reused), "never" (such a chapter stops it: the --check),
    "all", or a set of file names (those, and the changed ones). {name: seconds executed}."""
    times = {}
    for name, nb in notebooks.items():
        stored = stored_cells(name)
        wanted = run == "all" or (isinstance(run, set) and name in run)
        if run != "never" and not wanted:  # may reuse this machine's last execution
            nb.setdefault("metadata", {})[META] = {"name": name}
        missing = attach_outputs(nb, stored)
        nb["metadata"].pop(META, None)
        if missing and run == "never":
            raise TranslationError(
                f"{name}: {len(missing)} code cell(s) of the Korean notebook have no stored "
                f"Korean outputs (new, or their Korean code changed: {missing[:8]}); run "
                f"`{COMMAND}`, which executes that chapter in Korean"
            )
        if missing and not wanted:
            print(f"{name}: {len(missing)} code cell(s) changed in Korean ({missing[:5]}...)")
        if missing or wanted:
            times[name] = execute(nb, name, stored)
    if times:
        total = sum(times.values())
        print(f"Korean notebooks executed: {len(times)} in {total:.1f} s")
    return times


# ------------------------------------------------------------------ the build


def stage(target: Path, notebooks: dict[str, dict]) -> Path:
    """The Korean book's sources in `target`: the book's pages and catalogues (without the
    notebooks' catalogues) and the Korean notebooks."""
    target.mkdir(parents=True, exist_ok=True)
    config = _book_script().edition_config(LANGUAGE, student=False)
    (target / "_config.yml").write_text(
        yaml.safe_dump(config, allow_unicode=True, sort_keys=False), encoding="utf-8"
    )
    shutil.copy(ROOT / "_toc.yml", target)
    shutil.copytree(ROOT / "book", target / "book")
    shutil.copytree(
        ROOT / "locales",
        target / "locales",
        ignore=lambda folder, names: [
            n for n in names if n.endswith(".mo") or (n == "notebooks" and "LC_MESSAGES" in folder)
        ],
    )
    (target / "notebooks").mkdir()
    for name, nb in notebooks.items():
        (target / "notebooks" / name).write_text(
            json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    return target


def generate(out: Path, run: str | set[str] = "never") -> dict[str, bytes]:
    """Build the Korean Colab edition in `out`: {file name: bytes} of its notebooks, and
    {"glue/NN_topic.json": bytes} of their glued values (`glue_of`). `run`: which chapters
    to execute in Korean (`with_korean_outputs`; "never": only the stored outputs)."""
    import colab_edition

    notebooks = korean_notebooks()
    with_korean_outputs(notebooks, run)
    source = stage(out / "source", notebooks)
    built = colab_edition.generate(out / "build", root=source)
    glue = {f"glue/{Path(n).stem}.json": glue_of(notebooks[n]) for n in built}
    return {**built, **glue}


def glue_of(source: dict) -> bytes:
    """The glued values of a Korean notebook, {cell id: outputs}: the Colab edition drops a
    glue cell's outputs (values for the site, which JupyterLab draws as an empty band), and
    the Korean book (scripts/book.py) and the tests read them from here."""
    glue = {
        cell["id"]: [o for o in cell.get("outputs", []) if is_glue(o)]
        for cell in source["cells"]
        if cell["cell_type"] == "code" and any(is_glue(o) for o in cell.get("outputs", []))
    }
    return (json.dumps(glue, indent=1, ensure_ascii=False, sort_keys=True) + "\n").encode()


def _split(fresh: dict[str, bytes]) -> tuple[dict[str, bytes], dict[str, bytes]]:
    notebooks = {n: d for n, d in fresh.items() if not n.startswith("glue/")}
    glue = {n.removeprefix("glue/"): d for n, d in fresh.items() if n.startswith("glue/")}
    return notebooks, glue


def stale(fresh: dict[str, bytes]) -> list[str]:
    """What differs between the committed Korean editions (and glued values) and fresh
    ones, one line each."""
    import colab_edition
    import student_edition

    notebooks, glue = _split(fresh)
    committed = {p.name: p.read_bytes() for p in sorted(GLUE.glob("*.json"))}
    lines = [
        f"stale: glue/{n}"
        for n in sorted(set(glue) | set(committed))
        if glue.get(n) != committed.get(n)
    ]
    return (
        colab_edition.differences(notebooks, COLAB)
        + colab_edition.differences(student_edition.generate(notebooks), STUDENT)
        + lines
    )


def finish(fresh: dict[str, bytes], check: bool) -> int:
    import student_edition

    notebooks, glue = _split(fresh)
    if not notebooks:
        raise SystemExit("no chapter notebooks were converted")
    students = student_edition.generate(notebooks)  # before writing: a failure writes nothing
    where = f"{shown(COLAB)}/, {shown(STUDENT)}/ and {shown(GLUE)}/"
    if check:
        diff = stale(fresh)
        if diff:
            print("\n".join(diff))
            print(f"The Korean Colab or student edition is stale: run `{COMMAND}`, commit {where}")
            return 1
        print(f"{where} are current ({len(notebooks)} chapters)")
        return 0
    student_edition.write(notebooks, COLAB)
    student_edition.write(students, STUDENT)
    GLUE.mkdir(parents=True, exist_ok=True)
    for path in GLUE.glob("*.json"):
        if path.name not in glue:
            path.unlink()
    for name, data in glue.items():
        if not (GLUE / name).exists() or (GLUE / name).read_bytes() != data:
            (GLUE / name).write_bytes(data)
    import colab_edition

    colab_edition.record_digest("ko")  # what make test compares (editions/ko/digest.json)
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report a stale edition")
    parser.add_argument("--source", action="store_true", help="write the Korean source notebooks")
    parser.add_argument(
        "--execute",
        nargs="*",
        metavar="NOTEBOOK",
        help="execute the Korean notebooks (all, or these chapters) before writing",
    )
    parser.add_argument(
        "--catalogues",
        type=Path,
        metavar="DIR",
        help="a preview: the catalogues from DIR/notebooks and DIR/code (untranslated code "
        "stays English)",
    )
    args = parser.parse_args(argv)
    if args.catalogues is not None:
        global CATALOGUES, CODE_CATALOGUES, PREVIEW
        folder = args.catalogues.resolve()
        CATALOGUES = folder / "notebooks" if (folder / "notebooks").is_dir() else folder
        CODE_CATALOGUES = folder / "code" if (folder / "code").is_dir() else CODE_CATALOGUES
        PREVIEW = True
    run: str | set[str] = "never" if args.check else "changed"
    if args.execute is not None:
        run = {Path(n).name for n in args.execute} if args.execute else "all"
    try:
        if args.source:
            target = ROOT / "_build" / "ko-source"
            shutil.rmtree(target, ignore_errors=True)
            stage(target, korean_notebooks())
            print(f"Korean source notebooks: {target / 'notebooks'}")
            return 0
        with tempfile.TemporaryDirectory() as tmp:
            fresh = generate(Path(tmp), run)
    except TranslationError as err:
        if args.check:
            print(f"The Korean editions are stale: {err}")
            return 1
        raise SystemExit(f"The Korean editions cannot be made: {err}") from None
    return finish(fresh, args.check)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
