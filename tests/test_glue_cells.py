"""The code a reader sees computes; the glue that puts numbers into the prose stays out of
the way (scripts/glue_cells.py says how, and moves glue calls into glue cells).

- No code cell that a reader of the site sees consists only of glue calls, and each
  chapter shows at most VISIBLE_GLUE_LINES_ALLOWED ``glue(`` lines (the target: none). The
  count per chapter is printed before anything is asserted.
- Every cell the site hides that calls glue is a glue cell: glue calls only (no assert, no
  computation the reader should see), titled, collapsed in Jupyter and in Colab.
- The Colab and student editions keep every glue cell collapsed, and no starting cell of
  the student edition glues anything (a solution's glue cells are left out with it).
- scripts/glue_cells.py moves glue calls into glue cells, and leaves (and names) the ones
  it cannot move as they are.

tests/site/test_glue_site.py counts the same on the built site's pages.
"""

from __future__ import annotations

import copy
import re
import sys

import nbformat
import pytest

from tests.notebook_bootstrap import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
from glue_cells import (
    GLUE_LINE,
    GLUE_METADATA,
    GLUE_TITLE,
    VISIBLE_GLUE_LINES_ALLOWED,
    glue_cell_problems,
    glue_lines,
    glue_only_visible_cells,
    is_glue_only,
    is_visible,
    main,
    move_glue,
    source_of,
    visible_glue_lines,
)

CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
EDITIONS = [ROOT / "editions" / "colab", ROOT / "editions" / "student"]


def read(path):
    return nbformat.read(path, as_version=4)


def visible_glue_report(notebooks: dict[str, dict]) -> tuple[str, list[str]]:
    """(a table of the visible glue lines per chapter, what is wrong with them)."""
    rows, problems = [], []
    for name, nb in notebooks.items():
        count = visible_glue_lines(nb)
        hidden = sum(1 for c in nb["cells"] if not is_visible(c) and glue_lines(source_of(c)))
        rows.append(f"{name:40} {count:4d} visible glue( lines ({hidden} glue cells hidden)")
        for cell_id in glue_only_visible_cells(nb):
            problems.append(f"{name}: visible code cell {cell_id} only glues values")
        if count > VISIBLE_GLUE_LINES_ALLOWED:
            problems.append(
                f"{name}: {count} visible glue( lines (at most {VISIBLE_GLUE_LINES_ALLOWED}); "
                "move them into a glue cell after the computation (scripts/glue_cells.py)"
            )
    return "\n".join(rows), problems


def test_no_visible_cell_only_glues_and_the_count_per_chapter_is_printed(capsys):
    table, problems = visible_glue_report({p.name: read(p) for p in CHAPTERS})
    with capsys.disabled():  # printed even when the test passes (and before it asserts)
        print("\nglue( lines in the code a reader of each chapter sees:\n" + table)
    print(table)  # and in the report of a failure
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_every_hidden_cell_that_glues_is_a_glue_cell(chapter):
    nb = read(chapter)
    glue_cells = 0
    for cell in nb.cells:
        if cell.cell_type != "code" or is_visible(cell) or not GLUE_LINE.search(cell.source):
            continue
        glue_cells += 1
        problems = glue_cell_problems(cell)
        assert not problems, f"{chapter.name}, cell {cell.get('id')}: " + "; ".join(problems)
    assert glue_cells, f"{chapter.name} has no glue cell: where are its numbers glued?"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_glue_is_imported_in_the_first_glue_cell_and_no_visible_cell(chapter):
    """Glue is hidden bookkeeping: the chapter's first glue cell imports it, and no cell a
    reader sees does (the first code cell imports what the chapter computes with)."""
    cells = [c for c in read(chapter).cells if c.cell_type == "code"]
    importing = re.compile(r"^\s*from helpers(\.glue)? import .*\bglue\b", re.M)
    seen = [k for k, c in enumerate(cells) if is_visible(c) and importing.search(c.source)]
    assert not seen, f"{chapter.name}: visible code cells {seen} import glue"
    first = next(c for c in cells if GLUE_LINE.search(c.source))
    assert not is_visible(first) and importing.search(first.source), (
        f"{chapter.name}: the first cell that glues must be a glue cell that imports glue"
    )


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_a_glue_cell_follows_the_code_it_quotes(chapter):
    """A glue cell comes right after a visible code cell (whose values it stores), and
    when that cell's output may vary (nbval-ignore-output), so may the glue cell's."""
    cells = read(chapter).cells
    for k, cell in enumerate(cells):
        if cell.cell_type != "code" or is_visible(cell) or not GLUE_LINE.search(cell.source):
            continue
        before = cells[k - 1]
        assert before.cell_type == "code" and is_visible(before), (
            f"{chapter.name}, cell {cell.get('id')}: a glue cell must follow its computation"
        )
        varies = "nbval-ignore-output" in before.metadata.get("tags", [])
        assert varies == ("nbval-ignore-output" in cell.metadata.get("tags", [])), (
            f"{chapter.name}, cell {cell.get('id')}: nbval-ignore-output as on the cell before"
        )


@pytest.mark.parametrize("edition", EDITIONS, ids=lambda p: p.name)
def test_the_editions_keep_every_glue_cell_collapsed(edition):
    """In Jupyter and Colab, whose readers see every cell, a glue cell shows one line (its
    title); the student edition has no glue cell of a solution, nor glue in a starting cell."""
    for path in sorted(edition.glob("[0-9][0-9]_*.ipynb")):
        nb = read(path)
        for cell in nb.cells:
            if cell.cell_type != "code" or not GLUE_LINE.search(cell.source):
                continue
            assert "student_edition" not in cell.metadata, (
                f"{edition.name}/{path.name}: a starting cell glues: {cell.source[:80]}"
            )
            problems = glue_cell_problems(cell)
            assert not problems, f"{edition.name}/{path.name}, {cell.get('id')}: {problems}"
        if edition.name == "student":
            solution_ids = {
                i
                for ids in read(ROOT / "editions" / "colab" / path.name)
                .metadata["colab_edition"]["solutions"]
                .values()
                for i in ids
            }
            left = [c.get("id") for c in nb.cells if c.get("id") in solution_ids]
            assert not left, f"student/{path.name}: solution cells left: {left}"


# ------------------------------------------------------------ the detector itself


def notebook(*cells) -> dict:
    return nbformat.v4.new_notebook(cells=list(cells))


def code(source: str, tags=(), **metadata) -> dict:
    cell = nbformat.v4.new_code_cell(source)
    if tags:
        cell.metadata["tags"] = list(tags)
    cell.metadata.update(metadata)
    return cell


GLUE_CELL = code(
    GLUE_TITLE + '\nglue("a", f"{a:.4f}")\nfor k, v in d.items():\n    glue(k, f"{v:.2f}")',
    tags=["remove-cell"],
    **GLUE_METADATA,
)


@pytest.mark.parametrize(
    "source, only",
    [
        ('glue("a", "1")', True),
        ('glue("a", f"{x:.4f}")\nglue("b", f"{y:.2f}")  # both', True),
        ('from helpers import glue\n\nglue("a", "1")', True),
        ('for t in taus:\n    glue(f"p_{t}", f"{p[t]:.3f}")', True),
        ('helpers.glue.glue("a", "1")', True),
        ("import numpy as np", False),  # no glue at all
        ('x = 2\nglue("a", f"{x}")', False),  # a computation
        ('assert x > 0\nglue("a", f"{x}")', False),  # a check the reader must see
        ('glue("a", f"{x}")\nprint(x)', False),  # an output the reader sees
        ('for t in taus:\n    assert t > 0\n    glue(f"p_{t}", "1")', False),
        ('%timeit f()\nglue("a", "1")', False),  # IPython: not plain Python, never glue-only
        ("", False),
    ],
)
def test_glue_only_is_glue_calls_imports_and_loops_of_them(source, only):
    assert is_glue_only(source) is only


def test_the_chapter_test_fails_on_a_visible_cell_that_only_glues():
    setup = code("import numpy as np\nfrom helpers import glue\nx = np.pi")
    shown = code('glue("x", f"{x:.4f}")')  # the mistake: plumbing left in view
    good = notebook(setup, code('glue("x", f"{x:.4f}")', tags=["remove-cell"]))
    bad = notebook(setup, shown)
    assert glue_only_visible_cells(good) == [] and visible_glue_lines(good) == 0
    assert glue_only_visible_cells(bad) == [shown.id] and visible_glue_lines(bad) == 1
    table, problems = visible_glue_report({"good.ipynb": good, "bad.ipynb": bad})
    assert "good.ipynb" in table and "bad.ipynb" in table
    assert problems == [
        f"bad.ipynb: visible code cell {shown.id} only glues values",
        f"bad.ipynb: 1 visible glue( lines (at most {VISIBLE_GLUE_LINES_ALLOWED}); move them "
        "into a glue cell after the computation (scripts/glue_cells.py)",
    ]


def test_glue_in_a_cell_that_computes_counts_but_is_not_glue_only():
    cell = code('y = 2 * x\nglue("y", f"{y}")\nglue("x", f"{x}")')
    assert glue_lines(cell.source) == 2
    assert visible_glue_lines(notebook(cell)) == 2 and glue_only_visible_cells(notebook(cell)) == []


@pytest.mark.parametrize(
    "change, problem",
    [
        (lambda c: c.metadata.pop("cellView"), "metadata 'cellView'"),
        (lambda c: c.metadata["jupyter"].pop("source_hidden"), "metadata 'jupyter'"),
        (lambda c: c.metadata.update(tags=["hide-input"]), "not tagged remove-cell"),
        (lambda c: c.update(source=c.source.replace(GLUE_TITLE, "# numbers")), "start with"),
        (lambda c: c.update(source=c.source + "\nassert a > 0"), "an assert or a computation"),
    ],
)
def test_a_glue_cell_is_titled_collapsed_removed_and_only_glues(change, problem):
    assert glue_cell_problems(GLUE_CELL) == []
    cell = copy.deepcopy(GLUE_CELL)
    change(cell)
    problems = glue_cell_problems(cell)
    assert len(problems) == 1 and problem in problems[0], problems


# --------------------------------------------------------------------- the mover


def test_the_mover_splits_a_cell_into_its_computation_and_a_glue_cell():
    glued = 'glue("x", f"{x:.4f}")\nfor k in (1, 2):\n    glue(f"x{k}", f"{k * x}")'
    source = "x = np.pi\n" + glued.replace("\nfor", "\nprint(x)\nfor")
    nb = notebook(code(source, tags=["nbval-ignore-output"]))
    assert move_glue(nb) == (1, [])
    first, second = nb["cells"]
    assert first["source"] == "x = np.pi\nprint(x)"
    assert second["source"] == GLUE_TITLE + "\n" + glued
    assert glue_cell_problems(second) == [] and second["id"] == first["id"] + "-glue"
    assert "nbval-ignore-output" in second["metadata"]["tags"]  # varies as its cell does
    assert visible_glue_lines(nb) == 0
    assert move_glue(nb) == (0, [])  # nothing left to move


@pytest.mark.parametrize(
    "source, reason",
    [
        (
            'for t in (1, 2):\n    y = 2 * t\n    print(y)\n    glue(f"y{t}", f"{y}")',
            "inside a block",
        ),
        ('x = 1\nglue("x", f"{x}")\nx = 2', "reads x, which the cell changes"),
        ('xs = [1]\nglue("n", f"{len(xs)}")\nxs.append(2)', "reads xs, which the cell changes"),
        ('p = {}\nglue("p", f"{p}")\np["a"] = 1', "reads p, which the cell changes"),
    ],
)
def test_the_mover_leaves_what_it_cannot_move_and_says_why(source, reason):
    nb = notebook(code(source))
    moved, problems = move_glue(nb)
    assert moved == 0 and len(problems) == 1 and reason in problems[0], problems
    assert [c["source"] for c in nb["cells"]] == [source]


def test_a_cell_that_only_glued_becomes_the_glue_cell_under_its_id():
    cell = code('glue("x", "1")')
    nb = notebook(code("x = 1"), cell)
    assert move_glue(nb) == (1, [])
    assert [c["id"] for c in nb["cells"]][1:] == [cell.id]
    assert glue_cell_problems(nb["cells"][1]) == []


def test_the_command_moves_glue_and_fails_on_what_it_cannot_move(tmp_path, capsys):
    path = tmp_path / "chapter.ipynb"
    nbformat.write(notebook(code('x = 1\nglue("x", f"{x}")')), path)
    assert main([str(path)]) == 0
    assert [c.source for c in read(path).cells] == ["x = 1", GLUE_TITLE + '\nglue("x", f"{x}")']
    assert "glue calls of 1 cells moved" in capsys.readouterr().out
    nbformat.write(notebook(code('for t in (1, 2):\n    print(t)\n    glue("t", f"{t}")')), path)
    assert main([str(path)]) == 1
    assert "not moved: cell" in capsys.readouterr().out
