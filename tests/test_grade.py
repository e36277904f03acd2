"""The grading command, scripts/grade.py, on reference, student and misbehaving notebooks.

Each test runs the command itself (a subprocess, as `make grade` does) on a folder of
notebooks and reads the CSV it writes. The limits are small where the notebooks are
small (a loop costs two time limits: the student's own check cell, then the grading).
"""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
import yaml

from tests.conftest import ROOT, once_per_session, sample

sys.path.insert(0, str(ROOT / "scripts"))
import grade

CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
STUDENT = ROOT / "editions" / "student"
EXERCISES = grade.load_exercises()


# Where the submissions cannot be sealed off (not root, no bubblewrap, no cgroup), these
# tests grade without isolation, as --without-isolation allows (tests/test_grade_hostile.py
# is then skipped, with the reason printed).
from grade_sandbox import Isolation  # noqa: E402

UNSEALED = () if Isolation.detect().available else ("--without-isolation",)


def run_grade(folder: Path, *options: str) -> tuple[list[dict], str]:
    """Run the command on `folder`; return the CSV's rows and what it printed."""
    out = folder.parent / f"{folder.name}.csv"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "grade.py"),
            str(folder),
            "--out",
            str(out),
            *options,
            *UNSEALED,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with out.open() as f:
        rows = list(csv.DictReader(f))
    assert rows and list(rows[0]) == list(grade.COLUMNS)
    return rows, done.stdout


def expected_items(stem: str) -> list[tuple[str, str, str]]:
    """The self-check rows of a chapter: (exercise, check, function)."""
    return grade.graded_items(EXERCISES[stem])


def expected_hand_items(stem: str) -> list[tuple[str, str, str]]:
    """The rows nothing checks: (exercise, "", function or "")."""
    return grade.hand_items(stem, EXERCISES[stem])


def every_exercise_has_a_row(stem: str, rows: list[dict]) -> None:
    """Rows in the book's order, the self-checks' and the ones to read by hand, and every
    exercise of book/exercises.yml among them."""
    order = [e["label"] for e in EXERCISES[stem]]
    labels = [r["exercise"] for r in rows if r["exercise"] != grade.NOTEBOOK_ROW]
    assert sorted(set(labels), key=order.index) == order
    assert labels == sorted(labels, key=order.index)
    assert [(r["exercise"], r["check"], r["function"]) for r in rows if r["check"]] == (
        expected_items(stem)
    )
    hand = [r for r in rows if not r["check"] and r["exercise"] != grade.NOTEBOOK_ROW]
    assert [(r["exercise"], r["check"], r["function"]) for r in hand] == expected_hand_items(stem)
    for r in hand:  # a written part, or a function no check grades
        assert r["status"] in ("manual", "not attempted"), r


def notebook(*cells: str, metadata: dict | None = None) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata.update(metadata or {})
    nb.cells = [nbformat.v4.new_code_cell(textwrap.dedent(c).strip()) for c in cells]
    return nb


# ---------------------------------------------------------------------------
# Submissions of chapter 1, written for the test: right, wrong, looping, hogging, crashing
# ---------------------------------------------------------------------------

SETUP = """
    import numpy as np
    import helpers
    """
RIGHT = {
    "my_softmax_jacobian": """
        def my_softmax_jacobian(z):
            p = helpers.softmax(z)
            return np.diag(p) - np.outer(p, p)
        """,
    "my_softmax": """
        def my_softmax(z, tau=1.0):
            z = np.asarray(z, dtype=float)
            top = z.max(axis=-1, keepdims=True)
            seen = np.isfinite(top)  # False for a row of -inf
            if tau == 0:
                e = ((z == top) & seen).astype(float)
            else:
                e = np.exp((z - np.where(seen, top, 0.0)) / tau)
            total = e.sum(axis=-1, keepdims=True)
            return e / np.where(total > 0, total, 1.0)
        """,
    "my_log_softmax_backward": """
        def my_log_softmax_backward(z, g):
            p = helpers.softmax(z)
            return g - p * g.sum(axis=-1, keepdims=True)
        """,
    "my_entropy": """
        def my_entropy(p):
            q = p[p > 0]
            return -np.sum(q * np.log(q))
        """,
}
WRONG_SOFTMAX = """
    def my_softmax(z, tau=1.0):  # the textbook formula: overflows for large logits
        e = np.exp(np.asarray(z) / tau)
        return e / e.sum(axis=-1, keepdims=True)
    """
LOOPING_ENTROPY = """
    def my_entropy(p):
        total = 0.0
        while True:  # never returns
            total += 1.0
    """
# np.empty reserves address space, which the limit (RLIMIT_AS) counts, without writing
# to it: the test reaches the limit in milliseconds instead of filling 2 GB of memory.
HOGGING_SOFTMAX = """
    def my_softmax(z, tau=1.0):
        blocks = []
        while True:  # allocates without bound
            blocks.append(np.empty(10**7))
    """
HOGGING_CELL = "hoard = [np.empty(10**7) for _ in range(10**6)]"  # 80 TB


def chapter_one(*extra: str, **replaced: str) -> nbformat.NotebookNode:
    """A chapter-1 submission: each function in its own cell, followed by its self-check."""
    cells = [SETUP, *extra]
    checks = {f: c for _, c, f in expected_items("01_softmax")}
    missing = sorted(set(checks) - set(RIGHT))
    if missing:
        pytest.fail(
            f"book/exercises.yml grades {', '.join(missing)} in chapter 1, but tests/test_grade.py "
            "has no right answer for it: add one to the RIGHT dict there (the function's "
            "source, as a student would write it)"
        )
    for function, source in RIGHT.items():
        cells.append(replaced.get(function, source))
        cells.append(f"helpers.checks.{checks[function]}({function})")
    return notebook(*cells)


# Long enough for a sealed kernel to import helpers on a loaded machine (the first cell;
# 10 s was not at a load of 18 on two cores, where importing helpers took 6.5 s alone).
CELL_TIMEOUT = "20"
# The limits of the chapter-1 class graded once for the session (tests/test_grade_class.py:
# these six students, the instructors' class and the chapter's reference solutions).
CLASS_LIMITS = ("--cell-timeout", CELL_TIMEOUT, "--memory-mb", "2048", "--total-timeout", "600")


def write_a_class(folder: Path) -> list[str]:
    """Write six chapter-1 submissions into ``folder``; return their students' names."""
    submissions = {
        "alice_01_softmax.ipynb": chapter_one(),
        "bob_01_softmax.ipynb": chapter_one(my_softmax=WRONG_SOFTMAX, my_entropy=LOOPING_ENTROPY),
        "carol_01_softmax.ipynb": chapter_one(HOGGING_CELL, my_softmax=HOGGING_SOFTMAX),
        # Crashes its kernel half-way: the run must go on with the next notebook.
        "dave_01_softmax.ipynb": notebook(SETUP, RIGHT["my_softmax"], "import os\nos._exit(1)"),
        # Named only like the chapter: the folder names the student.
        "erin/Copy of 01_softmax.ipynb": chapter_one(),
        "frank_homework.ipynb": notebook(SETUP),  # no way to tell the chapter
    }
    for name, nb in submissions.items():
        (folder / name).parent.mkdir(exist_ok=True)
        nbformat.write(nb, folder / name)
    return ["alice", "bob", "carol", "dave", "erin", "frank_homework"]


def chapter_one_class(tmp_path_factory) -> dict:
    """The chapter-1 class graded once for the session, in one run of the command
    (tests/test_grade_class.py's shared_class): rows, printed summary, students."""
    from tests.test_grade_class import shared_class  # (that module imports this one)

    return shared_class(tmp_path_factory)


def grade_a_class(tmp_path_factory) -> tuple[dict[str, list[dict]], str, list[str]]:
    """Each student's rows of the shared chapter-1 class, what the command printed, and
    every student the class has (these six among them)."""
    done = chapter_one_class(tmp_path_factory)
    by_student: dict[str, list[dict]] = {}
    for row in done["rows"]:
        by_student.setdefault(row["student"], []).append(row)
    return by_student, done["printed"], done["students"]


def graded_rows(rows: list[dict]) -> dict[str, dict]:
    """The self-check rows, by function."""
    return {r["function"]: r for r in rows if r["check"]}


def notebook_rows(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["exercise"] == grade.NOTEBOOK_ROW]


def check_every_student_is_named_and_gets_a_row_per_self_check(class_results):
    by_student, _, students = class_results
    # every student of the shared class named as expected (these six among them)
    assert sorted(by_student) == sorted(students)
    assert {"alice", "bob", "carol", "dave", "erin", "frank_homework"} <= set(students)
    for student in ("alice", "bob", "carol", "dave", "erin"):
        graded = [r for r in by_student[student] if r["exercise"] != grade.NOTEBOOK_ROW]
        every_exercise_has_a_row("01_softmax", graded)
        assert {r["chapter"] for r in graded} == {"01_softmax"}


def check_a_right_submission_passes_everything(class_results):
    by_student, *_ = class_results
    for student in ("alice", "erin"):
        rows = by_student[student]
        assert {r["status"] for r in graded_rows(rows).values()} == {"passed"}, rows
        assert not notebook_rows(rows)
        # what no check grades: their notebooks define none of it (read from the source),
        # and have no answer cells (tests/test_grade_class.py has the student notebook's)
        hand = {r["function"]: r for r in rows if not r["check"]}
        written = [r for r in rows if not r["check"] and not r["function"]]
        assert {r["status"] for r in written} == {"not attempted"}
        assert written[0]["message"] == "no answer cell for Exercise 1.1: not attempted"
        assert hand["H_of_tau"]["status"] == "not attempted"
        assert hand["H_of_tau"]["message"] == "H_of_tau is not defined: not attempted"


def check_exactly_the_wrong_answer_and_the_infinite_loop_are_reported(class_results):
    by_student, *_ = class_results
    rows = by_student["bob"]
    graded = graded_rows(rows)
    wrong = {f: r for f, r in graded.items() if r["status"] != "passed"}
    assert sorted(wrong) == ["my_entropy", "my_softmax"]
    assert wrong["my_softmax"]["status"] == "failed"
    assert wrong["my_softmax"]["message"].startswith(
        "logits near 1e4 (tau = 2): the output contains nan"
    )
    assert wrong["my_entropy"]["status"] == "error"
    assert (
        wrong["my_entropy"]["message"]
        == f"time limit: my_entropy did not return within {CELL_TIMEOUT} s"
    )
    if not UNSEALED:  # sealed, helpers.checks is a stub in the kernel: the cell raises
        assert not notebook_rows(rows)
        return
    # The notebook's own check cell looped too: the (notebook) row names that cell.
    (note,) = notebook_rows(rows)
    assert note["status"] == "error"
    assert f"was stopped by the time limit of {CELL_TIMEOUT} s per cell" in note["message"]
    assert "('helpers.checks.check_entropy(my_entropy)')" in note["message"]


def check_unbounded_allocation_is_stopped_by_the_memory_limit(class_results):
    by_student, *_ = class_results
    rows = by_student["carol"]
    graded = graded_rows(rows)
    assert graded["my_softmax"]["status"] == "error"
    assert graded["my_softmax"]["message"].startswith(
        "memory limit: my_softmax ran out of memory (MemoryError at the memory limit of 2048 MB)"
    )
    assert {r["status"] for f, r in graded.items() if f != "my_softmax"} == {"passed"}
    # The cell that hoarded at the top level: reported, and its memory freed for the rest.
    (note,) = notebook_rows(rows)
    assert note["message"] == (
        f"cell 2 ({HOGGING_CELL!r}) ran out of memory (MemoryError at the memory limit of 2048 MB)"
    )


def check_a_crashed_kernel_gets_clear_rows_and_the_run_goes_on(class_results):
    by_student, printed, _ = class_results
    rows = by_student["dave"]
    assert {r["status"] for r in graded_rows(rows).values()} == {"error"}
    assert notebook_rows(rows)[0]["status"] == "error"
    (note,) = notebook_rows(rows)
    assert note["message"] == "the kernel died in cell 3 ('import os') (exit status 1)"
    assert all(
        r["message"].startswith("not graded: the kernel died") for r in graded_rows(rows).values()
    )
    # Notebooks after it were graded (the summary has a line for each).
    for student in ("erin", "frank_homework"):
        assert any(line.startswith(student) for line in printed.splitlines())


def check_a_notebook_of_no_known_chapter_gets_one_clear_row(class_results):
    by_student, *_ = class_results
    (row,) = by_student["frank_homework"]
    assert row["exercise"] == grade.NOTEBOOK_ROW and row["status"] == "error"
    assert row["message"].startswith("cannot tell which chapter this is")


def test_a_class_of_right_wrong_looping_hogging_and_crashing_notebooks(tmp_path_factory):
    # One grading run for all of them (each check_* below looks at one aspect), shared
    # with tests/test_grade_class.py's class and chapter 1's reference solutions.
    results = grade_a_class(tmp_path_factory)
    check_every_student_is_named_and_gets_a_row_per_self_check(results)
    check_a_right_submission_passes_everything(results)
    check_exactly_the_wrong_answer_and_the_infinite_loop_are_reported(results)
    check_unbounded_allocation_is_stopped_by_the_memory_limit(results)
    check_a_crashed_kernel_gets_clear_rows_and_the_run_goes_on(results)
    check_a_notebook_of_no_known_chapter_gets_one_clear_row(results)


# ---------------------------------------------------------------------------
# Who and which chapter, without running anything
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("relative", "student"),
    [
        ("alice.ipynb", "alice"),
        ("alice_01_softmax.ipynb", "alice"),
        ("01_softmax-alice.ipynb", "alice"),
        ("Copy of 01_softmax - alice.ipynb", "alice"),
        ("alice/01_softmax.ipynb", "alice"),
        ("alice/Copy of 01_softmax (1).ipynb", "alice"),
        ("01_softmax.ipynb", "01_softmax"),
        # Exports of learning-management systems (scripts/grade.py, LMS_NAMES)
        ("lastfirst_12345_67890_01_softmax.ipynb", "lastfirst"),
        ("lastfirst_LATE_12345_67890_01_softmax.ipynb", "lastfirst"),
        ("Jane Doe_123456_assignsubmission_file_01_softmax.ipynb", "Jane Doe"),
        ("Jane Doe_123456_assignsubmission_file_/01_softmax.ipynb", "Jane Doe"),
        ("Softmax_jdoe_attempt_2024-01-31-12-00-00_01_softmax.ipynb", "jdoe"),
    ],
)
def test_the_student_is_named_by_the_file(tmp_path, relative, student):
    assert grade.student_name(tmp_path / relative, tmp_path, "01_softmax") == student


def test_the_chapter_comes_from_metadata_then_file_name_then_title():
    stems = list(EXERCISES)
    titles = grade.chapter_titles(stems)
    assert titles["01_softmax"] == "The softmax function"
    meta = notebook(
        metadata={"colab_edition": {"chapter": "notebooks/02_scaled_dot_product_attention.ipynb"}}
    )
    assert grade.identify_chapter(meta, Path("01_softmax.ipynb"), stems, titles) == stems[1]
    plain = notebook()
    assert grade.identify_chapter(
        plain, Path("x_04_positional_encodings.ipynb"), stems, titles
    ) == ("04_positional_encodings")
    titled = notebook()
    titled.cells.insert(0, nbformat.v4.new_markdown_cell("# 1. The softmax function\n\nText."))
    assert grade.identify_chapter(titled, Path("homework.ipynb"), stems, titles) == "01_softmax"
    assert grade.identify_chapter(plain, Path("homework.ipynb"), stems, titles) is None


# ---------------------------------------------------------------------------
# The book's own notebooks: every chapter's reference solutions pass; the starting cells
# of the student notebooks are not attempted. Grading executes the whole chapter, so the
# student notebooks are graded for two chapters here (the Colab test, tests/colab, runs
# every student notebook and every self-check on its starting cells). Each chapter is
# graded once for the session: chapter 1's in the shared chapter-1 class
# (tests/test_grade_class.py: its reference solutions, and its student notebook as handed
# out, the class's blank submission), the others together in one run.
# ---------------------------------------------------------------------------

REFERENCE_LIMITS = ("--cell-timeout", "600", "--total-timeout", "1800", "--memory-mb", "2048")
STUDENT_SAMPLE = ("01_softmax", "03_multi_head_attention")
# Grading a chapter executes all of it (19 to 54 s of CPU): `make test` grades the
# references of three chapters (the two above and chapter 7's, whose checks return
# tuples and token arrays); `make test-full` (tests/conftest.py's FULL) grades every
# chapter's. nbval, the student edition's tests and the Colab step run every chapter.
REFERENCE_SAMPLE = {*STUDENT_SAMPLE, "07_bert_gpt_and_moe"}
REFERENCE_CHAPTERS = sample(CHAPTERS, REFERENCE_SAMPLE, key=lambda p: p.stem)
IN_THE_CLASS = "01_softmax"  # graded in the shared chapter-1 class


def grade_the_references(tmp: Path) -> list[dict]:
    """The reference solutions of the sampled chapters but chapter 1 (and their student
    notebooks, for STUDENT_SAMPLE), graded in one run."""
    folder = tmp / "submissions"
    folder.mkdir()
    for chapter in REFERENCE_CHAPTERS:
        if chapter.stem == IN_THE_CLASS:
            continue
        shutil.copy(chapter, folder / f"reference_{chapter.stem}.ipynb")
        if chapter.stem in STUDENT_SAMPLE:
            shutil.copy(STUDENT / chapter.name, folder / f"student_{chapter.stem}.ipynb")
    rows, _ = run_grade(folder, *REFERENCE_LIMITS, "--jobs", "2")
    return rows


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """The references graded once for the session (tests/conftest.py: once_per_session)."""
    return once_per_session(tmp_path_factory, "grade-references", grade_the_references)


@pytest.mark.slow
@pytest.mark.parametrize("chapter", REFERENCE_CHAPTERS, ids=lambda p: p.stem)
def test_reference_solutions_pass_and_starting_cells_are_not_attempted(
    request, tmp_path_factory, chapter
):
    stem = chapter.stem
    if stem == IN_THE_CLASS:
        # (the class's "blank" student submitted the student notebook as handed out)
        rows = chapter_one_class(tmp_path_factory)["rows"]
        names = {"reference": "reference", "student": "blank00"}
    else:
        rows = request.getfixturevalue("references")
        names = {"reference": "reference", "student": "student"}
    rows = [r for r in rows if r["chapter"] == stem]
    expected = {"reference": "passed"}
    if stem in STUDENT_SAMPLE:
        expected["student"] = "not attempted"
    if stem != IN_THE_CLASS:  # every notebook of this run is one of these
        assert {r["student"] for r in rows} == set(expected)
    for who, status in expected.items():
        mine = [r for r in rows if r["student"] == names[who]]
        assert mine, f"no rows for the {who} notebook of {stem}"
        assert not notebook_rows(mine), notebook_rows(mine)
        every_exercise_has_a_row(stem, mine)
        assert {r["chapter"] for r in mine} == {stem}
        wrong = [r for r in mine if r["check"] and r["status"] != status]
        assert not wrong, wrong
        # a function no check grades: the reference defines it, the starting cell is a stub
        for row in mine:
            if row["function"] and not row["check"]:
                assert row["status"] == ("manual" if who == "reference" else status), row
        if status == "not attempted":
            for row in mine:
                if row["function"]:
                    assert (
                        row["message"]
                        == f"{row['function']} raises NotImplementedError: not attempted yet"
                    )


def test_the_sampled_student_notebooks_exist():
    for stem in STUDENT_SAMPLE:
        assert (STUDENT / f"{stem}.ipynb").exists(), stem


def test_the_exercise_list_names_what_the_student_notebooks_check():
    for chapter in CHAPTERS:
        path = STUDENT / chapter.name
        if not path.exists():
            pytest.fail(f"{path} is missing (the student notebooks)")
        meta = nbformat.read(path, as_version=4).metadata.get("student_edition", {})
        recorded = [
            (label, check, function)
            for label, entry in meta.get("exercises", {}).items()
            for check, function in entry.get("checks", [])
        ]
        assert sorted(recorded) == sorted(expected_items(chapter.stem)), chapter.stem


def test_the_list_is_the_one_the_grader_reads():
    data = yaml.safe_load((ROOT / "book" / "exercises.yml").read_text())
    assert list(EXERCISES) == [c["notebook"] for c in data["chapters"]]


def test_two_submissions_of_a_chapter_are_flagged_and_other_files_listed(tmp_path):
    for name in (
        "alice_01_softmax.ipynb",
        "alice/Copy of 01_softmax.ipynb",
        "bob_01_softmax.ipynb",
    ):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        nbformat.write(notebook(SETUP), tmp_path / name)
    (tmp_path / "alice" / "notes.pdf").write_bytes(b"%PDF")
    found = grade.find_submissions(tmp_path, EXERCISES)
    assert [s.student for s in found] == ["alice", "alice", "alice", "bob"]  # grouped
    assert sorted((s.path.name, s.notebook) for s in found) == [
        ("Copy of 01_softmax.ipynb", True),
        ("alice_01_softmax.ipynb", True),
        ("bob_01_softmax.ipynb", True),
        ("notes.pdf", False),
    ]
    for s in found:
        s.rows = [{"flags": "", "exercise": grade.NOTEBOOK_ROW, "message": "", "status": ""}]
    groups = grade.flag_duplicates(found)
    assert [[s.path.name for s in g] for g in groups] == [
        ["Copy of 01_softmax.ipynb", "alice_01_softmax.ipynb"]
    ]
    flags = {s.path.name: s.rows[0]["flags"] for s in found}
    assert flags["alice_01_softmax.ipynb"] == "duplicate (also Copy of 01_softmax.ipynb)"
    assert flags["bob_01_softmax.ipynb"] == flags["notes.pdf"] == ""
    text = grade.summary(found, True, groups)
    assert "more than one submission" in text and "notes.pdf" in text


def test_without_isolation_the_command_refuses_and_says_why(tmp_path, monkeypatch, capsys):
    import grade_sandbox

    missing = grade_sandbox.Isolation("bwrap is not installed (Debian package bubblewrap)")
    monkeypatch.setattr(grade_sandbox.Isolation, "detect", staticmethod(lambda: missing))
    nbformat.write(notebook(SETUP), tmp_path / "alice_01_softmax.ipynb")
    assert grade.main([str(tmp_path), "--out", str(tmp_path / "out.csv")]) == 2
    err = capsys.readouterr().err
    assert "bwrap is not installed" in err and "--without-isolation" in err
    assert not (tmp_path / "out.csv").exists()


def test_what_no_check_grades_is_read_from_the_source_never_run(monkeypatch):
    """Every exercise gets a row; a function the starting cells define and no check grades
    is "not attempted" while undefined or still its starting cell, "manual" once written;
    an exercise with only an answer to read is "manual"."""
    exercises = [
        {"label": "ex-a", "checks": [{"check": "check_softmax", "function": "my_softmax"}]},
        {"label": "ex-b", "checks": []},
        {"label": "ex-c", "checks": []},
    ]
    listed = {
        "ex-a": {"number": "9.1", "functions": ["my_softmax", "helper"]},
        "ex-b": {"number": "9.2", "functions": []},
        "ex-c": {"number": "9.3", "functions": ["rms"]},
    }
    monkeypatch.setattr(grade, "student_edition_exercises", lambda stem: listed)
    assert grade.hand_items("99_x", exercises) == [
        ("ex-a", "", "helper"),
        ("ex-b", "", ""),
        ("ex-c", "", "rms"),
    ]
    stub = 'def rms(x):\n    """What it returns."""\n    raise NotImplementedError()'
    written = "def rms(x):\n    return x"
    cases = {
        "undefined": (["x = 1", "%pip install nothing"], "not attempted", "is not defined"),
        "stub": ([stub], "not attempted", "raises NotImplementedError"),
        "written": ([stub, written], "manual", "rms of Exercise 9.3 has no self-check"),
        "written, then reset": ([written, stub], "not attempted", "NotImplementedError"),
    }
    for name, (cells, status, words) in cases.items():
        rows = grade.hand_rows("99_x", exercises, notebook(*cells))
        by_function = {r["function"]: r for r in rows}
        assert by_function["rms"]["status"] == status, name
        assert words in by_function["rms"]["message"], name
        assert by_function[""] == {
            "exercise": "ex-b",
            "check": "",
            "function": "",
            "status": "manual",
            "message": "graded by hand: read the answer to Exercise 9.2",
            "answer": "",
        }
    checked = [{"exercise": "ex-a", "check": "check_softmax", "function": "my_softmax"}]
    rows = grade.in_book_order(checked, grade.hand_rows("99_x", exercises, notebook()), exercises)
    assert [(r["exercise"], r["function"]) for r in rows] == [
        ("ex-a", "my_softmax"),
        ("ex-a", "helper"),
        ("ex-b", ""),
        ("ex-c", "rms"),
    ]
