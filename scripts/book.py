"""Build the book's HTML (used by `make book`; `--student` builds the student edition).

`--pages DIR` builds nothing: it puts the two built editions together as GitHub Pages
publishes them (`make pages`; the Pages workflow), the book at the root of DIR and the
student edition under DIR/student/.

Runs Jupyter Book with warnings as errors and nitpicky references, then serves MathJax 3
from the site itself: the npm package `mathjax` (installed into node_modules by
`make book`) is copied into _static/mathjax, where `mathjax_path` in _config.yml points.
A student who downloads the built site therefore sees typeset formulas with no network.

Then it cuts the theme's Font Awesome fonts down to the icons the site uses
(`subset_icon_fonts`, served by book/_static/icons.css; the theme's 1.49 MB fontawesome.js
is not loaded, see book/_templates/static/webpack-macros.html).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parent.parent
MATHJAX = ROOT / "node_modules" / "mathjax" / "es5"


def copy_mathjax(html: Path) -> None:
    """Copy MathJax into html/_static/mathjax unless that version is already there."""
    version = json.loads((MATHJAX.parent / "package.json").read_text())["version"]
    target = html / "_static" / "mathjax"
    stamp = target / ".version"
    if stamp.exists() and stamp.read_text() == version:
        return
    if not (MATHJAX / "tex-mml-chtml.js").exists():
        sys.exit("MathJax is missing from node_modules: run `npm ci` (make book does)")
    shutil.rmtree(target, ignore_errors=True)
    # The speech-rule engine (sre) is only loaded on request; leave it out to halve the size.
    shutil.copytree(MATHJAX, target, ignore=shutil.ignore_patterns("sre", "*.map"))
    stamp.write_text(version)


FONTS = "_static/vendor/fontawesome/webfonts"
ICON_FONTS = ("fa-solid-900", "fa-regular-400", "fa-brands-400")
# A rule of Font Awesome's stylesheet naming the glyph of its icon classes:
# .fa-magnifying-glass:before,.fa-search:before{content:"\f002"}
_ICON_RULE = re.compile(r'((?:\.fa-[a-z0-9-]+:(?:before|after),?)+)\{content:"(\\[0-9a-f]+|.)"\}')
_ICON_CLASS = re.compile(r"\bfa-[a-z0-9-]+")
# A glyph of the private use area named outside those rules: written as is or as \fxxx
_GLYPH = re.compile(r"[\ue000-\uf8ff]|\\[ef][0-9a-f]{3}\b")


THEME_CSS = "_static/styles/pydata-sphinx-theme.css"


def theme_css() -> str:
    """The theme's stylesheet as the installed pydata-sphinx-theme ships it."""
    import pydata_sphinx_theme

    theme = Path(pydata_sphinx_theme.__file__).parent / "theme" / "pydata_sphinx_theme"
    return (theme / "static" / "styles" / "pydata-sphinx-theme.css").read_text(encoding="utf-8")


def _codepoint(text: str) -> int:
    return int(text[1:], 16) if text.startswith("\\") else ord(text)


def icon_codepoints(html: Path) -> set[int]:
    """The Font Awesome glyphs the built site can show: every icon class named in a page
    or a script (one adds fa-xmark to the search dialog), through the stylesheet's rules,
    and every glyph the stylesheets name directly (the admonitions' marks, --pst-icon-*)."""
    styles = [theme_css()]  # the theme's own (the site's copy is trimmed)
    styles += [
        p.read_text(encoding="utf-8")
        for p in (html / "_static").rglob("*.css")
        if p != html / THEME_CSS
    ]
    by_class: dict[str, int] = {}
    direct: set[int] = set()
    for css in styles:
        for selectors, glyph in _ICON_RULE.findall(css):
            for name in re.findall(r"\.(fa-[a-z0-9-]+)", selectors):
                by_class[name] = _codepoint(glyph)
        rest = _ICON_RULE.sub("", css)
        direct |= {_codepoint(g) for g in _GLYPH.findall(rest)}
    named: set[str] = set()
    for path in [*html.rglob("*.html"), *(html / "_static").rglob("*.js")]:
        if "mathjax" not in path.parts:
            if path.name == "fontawesome.js":  # the theme's own, no longer loaded
                continue
            named |= set(_ICON_CLASS.findall(path.read_text(encoding="utf-8", errors="ignore")))
    return direct | {by_class[n] for n in named if n in by_class}


def subset_icon_fonts(html: Path) -> dict[str, int]:
    """Write FONTS/NAME.book.woff, each theme font with only the glyphs the site uses."""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    codepoints = icon_codepoints(html)
    sizes = {"css": trim_theme_css(html, codepoints)}
    for name in ICON_FONTS:
        font = TTFont(html / FONTS / f"{name}.ttf")
        options = subset.Options()
        options.flavor = "woff"
        options.layout_features = ["*"]
        subsetter = subset.Subsetter(options)
        subsetter.populate(unicodes=codepoints)
        subsetter.subset(font)
        target = html / FONTS / f"{name}.book.woff"
        font.flavor = "woff"
        font.save(target)
        sizes[name] = target.stat().st_size
    return sizes


def trim_theme_css(html: Path, codepoints: set[int]) -> int:
    """Write the theme's stylesheet without Font Awesome's rules for the icons the site
    does not use (about 2,000 of them, 90 kB of its 397 kB); returns its new size.

    It is cut from the theme's own file (in the installed package), so a second build
    gives the same bytes."""
    css = theme_css()

    def keep(match: re.Match) -> str:
        return match.group(0) if _codepoint(match.group(2)) in codepoints else ""

    trimmed = _ICON_RULE.sub(keep, css)
    (html / THEME_CSS).write_text(trimmed, encoding="utf-8")
    return len(trimmed.encode("utf-8"))


SOLUTION_START = re.compile(r"```\{solution-start\}[^\n]*\n(?::[^\n]*\n)*```[ \t]*\n?")
SOLUTION_END = re.compile(r"```\{solution-end\}[ \t]*\n```[ \t]*\n?")


def strip_solutions(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Remove every solution: the text and the cells from solution-start to solution-end.

    (sphinx-exercise's own `hide_solutions` fails on solutions split across notebook
    cells, and would leave their code cells on the page.)
    """
    cells, inside = [], False
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            if not inside:
                cells.append(cell)
            continue
        text, kept = cell.source, []
        while text:
            marker = (SOLUTION_END if inside else SOLUTION_START).search(text)
            if marker is None:
                if not inside:
                    kept.append(text)
                break
            if not inside:
                kept.append(text[: marker.start()])
            text, inside = text[marker.end() :], not inside
        if "".join(kept).strip():
            cells.append(nbformat.from_dict({**cell, "source": "".join(kept).rstrip() + "\n"}))
    if inside:
        raise ValueError("a solution-start has no matching solution-end")
    nb.cells = cells
    return nb


STUDENT_NOTEBOOKS = "editions/student"  # what the student edition's launch buttons open


TITLES = {"en": ("", " (student edition)"), "ko": ("어텐션과 트랜스포머의 수학", " (학생판)")}


def edition_config(language: str, student: bool) -> dict:
    """_config.yml for one edition: the Korean one is the same book with `language: ko`
    (its text comes from locales/ko/LC_MESSAGES, book/_ext/i18n.py)."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    title, suffix = TITLES[language]
    config["title"] = (title or config["title"]) + (suffix if student else "")
    sphinx = config["sphinx"].setdefault("config", {})
    if language != "en":
        sphinx["language"] = language
        sphinx["book_language"] = language
        # The launch buttons open the Korean notebooks (scripts/ko_edition.py): the book's
        # editions/ko/colab, its student edition's editions/ko/student (book/_ext/book_site.py
        # tags the student edition by this folder).
        edition = "student" if student else "colab"
        sphinx["book_launch_edition"] = f"editions/{language}/{edition}"
    # Jupyter Book finds local extensions relative to the configuration file, which a
    # Korean build writes elsewhere.
    extensions = config["sphinx"].get("local_extensions", {})
    for name, folder in extensions.items():
        extensions[name] = str(ROOT / folder)
    return config


def with_translated_code(nb: nbformat.NotebookNode, name: str, language: str):
    """The chapter `nb` for a translated book: its markdown cells as they are (Sphinx
    translates them from locales/LANGUAGE), and every code cell, source and outputs, the
    one of the translated Colab edition (editions/LANGUAGE/colab, scripts/ko_edition.py:
    the code in that language and the outputs of its execution) with the same id, each
    glue cell with the glued values kept beside it (editions/LANGUAGE/glue/). So the Korean book
    shows Korean comments, printed text and figures, and its glued numbers are those of
    the Korean execution."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import ko_edition

    path = ROOT / "editions" / language / "colab" / name
    if not path.exists():
        sys.exit(f"{path.relative_to(ROOT)} is missing: run `make edition`")
    cells = ko_edition.stored_cells(name)
    missing = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        translated = cells.get(cell.get("id"))
        if translated is None:
            missing.append(cell.get("id"))
            continue
        cell.source = ko_edition.source_of(translated)
        cell.outputs = (
            nbformat.reads(
                json.dumps({**nbformat.v4.new_notebook(), "cells": [translated]}), as_version=4
            )
            .cells[0]
            .outputs
        )
        cell.execution_count = translated.get("execution_count")
    if missing:
        sys.exit(
            f"{path.relative_to(ROOT)} has no code cell {missing[:5]} of the chapter: it is stale "
            "(run `make edition`)"
        )
    return nb


def _write_if_changed(target: Path, data: bytes) -> None:
    """Write `target` only when its bytes change: Sphinx rebuilds a page whose source is
    newer than its last build, so an unchanged file keeps its time."""
    if not target.exists() or target.read_bytes() != data:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def _sync_tree(source: Path, target: Path, skip=lambda path: False) -> None:
    """`target` made a copy of `source` (changed files only; files gone removed)."""
    wanted = set()
    for path in source.rglob("*"):
        if path.is_file() and not skip(path):
            rel = path.relative_to(source)
            wanted.add(rel)
            if not (target / rel).exists() or (target / rel).read_bytes() != path.read_bytes():
                (target / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target / rel)
    for path in list(target.rglob("*")) if target.exists() else []:
        if path.is_file() and path.relative_to(target) not in wanted:
            path.unlink()


def stage_translated_book(stage: Path, language: str) -> Path:
    """The translated book's sources in `stage`: the book's pages and catalogues, and the
    chapters with their code cells in that language (`with_translated_code`). Only what
    changed is written, so that the build stays incremental."""
    stage.mkdir(parents=True, exist_ok=True)
    config = yaml.safe_dump(edition_config(language, False), allow_unicode=True, sort_keys=False)
    _write_if_changed(stage / "_config.yml", config.encode())
    _write_if_changed(stage / "_toc.yml", (ROOT / "_toc.yml").read_bytes())
    _sync_tree(ROOT / "book", stage / "book")
    _sync_tree(ROOT / "locales", stage / "locales", skip=lambda p: p.suffix == ".mo")
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = with_translated_code(nbformat.read(path, as_version=4), path.name, language)
        _write_if_changed(stage / "notebooks" / path.name, nbformat.writes(nb).encode() + b"\n")
    return stage


def stage_student_edition(stage: Path, language: str = "en") -> Path:
    """Copy the book's sources to `stage`, with every solution removed; its Colab and
    Binder buttons open the student notebooks (editions/student/). A translated one has
    its chapters' code cells in that language (`with_translated_code`)."""
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    config = edition_config(language, student=True)
    config["sphinx"].setdefault("config", {}).setdefault("book_launch_edition", STUDENT_NOTEBOOKS)
    # "Edit on GitHub" would open the chapter's source notebook, solutions included.
    config.setdefault("html", {})["use_edit_page_button"] = False
    (stage / "_config.yml").write_text(yaml.safe_dump(config, allow_unicode=True, sort_keys=False))
    shutil.copy(ROOT / "_toc.yml", stage)
    shutil.copytree(ROOT / "book", stage / "book")
    shutil.copytree(ROOT / "locales", stage / "locales", ignore=shutil.ignore_patterns("*.mo"))
    (stage / "notebooks").mkdir()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        if language != "en":
            nb = with_translated_code(nb, path.name, language)
        nbformat.write(strip_solutions(nb), stage / "notebooks" / path.name)
    return stage


def sync_static(static: Path, html: Path) -> None:
    """Copy the book's own static files into the site, replacing older copies.

    Sphinx 7.4 copies _static files only when it writes pages, and keeps an existing
    copy, so after editing only explorer.js or explorer.css an incremental build would
    serve the old file.
    """
    for source in static.rglob("*"):
        target = html / "_static" / source.relative_to(static)
        if source.is_file() and (not target.exists() or target.read_bytes() != source.read_bytes()):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)


def site_code_digest() -> str:
    """A digest of the local extensions and templates: Sphinx rewrites no page when only
    they change (an html-page-context handler of book/_ext/book_site.py, say)."""
    import hashlib

    files = sorted((ROOT / "book" / "_ext").glob("*.py")) + sorted(
        p for p in (ROOT / "book" / "_templates").rglob("*") if p.is_file()
    )
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def build(student: bool, language: str = "en") -> Path:
    # Jupyter Book writes to PATH_OUTPUT/_build/html.
    source, out = ROOT, edition_root(language, student)
    args = ["build", str(source), "--builder", "html", "-W", "-n", "--keep-going"]
    if student:
        source = stage_student_edition(out / "source", language)
        args[1] = str(source)
    elif language != "en":
        # the chapters' code cells in the language (editions/ko/colab: scripts/ko_edition.py)
        source = stage_translated_book(out / "source", language)
        args[1] = str(source)
    args += ["--path-output", str(out)]
    html = out / "_build" / "html"
    stamp, digest = html / ".site-code", site_code_digest()
    if not stamp.exists() or stamp.read_text() != digest:
        args.append("--all")  # every page, written by the current extensions
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    subprocess.run([str(jupyter_book), *args], check=True)
    stamp.write_text(digest)
    sync_static(source / "book" / "_static", html)
    copy_mathjax(html)
    subset_icon_fonts(html)
    return html


def edition_root(language: str, student: bool) -> Path:
    """Where Jupyter Book writes an edition (its HTML is in _build/html below it)."""
    root = ROOT if language == "en" else ROOT / "_build" / language
    return (
        root / "_build" / "student"
        if (student and language == "en")
        else (root / "student" if student else root)
    )


BOOK_HTML = ROOT / "_build" / "html"
STUDENT_HTML = ROOT / "_build" / "student" / "_build" / "html"
KO_HTML = ROOT / "_build" / "ko" / "_build" / "html"
KO_STUDENT_HTML = ROOT / "_build" / "ko" / "student" / "_build" / "html"
STUDENT_PATH = "student"  # where the student edition is published, beside the book
KO_PATH = "ko"  # where the Korean book is published, beside the English one


def assemble_pages(target: Path) -> Path:
    """The site as published: the book in `target`, the student edition in target/student/,
    the Korean book in target/ko/ and its student edition in target/ko/student/."""
    editions = (
        (BOOK_HTML, "", "make book"),
        (STUDENT_HTML, STUDENT_PATH, "make student"),
        (KO_HTML, KO_PATH, "make book"),
        (KO_STUDENT_HTML, f"{KO_PATH}/{STUDENT_PATH}", "make student"),
    )
    for html, _, command in editions:
        if not (html / "index.html").exists():
            sys.exit(f"{html.relative_to(ROOT)} is not built: run `{command}` first")
    for html, _, _ in editions[:3:2]:
        if (html / STUDENT_PATH).exists() or (html / KO_PATH).exists():
            sys.exit(
                f"{html} has its own {STUDENT_PATH}/ or {KO_PATH}/: an edition cannot go there"
            )
    shutil.rmtree(target, ignore_errors=True)
    for html, path, _ in editions:
        shutil.copytree(html, target / path, dirs_exist_ok=True)
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--student", action="store_true", help="build without solutions")
    parser.add_argument("--lang", default="en", choices=("en", "ko"), help="the edition's language")
    parser.add_argument(
        "--pages", type=Path, metavar="DIR", help="put both built editions into DIR, as published"
    )
    args = parser.parse_args()
    if args.pages is not None:
        site = assemble_pages(args.pages.resolve())
        print(f"Site: {site / 'index.html'}; student edition: {site / STUDENT_PATH / 'index.html'}")
        return 0
    html = build(args.student, args.lang)
    print(f"HTML: {html / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
