"""Gradescope's autograder for one chapter (`make gradescope CHAPTER=01_softmax`).

Usage: python scripts/gradescope.py build CHAPTER [--out _build/gradescope/CHAPTER.zip]
       python scripts/gradescope.py run [--root /autograder]

``build`` writes the zip Gradescope's "Configure Autograder" page takes: ``setup.sh`` and
``run_autograder`` at its root (Gradescope's autograder specification), beside the files
the grader needs (scripts/grade*.py, helpers, book/exercises.yml, the chapter's student
notebook, requirements.txt). Gradescope unpacks it into /autograder/source, runs
``setup.sh`` once as root when it builds the image (it installs bubblewrap and a virtual
environment with the book's packages), then ``run_autograder`` for each submission.

``run`` is what ``run_autograder`` calls: it grades the notebook in
``$AUTOGRADER_ROOT/submission`` (``/autograder`` unless the variable names another folder)
with scripts/grade.py, sealed as `make grade` seals it (Gradescope runs the autograder as
root), and writes ``results/results.json``: one test per part of every exercise (name,
score, max_score, status, output, visibility) and the total score. Parts marked by hand
(written answers, functions no check grades) are tests worth 0 points whose output says
whether an answer was found: give their points in Gradescope's manual grading.

One zip grades both editions of the chapter: a notebook of the Korean edition (its metadata,
as scripts/grade.py reads it) gets every test's name and output, and the overall output, in
Korean; the zip carries the Korean student notebook too, whose starting cells the grader
recognises as not attempted.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from grade_i18n import localize, msg  # noqa: E402

SETUP_SH = """#!/usr/bin/env bash
# Run once by Gradescope, as root, when it builds the autograder's image.
set -euo pipefail
SOURCE="$(cd "$(dirname "$0")" && pwd)"
ROOT="${AUTOGRADER_ROOT:-/autograder}"
if ! command -v bwrap >/dev/null || ! command -v python3 >/dev/null; then
    apt-get install -y --no-install-recommends bubblewrap util-linux python3 python3-venv
fi
if [ -z "${AUTOGRADER_PYTHON:-}" ]; then  # (a test gives an installed Python instead)
    python3 -m venv "$ROOT/venv"
    "$ROOT/venv/bin/pip" install --quiet -r "$SOURCE/requirements.txt" -e "$SOURCE"
fi
chmod 0755 "$SOURCE/run_autograder"
"""
RUN_AUTOGRADER = """#!/usr/bin/env bash
# Run by Gradescope for each submission, as root, in /autograder.
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PYTHON="${AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}"
exec "$PYTHON" "$ROOT/source/scripts/gradescope.py" run --root "$ROOT"
"""
SOURCES = (
    "scripts/grade.py",
    "scripts/grade_i18n.py",
    "scripts/grade_sandbox.py",
    "scripts/grade_wire.py",
    "scripts/grade_seccomp.py",
    "scripts/grade_copies.py",
    "scripts/gradescope.py",
    "book/exercises.yml",
    "requirements.txt",
    "pyproject.toml",
)
VISIBILITY = "visible"  # Gradescope: hidden, after_due_date, after_published or visible
LIMITS = ("--cell-timeout", "120", "--total-timeout", "900", "--memory-mb", "4096")


def build(chapter: str, out: Path) -> Path:
    """The autograder zip of ``chapter``."""
    student = ROOT / "editions" / "student" / f"{chapter}.ipynb"
    if not student.exists():
        raise SystemExit(f"no chapter {chapter!r}: editions/student/{chapter}.ipynb is missing")
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in (("setup.sh", SETUP_SH), ("run_autograder", RUN_AUTOGRADER)):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            z.writestr(info, text)
        z.writestr("chapter.txt", chapter + "\n")
        for name in SOURCES:
            z.write(ROOT / name, name)
        z.write(student, f"editions/student/{chapter}.ipynb")
        korean = ROOT / "editions" / "ko" / "student" / f"{chapter}.ipynb"
        if korean.exists():  # its starting cells are not attempted either
            z.write(korean, f"editions/ko/student/{chapter}.ipynb")
        for path in sorted((ROOT / "helpers").rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                z.write(path, str(path.relative_to(ROOT)))
    return out


# The status words of the grader's CSV as a student reads them in a test's output.
STATUS_WORDS = {
    "passed": msg("passed"),
    "failed": msg("failed"),
    "not attempted": msg("not attempted"),
    "error": msg("error"),
}


def results_json(
    rows: list[dict], chapter: str, seconds: float, problem: str = "", language: str = "en"
) -> dict:
    """Gradescope's results.json from the grader's rows of one submission, its words in
    ``language`` (the rows' messages are already in it)."""
    import grade

    def say(text: str) -> str:
        return localize(text, language)

    numbers = grade.student_edition_exercises(chapter)
    tests, notes = [], [say(problem)] if problem else []
    for row in rows:
        if row["exercise"] in (grade.NOTEBOOK_ROW, grade.FILE_ROW):
            notes.append(row["message"])
            continue
        number = numbers.get(row["exercise"], {}).get("number", row["exercise"])
        what = row["function"] or msg("written answer")
        most = float(row["max_points"] or 0)
        text = row["message"]
        if not row["check"]:  # read by hand: Gradescope's manual grading gives its points
            output = say(
                msg("Marked by hand ({points:g} point): {message}", points=most, message=text)
                if most == 1
                else msg("Marked by hand ({points:g} points): {message}", points=most, message=text)
            )
            score, most = 0.0, 0.0
        else:
            word = say(STATUS_WORDS.get(row["status"], row["status"]))
            output = f"{word}: {row['message']}" if row["message"] else word
            score = float(row["points"] or 0)
        name = (
            msg("Exercise {number}: {what}, {check}", number=number, what=what, check=row["check"])
            if row["check"]
            else msg("Exercise {number}: {what}", number=number, what=what)
        )
        tests.append(
            {
                "name": say(name),
                "score": score,
                "max_score": most,
                "status": "passed" if row["status"] == grade.PASSED else "failed",
                "output": output,
                "visibility": VISIBILITY,
            }
        )
    return {
        "score": sum(t["score"] for t in tests),
        "execution_time": round(seconds),
        "output": "\n".join(notes)
        if notes
        else say(msg("Graded with the self-checks of {chapter}.", chapter=chapter)),
        "visibility": VISIBILITY,
        "stdout_visibility": "hidden",
        "tests": tests,
    }


def run(root: Path) -> int:
    """Grade the submission in ``root``/submission; write ``root``/results/results.json."""
    start = time.monotonic()
    chapter = (root / "source" / "chapter.txt").read_text().strip()
    results = root / "results"
    results.mkdir(parents=True, exist_ok=True)
    notebooks = sorted((root / "submission").rglob("*.ipynb"))
    rows: list[dict] = []
    problem = ""
    language = "en"  # of the graded notebook's edition (nothing submitted: English)
    if not notebooks:
        problem = "No notebook (.ipynb) was submitted: submit the chapter's notebook."
    else:
        import grade

        language = grade.submission_language(grade.read_notebook(notebooks[0]))
        if len(notebooks) > 1:
            problem = msg(
                "{count} notebooks were submitted; graded {name}.",
                count=len(notebooks),
                name=notebooks[0].name,
            )
        with tempfile.TemporaryDirectory(prefix="gradescope-") as tmp:
            folder = Path(tmp) / "submission"
            folder.mkdir()
            shutil.copyfile(notebooks[0], folder / f"student_{chapter}.ipynb")
            out = Path(tmp) / "results.csv"
            grader = [sys.executable, str(Path(__file__).with_name("grade.py")), str(folder)]
            if os.environ.get("GRADESCOPE_UNSEALED"):  # (the tests, where nothing can seal)
                grader.append("--without-isolation")
            done = subprocess.run(
                [*grader, "--out", str(out), *LIMITS],
                capture_output=True,
                text=True,
                check=False,
            )
            print(done.stdout, done.stderr)
            if done.returncode == 0:
                with out.open(encoding="utf-8", newline="") as f:
                    rows = list(csv.DictReader(f))
            else:
                lines = [x for x in done.stderr.splitlines() if x.strip()]
                problem = msg(
                    "The autograder could not grade this notebook: {why}",
                    why=lines[-1] if lines else msg("exit status {code}", code=done.returncode),
                )
    report = results_json(rows, chapter, time.monotonic() - start, problem, language)
    (results / "results.json").write_text(json.dumps(report, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="write the autograder zip of a chapter")
    b.add_argument("chapter", help="e.g. 01_softmax")
    b.add_argument("--out", type=Path)
    r = sub.add_parser("run", help="grade /autograder/submission (run_autograder calls it)")
    r.add_argument("--root", type=Path, default=Path("/autograder"))
    args = parser.parse_args(argv)
    if args.command == "build":
        out = args.out or ROOT / "_build" / "gradescope" / f"{args.chapter}.zip"
        print(f"Wrote {build(args.chapter, out)}")
        return 0
    return run(args.root)


if __name__ == "__main__":
    sys.exit(main())
