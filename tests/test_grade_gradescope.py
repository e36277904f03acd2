"""`make gradescope`'s autograder zip, run as Gradescope runs it, in a simulated layout:
the zip unpacked into AUTOGRADER_ROOT/source, ``setup.sh`` run once, then
``run_autograder`` on a right, a wrong and a blank submission, each in its own layout.
results.json is checked against the fields Gradescope's autograder specification
documents (the total, and per test: name, score, max_score, status, output, visibility).

The set-up installs nothing here: AUTOGRADER_PYTHON names this environment's Python
(Gradescope's image gets a virtual environment with requirements.txt instead).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

import nbformat

from tests.conftest import ROOT
from tests.test_grade import SETUP, UNSEALED, WRONG_SOFTMAX, chapter_one, notebook

sys.path.insert(0, str(ROOT / "scripts"))
import grade
import gradescope

TOP = {
    "score",
    "execution_time",
    "output",
    "output_format",
    "test_output_format",
    "test_name_format",
    "visibility",
    "stdout_visibility",
    "extra_data",
    "tests",
    "leaderboard",
}
TEST = {
    "score",
    "max_score",
    "status",
    "name",
    "name_format",
    "number",
    "output",
    "output_format",
    "tags",
    "visibility",
    "extra_data",
}
VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}


def valid(report: dict) -> None:
    """results.json as Gradescope's specification documents it."""
    assert set(report) <= TOP, set(report) - TOP
    assert isinstance(report["score"], float | int)
    assert report["visibility"] in VISIBILITY and report["stdout_visibility"] in VISIBILITY
    for test in report["tests"]:
        assert set(test) <= TEST, set(test) - TEST
        assert {"name", "score", "max_score", "output", "visibility"} <= set(test)
        assert isinstance(test["name"], str) and isinstance(test["output"], str)
        assert 0 <= test["score"] <= test["max_score"] or test["max_score"] == 0 == test["score"]
        assert test["status"] in ("passed", "failed") and test["visibility"] in VISIBILITY
    assert report["score"] == sum(t["score"] for t in report["tests"])


def test_the_autograder_zip_grades_right_wrong_and_blank_submissions(tmp_path):
    zip_path = gradescope.build("01_softmax", tmp_path / "01_softmax.zip")
    with zipfile.ZipFile(zip_path) as z:
        names = z.namelist()
        assert {"setup.sh", "run_autograder"} <= set(names)  # at the root
        assert (z.getinfo("run_autograder").external_attr >> 16) & 0o111
        submissions = {
            "right": chapter_one(),
            "wrong": chapter_one(my_softmax=WRONG_SOFTMAX),
            "blank": notebook(SETUP),
        }
        running = {}
        for name, nb in submissions.items():
            root = tmp_path / name / "autograder"
            z.extractall(root / "source")
            (root / "submission").mkdir(parents=True)
            (root / "results").mkdir()
            nbformat.write(nb, root / "submission" / "homework.ipynb")
            env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
            if UNSEALED:  # where this machine cannot seal (tests/test_grade.py)
                env["GRADESCOPE_UNSEALED"] = "1"
            subprocess.run(["bash", str(root / "source" / "setup.sh")], check=True, env=env)
            (root / "run_autograder").write_bytes((root / "source" / "run_autograder").read_bytes())
            (root / "run_autograder").chmod(0o755)
            running[name] = subprocess.Popen(
                [str(root / "run_autograder")], cwd=root, env=env, stdout=subprocess.PIPE
            )
    reports = {}
    for name, proc in running.items():
        proc.communicate(timeout=900)
        assert proc.returncode == 0, name
        reports[name] = json.loads(
            (tmp_path / name / "autograder/results/results.json").read_text()
        )
    checks = grade.graded_items(grade.load_exercises()["01_softmax"])
    for name, report in reports.items():
        valid(report)
        checked = [t for t in report["tests"] if "check_" in t["name"]]
        assert len(checked) == len(checks), name
    right, wrong, blank = reports["right"], reports["wrong"], reports["blank"]
    assert all(t["status"] == "passed" for t in right["tests"] if "check_" in t["name"])
    assert right["score"] == sum(t["max_score"] for t in right["tests"]) > 0
    by_hand = [t for t in right["tests"] if "check_" not in t["name"]]
    assert by_hand and all(t["max_score"] == 0 for t in by_hand)  # Gradescope's manual part
    (softmax,) = [t for t in wrong["tests"] if "check_softmax_temperature" in t["name"]]
    assert softmax["status"] == "failed" and softmax["score"] == 0
    assert "the output contains nan" in softmax["output"]
    assert wrong["score"] == right["score"] - softmax["max_score"]
    assert blank["score"] == 0
    (written,) = [t for t in blank["tests"] if t["name"] == "Exercise 1.1: written answer"]
    assert written["max_score"] == 0 and written["output"].startswith("Marked by hand (1 point): ")


def test_no_notebook_submitted_is_a_score_of_zero_that_says_why(tmp_path):
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "source" / "chapter.txt").write_text("01_softmax\n")
    (root / "submission").mkdir()
    (root / "submission" / "answers.pdf").write_bytes(b"%PDF")
    assert gradescope.run(root) == 0
    report = json.loads((root / "results" / "results.json").read_text())
    valid(report)
    assert report["score"] == 0 and report["tests"] == []
    assert report["output"].startswith("No notebook (.ipynb) was submitted")


def test_the_zip_carries_every_module_of_the_grader():
    # grade.py imports its sibling modules (the sandbox, the wire, seccomp, near-copies):
    # a module left out of the zip loses its part of the grading on Gradescope.
    modules = {f"scripts/{p.name}" for p in (ROOT / "scripts").glob("grade_*.py")}
    assert modules <= set(gradescope.SOURCES), sorted(modules - set(gradescope.SOURCES))
