"""From `make grade`'s CSV (and the marks entered in the marking sheets) to grade books.

Usage: python scripts/gradebook.py results.csv [--marks marks.json ...] [--out DIR]
       [--per-exercise]

Writes into DIR (default: the CSV's folder, ``grades/``):

- ``results-marked.csv``: the CSV with the marks of the written work merged in (a marked
  part's status becomes "marked", its points the marker's, its message the comment);
- ``canvas.csv``: Canvas's grade-book import layout (Grades, Import): the columns
  ``Student, ID, SIS User ID, SIS Login ID, Section``, then one column per chapter (its
  total) or, with ``--per-exercise``, per exercise; a ``Points Possible`` row first. ID is
  the Canvas user id in the name Canvas gives each downloaded submission
  (``lastfirst_12345_67890_...``: 12345);
- ``moodle-<chapter>.csv``: Moodle's offline grading worksheet of an assignment (View all
  submissions, Grading action, Upload grading worksheet): ``Identifier, Full name,
  Grade, Maximum grade, Feedback comments``, the identifier ``Participant 123456`` read
  from the folder Moodle makes for each submission (``Full Name_123456_assignsubmission_
  file_``).

A student whose identity the LMS's names do not give (a folder you named) keeps their
name and an empty ID: fill it in, or the LMS skips the row.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

CANVAS = re.compile(r"^(?P<name>[a-z][a-z0-9-]*?)(?:_LATE|_late)?_(?P<id>\d+)_\d+_")
MOODLE = re.compile(r"^(?P<name>.+?)_(?P<id>\d+)_assignsubmission_(?:file|onlinetext)_")
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
MOODLE_COLUMNS = ("Identifier", "Full name", "Grade", "Maximum grade", "Feedback comments")


def mark_key(row: dict) -> str:
    """How the marking sheet names a part of a student's submission."""
    return "|".join((row["student"], row["chapter"], row["exercise"], row["function"]))


def read_rows(path: Path) -> list[dict]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def merge_marks(rows: list[dict], marks: dict[str, dict]) -> list[dict]:
    """The rows with the marker's points and comments on the parts marked by hand."""
    out = []
    for row in rows:
        row = dict(row)
        mark = marks.get(mark_key(row))
        if mark and row["status"] == "manual" and mark.get("points") not in (None, ""):
            points = float(mark["points"])
            most = float(row["max_points"] or 0)
            if not 0 <= points <= most:
                raise ValueError(
                    f"{mark_key(row)}: {points:g} points is not between 0 and {most:g}"
                )
            row["points"] = f"{points:g}"
            row["status"] = "marked"
            row["message"] = mark.get("comment", "") or row["message"]
        out.append(row)
    return out


def load_marks(paths: list[Path]) -> dict[str, dict]:
    marks: dict[str, dict] = {}
    for path in paths:
        data = json.loads(path.read_text(encoding="utf-8"))
        marks.update(data.get("marks", {}))
    return marks


def identity(rows: list[dict]) -> dict:
    """{"name", "canvas", "moodle"} of a student, from the names their LMS gave the files."""
    found = {"name": rows[0]["student"], "canvas": "", "moodle": ""}
    for row in rows:
        for part in row["notebook"].split("/"):
            if m := MOODLE.match(part):
                found["moodle"] = m.group("id")
            elif m := CANVAS.match(part):
                found["canvas"] = m.group("id")
    return found


def totals(rows: list[dict], per_exercise: bool) -> tuple[dict, dict]:
    """({student: {column: points}}, {column: points possible}) over the graded parts."""
    got: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    possible: dict[str, float] = defaultdict(float)
    seen: set[tuple[str, str]] = set()
    for row in rows:
        if row["max_points"] in ("", None):
            continue
        column = f"{row['chapter']} {row['exercise']}" if per_exercise else row["chapter"]
        part = (column, f"{row['exercise']}|{row['check']}|{row['function']}")
        if part not in seen:
            seen.add(part)
            possible[column] += float(row["max_points"])
        got[row["student"]][column] += float(row["points"] or 0)
    return got, possible


def write_canvas(rows: list[dict], out: Path, per_exercise: bool = False) -> None:
    got, possible = totals(rows, per_exercise)
    columns = list(possible)
    by_student = _by_student(rows)
    with out.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([*CANVAS_COLUMNS, *columns])
        writer.writerow(["Points Possible", "", "", "", "", *(f"{possible[c]:g}" for c in columns)])
        for student, mine in by_student.items():
            who = identity(mine)
            writer.writerow(
                [who["name"], who["canvas"], "", "", ""] + [f"{got[student][c]:g}" for c in columns]
            )


def write_moodle(rows: list[dict], folder: Path) -> list[Path]:
    written = []
    for chapter in sorted({r["chapter"] for r in rows if r["chapter"]}):
        mine = [r for r in rows if r["chapter"] == chapter]
        got, possible = totals(mine, per_exercise=False)
        out = folder / f"moodle-{chapter}.csv"
        with out.open("w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(MOODLE_COLUMNS)
            for student, parts in _by_student(mine).items():
                who = identity(parts)
                ident = f"Participant {who['moodle']}" if who["moodle"] else ""
                notes = [
                    f"{r['exercise']} {r['function'] or 'written'}: {r['message']}"
                    for r in parts
                    if r["status"] in ("failed", "error", "marked") and r["message"]
                ]
                grade_text = f"{got[student][chapter]:g}"
                writer.writerow(
                    [ident, who["name"], grade_text, f"{possible[chapter]:g}", "; ".join(notes)]
                )
        written.append(out)
    return written


def _by_student(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for row in rows:
        if row["max_points"] not in ("", None):
            out.setdefault(row["student"], []).append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="the CSV make grade wrote")
    parser.add_argument("--marks", type=Path, action="append", default=[], help="marks.json")
    parser.add_argument("--out", type=Path, help="folder of the grade books (default: grades/)")
    parser.add_argument("--per-exercise", action="store_true", help="a column per exercise")
    args = parser.parse_args(argv)
    out = args.out or args.results.resolve().parent / "grades"
    out.mkdir(parents=True, exist_ok=True)
    import grade

    rows = merge_marks(read_rows(args.results), load_marks(args.marks))
    grade.write_csv(rows, out / "results-marked.csv")
    write_canvas(rows, out / "canvas.csv", args.per_exercise)
    moodle = write_moodle(rows, out)
    to_mark = sum(1 for r in rows if r["status"] == "manual" and r["max_points"])
    print(
        f"Wrote {out / 'results-marked.csv'}, {out / 'canvas.csv'} and {len(moodle)} Moodle file(s)"
    )
    if to_mark:
        print(f"{to_mark} parts are still to mark by hand (their points count as 0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
