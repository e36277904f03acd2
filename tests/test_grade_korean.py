"""The grader on the Korean student notebooks (editions/ko/student/): graded exactly like
the English ones (tests/test_grade.py), every message about them in Korean.

One grading run, of two notebooks of chapter 1 with the same answers (grading executes the
whole chapter): the English student notebook and the Korean one, each with the reference
solutions' code put in place of the exercises' starting cells (from the Colab edition of
its language, whose solutions are the chapter's), then the same changes made to both: one
function left as its starting cell, one wrong, one calling the book's own implementation
of what its check grades, one written answer written, a cell that raises MemoryError; the
other written answers are left as their starting cells. The verdicts, points and flags
must be the same in both; the English messages are the grader's English, byte for byte;
the Korean ones Korean (the self-checks' as a student sees them in Colab with
``helpers.set_language("ko")``). Gradescope's results.json is made from the same rows.
"""

from __future__ import annotations

import copy
import csv
import json
import re
import sys
import textwrap
import zipfile
from pathlib import Path

import nbformat
import numpy as np
import pytest

import helpers
from helpers.checks import run_self_check
from tests.conftest import ROOT, once_per_session
from tests.test_grade import REFERENCE_LIMITS, every_exercise_has_a_row, notebook_rows, run_grade
from tests.test_helpers_i18n import _english_prose

sys.path.insert(0, str(ROOT / "scripts"))
import grade
import gradescope

STEM = "01_softmax"
EDITIONS = {  # language -> (student notebook, Colab edition, the student's name)
    "en": (ROOT / "editions" / "student", ROOT / "editions" / "colab", "student"),
    "ko": (ROOT / "editions" / "ko" / "student", ROOT / "editions" / "ko" / "colab", "학생"),
}
LEFT_AS_STARTED = "ex-softmax-jacobian"  # my_softmax_jacobian stays a starting cell
WRITTEN = ("ex-softmax-by-hand", "p = (0.090, 0.245, 0.665); log-sum-exp = 3.408")
WRONG = '''
def my_log_softmax_backward(z, g):
    """Forgets the softmax term: returns g as it is."""
    return np.asarray(g, dtype=float)
'''
BOOK_CODE = '''
def my_entropy(p):
    """The book's own entropy: not an answer."""
    from helpers.softmax import entropy

    return entropy(p)
'''
MEMORY = "raise MemoryError()"  # (what the kernel says when a cell runs out of memory)
HANGUL = re.compile(r"[\uac00-\ud7a3]")


def with_reference_solutions(
    student: nbformat.NotebookNode, colab: nbformat.NotebookNode, keep: tuple[str, ...] = ()
):
    """The student notebook with each exercise's starting code cells replaced by the code
    cells of its solution in the Colab edition (the written answers' cells stay, and the
    exercises in ``keep`` keep their starting cells)."""
    solutions = colab.metadata["colab_edition"]["solutions"]
    by_id = {c.get("id"): c for c in colab.cells}
    cells, placed = [], set()
    for cell in student.cells:
        role = cell.metadata.get("student_edition", {})
        label = role.get("exercise")
        if label is None or label in keep or role.get("role") == "answer":
            cells.append(cell)
            continue
        if label not in placed:
            code = [by_id[i] for i in solutions[label] if by_id[i].cell_type == "code"]
            cells += [copy.deepcopy(c) for c in code]
            placed.add(label)
    out = copy.deepcopy(student)
    out.cells = cells
    return out


def submission(language: str) -> nbformat.NotebookNode:
    """The answers of the module's docstring, in the student notebook of ``language``."""
    students, colabs, _ = EDITIONS[language]
    nb = with_reference_solutions(
        nbformat.read(students / f"{STEM}.ipynb", as_version=4),
        nbformat.read(colabs / f"{STEM}.ipynb", as_version=4),
        keep=(LEFT_AS_STARTED,),
    )
    label, text = WRITTEN
    for cell in nb.cells:
        role = cell.metadata.get("student_edition", {})
        if role.get("role") == "answer" and role.get("exercise") == label:
            cell.source = text
    nb.cells += [nbformat.v4.new_code_cell(textwrap.dedent(s).strip()) for s in (WRONG, BOOK_CODE)]
    nb.cells.append(nbformat.v4.new_code_cell(MEMORY))
    return nb


def grade_both(tmp: Path) -> dict[str, list[dict]]:
    folder = tmp / "submissions"
    folder.mkdir()
    for language, (_, _, name) in EDITIONS.items():
        nbformat.write(submission(language), folder / f"{name}_{STEM}.ipynb")
    rows, _ = run_grade(folder, *REFERENCE_LIMITS)
    return {
        language: [r for r in rows if r["student"] == name]
        for language, (_, _, name) in EDITIONS.items()
    }


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, list[dict]]:
    """Language -> the rows of its submission, both graded in one run, once for the session
    (tests/conftest.py: once_per_session; a module fixture graded them once per worker)."""
    return once_per_session(tmp_path_factory, "grade-korean", grade_both)


def key(row: dict) -> tuple[str, str, str]:
    return row["exercise"], row["check"], row["function"]


def test_the_grader_reads_the_language_from_the_notebooks_metadata():
    for language, (students, colabs, _) in EDITIONS.items():
        for folder in (students, colabs):
            nb = json.loads((folder / f"{STEM}.ipynb").read_text(encoding="utf-8"))
            assert grade.submission_language(nb) == language, folder
    korean = json.loads((EDITIONS["ko"][0] / f"{STEM}.ipynb").read_text(encoding="utf-8"))
    korean["metadata"]["colab_edition"]["language"] = "fr"  # not a language of the book
    assert grade.submission_language(korean) == "en"
    for broken in ({}, [], {"metadata": {"colab_edition": "ko"}}, {"metadata": None}):
        assert grade.submission_language(broken) == "en"


def test_the_verdicts_are_the_same_in_both_languages(graded):
    english, korean = graded["en"], graded["ko"]
    for language, rows in graded.items():
        assert {r["chapter"] for r in rows} == {STEM}, language
        every_exercise_has_a_row(STEM, [r for r in rows if r["exercise"] != grade.NOTEBOOK_ROW])
    same = ("exercise", "check", "function", "status", "points", "max_points", "chapter")
    assert [{k: r[k] for k in same} for r in korean] == [{k: r[k] for k in same} for r in english]
    assert [bool(r["flags"]) for r in korean] == [bool(r["flags"]) for r in english]
    statuses = {key(r): r["status"] for r in english}
    assert statuses[("ex-softmax-stable", "check_softmax_temperature", "my_softmax")] == "passed"
    assert statuses[
        ("ex-log-softmax", "check_log_softmax_backward", "my_log_softmax_backward")
    ] == ("failed")
    for checked in (
        ("ex-softmax-jacobian", "check_softmax_jacobian", "my_softmax_jacobian"),
        ("ex-entropy-temperature", "check_entropy", "my_entropy"),
    ):
        assert statuses[checked] == "not attempted", checked
    assert statuses[("ex-softmax-by-hand", "", "")] == "manual"
    assert statuses[("ex-entropy-temperature", "", "H_of_tau")] == "manual"
    assert [r["status"] for r in notebook_rows(english)] == ["error"]


def test_the_english_messages_are_the_graders_english(graded):
    messages = {key(r): r["message"] for r in graded["en"]}
    assert messages[("ex-softmax-by-hand", "", "")] == (
        f"graded by hand: a written answer of {len(WRITTEN[1])} characters"
    )
    assert messages[("ex-softmax-jacobian", "", "")] == (
        "the answer to Exercise 1.2 is still its starting cell: not attempted"
    )
    assert messages[("ex-softmax-jacobian", "check_softmax_jacobian", "my_softmax_jacobian")] == (
        "my_softmax_jacobian raises NotImplementedError: not attempted yet"
    )
    assert messages[("ex-entropy-temperature", "", "H_of_tau")] == (
        "graded by hand: H_of_tau of Exercise 1.5 has no self-check"
    )
    assert messages[("ex-entropy-temperature", "check_entropy", "my_entropy")] == (
        "this calls helpers.softmax.entropy, the book's own version: the exercise asks you "
        "to write it"
    )
    flags = {key(r): r["flags"] for r in graded["en"]}
    assert flags[("ex-entropy-temperature", "check_entropy", "my_entropy")] == (
        "calls the book's own helpers.softmax.entropy"
    )
    (event,) = notebook_rows(graded["en"])
    assert re.fullmatch(
        r"cell \d+ \('raise MemoryError\(\)'\) ran out of memory \(MemoryError at the "
        r"memory limit of 2048 MB\)",
        event["message"],
    ), event["message"]


def test_the_korean_messages_are_korean_and_the_self_checks_as_in_colab(graded):
    english = {key(r): r for r in graded["en"]}
    for row in graded["ko"]:
        if not row["message"]:  # passed: no message
            assert row["status"] == "passed", row
            continue
        assert HANGUL.search(row["message"]), row
        assert not _english_prose(row["message"]), row
        if row["exercise"] != grade.NOTEBOOK_ROW:
            assert row["message"] != english[key(row)]["message"], row
        for flag in filter(None, row["flags"].split("; ")):
            assert HANGUL.search(flag) and not _english_prose(flag), row
    korean = {key(r): r["message"] for r in graded["ko"]}
    assert korean[("ex-softmax-by-hand", "", "")] == (
        f"직접 채점: 글자 수 {len(WRITTEN[1])}의 서술형 답"
    )
    assert korean[("ex-softmax-jacobian", "", "")] == (
        "연습 문제 1.2의 답이 아직 시작 셀 그대로입니다: 시도하지 않음"
    )
    flags = {key(r): r["flags"] for r in graded["ko"]}
    assert flags[("ex-entropy-temperature", "check_entropy", "my_entropy")] == (
        "책 자체의 helpers.softmax.entropy을(를) 호출함"
    )
    (event,) = notebook_rows(graded["ko"])
    assert re.fullmatch(
        r"셀 \d+ \('raise MemoryError\(\)'\)에서 메모리가 부족했습니다 "
        r"\(메모리 제한 2048 MB에서 MemoryError\)",
        event["message"],
    ), event["message"]
    # The self-checks' messages are the ones the student reads in Colab, in both languages.
    wrong = {}
    exec(textwrap.dedent(WRONG), {"np": np}, wrong)
    exec(textwrap.dedent(BOOK_CODE), {}, wrong)
    for check in (
        ("ex-log-softmax", "check_log_softmax_backward", "my_log_softmax_backward"),
        ("ex-entropy-temperature", "check_entropy", "my_entropy"),
    ):
        for language in ("en", "ko"):
            helpers.set_language(language)
            try:
                expected = run_self_check(check[1], wrong, check[2]).message
            finally:
                helpers.set_language("en")
            assert {key(r): r["message"] for r in graded[language]}[check] == expected, language


def test_gradescope_feedback_is_in_the_submissions_language(graded, tmp_path, monkeypatch):
    """results.json from these rows (gradescope.run, with the grading itself replaced by the
    rows above), and the zip that carries the Korean student notebook."""
    reports = {}
    for language, rows in graded.items():
        root = tmp_path / language
        (root / "source").mkdir(parents=True)
        (root / "source" / "chapter.txt").write_text(f"{STEM}\n")
        (root / "submission").mkdir()
        nbformat.write(submission(language), root / "submission" / "homework.ipynb")

        def grading(command, rows=rows, **_):
            out = command[command.index("--out") + 1]
            with open(out, "w", newline="", encoding="utf-8") as f:
                writer = csv.DictWriter(f, fieldnames=grade.COLUMNS)
                writer.writeheader()
                writer.writerows(rows)
            return type("Done", (), {"returncode": 0, "stdout": "", "stderr": ""})()

        monkeypatch.setattr(gradescope.subprocess, "run", grading)
        assert gradescope.run(root) == 0
        reports[language] = json.loads((root / "results" / "results.json").read_text())
    english, korean = reports["en"], reports["ko"]
    drop = ("name", "output")
    assert [{k: v for k, v in t.items() if k not in drop} for t in korean["tests"]] == [
        {k: v for k, v in t.items() if k not in drop} for t in english["tests"]
    ]
    assert korean["score"] == english["score"]
    names = [t["name"] for t in english["tests"]]
    assert "Exercise 1.1: written answer" in names
    assert "Exercise 1.3: my_softmax, check_softmax_temperature" in names
    assert "연습 문제 1.1: 서술형 답" in [t["name"] for t in korean["tests"]]
    outputs = {t["name"]: t["output"] for t in english["tests"]}
    assert outputs["Exercise 1.2: my_softmax_jacobian, check_softmax_jacobian"] == (
        "not attempted: my_softmax_jacobian raises NotImplementedError: not attempted yet"
    )
    assert outputs["Exercise 1.1: written answer"] == (
        f"Marked by hand (1 point): graded by hand: a written answer of {len(WRITTEN[1])} "
        "characters"
    )
    for test in korean["tests"]:
        for text in (test["name"], test["output"]):
            assert HANGUL.search(text) and not _english_prose(text), test
    assert HANGUL.search(korean["output"]) and "MemoryError" in korean["output"]
    with zipfile.ZipFile(gradescope.build(STEM, tmp_path / f"{STEM}.zip")) as z:
        names = set(z.namelist())
    assert {f"editions/ko/student/{STEM}.ipynb", "scripts/grade_i18n.py"} <= names


def test_the_graders_parent_process_does_not_import_the_whole_of_helpers():
    """grade.py's words come from helpers/i18n.py alone (scripts/grade_i18n.py): the
    parent process, which grades nothing itself, does not pay for the import of every
    module of the book (numpy, matplotlib: about 3 s). (The worker, which imports helpers
    after it, finds the same module with the language it set: the Korean self-checks'
    messages above show it.)"""
    import subprocess

    code = (
        "import sys; sys.path.insert(0, 'scripts'); import grade; "
        "print(*sorted(m for m in sys.modules if m.split('.')[0] in ('helpers', 'matplotlib')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["helpers.i18n"]
