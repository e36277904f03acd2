"""Grade a class's submitted notebooks with the book's self-checks (`make grade DIR=...`).

Usage: python scripts/grade.py SUBMISSIONS_DIR [--out results.csv] [--jobs N]
       [--cell-timeout S] [--total-timeout S] [--memory-mb MB]

Every ``*.ipynb`` under SUBMISSIONS_DIR (subfolders included) is one submission. Each runs
in a clean kernel of its own (nbclient), started in an empty temporary directory by a
worker process whose address space is limited (``resource.setrlimit(RLIMIT_AS)``, which
the kernel inherits): every cell runs in order with a time limit per cell and one for the
whole notebook, and a cell that raises does not stop the cells after it. Then, in the same
kernel, every exercise of the chapter that has a self-check (book/exercises.yml) is graded:
the check (``helpers.checks.check_*``) runs on the student's function of the name the
exercise asks for, with the per-cell time limit. A notebook that loops, exhausts memory or
kills its kernel gets rows saying so, and the run goes on with the next notebook.

Which chapter: the notebook's metadata (the student and Colab editions record it), else a
chapter's file name inside the submission's file name (``01_softmax``), else the chapter
title in the first heading.

Which student: the file name, without Colab's "Copy of " and " (1)", the chapter's file
name and the separators around it: ``alice.ipynb``, ``alice_01_softmax.ipynb`` and
``01_softmax-alice.ipynb`` are alice's. A file named only like the chapter
(``01_softmax.ipynb``, ``Copy of 01_softmax.ipynb``) is named by its folder:
``alice/01_softmax.ipynb`` is alice's.

The CSV has one row per submission and graded exercise (and self-check, where an exercise
has two): student, chapter, exercise, check, function, status, message, notebook. Status
is "passed", "failed" (message: the check's first failing case), "not attempted" (the
function is undefined or raises NotImplementedError, as the student notebooks' starting
cells do) or "error" (the time or memory limit stopped the check, the check could not run,
or the kernel was gone). A submission whose notebook itself hit a limit or lost its kernel
gets one more row, exercise "(notebook)", status "error", saying which cell and why.
Exercises without a self-check (proofs, work by hand) are graded by hand and have no row.

Grading runs the students' code with your permissions: run it in a container or as a
throwaway user (see the instructor's page, book/instructors.md).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = ROOT / "book" / "exercises.yml"

DEFAULT_CELL_TIMEOUT = 120  # seconds, for each cell and for each self-check
DEFAULT_TOTAL_TIMEOUT = 900  # seconds, for all the cells of one notebook
DEFAULT_MEMORY_MB = 4096  # address space of the kernel (a chapter's kernel uses ~1.3 GB)

PASSED, FAILED, NOT_ATTEMPTED, ERROR = "passed", "failed", "not attempted", "error"
STATUSES = (PASSED, FAILED, NOT_ATTEMPTED, ERROR)
NOTEBOOK_ROW = "(notebook)"
COLUMNS = ("student", "chapter", "exercise", "check", "function", "status", "message", "notebook")


# ---------------------------------------------------------------------------
# The exercises, and which chapter and student a submission belongs to
# ---------------------------------------------------------------------------


def load_exercises(path: Path = EXERCISES) -> dict[str, list[dict]]:
    """Chapter notebook stem -> its exercises, as listed in book/exercises.yml."""
    data = yaml.safe_load(path.read_text())
    return {c["notebook"]: c["exercises"] for c in data["chapters"]}


def graded_items(exercises: list[dict]) -> list[tuple[str, str, str]]:
    """(exercise label, check, function) for every self-check of a chapter, in order."""
    return [(e["label"], c["check"], c["function"]) for e in exercises for c in e["checks"]]


def chapter_titles(stems: list[str]) -> dict[str, str]:
    """Chapter stem -> the title of the chapter (its first heading)."""
    import nbformat

    titles = {}
    for stem in stems:
        path = ROOT / "notebooks" / f"{stem}.ipynb"
        if path.exists():
            title = first_heading(nbformat.read(path, as_version=4))
            if title:
                titles[stem] = title
    return titles


def first_heading(nb) -> str:
    """The text of the first level-1 heading, without a section number ("1. ")."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            match = re.search(r"^# +(?:\d+\.\s+)?(.+?)\s*$", cell.source, re.M)
            if match:
                return match.group(1)
    return ""


def identify_chapter(nb, path: Path, stems: list[str], titles: dict[str, str]) -> str | None:
    """The chapter a submitted notebook belongs to (see the module docstring), or None."""
    for value in nb.metadata.values():
        chapter = value.get("chapter") if isinstance(value, dict) else None
        if isinstance(chapter, str) and Path(chapter).stem in stems:
            return Path(chapter).stem
    named = [s for s in stems if s in path.name]
    if len(named) == 1:
        return named[0]
    title = first_heading(nb)
    matches = [s for s, t in titles.items() if t == title]
    return matches[0] if len(matches) == 1 else None


def student_name(path: Path, root: Path, chapter: str | None) -> str:
    """The student a submission belongs to (see the module docstring)."""
    stem = re.sub(r"^Copy of ", "", path.stem)
    stem = re.sub(r"\s*\(\d+\)$", "", stem)
    if chapter:
        stem = stem.replace(chapter, " ")
    name = stem.strip(" _-.")
    if name:
        return name
    parent = path.parent.relative_to(root)
    return str(parent) if parent.parts else re.sub(r"^Copy of ", "", path.stem)


# ---------------------------------------------------------------------------
# The worker: one notebook in one kernel, under the limits
# ---------------------------------------------------------------------------


def _cell_name(index: int, cell) -> str:
    first = next((line for line in cell.source.splitlines() if line.strip()), "")
    if len(first) > 50:
        first = first[:47] + "..."
    return f"cell {index + 1} ({first.strip()!r})"


def _grading_source(nonce: str, check: str, function: str) -> str:
    """The code run in the student's kernel to grade one function.

    helpers.checks is imported afresh (the student's code may have replaced its
    functions), and the result is printed after a marker the student's code cannot know.
    """
    fn = f"_grade_{nonce}"
    return f"""\
def {fn}():
    import json as _json
    import sys as _sys
    _saved = {{k: m for k, m in _sys.modules.items() if k == "helpers" or k.startswith("helpers.")}}
    for _k in _saved:
        del _sys.modules[_k]
    try:
        import helpers.checks as _hc
    finally:
        _sys.modules.update(_saved)
    _result = _hc.run_self_check(getattr(_hc, {check!r}), globals(), {function!r})
    _out = _result.to_dict()
    _report = _result.report
    _out["memory"] = _report is not None and any(
        getattr(r, "raised", "") == "MemoryError" for r in _report.results
    )
    print({nonce!r} + _json.dumps(_out))


{fn}()
del {fn}
"""


def grade_notebook(
    path: Path,
    items: list[tuple[str, str, str]],
    *,
    cell_timeout: float,
    total_timeout: float,
    memory_mb: int,
) -> dict:
    """Execute one notebook and grade its functions (in the worker, under the limits).

    Returns {"events": [str, ...], "results": [{label, check, function, status, message}]}.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    class Unresponsive(Exception):
        """The kernel did not stop when interrupted."""

    class Client(NotebookClient):
        timed_out: set

        async def _async_handle_timeout(self, timeout, cell=None):
            key = id(cell)
            if key in self.timed_out:  # interrupted once already, and still running
                raise Unresponsive
            self.timed_out.add(key)
            return await super()._async_handle_timeout(timeout, cell)

    nb = nbformat.read(path, as_version=4)
    events: list[str] = []
    results: list[dict] = []
    nonce = secrets.token_hex(8)
    limit_text = f"the memory limit of {memory_mb} MB"
    with tempfile.TemporaryDirectory(prefix="grade-") as cwd:
        client = Client(
            nb,
            timeout=math.ceil(cell_timeout),
            kernel_name="python3",
            allow_errors=True,
            interrupt_on_timeout=True,
            store_widget_state=False,
            record_timing=False,
            resources={"metadata": {"path": cwd}},
        )
        client.timed_out = set()

        def run(cell, index: int, timeout: float) -> str:
            """Execute one cell; return "" or what went wrong with the kernel."""
            client.timeout = max(1, math.ceil(timeout))
            try:
                client.execute_cell(cell, index)
            except DeadKernelError:
                return "dead"
            except Unresponsive:
                return "unresponsive"
            return ""

        gone = ""  # why the kernel is gone, once it is
        with client.setup_kernel():
            deadline = time.monotonic() + total_timeout
            code = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
            for k, (index, cell) in enumerate(code):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    events.append(
                        f"the notebook reached the total time limit of {total_timeout:g} s: "
                        f"{len(code) - k} code cells from {_cell_name(index, cell)} on were "
                        "not run"
                    )
                    break
                timeout = min(cell_timeout, remaining)
                problem = run(cell, index, timeout)
                name = _cell_name(index, cell)
                if problem:
                    gone = (
                        f"the kernel did not stop when interrupted in {name}"
                        if problem == "unresponsive"
                        else f"the kernel died in {name} ({_death(client, limit_text)})"
                    )
                    events.append(gone)
                    break
                if id(cell) in client.timed_out:
                    which = (
                        f"the time limit of {cell_timeout:g} s per cell"
                        if timeout == cell_timeout
                        else f"the total time limit of {total_timeout:g} s"
                    )
                    events.append(f"{name} was stopped by {which}")
                elif any(o.get("ename") == "MemoryError" for o in cell.get("outputs", [])):
                    events.append(f"{name} ran out of memory (MemoryError at {limit_text})")
            for label, check, function in items:
                result = {"label": label, "check": check, "function": function}
                results.append(result)
                if gone:
                    result.update(status=ERROR, message=f"not graded: {gone}")
                    continue
                cell = nbformat.v4.new_code_cell(_grading_source(nonce, check, function))
                nb.cells.append(cell)
                problem = run(cell, len(nb.cells) - 1, cell_timeout)
                if problem:
                    why = "did not stop" if problem == "unresponsive" else "died"
                    gone = f"the kernel {why} while {check} ran {function}"
                    result.update(status=ERROR, message=gone)
                    events.append(gone)
                    continue
                result.update(_parse_grading(cell, nonce, function, cell_timeout, limit_text))
                if id(cell) in client.timed_out:
                    result.update(
                        status=ERROR,
                        message=f"time limit: {function} did not return within {cell_timeout:g} s",
                    )
    return {"events": events, "results": results}


def _death(client, limit_text: str) -> str:
    """How the kernel ended: its exit status, or the signal that killed it."""
    process = getattr(getattr(client.km, "provisioner", None), "process", None)
    code = process.poll() if process is not None else None
    if code is not None and code >= 0:
        return f"exit status {code}"
    killed = f"killed by {signal.Signals(-code).name}" if code is not None else "no exit status"
    return f"{killed}; an allocation at {limit_text} can do that"


def _parse_grading(cell, nonce: str, function: str, cell_timeout: float, limit: str) -> dict:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream" and output.get("name") == "stdout":
            for line in output.get("text", "").splitlines():
                if line.startswith(nonce):
                    found = json.loads(line[len(nonce) :])
                    if found.get("memory"):
                        return {
                            "status": ERROR,
                            "message": f"memory limit: {function} ran out of memory "
                            f"(MemoryError at {limit}); {found['message']}",
                        }
                    return {"status": found["status"], "message": found["message"]}
    errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    if errors and errors[0].get("ename") == "MemoryError":
        return {"status": ERROR, "message": f"memory limit: MemoryError at {limit}"}
    if errors:
        e = errors[0]
        return {"status": ERROR, "message": f"grading raised {e.get('ename')}: {e.get('evalue')}"}
    return {"status": ERROR, "message": "the self-check printed no result"}


def worker_main(args: argparse.Namespace) -> int:
    """`grade.py --worker`: limit this process (and so the kernel), grade, write JSON."""
    import resource

    limit = args.memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    items = [tuple(item) for item in json.loads(args.items)]
    outcome = grade_notebook(
        Path(args.worker),
        items,
        cell_timeout=args.cell_timeout,
        total_timeout=args.total_timeout,
        memory_mb=args.memory_mb,
    )
    Path(args.result).write_text(json.dumps(outcome))
    return 0


# ---------------------------------------------------------------------------
# The parent: find submissions, run a worker per notebook, write the CSV
# ---------------------------------------------------------------------------


@dataclass
class Submission:
    path: Path
    student: str
    chapter: str | None
    problem: str = ""
    rows: list[dict] = field(default_factory=list)
    seconds: float = 0.0


def find_submissions(root: Path, chapters: dict[str, list[dict]]) -> list[Submission]:
    import nbformat

    stems = list(chapters)
    titles = chapter_titles(stems)
    found = []
    for path in sorted(root.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception as err:  # not a notebook at all
            student = student_name(path, root, None)
            found.append(Submission(path, student, None, f"cannot read the notebook: {err}"))
            continue
        chapter = identify_chapter(nb, path, stems, titles)
        submission = Submission(path, student_name(path, root, chapter), chapter)
        if chapter is None:
            submission.problem = (
                "cannot tell which chapter this is: name the file after the chapter, "
                f"e.g. alice_{stems[0]}.ipynb"
            )
        found.append(submission)
    return found


def _kill_tree(pid: int) -> None:
    """Kill a worker and its kernel (which runs in a session of its own)."""
    import psutil

    try:
        parent = psutil.Process(pid)
        procs = [*parent.children(recursive=True), parent]
    except psutil.NoSuchProcess:
        return
    for proc in procs:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=10)


def grade_submission(submission: Submission, root: Path, chapters, limits) -> Submission:
    """Grade one submission in a worker process; fill submission.rows."""
    base = {
        "student": submission.student,
        "chapter": submission.chapter or "",
        "notebook": str(submission.path.relative_to(root)),
    }
    if submission.problem:
        submission.rows = [
            {**base, "exercise": NOTEBOOK_ROW, "check": "", "function": "", "status": ERROR}
            | {"message": submission.problem}
        ]
        return submission
    items = graded_items(chapters[submission.chapter])
    cell_timeout, total_timeout, memory_mb = limits
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="grade-worker-") as tmp:
        result = Path(tmp) / "result.json"
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--worker",
            str(submission.path.resolve()),
            "--items",
            json.dumps(items),
            "--result",
            str(result),
            "--cell-timeout",
            str(cell_timeout),
            "--total-timeout",
            str(total_timeout),
            "--memory-mb",
            str(memory_mb),
        ]
        # Enough for every cell, every check and two interrupts each, plus kernel start-up.
        backstop = total_timeout + (len(items) + 2) * 2 * cell_timeout + 60
        proc = subprocess.Popen(
            command,
            cwd=tmp,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            _, stderr = proc.communicate(timeout=backstop)
            failure = "" if proc.returncode == 0 and result.exists() else stderr
        except subprocess.TimeoutExpired:
            _kill_tree(proc.pid)
            proc.communicate()
            failure = f"grading this notebook took more than {backstop:g} s and was stopped"
        outcome = json.loads(result.read_text()) if not failure else None
    submission.seconds = time.monotonic() - start
    if outcome is None:
        last = [line for line in failure.strip().splitlines() if line.strip()][-1:]
        message = f"the grader failed on this notebook: {last[0] if last else 'no output'}"
        outcome = {
            "events": [message],
            "results": [
                {"label": label, "check": check, "function": function, "status": ERROR}
                | {"message": f"not graded: {message}"}
                for label, check, function in items
            ],
        }
    submission.rows = [
        {**base, "exercise": r["label"], "check": r["check"], "function": r["function"]}
        | {"status": r["status"], "message": r["message"]}
        for r in outcome["results"]
    ]
    if outcome["events"]:
        submission.rows.append(
            {**base, "exercise": NOTEBOOK_ROW, "check": "", "function": "", "status": ERROR}
            | {"message": "; ".join(outcome["events"])}
        )
    return submission


def write_csv(rows: list[dict], out: Path) -> None:
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def summary(submissions: list[Submission]) -> str:
    """One line per submission: counts of each status, and what went wrong in the notebook."""
    head = ("student", "chapter", "passed", "failed", "not attempted", "error", "seconds")
    table = [head]
    notes = []
    for s in submissions:
        graded = [r for r in s.rows if r["exercise"] != NOTEBOOK_ROW]
        counts = Counter(r["status"] for r in graded)
        table.append(
            (
                s.student,
                s.chapter or "?",
                *(str(counts[status]) for status in STATUSES),
                f"{s.seconds:.0f}",
            )
        )
        notes += [f"  {s.student}: {r['message']}" for r in s.rows if r["exercise"] == NOTEBOOK_ROW]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in table
    ]
    if notes:
        lines += ["", "Notebooks that hit a limit or could not be graded:", *notes]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("submissions", nargs="?", type=Path, help="folder of submitted notebooks")
    parser.add_argument("--out", type=Path, default=Path("results.csv"), help="the CSV to write")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks graded at once")
    parser.add_argument("--cell-timeout", type=float, default=DEFAULT_CELL_TIMEOUT)
    parser.add_argument("--total-timeout", type=float, default=DEFAULT_TOTAL_TIMEOUT)
    parser.add_argument("--memory-mb", type=int, default=DEFAULT_MEMORY_MB)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--items", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker_main(args)
    if args.submissions is None or not args.submissions.is_dir():
        parser.error("SUBMISSIONS_DIR must be a folder of submitted notebooks")
    root = args.submissions.resolve()
    chapters = load_exercises()
    submissions = find_submissions(root, chapters)
    if not submissions:
        parser.error(f"no notebooks (*.ipynb) under {args.submissions}")
    limits = (args.cell_timeout, args.total_timeout, args.memory_mb)
    start = time.monotonic()
    print(
        f"Grading {len(submissions)} notebooks from {args.submissions}, {args.jobs} at a time "
        f"(limits: {args.cell_timeout:g} s per cell, {args.total_timeout:g} s per notebook, "
        f"{args.memory_mb} MB)",
        flush=True,
    )
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        done = pool.map(lambda s: grade_submission(s, root, chapters, limits), submissions)
        for s in done:
            print(f"  {s.student} ({s.path.name}): graded in {s.seconds:.0f} s", flush=True)
    rows = [row for s in submissions for row in s.rows]
    write_csv(rows, args.out)
    print()
    print(summary(submissions))
    print(f"\n{len(rows)} rows written to {args.out} in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
