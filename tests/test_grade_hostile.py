"""Hostile submissions (issue: grading that a submission cannot game), graded by the real
command in one run: each attack gets no "passed" it did not earn, honest controls get
their rows, nothing they start survives, the CSV does not change after the grader exits,
and a clean submission graded after one that tried to edit the checks is not attempted.

Needs the isolation (root, bubblewrap, cgroup v1 memory and pids): elsewhere every test
here is skipped, with the reason printed.
"""

from __future__ import annotations

import csv
import hashlib
import os
import secrets
import sys
import time
from pathlib import Path

import nbformat
import pytest

from tests.conftest import ROOT
from tests.test_grade import RIGHT, SETUP, chapter_one, notebook

sys.path.insert(0, str(ROOT / "scripts"))
import grade
from grade_sandbox import UID_RANGE, Isolation

ISOLATION = Isolation.detect()
pytestmark = pytest.mark.skipif(
    not ISOLATION.available, reason=f"no isolation on this machine: {ISOLATION.missing}"
)
if not ISOLATION.available:
    print(f"\ntests/test_grade_hostile.py skipped: {ISOLATION.missing}", file=sys.stderr)

# A range of user ids of this run's own (see run_grade).
HOSTILE_UID_BASE = 5_000_000 + secrets.randbelow(1000) * UID_RANGE
ZERO = "def {f}(*args, **kwargs):\n    return np.zeros(3)\n"
WRONG_ALL = "\n".join(ZERO.format(f=f) for f in RIGHT)
CHECKS = ROOT / "helpers" / "checks" / "core.py"

# Each attack replaces every graded function by a wrong one, then tries to be graded
# "passed" anyway. {csv} is the CSV's path, which an attacker could guess.
ATTACKS = {
    "print": """
        import builtins
        _print = builtins.print
        def print(*a, **k):  # the old grader read the status that the check printed
            _print(*[str(x).replace('"failed"', '"passed"') for x in a], **k)
        builtins.print = print
        """,
    "monkeypatch": """
        import sys, importlib.abc
        np.allclose = lambda *a, **k: True
        np.isclose = lambda a, b, *x, **k: np.ones(np.broadcast(a, b).shape, bool)
        np.array_equal = lambda *a, **k: True
        class Hook(importlib.abc.MetaPathFinder):  # patches helpers.checks when re-imported
            def find_spec(self, name, path, target=None):
                if name.startswith("helpers.checks"):
                    sys.modules.pop(name, None)
                return None
        sys.meta_path.insert(0, Hook())
        import helpers.checks
        """,
    "reads": """
        # Copy the right answers from wherever they can be read: the book's notebooks,
        # another student's submission, the folders named on the grader's command line.
        import glob, json, os
        paths = glob.glob("%(book)s/notebooks/01_softmax.ipynb")  # the book itself
        paths += glob.glob("/root/**/01_softmax.ipynb", recursive=True)
        paths += glob.glob("/tmp/**/right_01_softmax.ipynb", recursive=True)
        for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
            try:
                args = open(cmdline, "rb").read().split(b"\\0")
            except OSError:
                continue
            for arg in args:
                folder = arg.decode(errors="ignore")
                if os.path.isdir(folder):
                    paths += glob.glob(os.path.join(folder, "right_*.ipynb"))
        for path in paths:
            try:
                cells = json.load(open(path))["cells"]
            except (OSError, ValueError):
                continue
            for cell in cells:
                source = "".join(cell["source"])
                if cell["cell_type"] == "code" and "def my_" in source:
                    try:
                        exec(source, globals())
                    except Exception:
                        pass
        """,
    "writes": """
        import os, site
        for target in ["%(checks)s", os.path.dirname(np.__file__) + "/__init__.py",
                       site.getsitepackages()[0] + "/evil.pth", "%(csv)s"]:
            try:
                with open(target, "a") as f:
                    f.write("\\nraise SystemExit('tampered')\\n")
                print("WROTE", target)
            except OSError as err:
                print("cannot write", target, type(err).__name__)
        """,
    "detached": """
        import os, subprocess, sys, time
        code = ("import time, os\\ntime.sleep(4)\\n"
                "open(%(csv)r, 'w').write('student,status\\\\nmallory,passed\\\\n')")
        for _ in range(2):  # a double fork, in a session of its own
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    os.execv(sys.executable, [sys.executable, "-c", code])
                os._exit(0)
        subprocess.Popen(["sleep", "600"], start_new_session=True)
        """,
    "processes": """
        import os, time
        kids = []
        for _ in range(2):  # two children each under the memory limit, together above it
            pid = os.fork()
            if pid == 0:
                block = bytearray(400 * 2**20)
                time.sleep(3)
                os._exit(0)
            kids.append(pid)
        n = 0
        try:
            while n < 5000:  # a fork bomb, bounded by the pids limit
                if os.fork() == 0:
                    time.sleep(30)
                    os._exit(0)
                n += 1
        except OSError as err:
            print("fork stopped after", n, err)
        """,
    "flood": """
        import sys
        for _ in range(200):
            sys.stdout.write("x" * 100_000 + "\\n")
        """,
    "forged": """
        import base64, io, pickle
        from IPython import display
        real = display.publish_display_data
        class Evil:
            def __reduce__(self):
                return (print, ("pickle ran",))
        def forged(data, *a, **k):
            answer = next(iter(data.values()))
            if isinstance(answer, dict) and "id" in answer:
                buffer = io.BytesIO()
                np.save(buffer, np.array([Evil()], dtype=object), allow_pickle=True)
                blob = base64.b64encode(buffer.getvalue()).decode()
                answer = {"id": answer["id"], "warnings": [], "raised": None, "peak": None,
                          "changed": [], "result": {"t": "array", "npy": blob},
                          "defined": True, "callable": True, "type": "function", "name": "f"}
                data = {k: answer for k in data}
            return real(data, *a, **k)
        display.publish_display_data = forged
        """,
}


# The attacks, grouped into four submissions to keep the test's time down (each attack is
# a cell of its own: one that raises does not stop the next).
SUBMISSIONS = {
    "tamper": ("print", "monkeypatch", "flood"),  # change the grading in the kernel
    "escape": ("writes", "detached", "processes"),  # reach beyond the kernel
    "reads": ("reads",),  # copy right answers from disk
    "forged": ("forged",),  # send back a crafted answer
}


def hostile(name: str, csv_path: Path) -> nbformat.NotebookNode:
    values = {"checks": str(CHECKS), "csv": str(csv_path), "book": str(ROOT)}
    attacks = SUBMISSIONS.get(name, (name,))
    return notebook(SETUP, WRONG_ALL, *(ATTACKS[a] % values for a in attacks))


def grade_the_hostile_class(tmp: Path):
    folder = tmp / "class"
    folder.mkdir()
    out = tmp / "class.csv"
    checks_before = CHECKS.read_bytes()
    for name in SUBMISSIONS:
        nbformat.write(hostile(name, out), folder / f"a_{name}_01_softmax.ipynb")
    nbformat.write(chapter_one(), folder / "right_01_softmax.ipynb")
    nbformat.write(notebook(SETUP, WRONG_ALL), folder / "wrong_01_softmax.ipynb")
    nbformat.write(notebook(SETUP), folder / "zz_empty_01_softmax.ipynb")
    (folder / "notes.txt").write_text('=HYPERLINK("http://x")')
    start = time.monotonic()
    rows, printed = run_grade(folder, out)
    seconds = time.monotonic() - start
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    time.sleep(6)  # the detached writer wakes after 4 s
    print(f"\nhostile class graded in {seconds:.0f} s (timings noisy on a shared machine)")
    print(printed)
    return rows, printed, out, digest, checks_before


def run_grade(folder: Path, out: Path):
    import subprocess

    # A range of user ids of this run's own: a grader running beside it (another test)
    # has its sandboxes' processes too.
    env = {**os.environ, "GRADE_UID_BASE": str(HOSTILE_UID_BASE)}
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "grade.py"),
            str(folder),
            "--out",
            str(out),
            "--cell-timeout",
            "20",
            "--total-timeout",
            "120",
            "--memory-mb",
            "1024",
            "--jobs",
            "2",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with out.open() as f:
        return list(csv.DictReader(f)), done.stdout


def by_student(rows):
    out: dict[str, list[dict]] = {}
    for row in rows:
        out.setdefault(row["student"], []).append(row)
    return out


def checked(rows: list[dict]) -> list[dict]:
    """The rows of self-checks (the others, read by hand, never say "passed")."""
    return [r for r in rows if r["check"]]


def check_no_attack_gets_a_pass(graded):
    rows, *_ = graded
    students = by_student(rows)
    assert sorted(a for group in SUBMISSIONS.values() for a in group) == sorted(ATTACKS)
    for name in SUBMISSIONS:
        mine = [r for r in students[f"a_{name}"] if r["exercise"] != grade.NOTEBOOK_ROW]
        assert len(checked(mine)) == len(RIGHT), (name, mine)
        assert not [r for r in mine if r["status"] == "passed"], (name, mine)


def check_a_forged_answer_with_a_pickled_object_is_an_error(graded):
    rows, *_ = graded
    mine = checked(by_student(rows)["a_forged"])
    assert {r["status"] for r in mine} == {"error"}, mine
    assert all("not an answer" in r["message"] for r in mine), mine


def check_honest_controls_get_their_rows(graded):
    rows, *_ = graded
    students = by_student(rows)
    assert {r["status"] for r in checked(students["right"])} == {"passed"}
    assert {r["status"] for r in checked(students["wrong"])} == {"failed"}
    assert {r["status"] for r in checked(students["zz_empty"])} == {"not attempted"}


def check_the_checks_on_disk_are_untouched_and_a_later_submission_is_not_attempted(graded):
    rows, _, _, _, before = graded
    assert CHECKS.read_bytes() == before
    assert {r["status"] for r in checked(by_student(rows)["zz_empty"])} == {"not attempted"}


def check_nothing_survives_and_the_csv_stays_as_written(graded):
    _, _, out, digest, _ = graded
    assert hashlib.sha256(out.read_bytes()).hexdigest() == digest
    survivors = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if HOSTILE_UID_BASE <= entry.stat().st_uid < HOSTILE_UID_BASE + UID_RANGE:
                    status = (entry / "status").read_text().splitlines()
                    state = [x for x in status if x.startswith(("State", "PPid", "NSpid"))]
                    cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ")[:80]
                    survivors.append((entry.name, state, cmd))
            except OSError:
                pass
    assert not survivors


def check_a_file_that_is_not_a_notebook_is_listed_and_made_harmless(graded):
    rows, printed, *_ = graded
    (row,) = [r for r in rows if r["notebook"] == "notes.txt"]
    assert row["exercise"] == grade.FILE_ROW
    assert "Files that are not notebooks" in printed and "notes.txt" in printed
    assert all(not r[k].startswith(("=", "+", "-", "@")) for r in rows for k in r)


def check_rows_are_grouped_by_student(graded):
    rows, *_ = graded
    order = [r["student"] for r in rows]
    assert order == sorted(order, key=str.lower)
    assert os.path.exists(graded[2])


def test_hostile_submissions_get_no_pass_and_leave_nothing_behind(tmp_path):
    # One grading run for all the checks (a module fixture would run once per xdist worker).
    graded = grade_the_hostile_class(tmp_path)
    check_no_attack_gets_a_pass(graded)
    check_a_forged_answer_with_a_pickled_object_is_an_error(graded)
    check_honest_controls_get_their_rows(graded)
    check_the_checks_on_disk_are_untouched_and_a_later_submission_is_not_attempted(graded)
    check_nothing_survives_and_the_csv_stays_as_written(graded)
    check_a_file_that_is_not_a_notebook_is_listed_and_made_harmless(graded)
    check_rows_are_grouped_by_student(graded)
