"""The instructor's page, generated from book/exercises.yml (a local Sphinx extension).

- ``exercise-table``: a directive that writes, for every chapter listed in
  book/exercises.yml, a table of its exercises: a link to each (numbered as on the
  chapter's page), the one-line topic, the difficulty, the self-checks that grade it and
  the estimated time. The list is the single source: tests/test_exercises.py checks it
  against the chapters and the self-checks, and scripts/grade.py grades from it.
- ``book-value``: a role that writes the value of a constant of the code, so that the
  page quotes the numbers the code uses: ``{book-value}`helpers.checks.core.RTOL_FLOAT64```
  or ``{book-value}`grade.DEFAULT_CELL_TIMEOUT``` (scripts/grade.py).

Both register book/exercises.yml (and the modules they read) as dependencies of the page,
so an incremental build rebuilds it when they change.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import sys
from pathlib import Path

import yaml
from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList

LIST = "book/exercises.yml"
DIFFICULTIES = ("warm-up", "core", "challenge")
STUDENT_EDITION = "editions/student"


def load(srcdir: Path) -> list[dict]:
    """The chapters of book/exercises.yml, each {"notebook": stem, "exercises": [...]}."""
    return yaml.safe_load((srcdir / LIST).read_text())["chapters"]


def _hours(minutes: int) -> str:
    return f"{minutes} min" if minutes < 60 else f"{minutes / 60:.1f} h".replace(".0 h", " h")


def colab_url(env, stem: str) -> str:
    """The Colab link of a chapter's student notebook, editions/student/<stem>.ipynb."""
    options = env.config.html_theme_options
    repository = options["repository_url"].removeprefix("https://github.com/")
    branch = options.get("repository_branch") or "main"
    colab = options.get("launch_buttons", {}).get("colab_url", "https://colab.research.google.com")
    return f"{colab}/github/{repository}/blob/{branch}/{STUDENT_EDITION}/{stem}.ipynb"


def table_markdown(chapter: dict, colab: str) -> list[str]:
    """The MyST list-table of one chapter's exercises, and the link to its student notebook."""
    stem, exercises = chapter["notebook"], chapter["exercises"]
    checked = sum(1 for e in exercises if e["checks"])
    total = sum(e["minutes"] for e in exercises)
    title = (
        f"{{doc}}`/notebooks/{stem}`: {len(exercises)} exercises, {checked} with self-checks, "
        f"about {_hours(total)}"
    )
    lines = [
        f":::{{list-table}} {title}",
        ":header-rows: 1",
        ":widths: 14 44 11 23 8",
        "",
        "* - Exercise",
        "  - Topic",
        "  - Difficulty",
        "  - Graded by",
        "  - Time",
    ]
    for e in exercises:
        if e["difficulty"] not in DIFFICULTIES:
            raise ValueError(f"{LIST}: {e['label']}: difficulty must be one of {DIFFICULTIES}")
        checks = ", ".join(f"`{c['check']}({c['function']})`" for c in e["checks"]) or "by hand"
        lines += [
            f"* - {{ref}}`{e['label']}`",
            f"  - {e['topic']}",
            f"  - {e['difficulty']}",
            f"  - {checks}",
            f"  - {e['minutes']} min",
        ]
    return [
        *lines,
        ":::",
        "",
        f"The student notebook of this chapter: [open it in Colab]({colab}).",
        "",
    ]


class ExerciseTable(Directive):
    """``exercise-table``: every chapter's exercises, one table per chapter."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        env = self.state.document.settings.env
        srcdir = Path(env.srcdir)
        env.note_dependency(str(srcdir / LIST))
        env.note_dependency(__file__)  # the tables' layout is decided here too
        lines: list[str] = []
        for chapter in load(srcdir):
            lines += table_markdown(chapter, colab_url(env, chapter["notebook"]))
        container = nodes.container(classes=["instructors-exercises"])
        self.state.nested_parse(StringList(lines, source=LIST), self.content_offset, container)
        for literal in container.findall(nodes.literal):
            break_after_parenthesis(literal)
        return [container]


def break_after_parenthesis(literal: nodes.literal) -> None:
    """Let ``check_x(my_x)`` break after its "(" in HTML (a ``<wbr>``), so that the
    "Graded by" column does not push the table wider than the column or a phone."""
    text = literal.astext()
    head, paren, tail = text.partition("(")
    if not (paren and tail) or len(literal.children) != 1:
        return
    wbr = nodes.raw("", "<wbr>", format="html")
    literal.children = []
    literal += [nodes.Text(head + paren), wbr, nodes.Text(tail)]


def _value(path: str, srcdir: Path) -> tuple[object, Path]:
    """The constant named by ``module.NAME``; ``grade`` is scripts/grade.py."""
    module_name, _, name = path.rpartition(".")
    if module_name == "grade":
        # The student edition is built from a copy of the book's sources without
        # scripts/: then the repository is where the (editable) helpers package lives.
        repository = Path(importlib.import_module("helpers").__file__).resolve().parents[1]
        file = next(
            (d / "scripts" / "grade.py" for d in (srcdir, repository) if (d / "scripts").is_dir()),
            srcdir / "scripts" / "grade.py",
        )
        spec = importlib.util.spec_from_file_location("_book_grade", file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up there
        # grade.py imports its sibling modules (grade_wire, ...) from its own folder
        sys.path.insert(0, str(file.parent))
        try:
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(str(file.parent))
    else:
        module = importlib.import_module(module_name)
        file = Path(module.__file__)
    return getattr(module, name), file


def book_value_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``{book-value}`module.NAME```: the constant's value (numbers as ``%g``)."""
    env = inliner.document.settings.env
    try:
        value, file = _value(text, Path(env.srcdir))
    except (ImportError, AttributeError, OSError) as err:
        msg = inliner.reporter.error(f"book-value: cannot read {text}: {err}", line=lineno)
        return [inliner.problematic(rawtext, rawtext, msg)], [msg]
    env.note_dependency(str(file))
    if isinstance(value, float) and not math.isclose(value, round(value)):
        shown = f"{value:g}"
    elif isinstance(value, float):
        shown = str(round(value))
    else:
        shown = str(value)
    return [nodes.Text(shown)], []


def setup(app):
    app.add_directive("exercise-table", ExerciseTable)
    app.add_role("book-value", book_value_role)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
