"""The student notebooks (editions/student/): no solution left, starting cells in its place.

The notebooks are generated from the Colab edition by scripts/student_edition.py (with
the Colab edition, by `make edition`); tests/test_colab_edition.py fails when either is
stale. These tests compare them with the chapters' solution cells (the source notebooks,
between solution-start and solution-end) and with the Colab edition; tests/colab runs them
on Colab's versions and tests/site/test_student_site.py checks their links against the
student edition of the site.
"""

from __future__ import annotations

import ast
import copy
import io
import json
import re
import sys
import tokenize
from pathlib import Path

import nbformat
import numpy as np
import pytest

import helpers
from helpers.checks import NOT_ATTEMPTED, run_self_check
from tests.notebook_bootstrap import ROOT, bootstrap_source

sys.path.insert(0, str(ROOT / "scripts"))
import student_edition

COLAB = ROOT / "editions" / "colab"
STUDENT = ROOT / "editions" / "student"
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
ROLE = "student_edition"

SOLUTION_START = re.compile(r"```\{solution-start\}\s*([\w-]+)[^\n]*\n(?::[^\n]*\n)*```")
SOLUTION_END = re.compile(r"```\{solution-end\}\s*\n```")


def chapter_solutions(chapter: Path) -> dict[str, dict[str, list[str]]]:
    """{exercise label: {"markdown": [...], "code": [...]}} read from the chapter itself."""
    nb = nbformat.read(chapter, as_version=4)
    out: dict[str, dict[str, list[str]]] = {}
    label = None
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            if label is not None:
                out[label]["code"].append(cell.source)
            continue
        text = cell.source
        while text:
            if label is None:
                start = SOLUTION_START.search(text)
                if start is None:
                    break
                label = start.group(1)
                out[label] = {"markdown": [], "code": []}
                text = text[start.end() :]
            else:
                end = SOLUTION_END.search(text)
                out[label]["markdown"].append(text[: end.start()] if end else text)
                if end is None:
                    break
                label, text = None, text[end.end() :]
    assert label is None, f"{chapter.name}: a solution is not closed"
    return out


def read(directory: Path, chapter: Path) -> nbformat.NotebookNode:
    path = directory / chapter.name
    assert path.exists(), f"{path.relative_to(ROOT)} is missing: run `make edition`"
    return nbformat.read(path, as_version=4)


def role(cell) -> str:
    return cell.metadata.get(ROLE, {}).get("role", "")


def answer_cell(what: str) -> str:
    return (
        f"> ✏️ **Your answer to {what}**\n>\n> {student_edition.ANSWER} "
        "(Double-click this cell to edit it.)"
    )


def check_calls(code: str) -> list[ast.Expr]:
    return [s for s in ast.parse(code).body if student_edition.is_check_call(s)]


def code_lines(text: str) -> set[str]:
    return {line.strip() for line in text.split("\n") if line.strip()}


def header_lines(code: str, node: ast.AST) -> set[int]:
    """Line numbers (1-based) of a definition's decorators and signature (up to its ':')."""
    lines = code.split("\n")
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    depth = 0
    source = "\n".join(lines[node.lineno - 1 :]) + "\n"
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        elif token.type == tokenize.OP and token.string == ":" and depth == 0:
            return set(range(first, node.lineno + token.end[0]))
    raise AssertionError("no header end")


def exempt_lines(code: str) -> set[int]:
    """The solution lines a starting cell may repeat: signatures, docstrings, self-checks."""
    exempt: set[int] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            exempt |= header_lines(code, node)
            if ast.get_docstring(node, clean=False) is not None:
                doc = node.body[0]
                exempt |= set(range(doc.lineno, doc.end_lineno + 1))
    for call in check_calls(code):
        exempt |= set(range(call.lineno, call.end_lineno + 1))
    return exempt


# ------------------------------------------------------------------------ the files


def test_every_chapter_has_a_student_notebook_and_nothing_else():
    assert CHAPTERS
    assert sorted(p.name for p in STUDENT.glob("*.ipynb")) == [c.name for c in CHAPTERS]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_valid_notebook_that_starts_like_the_chapter(chapter):
    student = read(STUDENT, chapter)
    nbformat.validate(student)
    assert role(student.cells[0]) == "about"
    assert student.cells[1].source.startswith("# " + chapter.name[:2].lstrip("0") + ". ")
    first = next(c for c in student.cells if c.cell_type == "code")
    assert first.source == bootstrap_source()
    assert student.metadata["kernelspec"] == read(COLAB, chapter).metadata["kernelspec"]
    ids = [c.get("id") for c in student.cells]
    assert len(ids) == len(set(ids)), "duplicate cell ids"


# ------------------------------------------------------------------ no solution left


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_every_solution_is_replaced(chapter):
    solutions = chapter_solutions(chapter)
    assert len(solutions) >= 4
    student = read(STUDENT, chapter)
    assert list(student.metadata[ROLE]["exercises"]) == list(solutions)
    colab = read(COLAB, chapter)
    solution_ids = {i for ids in colab.metadata["colab_edition"]["solutions"].values() for i in ids}
    assert solution_ids and not solution_ids & {c.get("id") for c in student.cells}
    assert "solutions" not in student.metadata["colab_edition"]
    assert student.metadata["colab"]["collapsed_sections"] == []
    assert not any(c.metadata.get("jp-MarkdownHeadingCollapsed") for c in student.cells)
    for label, parts in solutions.items():
        cells = [c for c in student.cells if c.metadata.get(ROLE, {}).get("exercise") == label]
        assert cells, f"{label}: no starting cell"
        if any(text.strip() for text in parts["markdown"]):
            answers = [c for c in cells if role(c) == "answer"]
            what = f"Exercise {student.metadata[ROLE]['exercises'][label]['number']}"
            assert [c.source for c in answers] == [answer_cell(what)]
            assert answers[0].cell_type == "markdown"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_no_solution_code_is_left(chapter):
    """Every line of every solution's code, except a signature, a docstring or a
    self-check call, is absent from the student notebook (unless the chapter has that
    same line outside its solutions, in a cell the student notebook keeps)."""
    solutions = chapter_solutions(chapter)
    source = nbformat.read(chapter, as_version=4)
    solution_code = [code for parts in solutions.values() for code in parts["code"]]
    outside = set()
    for cell in source.cells:
        if cell.cell_type == "code" and cell.source not in solution_code:
            outside |= code_lines(cell.source)
    student = read(STUDENT, chapter)
    student_code = set()
    for cell in student.cells:
        if cell.cell_type == "code":
            student_code |= code_lines(cell.source)
    checked = 0
    for code in solution_code:
        exempt = exempt_lines(code)
        for number, line in enumerate(code.split("\n"), start=1):
            line = line.strip()
            if not line or number in exempt or line in outside:
                continue
            checked += 1
            assert line not in student_code, f"solution code left in the student notebook: {line}"
    assert checked >= 20, f"{chapter.name}: only {checked} solution lines compared"


# A line of TeX environment markers only (\begin{split}\begin{aligned}) says nothing of
# the solution: any chapter's aligned equations have the same line.
MARKERS_ONLY = re.compile(r"(\\(begin|end)\{\w+\*?\}\s*)+")


def prose(text: str) -> list[str]:
    """The sentences (and lines) of a markdown text worth comparing: 20 characters or more."""
    pieces = re.split(r"\n|(?<=[.:;?!])\s+", text)
    return [
        p.strip() for p in pieces if len(p.strip()) >= 20 and not MARKERS_ONLY.fullmatch(p.strip())
    ]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_no_solution_text_is_left(chapter):
    """No line of a solution's text (as the Colab edition renders it) and no solution
    heading is in the student notebook; nor is any output of a solution's code."""
    colab = read(COLAB, chapter)
    ids = {i for ids in colab.metadata["colab_edition"]["solutions"].values() for i in ids}
    student = read(STUDENT, chapter)
    text = "\n".join(c.source for c in student.cells)
    outputs = json.dumps([c.get("outputs", []) for c in student.cells])
    compared = 0
    for cell in colab.cells:
        if cell.get("id") not in ids:
            continue
        if cell.cell_type == "markdown":
            for line in prose(cell.source):
                compared += 1
                assert line not in text, f"solution text left: {line[:100]}"
        for output in cell.get("outputs", []):
            shown = output.get("text") or output.get("data", {}).get("text/plain", "")
            # whole lines of output (a fragment after a colon, such as "largest difference
            # 1.6e-15", may be printed by another cell too, with the same round-off)
            shown = shown if isinstance(shown, str) else "".join(shown)
            for line in (t.strip() for t in shown.splitlines()):
                if len(line) >= 20:
                    assert json.dumps(line)[1:-1] not in outputs, f"solution output left: {line}"
    assert compared >= 10
    assert "Solution to Exercise" not in text and "<details" not in text.split("Exercises")[-1]


# ----------------------------------------------------------- what stays, what is added


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_everything_else_is_the_colab_edition(chapter):
    """The exercise statements and every other cell: the Colab edition's, in order, with
    links to the online book sent to its student edition."""
    colab = read(COLAB, chapter)
    site = colab.metadata["colab_edition"]["site"]
    ids = {i for ids in colab.metadata["colab_edition"]["solutions"].values() for i in ids}
    expected = []
    for cell in colab.cells:
        if cell.get("id") in ids or cell.metadata.get("colab_edition", {}).get("role") == "about":
            continue  # (the student edition's first cell takes the place of the Colab one's)
        cell = copy.deepcopy(cell)
        if cell.cell_type == "markdown":
            cell.source = cell.source.replace(f"]({site}", f"]({site}student/")
        expected.append(cell)
    student = read(STUDENT, chapter)
    kept = [c for c in student.cells if ROLE not in c.metadata]
    assert kept == expected
    exercises = [c for c in kept if c.metadata.get("colab_edition", {}).get("role") == "exercise"]
    assert len(exercises) >= len(chapter_solutions(chapter))
    links = re.findall(r"\]\((https?://[^)\s]+)\)", "\n".join(c.source for c in kept))
    assert any(u.startswith(site + "student/") for u in links)
    assert not [u for u in links if u.startswith(site) and not u.startswith(site + "student/")]
    assert student.metadata[ROLE]["site"] == site + "student/"


def rendered(markdown: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").render(markdown)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_the_first_cell_says_what_the_notebook_is_and_how_to_work_in_it(chapter):
    """A quote above the chapter's title: the student edition, its exercises (how many,
    how many with a self-check, in which section), how to answer, where the solutions
    are not."""
    student = read(STUDENT, chapter)
    about = student.cells[0]
    exercises = student.metadata[ROLE]["exercises"]
    checked = sum(1 for e in exercises.values() if e["checks"])
    section = re.search(
        r"^## (\d+\.\d+)\. Exercises$", "\n".join(c.source for c in student.cells), re.M
    )
    assert about.cell_type == "markdown" and role(about) == "about"
    text = about.source
    assert text.startswith("> **Student edition.**")
    assert all(line.startswith(">") for line in text.split("\n"))
    assert rendered(text).startswith("<blockquote>")
    assert (
        f"{len(exercises)} exercises, {checked} of them with a self-check, "
        f"in section {section.group(1)} at the end." in text
    )
    said = ("✏️ *Your answer*", "`NotImplementedError`", "self-check", "installs", "Run all")
    for words in (*said, "explorers"):
        assert words in text
    assert "The solutions are not here" in text and "instructor" in text
    # the instructor's page says the student edition online has no solution either
    assert "with every solution removed" in (ROOT / "book" / "instructors.md").read_text()


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_answer_cells_read_apart_from_the_chapter(chapter):
    """A ✏️ "Your answer" cell renders as a quote (the chapter's own paragraphs do not
    start with a pencil) and names its exercise."""
    student = read(STUDENT, chapter)
    answers = [c for c in student.cells if role(c) == "answer"]
    assert answers, f"{chapter.name}: no answer cell"
    for cell in answers:
        html = rendered(cell.source)
        assert html.startswith("<blockquote>\n<p>✏️ <strong>Your answer to Exercise ")
        assert student_edition.ANSWER in html
    chapter_text = "\n".join(c.source for c in student.cells if ROLE not in c.metadata)
    assert "✏️" not in chapter_text


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_every_self_check_call_stays_in_a_cell_of_its_own(chapter):
    calls = []
    for parts in chapter_solutions(chapter).values():
        for code in parts["code"]:
            calls += [ast.get_source_segment(code, c) for c in check_calls(code)]
    assert calls, f"{chapter.name} has no self-check"
    student = read(STUDENT, chapter)
    cells = [c for c in student.cells if role(c) == "check"]
    assert [c.source for c in cells] == calls
    assert all(c.cell_type == "code" and c.outputs == [] for c in cells)
    pairs = [p for e in student.metadata[ROLE]["exercises"].values() for p in e["checks"]]
    assert [f"helpers.checks.{check}({fn})" for check, fn in pairs] == calls


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_starting_cells_have_the_solutions_signatures(chapter):
    """For every definition in a solution: a definition with the same name, arguments,
    defaults, annotations and decorators, whose body is a docstring and
    `raise NotImplementedError(...)`, and nothing else in the starting cell."""
    definitions = {}
    for parts in chapter_solutions(chapter).values():
        for code in parts["code"]:
            for node in ast.parse(code).body:
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    definitions[node.name] = node
    student = read(STUDENT, chapter)
    stubs = {}
    for cell in student.cells:
        if role(cell) != "starter":
            continue
        tree = ast.parse(cell.source)
        assert tree.body and all(isinstance(n, ast.FunctionDef) for n in tree.body)
        others = [line for line in cell.source.split("\n") if line.startswith("#")]
        assert others in ([], [student_edition.CODE_HERE])
        for node in tree.body:
            stubs[node.name] = node
    assert sorted(stubs) == sorted(definitions)
    for name, solution in definitions.items():
        stub = stubs[name]
        assert ast.dump(stub.args) == ast.dump(solution.args), name
        assert ast.dump(stub.returns or ast.Pass()) == ast.dump(solution.returns or ast.Pass())
        assert [ast.dump(d) for d in stub.decorator_list] == [
            ast.dump(d) for d in solution.decorator_list
        ]
        assert ast.get_docstring(stub), f"{name}: no docstring"
        assert len(stub.body) == 2 and isinstance(stub.body[1], ast.Raise)
        raised = stub.body[1].exc
        assert isinstance(raised, ast.Call) and raised.func.id == "NotImplementedError"


def starting_namespace(student: nbformat.NotebookNode) -> dict:
    namespace = {"np": np, "helpers": helpers}
    for cell in student.cells:
        if role(cell) == "starter":
            exec(compile(cell.source, cell.get("id", "starter"), "exec"), namespace)
    return namespace


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_every_starting_cell_is_not_attempted_by_its_check(chapter):
    """Each check cell, run on the starting cells, reports "not attempted" (a sentence,
    not a traceback); so does the grader's run_self_check."""
    student = read(STUDENT, chapter)
    namespace = starting_namespace(student)
    pairs = [p for e in student.metadata[ROLE]["exercises"].values() for p in e["checks"]]
    for cell in (c for c in student.cells if role(c) == "check"):
        report = eval(compile(cell.source, "check", "eval"), namespace)
        assert report.status == NOT_ATTEMPTED, cell.source
        assert "not attempted yet" in repr(report) and "Traceback" not in repr(report)
    for check, function in pairs:
        result = run_self_check(check, namespace, function)
        assert result.status == NOT_ATTEMPTED, (check, function, result.message)
    for name in {n for e in student.metadata[ROLE]["exercises"].values() for n in e["functions"]}:
        with pytest.raises(NotImplementedError, match=r"Exercise \d+\.\d+: write " + name):
            namespace[name](*([None] * namespace[name].__code__.co_argcount))


SHOWN = re.compile(r"^(check_\w+)\((\w+)\): (All \d+ checks passed|The 1 check passed)", re.M)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_reference_solutions_pass_their_checks(chapter):
    """Where a chapter shows a self-check's report (the last line of a solution cell; the
    check displays it where it runs), it
    is "passed": nbval re-executes the chapter and compares that output, so this holds for
    the current code. (tests/colab runs every check on the reference solutions.)"""
    source = nbformat.read(chapter, as_version=4)
    solution_code = [c for p in chapter_solutions(chapter).values() for c in p["code"]]
    shown = 0
    for cell in source.cells:
        if cell.cell_type != "code" or cell.source not in solution_code:
            continue
        body = ast.parse(cell.source).body
        if not body or not student_edition.is_check_call(body[-1]):
            continue
        call = body[-1].value
        text = "".join(
            o.get("data", {}).get("text/plain", "")
            for o in cell.outputs
            if o.output_type in ("execute_result", "display_data")
        )
        assert (call.func.attr, call.args[0].id) in [m[:2] for m in SHOWN.findall(text)], text
        shown += 1
    assert shown >= 2


# ------------------------------------------------------------------ the generator


def colab_notebook(cells: list[dict], solutions: dict[str, list[str]]) -> dict:
    return {
        "cells": cells,
        "metadata": {
            "colab_edition": {
                "chapter": "notebooks/09_test.ipynb",
                "site": "https://example.org/book/",
                "exercises": {label: "9.1" for label in solutions},
                "solutions": solutions,
            },
            "colab": {"collapsed_sections": [ids[0] for ids in solutions.values()]},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def md(cell_id: str, text: str, **meta) -> dict:
    return {"cell_type": "markdown", "id": cell_id, "metadata": meta, "source": text}


def code(cell_id: str, text: str) -> dict:
    return {
        "cell_type": "code",
        "id": cell_id,
        "metadata": {},
        "source": text,
        "execution_count": 1,
        "outputs": [],
    }


SOLUTION_CODE = '''\
@functools.cache
def my_f(
    x: np.ndarray,  # the input
    *,
    scale: float = 2.0,
) -> np.ndarray:
    """Scale x: the docstring stays."""
    return scale * x


class Counter:
    """Counts."""

    def __init__(self, start=0):
        self.n = start

    def step(self):
        self.n += 1


async def fetch(url):  # a comment after the header goes
    return url


value = my_f(np.ones(2))
helpers.checks.check_softmax(my_f)
'''


def test_generator_on_every_kind_of_definition():
    nb = colab_notebook(
        [
            md("a", "### Exercise 9.1\n\nSee [the book](https://example.org/book/intro.html)."),
            md("s", "#### Solution to Exercise 9.1", **{"jp-MarkdownHeadingCollapsed": True}),
            md("t", "Because the secret reason."),
            code("c", SOLUTION_CODE),
            code("d", "assert value.sum() == 4"),
            md("e", "## Next"),
        ],
        {"ex-f": ["s", "t", "c", "d"]},
    )
    out = student_edition.student_notebook(nb, "09_test.ipynb")
    about = out["cells"].pop(0)
    assert about["metadata"][ROLE]["role"] == "about"
    assert ": 1 exercise, 1 of them with a self-check, in section" not in about["source"]
    assert ": 1 exercise, 1 of them with a self-check." in about["source"]  # no section
    sources = [c["source"] for c in out["cells"]]
    assert sources[0].endswith("(https://example.org/book/student/intro.html).")
    assert sources[1] == answer_cell("Exercise 9.1")
    assert (
        sources[2]
        == '''\
@functools.cache
def my_f(
    x: np.ndarray,  # the input
    *,
    scale: float = 2.0,
) -> np.ndarray:
    """Scale x: the docstring stays."""
    raise NotImplementedError("Exercise 9.1: write my_f")


class Counter:
    """Counts."""

    def __init__(self, start=0):
        """Your answer to Exercise 9.1."""
        raise NotImplementedError("Exercise 9.1: write __init__")

    def step(self):
        """Your answer to Exercise 9.1."""
        raise NotImplementedError("Exercise 9.1: write step")


async def fetch(url):
    """Your answer to Exercise 9.1."""
    raise NotImplementedError("Exercise 9.1: write fetch")


# Write your code here.'''
    )
    assert sources[3] == "helpers.checks.check_softmax(my_f)"
    assert sources[4] == student_edition.CODE_HERE
    assert sources[5] == "## Next"
    assert len(sources) == 6
    assert "secret" not in json.dumps(out)
    exercise = out["metadata"]["student_edition"]["exercises"]["ex-f"]
    assert exercise == {
        "number": "9.1",
        "functions": ["my_f", "Counter", "fetch"],
        "checks": [["check_softmax", "my_f"]],
    }
    assert out["metadata"]["colab"]["collapsed_sections"] == []


@pytest.mark.parametrize(
    ("solution_code", "message"),
    [
        ("def f(:\n    pass", "does not parse"),
        ("f = lambda z: z\nhelpers.checks.check_softmax(f)", "only the solution's code defines"),
    ],
)
def test_generator_stops_on_what_it_cannot_convert(solution_code, message):
    nb = colab_notebook(
        [md("s", "#### Solution to Exercise 9.1"), code("c", solution_code)], {"ex-g": ["s", "c"]}
    )
    with pytest.raises(student_edition.StudentEditionError, match=message) as err:
        student_edition.student_notebook(nb, "09_test.ipynb")
    assert "09_test.ipynb" in str(err.value) and "ex-g" in str(err.value)


def test_generator_stops_on_a_solution_split_by_other_cells():
    nb = colab_notebook(
        [md("s", "#### Solution"), md("x", "Not the solution."), code("c", "x = 1")],
        {"ex-h": ["s", "c"]},
    )
    with pytest.raises(student_edition.StudentEditionError, match="not contiguous"):
        student_edition.student_notebook(nb, "09_test.ipynb")


def test_the_committed_student_edition_comes_from_the_committed_colab_edition():
    """(The staleness test in test_colab_edition.py compares both with a fresh build.)"""
    colab = {p.name: p.read_bytes() for p in sorted(COLAB.glob("*.ipynb"))}
    fresh = student_edition.generate(colab)
    assert {n: d for n, d in fresh.items()} == {
        p.name: p.read_bytes() for p in sorted(STUDENT.glob("*.ipynb"))
    }


# ------------------------------------------------ a check before its starting cell


@pytest.mark.parametrize(
    ("source", "name", "reported"),
    [
        ("helpers.checks.check_softmax(my_softmax)", "my_softmax", True),
        ("check_softmax(my_softmax)", "my_softmax", True),
        ("helpers.checks.check_softmax(fn=my_softmax)", "my_softmax", True),
        ("helpers.checks.check_softmax(my_softmax)", "helpers", False),  # not its argument
        ("x = 1\nhelpers.checks.check_softmax(my_softmax)", "my_softmax", False),
        ("print(my_softmax)", "my_softmax", False),
        ("helpers.checks.check_softmax(my_softmax(1))", "my_softmax", False),
    ],
)
def test_an_undefined_function_is_reported_only_in_a_self_check_cell(source, name, reported):
    from helpers.checks.notebook import not_defined_report

    error = NameError(f"name {name!r} is not defined", name=name)
    report = not_defined_report(source, error)
    if not reported:
        assert report is None
        return
    assert report == (
        f"check_softmax({name}): not attempted yet ({name} is not defined: run the cell that "
        "defines it, then this check again)."
    )
    assert "\n" not in report


def test_a_self_check_run_before_its_starting_cell_reports_in_one_line():
    """In a kernel, as a student would: every check cell of chapter 1's student notebook,
    run before the starting cells, prints its one-line "not attempted" report (no
    traceback); any other NameError still shows IPython's traceback."""
    from nbclient import NotebookClient

    student = read(STUDENT, CHAPTERS[0])
    checks = [c.source for c in student.cells if role(c) == "check"]
    assert checks
    cells = [nbformat.v4.new_code_cell("import helpers")]
    cells += [nbformat.v4.new_code_cell(source) for source in checks]
    cells.append(nbformat.v4.new_code_cell("not_defined_anywhere + 1"))
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    NotebookClient(nb, timeout=120, allow_errors=True, kernel_name="python3").execute()
    for cell in nb.cells[1:-1]:
        check, name = re.search(r"(check_\w+)\((\w+)\)", cell.source).groups()
        assert [o.output_type for o in cell.outputs] == ["stream"], cell.outputs
        assert cell.outputs[0].text == (
            f"{check}({name}): not attempted yet "
            f"({name} is not defined: run the cell that defines it, then this check again).\n"
        )
    last = nb.cells[-1].outputs
    assert [o.output_type for o in last] == ["error"] and last[0].ename == "NameError"


# ------------------------------------------------------------ the Korean student edition
#
# editions/ko/student/, from the Korean Colab edition (scripts/ko_edition.py): the same
# exercises, starting cells and self-checks, in Korean.

import ko_edition  # noqa: E402

KO_COLAB = ROOT / "editions" / "ko" / "colab"
KO_STUDENT = ROOT / "editions" / "ko" / "student"
KO = student_edition.WORDS["ko"]


def test_the_committed_korean_student_edition_comes_from_the_committed_korean_colab_edition():
    colab = {p.name: p.read_bytes() for p in sorted(KO_COLAB.glob("*.ipynb"))}
    assert colab, "editions/ko/colab/ is empty: run `make edition`"
    fresh = student_edition.generate(colab)
    assert fresh == {p.name: p.read_bytes() for p in sorted(KO_STUDENT.glob("*.ipynb"))}


def definitions(code: str) -> list[str]:
    """Each definition's header (name, arguments, decorators) and whether its body raises
    NotImplementedError, without the words of its docstring and message."""
    out = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            args = ast.dump(node.args) if hasattr(node, "args") else ""
            raises = any(isinstance(n, ast.Raise) for n in node.body)
            out.append(f"{node.name} {args} {[ast.dump(d) for d in node.decorator_list]} {raises}")
    return out


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_korean_student_notebook_is_the_english_one_in_korean(chapter):
    """The same cells (ids, roles), exercises, self-checks and starting functions as the
    English student notebook; its own words in Korean; its links to the Korean student
    edition online (SITE/ko/student/)."""
    english, korean = read(STUDENT, chapter), read(KO_STUDENT, chapter)
    nbformat.validate(korean)
    assert [c.get("id") for c in korean.cells] == [c.get("id") for c in english.cells]
    assert [role(c) for c in korean.cells] == [role(c) for c in english.cells]
    assert korean.metadata[ROLE]["exercises"] == english.metadata[ROLE]["exercises"]
    site = english.metadata["colab_edition"]["site"]
    assert korean.metadata[ROLE]["site"] == site + "ko/student/"
    first = next(c for c in korean.cells if c.cell_type == "code")
    assert first.source == ko_edition.install_source()
    for en, ko in zip(english.cells, korean.cells, strict=True):
        if role(en) == "check":
            assert ko.source == en.source
        elif role(en) == "starter":
            assert definitions(ko.source) == definitions(en.source)
            assert 'NotImplementedError("연습 문제 ' in ko.source
        elif role(en) == "code":
            assert ko.source == KO["code_here"]
        elif role(en) == "answer":
            number = english.metadata[ROLE]["exercises"][en.metadata[ROLE]["exercise"]]["number"]
            assert ko.source == KO["answer_cell"].format(
                what=f"연습 문제 {number}", answer=KO["answer"]
            )
            assert rendered(ko.source).startswith(
                f"<blockquote>\n<p>✏️ <strong>연습 문제 {number}의 답"
            )
    links = re.findall(r"\]\((https?://[^)\s]+)\)", "\n".join(c.source for c in korean.cells))
    assert any(u.startswith(site + "ko/student/") for u in links)
    assert not [u for u in links if u.startswith(site) and not u.startswith(site + "ko/student/")]
    about = korean.cells[0].source
    exercises = korean.metadata[ROLE]["exercises"]
    checked = sum(1 for e in exercises.values() if e["checks"])
    section = re.search(
        r"^## (\d+\.\d+)\. 연습 문제$", "\n".join(c.source for c in korean.cells), re.M
    )
    assert about.startswith("> **학생판.**") and rendered(about).startswith("<blockquote>")
    assert (
        f"연습 문제는 {len(exercises)}개이고, 그 가운데 {checked}개에는 자가 점검이 있으며, "
        f"맨 끝의 {section.group(1)}절에 있다." in about
    )
    for words in ("✏️ *답*", "`NotImplementedError`", "자가 점검", "런타임 ▸ 모두 실행", "풀이는"):
        assert words in about


def test_the_korean_starting_cells_are_not_attempted_by_their_checks():
    """A Korean starting function (its docstring and message in Korean) is "not attempted"
    for its self-check, as the English one is (chapter 1; tests/colab runs them all)."""
    korean = read(KO_STUDENT, CHAPTERS[0])
    namespace: dict = {"np": np, "helpers": helpers}
    pairs = [p for e in korean.metadata[ROLE]["exercises"].values() for p in e["checks"]]
    for cell in korean.cells:
        if role(cell) == "starter":
            exec(cell.source.replace(KO["code_here"], ""), namespace)
    assert pairs
    for check, function in pairs:
        result = run_self_check(check, namespace, function)
        assert result.status == NOT_ATTEMPTED, (check, result)
