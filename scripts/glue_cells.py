"""Glue cells: the code a reader sees computes; the glue plumbing goes in cells of its own.

Usage: python scripts/glue_cells.py notebooks/NN_topic.ipynb ...
       moves the glue(...) calls of every visible code cell into a glue cell right after
       it (then: ruff format, make execute NB=...); exits 1, naming the cell and the line,
       where a call cannot be moved as it is.

A chapter quotes its numbers in the prose with ``{glue:text}`` (helpers.glue). The calls
that store them are bookkeeping, not the computation the reader came for, so they live in
*glue cells*: a code cell right after the computation, holding only ``glue(...)`` calls,
which the site removes (the ``remove-cell`` tag) and which Jupyter and Colab show
collapsed to its first line, a ``# @title`` comment (``jupyter.source_hidden``, honoured
by JupyterLab, and ``cellView: form``, Colab's form view with its "Show code" link). The
Colab and student editions copy them as they are, so they stay unobtrusive there too
(scripts/student_edition.py leaves a solution's glue cells out with the solution).

Used by tests/test_glue_cells.py (the chapters) and tests/site/test_glue_site.py (the
built site).
"""

from __future__ import annotations

import ast
import copy
import re
import sys
from pathlib import Path

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


def tags_of(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def is_visible(cell) -> bool:
    """A code cell whose code the site shows (hide-input only folds it: still visible)."""
    return cell["cell_type"] == "code" and not HIDDEN_TAGS & set(tags_of(cell))


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
    if "remove-cell" not in tags_of(cell):
        problems.append("is not tagged remove-cell")
    return problems


# ------------------------------------------------------------------ moving glue calls


def _bound_inside(node: ast.AST) -> set[str]:
    """Names a statement binds for itself: loop and comprehension targets."""
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.For | ast.comprehension):
            out |= {m.id for m in ast.walk(n.target) if isinstance(m, ast.Name)}
    return out


def _reads(node: ast.AST) -> set[str]:
    loaded = {
        n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }
    return loaded - _bound_inside(node)


MUTATORS = {"append", "extend", "update", "insert", "pop", "sort", "fill", "setdefault", "clear"}


def _changes(node: ast.AST) -> set[str]:
    """Names a statement may change: assigned, defined, or modified in place."""
    in_comprehension = {
        id(m)
        for n in ast.walk(node)
        if isinstance(n, ast.comprehension)
        for m in ast.walk(n.target)
    }
    out = {
        n.id
        for n in ast.walk(node)
        if isinstance(n, ast.Name)
        and isinstance(n.ctx, ast.Store | ast.Del)
        and id(n) not in in_comprehension
    }
    out |= {n.name for n in ast.walk(node) if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    for n in ast.walk(node):
        base = None
        if isinstance(n, ast.Subscript | ast.Attribute) and isinstance(n.ctx, ast.Store):
            base = n.value
        elif (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr in MUTATORS
        ):
            base = n.func.value
        while isinstance(base, ast.Subscript | ast.Attribute):
            base = base.value
        if isinstance(base, ast.Name):
            out.add(base.id)
    return out


def split_glue(source: str) -> tuple[str, str, list[str]]:
    """(the code without its glue calls, the glue calls, what could not be moved).

    Moved: every top-level statement that is glue plumbing (a glue call, or a loop of glue
    calls), when nothing after it in the cell changes what it reads, so that it stores the
    same value at the end of the cell. Not moved (named in the third item, the code left as
    it is): a glue call inside a block that also computes or prints, and a glue call that
    reads a name the cell changes afterwards.
    """
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return source, "", []
    lines = source.split("\n")
    moved: list[ast.stmt] = []
    problems: list[str] = []
    for k, statement in enumerate(body):
        ok, calls = _plumbing([statement])
        if ok and calls:
            later = set().union(*(_changes(s) for s in body[k + 1 :]))
            changed = sorted(_reads(statement) & later)
            if changed:
                problems.append(
                    f"line {statement.lineno}: the glue call reads {', '.join(changed)}, which "
                    "the cell changes afterwards: glue a value computed for it"
                )
            else:
                moved.append(statement)
            continue
        for node in ast.walk(statement):
            if isinstance(node, ast.Expr) and _is_glue_call(node):
                problems.append(
                    f"line {node.lineno}: a glue call inside a block that also computes: "
                    "collect the values in the block (a dict), glue them after it"
                )
    if problems or not moved:
        return source, "", problems
    cut = {i for s in moved for i in range(s.lineno - 1, s.end_lineno)}
    glued = "\n".join("\n".join(lines[s.lineno - 1 : s.end_lineno]) for s in moved)
    kept = "\n".join(line for i, line in enumerate(lines) if i not in cut)
    kept = re.sub(r"\n{4,}", "\n\n\n", kept).strip("\n")
    return kept, glued, []


def glue_cell(glued: str, after: dict, cell_id: str) -> dict:
    """A glue cell holding `glued` (glue calls), to follow the code cell `after`."""
    tags = ["remove-cell"]
    if "nbval-ignore-output" in tags_of(after):
        tags.append("nbval-ignore-output")  # its values vary as that cell's output does
    metadata = {"tags": tags, **copy.deepcopy(GLUE_METADATA)}
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": cell_id[-64:],
        "metadata": metadata,
        "outputs": [],
        "source": f"{GLUE_TITLE}\n{glued}",
    }


def move_glue(notebook: dict) -> tuple[int, list[str]]:
    """Move the glue calls of every visible code cell of `notebook` (a dict, changed in
    place) into a glue cell after it: (how many cells had glue moved, what could not be)."""
    out: list[dict] = []
    moved, problems = 0, []
    for cell in notebook["cells"]:
        out.append(cell)
        if not is_visible(cell) or not GLUE_LINE.search(source_of(cell)):
            continue
        kept, glued, trouble = split_glue(source_of(cell))
        name = cell.get("id", f"#{len(out) - 1}")
        problems += [f"cell {name}, {t}" for t in trouble]
        if not glued:
            continue
        moved += 1
        new = glue_cell(glued, cell, f"{cell.get('id', 'cell')}-glue")
        if kept.strip():
            cell["source"] = kept
        else:  # the cell only glued: it becomes the glue cell, under its own id
            out.pop()
            new["id"] = cell.get("id", new["id"])
        out.append(new)
    notebook["cells"] = out
    return moved, problems


def main(argv: list[str]) -> int:
    import nbformat

    if not argv:
        print(__doc__.split("\n\n")[1])
        return 2
    failed = False
    for arg in argv:
        path = Path(arg)
        nb = nbformat.read(path, as_version=4)
        moved, problems = move_glue(nb)
        if moved:
            nb = nbformat.from_dict(nb)
            nbformat.validate(nb)
            nbformat.write(nb, path)
        print(f"{path}: glue calls of {moved} cells moved into glue cells")
        for problem in problems:
            print(f"{path}: not moved: {problem}")
        failed = failed or bool(problems)
    if failed:
        print("Move those by hand; then run ruff format and make execute NB=... for each chapter.")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
