"""The glue cells of a chapter: which code a reader sees, and which is only glue plumbing.

A chapter quotes its numbers in the prose with ``{glue:text}`` (helpers.glue). The calls
that store them are bookkeeping, not the computation the reader came for, so they live in
*glue cells*: a code cell right after the computation, holding only ``glue(...)`` calls,
which the site removes (the ``remove-cell`` tag) and which Jupyter and Colab show
collapsed to its first line, a ``# @title`` comment (``jupyter.source_hidden``, honoured
by JupyterLab, and ``cellView: form``, Colab's form view with its "Show code" link). The
Colab and student editions copy them as they are, so they stay unobtrusive there too.

Used by tests/test_glue_cells.py (the chapters) and tests/site/test_glue_site.py (the
built site).
"""

from __future__ import annotations

import ast
import re

#: Tags with which myst-nb leaves a cell's code off the page.
HIDDEN_TAGS = frozenset({"remove-cell", "remove_cell", "remove-input", "remove_input"})
#: The first line of every glue cell: the title Colab's form view and JupyterLab's
#: collapsed cell show.
GLUE_TITLE = "# @title Glue the numbers above into the text"
#: The metadata of every glue cell (besides its tags).
GLUE_METADATA = {"jupyter": {"source_hidden": True}, "cellView": "form"}
#: The largest number of visible ``glue(`` lines a chapter may show (the target: none).
VISIBLE_GLUE_LINES_ALLOWED = 0

GLUE_LINE = re.compile(r"\bglue\(")


def tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def is_visible(cell) -> bool:
    """A code cell whose code the site shows (hide-input only folds it: still visible)."""
    return cell["cell_type"] == "code" and not HIDDEN_TAGS & set(tags(cell))


def source_of(cell) -> str:
    text = cell.get("source", "")
    return "".join(text) if isinstance(text, list) else text


def glue_lines(source: str) -> int:
    """How many lines of `source` call ``glue(`` (a call over several lines counts once)."""
    return sum(1 for line in source.splitlines() if GLUE_LINE.search(line))


def _is_glue_call(statement: ast.stmt) -> bool:
    if not isinstance(statement, ast.Expr) or not isinstance(statement.value, ast.Call):
        return False
    func = statement.value.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name == "glue"


def _plumbing(statements: list[ast.stmt]) -> tuple[bool, int]:
    """(whether every statement is glue plumbing, how many glue calls there are).

    Plumbing: a glue call, an import, ``pass``, or a ``for``/``if``/``with`` block of
    plumbing (a loop that glues one value per case).
    """
    calls = 0
    for statement in statements:
        if _is_glue_call(statement):
            calls += 1
        elif isinstance(statement, ast.Import | ast.ImportFrom | ast.Pass):
            continue
        elif isinstance(statement, ast.For | ast.If | ast.With):
            inner = statement.body + getattr(statement, "orelse", [])
            ok, n = _plumbing(inner)
            if not ok:
                return False, calls
            calls += n
        else:
            return False, calls
    return True, calls


def is_glue_only(source: str) -> bool:
    """True when the code does nothing but glue values: at least one glue call, and no
    other statement than imports and loops of glue calls (no assert, no print, no
    computation). Code that does not parse (IPython magics) is not glue-only."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    ok, calls = _plumbing(tree.body)
    return ok and calls > 0


def is_glue_cell(cell) -> bool:
    """A code cell of glue plumbing only (hidden or not)."""
    return cell["cell_type"] == "code" and is_glue_only(source_of(cell))


def visible_glue_lines(notebook) -> int:
    """The ``glue(`` lines of the code cells a reader of the site sees."""
    return sum(glue_lines(source_of(c)) for c in notebook["cells"] if is_visible(c))


def glue_only_visible_cells(notebook) -> list[str]:
    """The ids (or positions) of visible code cells that only glue values."""
    return [
        str(cell.get("id", k))
        for k, cell in enumerate(notebook["cells"])
        if is_visible(cell) and is_glue_cell(cell)
    ]


def glue_cell_problems(cell) -> list[str]:
    """What is wrong with a cell that calls glue but the reader does not see (empty: a
    well-formed glue cell): it holds glue plumbing only (no assert or computation hidden
    from the reader), starts with the title and is collapsed in Jupyter and Colab."""
    problems = []
    source = source_of(cell)
    if not is_glue_only(source):
        problems.append("holds more than glue calls (an assert or a computation is hidden)")
    if not source.startswith(GLUE_TITLE + "\n"):
        problems.append(f"does not start with {GLUE_TITLE!r}")
    metadata = cell.get("metadata", {})
    for key, value in GLUE_METADATA.items():
        if metadata.get(key) != value:
            problems.append(f"metadata {key!r} is {metadata.get(key)!r}, not {value!r}")
    if "remove-cell" not in tags(cell):
        problems.append("is not tagged remove-cell")
    return problems
