"""A class of generated submissions of chapter 1 (right, wrong, blank, partly written,
slips: 30 under `make test-full`, 5 in `make test`) taken through the whole path of
issue 37: `make grade`'s command, its CSV (every part of every exercise, written ones
included, with points), the marking sheet in a browser (answers rendered, maths typeset
offline, points entered and saved), the merge of those marks (scripts/gradebook.py), and
the Canvas and Moodle grade books.

The class is graded once per session (shared_class) in one run of the command, beside
tests/test_grade.py's six chapter-1 students and the chapter's reference solutions (each
submission costs a sealed kernel: one run grades them all, and the chapter's student
notebook, as handed out, is both this class's blank submission and test_grade's graded
student notebook); every test reads it.
"""

from __future__ import annotations

import copy
import csv
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from tests.conftest import FULL, ROOT, once_per_session
from tests.test_grade import CLASS_LIMITS, RIGHT, UNSEALED, WRONG_SOFTMAX, write_a_class

sys.path.insert(0, str(ROOT / "scripts"))
import grade
import gradebook

STEM = "01_softmax"
STUDENT = ROOT / "editions" / "student" / f"{STEM}.ipynb"
EXERCISES = grade.load_exercises()[STEM]
ANSWER = {  # a written answer per exercise (maths included)
    "ex-softmax-by-hand": "With $e^{z_i} = (1, 2, 3)$ the sum is 6, so the softmax is "
    "$(1/6, 1/3, 1/2)$ and $\\operatorname{LSE}(\\mathbf z) = \\log 6$.",
    "ex-softmax-jacobian": "By the quotient rule,\n\n$$\\frac{\\partial p_i}{\\partial z_j} "
    "= p_i(\\delta_{ij} - p_j).$$",
    "ex-softmax-stable": "I predict that the naive version returns `nan` for logits near "
    "$10^4$, because $e^{10^4}$ overflows.",
    "ex-log-softmax": "The gradient is $g - p \\sum_j g_j$; $\\log(\\operatorname{softmax})$ "
    "underflows to $-\\infty$ where $p_i$ rounds to 0.",
    "ex-entropy-temperature": "As $\\tau \\to 0$ the entropy goes to 0; as "
    "$\\tau \\to \\infty$ it goes to $\\log n$.",
    "ex-gumbel-max": "Let $G_i$ be Gumbel: $P(\\arg\\max_i (\\log\\pi_i + G_i) = k) = \\pi_k$.",
}
HAND = {
    "H_of_tau": """
def H_of_tau(z, tau):
    p = np.exp(z / tau - np.max(z / tau))
    p = p / p.sum()
    q = p[p > 0]
    return -np.sum(q * np.log(q))
""",
    "my_gumbel_max": """
def my_gumbel_max(log_pi, size, rng):
    return np.argmax(log_pi + rng.gumbel(size=(size, len(log_pi))), axis=-1)
""",
}
SLIP_ENTROPY = """
def my_entropy(p):
    return -np.sum(p * np.log(p))  # 0 log 0 is nan here
"""
KINDS = (
    # (how many, name, functions written (None: all right), written answers, replaced)
    (8 if FULL else 1, "right", None, list(ANSWER), {}),
    (6 if FULL else 1, "wrong", None, list(ANSWER)[:3], {"my_softmax": WRONG_SOFTMAX}),
    (6 if FULL else 1, "blank", [], [], {}),
    (6 if FULL else 1, "partly", ["my_softmax_jacobian", "my_softmax"], list(ANSWER)[:2], {}),
    (4 if FULL else 1, "slip", None, list(ANSWER)[3:], {"my_entropy": SLIP_ENTROPY}),
)
# Students of a kind alternate between writing in the starting cells and in a new cell
# below them; the first of these kinds writes below. So `make test`'s one student of each
# kind (each submission costs a sealed kernel's start, about 7 s of CPU) still has every
# written answer once in its starting cell (right) and once below it (wrong's first
# three, slip's last three); `make test-full` grades a class of 30.
FIRST_BELOW = {"wrong", "slip"}
CLASS_SIZE = sum(count for count, *_ in KINDS)


def submission(functions, answers, replaced, below: bool) -> nbformat.NotebookNode:
    """The student notebook's exercises (the chapter's body left out, for time), with the
    functions and the written answers of this student. ``below``: the answer written in a
    new cell under the starting one, which is left as it was."""
    nb = nbformat.read(STUDENT, as_version=4)
    first = next(
        k for k, c in enumerate(nb.cells) if c.metadata.get("student_edition", {}).get("exercise")
    )
    cells = [nbformat.v4.new_code_cell("import numpy as np\nimport helpers")]
    for cell in nb.cells[first - 1 :]:
        role = cell.metadata.get("student_edition", {})
        label = role.get("exercise")
        if role.get("role") == "answer" and label in answers:
            if below:
                cells.append(cell)
                cell = nbformat.v4.new_markdown_cell(ANSWER[label])
            else:
                cell = copy.deepcopy(cell)
                cell.source = cell.source.split("\n")[0] + "\n>\n> " + ANSWER[label]
        if role.get("role") == "starter":
            name = cell.source.split("(")[0].removeprefix("def ").strip()
            if functions is None or name in functions:
                code = replaced.get(name) or RIGHT.get(name) or HAND[name]
                cell = copy.deepcopy(cell)
                cell.source = code.strip()
        cells.append(cell)
    nb.cells = cells
    return nb


def write_class(folder: Path) -> dict[str, str]:
    """Write the class, named as Canvas names downloads (the wrong ones), as Moodle makes
    folders (the slips) or by hand; return each student's kind."""
    kinds = {}
    for count, kind, functions, answers, replaced in KINDS:
        for k in range(count):
            below = (k % 2 == 1) != (kind in FIRST_BELOW)
            nb = submission(functions, answers, replaced, below=below)
            if kind == "blank":  # the chapter's student notebook as handed out, whole
                nb = nbformat.read(STUDENT, as_version=4)
            name, path = f"{kind}{k:02d}", f"{kind}{k:02d}_{STEM}.ipynb"
            if kind == "wrong":
                path = f"{name}_{12300 + k}_{45600 + k}_{STEM}.ipynb"
            elif kind == "slip":
                name = f"Slip Student{k}"
                path = f"{name}_{5000 + k}_assignsubmission_file_/{STEM}.ipynb"
            (folder / path).parent.mkdir(exist_ok=True)
            nbformat.write(nb, folder / path)
            kinds[name] = kind
    return kinds


def shared_class(tmp_path_factory) -> dict:
    """The chapter-1 class graded once for the session (tests/conftest.py:
    once_per_session), this module's class among it; tests/test_grade.py reads it too."""
    done = once_per_session(tmp_path_factory, "grade-chapter-one", grade_the_class)
    return {**done, "out": Path(done["out"]), "tmp": Path(done["tmp"])}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return shared_class(tmp_path_factory)


def grade_the_class(tmp: Path) -> dict:
    """One run of the command on this module's class, tests/test_grade.py's six students
    (write_a_class) and chapter 1's reference solutions (student "reference")."""
    folder = tmp / "submissions"
    folder.mkdir()
    kinds = write_class(folder)
    students = [*write_a_class(folder), *kinds, "reference"]
    shutil.copy(ROOT / "notebooks" / f"{STEM}.ipynb", folder / f"reference_{STEM}.ipynb")
    notebooks = len(list(folder.rglob("*.ipynb")))
    out = tmp / "results.csv"
    start = time.monotonic()
    command = [sys.executable, str(ROOT / "scripts" / "grade.py"), str(folder), "--out", str(out)]
    done = subprocess.run(
        [*command, "--jobs", "2", *CLASS_LIMITS, *UNSEALED],
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    seconds = time.monotonic() - start
    assert done.returncode == 0, done.stdout + done.stderr
    print(f"\n{notebooks} submissions graded in {seconds:.0f} s\n{done.stdout}")
    rows = gradebook.read_rows(out)
    return {
        "rows": rows,
        "kinds": kinds,
        "students": students,
        "notebooks": notebooks,
        "out": str(out),
        "printed": done.stdout,
        "tmp": str(tmp),
    }


def mine(graded, student):
    return [r for r in graded["rows"] if r["student"] == student]


def parts(rows):
    return {(r["exercise"], r["check"], r["function"]): r for r in rows}


def test_every_part_of_every_exercise_has_a_row_in_book_order(graded):
    expected = [
        ("ex-softmax-by-hand", "", ""),
        ("ex-softmax-jacobian", "", ""),
        ("ex-softmax-jacobian", "check_softmax_jacobian", "my_softmax_jacobian"),
        ("ex-softmax-stable", "", ""),
        ("ex-softmax-stable", "check_softmax_temperature", "my_softmax"),
        ("ex-log-softmax", "", ""),
        ("ex-log-softmax", "check_log_softmax_backward", "my_log_softmax_backward"),
        ("ex-entropy-temperature", "", ""),
        ("ex-entropy-temperature", "check_entropy", "my_entropy"),
        ("ex-entropy-temperature", "", "H_of_tau"),
        ("ex-gumbel-max", "", ""),
        ("ex-gumbel-max", "", "my_gumbel_max"),
    ]
    assert len(graded["kinds"]) == CLASS_SIZE
    for student in graded["kinds"]:
        rows = [r for r in mine(graded, student) if r["exercise"] != grade.NOTEBOOK_ROW]
        assert [(r["exercise"], r["check"], r["function"]) for r in rows] == expected, student


def test_a_written_part_is_not_attempted_until_answered_then_manual_with_its_length(graded):
    for student, kind in graded["kinds"].items():
        written = {r["exercise"]: r for r in mine(graded, student) if not r["function"]}
        answered = {
            "right": list(ANSWER),
            "wrong": list(ANSWER)[:3],
            "blank": [],
            "partly": list(ANSWER)[:2],
            "slip": list(ANSWER)[3:],
        }[kind]
        for label, row in written.items():
            if label in answered:
                assert row["status"] == "manual", (student, row)
                assert row["message"] == (
                    f"graded by hand: a written answer of {len(ANSWER[label])} characters"
                ), (student, row)
                assert row["points"] == "" and float(row["max_points"]) > 0
            else:
                assert row["status"] == "not attempted", (student, row)
                assert row["message"].endswith("is still its starting cell: not attempted")
                assert row["points"] == "0"


def test_the_checks_and_the_points(graded):
    for student, kind in graded["kinds"].items():
        checked = {r["function"]: r for r in mine(graded, student) if r["check"]}
        status = {f: r["status"] for f, r in checked.items()}
        if kind == "right":
            assert set(status.values()) == {"passed"}
        elif kind == "blank":
            assert set(status.values()) == {"not attempted"}
        elif kind == "wrong":
            assert status["my_softmax"] == "failed"
        elif kind == "slip":
            assert status["my_entropy"] == "failed"
        for row in checked.values():
            most = float(row["max_points"])
            assert float(row["points"]) == (most if row["status"] == "passed" else 0)
    got, most, to_mark = grade.score(mine(graded, "right00"))
    assert got == sum(float(r["max_points"]) for r in mine(graded, "right00") if r["check"])
    assert to_mark > 0 and got + to_mark == most
    line = next(x for x in graded["printed"].splitlines() if x.startswith("right00 "))
    assert f"{got:g}/{most:g}" in line.split()


def test_progress_is_shown_while_the_class_is_graded(graded):
    lines = [x for x in graded["printed"].splitlines() if x.strip().startswith("[")]
    total = graded["notebooks"]  # (the whole shared run's: this class is part of it)
    assert len(lines) == total
    assert lines[0].strip().startswith(f"[1/{total}, about ") and " left]" in lines[0]
    assert lines[-1].strip().startswith(f"[{total}/{total}]")


def sheet(graded) -> Path:
    return grade.marking_folder(graded["out"]) / f"{STEM}.html"


def test_the_marking_sheet_shows_the_solution_then_every_answer(graded):
    text = sheet(graded).read_text(encoding="utf-8")
    assert "The book&#x27;s solution" in text or "The book's solution" in text
    # every answered written part of every student, once
    answered = [r for r in graded["rows"] if r["status"] == "manual"]
    assert text.count('<article class="answer"') == len(answered)
    listed = re.findall(r"Not attempted \(0 points\): ([^<]*)<", text)
    assert listed and all("blank00" in names.split(", ") for names in listed)
    assert (sheet(graded).parent / "mathjax" / "tex-chtml.js").exists()


def test_marks_entered_in_the_browser_are_merged_and_exported(graded, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1366, "height": 900}, accept_downloads=True)
    page.route("http*://**", lambda route: route.abort())  # offline: no network at all
    page.goto(sheet(graded).as_uri())
    page.wait_for_function("document.querySelector('mjx-container') !== null", timeout=30_000)
    assert not page.locator("text=$e^{z_i}").count()  # typeset, not raw TeX
    answers = page.locator("article.answer")
    total = answers.count()
    first = answers.nth(0)
    student = first.locator("h4").inner_text()
    key = first.get_attribute("data-key")
    points = float(first.locator("input").get_attribute("max")) / 2  # half the points
    first.locator("input").fill(f"{points:g}")
    first.locator("textarea").fill("Right, but say why the sum is 6.")
    page.screenshot(path=str(graded["tmp"] / "marking-sheet.png"), full_page=False)
    assert page.locator("#count").inner_text() == f"1 of {total} answers marked"
    page.reload()  # kept in the browser as the marker goes
    assert page.locator("article.answer").nth(0).locator("input").input_value() == f"{points:g}"
    with page.expect_download() as download:
        page.locator("#save").click()
    marks = tmp_path / f"marks-{STEM}.json"
    download.value.save_as(marks)
    page.close()
    saved = json.loads(marks.read_text())
    assert saved["marks"][key] == {"points": points, "comment": "Right, but say why the sum is 6."}
    # the second command: merged into the CSV and the grade books
    out = tmp_path / "grades"
    gradebook.main([str(graded["out"]), "--marks", str(marks), "--out", str(out)])
    merged = gradebook.read_rows(out / "results-marked.csv")
    (row,) = [r for r in merged if gradebook.mark_key(r) == key]
    assert row["status"] == "marked" and row["points"] == f"{points:g}"
    assert row["student"] == student
    with (out / "canvas.csv").open(encoding="utf-8") as f:
        canvas = list(csv.reader(f))
    assert canvas[0][:5] == list(gradebook.CANVAS_COLUMNS) and canvas[0][5] == STEM
    assert canvas[1][0] == "Points Possible"
    by_name = {r[0]: r for r in canvas[2:]}
    chaptered = {s for s in graded["students"] if s != "frank_homework"}  # (no chapter)
    assert len(by_name) == len(chaptered)  # the whole shared run's
    right = grade.score([r for r in merged if r["student"] == "right00"])[0]
    assert float(by_name["right00"][5]) == right
    assert by_name["wrong00"][1] == "12300"  # Canvas's user id, from the file's name
    with (out / f"moodle-{STEM}.csv").open(encoding="utf-8") as f:
        moodle = list(csv.DictReader(f))
    assert list(moodle[0]) == list(gradebook.MOODLE_COLUMNS) and len(moodle) == len(chaptered)
    slip = next(r for r in moodle if r["Full name"] == "Slip Student0")
    assert slip["Identifier"] == "Participant 5000"  # Moodle's, from the folder's name
    assert slip["Grade"] == by_name["Slip Student0"][5]
    assert "my_entropy" in slip["Feedback comments"]


def test_an_answer_cannot_run_a_script_in_the_markers_browser():
    import marking

    shown = marking.render_markdown(
        "<script>alert(1)</script> $a<b$ <img src=x onerror=alert(1)>\n\n$$</div><script>$$"
    )
    assert "<script" not in shown and "<img" not in shown and "</div><" not in shown
    assert "\\(a&lt;b\\)" in shown


def test_the_lms_identity_comes_from_the_names_the_lms_gave():
    rows = [
        {"student": "Jane Doe", "notebook": "Jane Doe_123456_assignsubmission_file_/x.ipynb"},
        {"student": "lastfirst", "notebook": "lastfirst_LATE_4321_99_01_softmax.ipynb"},
        {"student": "alice", "notebook": "alice/01_softmax.ipynb"},
    ]
    assert gradebook.identity(rows[:1]) == {"name": "Jane Doe", "canvas": "", "moodle": "123456"}
    assert gradebook.identity(rows[1:2])["canvas"] == "4321"
    assert gradebook.identity(rows[2:]) == {"name": "alice", "canvas": "", "moodle": ""}


def test_a_mark_beyond_the_points_of_its_part_is_refused():
    row = {"student": "a", "chapter": STEM, "exercise": "ex-softmax-by-hand", "function": ""}
    row |= {"status": "manual", "points": "", "max_points": "1", "message": "", "check": ""}
    with pytest.raises(ValueError, match="3 points is not between 0 and 1"):
        gradebook.merge_marks([row], {gradebook.mark_key(row): {"points": 3}})
    (merged,) = gradebook.merge_marks([row], {gradebook.mark_key(row): {"points": 0.5}})
    assert merged["status"] == "marked" and merged["points"] == "0.5"
