"""Build the book's HTML (used by `make book`; `--student` builds the student edition).

`--pages DIR` builds nothing: it puts the two built editions together as GitHub Pages
publishes them (`make pages`; the Pages workflow), the book at the root of DIR and the
student edition under DIR/student/.

Runs Jupyter Book with warnings as errors and nitpicky references, then serves MathJax 3
from the site itself: the npm package `mathjax` (installed into node_modules by
`make book`) is copied into _static/mathjax, where `mathjax_path` in _config.yml points.
A student who downloads the built site therefore sees typeset formulas with no network.
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


def stage_student_edition(stage: Path) -> Path:
    """Copy the book's sources to `stage`, with every solution removed; its Colab and
    Binder buttons open the student notebooks (editions/student/)."""
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["title"] += " (student edition)"
    config["sphinx"].setdefault("config", {})["book_launch_edition"] = STUDENT_NOTEBOOKS
    # "Edit on GitHub" would open the chapter's source notebook, solutions included.
    config.setdefault("html", {})["use_edit_page_button"] = False
    (stage / "_config.yml").write_text(yaml.safe_dump(config, allow_unicode=True, sort_keys=False))
    shutil.copy(ROOT / "_toc.yml", stage)
    shutil.copytree(ROOT / "book", stage / "book")
    (stage / "notebooks").mkdir()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nbformat.write(
            strip_solutions(nbformat.read(path, as_version=4)), stage / "notebooks" / path.name
        )
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


def build(student: bool) -> Path:
    # Jupyter Book writes to PATH_OUTPUT/_build/html.
    source, out = ROOT, ROOT
    if student:
        out = ROOT / "_build" / "student"
        source = stage_student_edition(out / "source")
    args = ["build", str(source), "--builder", "html", "-W", "-n", "--keep-going"]
    args += ["--path-output", str(out)]
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    subprocess.run([str(jupyter_book), *args], check=True)
    html = out / "_build" / "html"
    sync_static(source / "book" / "_static", html)
    copy_mathjax(html)
    return html


BOOK_HTML = ROOT / "_build" / "html"
STUDENT_HTML = ROOT / "_build" / "student" / "_build" / "html"
STUDENT_PATH = "student"  # where the student edition is published, beside the book


def assemble_pages(target: Path) -> Path:
    """The site as published: the book in `target`, the student edition in target/student/."""
    for html, command in ((BOOK_HTML, "make book"), (STUDENT_HTML, "make student")):
        if not (html / "index.html").exists():
            sys.exit(f"{html.relative_to(ROOT)} is not built: run `{command}` first")
    if (BOOK_HTML / STUDENT_PATH).exists():
        sys.exit(f"the book has its own {STUDENT_PATH}/: the student edition cannot go there")
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(BOOK_HTML, target)
    shutil.copytree(STUDENT_HTML, target / STUDENT_PATH)
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--student", action="store_true", help="build without solutions")
    parser.add_argument(
        "--pages", type=Path, metavar="DIR", help="put both built editions into DIR, as published"
    )
    args = parser.parse_args()
    if args.pages is not None:
        site = assemble_pages(args.pages.resolve())
        print(f"Site: {site / 'index.html'}; student edition: {site / STUDENT_PATH / 'index.html'}")
        return 0
    html = build(args.student)
    print(f"HTML: {html / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
