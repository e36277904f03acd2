"""The grader on the Korean student notebooks (editions/ko/student/): graded exactly like
the English ones (tests/test_grade.py). One chapter: grading executes all of it.

A submission is the Korean student notebook of chapter 1 with the reference solutions'
code put in place of each exercise's starting cells (taken from the Korean Colab edition,
whose solutions are the chapter's), and every written answer left as its Korean starting
cell: every self-check passes, every function no check grades is read by hand, and every
written answer is "not attempted" (the grader knows the Korean starting text too).
"""

from __future__ import annotations

import copy

import nbformat
import pytest

from tests.conftest import ROOT
from tests.test_grade import REFERENCE_LIMITS, every_exercise_has_a_row, notebook_rows, run_grade

KO_COLAB = ROOT / "editions" / "ko" / "colab"
KO_STUDENT = ROOT / "editions" / "ko" / "student"
STEM = "01_softmax"


def with_reference_solutions(student: nbformat.NotebookNode, colab: nbformat.NotebookNode):
    """The student notebook with each exercise's starting code cells replaced by the code
    cells of its solution in the Colab edition (the written answers' cells stay)."""
    solutions = colab.metadata["colab_edition"]["solutions"]
    by_id = {c.get("id"): c for c in colab.cells}
    cells, placed = [], set()
    for cell in student.cells:
        role = cell.metadata.get("student_edition", {})
        label = role.get("exercise")
        if label is None or role.get("role") == "answer":
            cells.append(cell)
            continue
        if label not in placed:
            code = [by_id[i] for i in solutions[label] if by_id[i].cell_type == "code"]
            cells += [copy.deepcopy(c) for c in code]
            placed.add(label)
    out = copy.deepcopy(student)
    out.cells = cells
    return out


@pytest.mark.slow
def test_a_korean_student_notebook_is_graded_like_an_english_one(tmp_path):
    student = nbformat.read(KO_STUDENT / f"{STEM}.ipynb", as_version=4)
    colab = nbformat.read(KO_COLAB / f"{STEM}.ipynb", as_version=4)
    folder = tmp_path / "submissions"
    folder.mkdir()
    nbformat.write(with_reference_solutions(student, colab), folder / f"학생_{STEM}.ipynb")
    rows, _ = run_grade(folder, *REFERENCE_LIMITS)
    assert not notebook_rows(rows), notebook_rows(rows)
    assert {r["chapter"] for r in rows} == {STEM}
    every_exercise_has_a_row(STEM, rows)
    checks = [r for r in rows if r["check"]]
    assert checks and all(r["status"] == "passed" for r in checks), checks
    written = [r for r in rows if not r["check"] and not r["function"]]
    answers = [
        c for c in student.cells if c.metadata.get("student_edition", {}).get("role") == "answer"
    ]
    assert len(written) == len(answers)
    for row in written:
        assert row["status"] == "not attempted", row
        assert "is still its starting cell" in row["message"], row
    for row in rows:
        if row["function"] and not row["check"]:
            assert row["status"] == "manual", row
