"""Grade a class's submitted notebooks with the book's self-checks (`make grade DIR=...`).

Usage: python scripts/grade.py SUBMISSIONS_DIR [--out results.csv] [--jobs N]
       [--cell-timeout S] [--total-timeout S] [--memory-mb MB]

Every ``*.ipynb`` under SUBMISSIONS_DIR (subfolders included) is one submission. Each
runs in a clean kernel of its own (nbclient), sealed off by scripts/grade_sandbox.py
(bubblewrap, a user id of its own, no network, memory and pids cgroups), driven by a worker
process: every cell runs in order with a time limit per cell and one for the whole
notebook, and a cell that raises does not stop the cells after it. Then every exercise of
the chapter that has a self-check (book/exercises.yml) is graded: the check
(``helpers.checks.check_*``) runs in the worker, the grader's own process, on a stand-in
for the student's function of the name the exercise asks for; the stand-in calls that
function in the kernel with the check's inputs and gets its outputs back as data
(scripts/grade_wire.py), so the verdict never depends on what the student's code says
about itself. A notebook that loops, exhausts memory or kills its kernel gets rows saying
so, and the run goes on with the next notebook. Without root, bubblewrap or the cgroups the
command refuses, unless given ``--without-isolation`` (every row is then flagged).

Which chapter: the notebook's metadata (the student and Colab editions record it), else a
chapter's file name inside the submission's file name (``01_softmax``), else the chapter
title in the first heading.

Which student: a file in a folder is the folder's student, whatever the file is called
(a name chosen inside a student's folder never makes it another student's): the outermost
folder an LMS export names (Moodle ``Full Name_123456_assignsubmission_file_/``), else the
first folder under SUBMISSIONS_DIR. A file directly in SUBMISSIONS_DIR is named by its
name: an LMS export's (LMS_NAMES: Canvas ``lastfirst_12345_67890_...``, Moodle
``Full Name_123456_assignsubmission_file_...``, Blackboard
``Assignment_username_attempt_2024-01-31-12-00-00_...``), else the name without Colab's
"Copy of " and " (1)", the chapter's file name and the separators around it:
``alice.ipynb``, ``alice_01_softmax.ipynb`` and ``01_softmax-alice.ipynb`` are alice's. A
file in a folder whose own name names another student of the class is flagged.

No file stops the run: each is graded or gets a row saying why not, an exception while
handling one is its own "error" row, and names that are not UTF-8 are written escaped.

The CSV has one row per submission and graded exercise (and self-check, where an exercise
has two), grouped by student: student, chapter, exercise, check, function, status,
message, notebook, flags. Status is "passed", "failed" (message: the check's first failing
case), "not attempted" (the function is undefined or raises NotImplementedError, as the
student notebooks' starting cells do) or "error" (the time or memory limit stopped the
check, the check could not run, the kernel was gone or sent back something that is not an
answer). A submission whose notebook itself hit a limit or lost its kernel gets one more
row, exercise "(notebook)", status "error", saying which cell and why; a file that is not
a notebook gets a row "(not a notebook)". Flags: a duplicate submission of a chapter,
"unsealed", a peak memory measured in the submission's process, and the book's own code
as an answer: "calls the book's own helpers.x.y" (the kernel's watch saw the function, or
code run around the grader's cell, enter the book's implementation of what the check
grades: the row is "not attempted", or "error" when the request was answered twice),
"the grader's watch ... was switched off in the kernel" (a row that would pass is an
"error": read the code) and "near-copy of helpers.x.y" (the function, or one of the
notebook's it calls, holds most of that helper's source: scripts/grade_copies.py; the
verdict stands, read the code). Values that a
spreadsheet would evaluate (starting with = + - @) are written with a leading '.
Every exercise has a row: one without a self-check (a proof, work by hand) gets status
"manual" (read the answer), and each function its starting cells define that no check
grades gets a row too, "not attempted" while it is undefined or still raises
NotImplementedError (read from the notebook's source, never run), "manual" otherwise. The
functions come from the repository's own student notebook of the chapter.

Which language: a notebook of the Korean edition (editions/ko/; its metadata says
``colab_edition: {language: ko}``, as every Korean Colab and student notebook's does) is
graded like any other, and every message and flag written about it is in Korean: the
self-checks' (which run in the grader with helpers' language set to the submission's) and
the grader's own, from helpers' catalogue (helpers/locales/ko.po; scripts/helpers_i18n.py
reads the templates of this script's ``msg(...)`` calls). The columns, the chapter, the
exercise labels, the check and function names, the status words and the flag "unsealed"
stay as they are. The language is read from the submitted file before anything of it
runs, and decides only words: the verdicts are the same in both languages.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import csv
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import grade_wire
import yaml
from grade_i18n import LANGUAGES, Msg, localize, msg

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = ROOT / "book" / "exercises.yml"
STUDENT_EDITION = ROOT / "editions" / "student"  # lists each exercise's starting functions
KO_STUDENT_EDITION = ROOT / "editions" / "ko" / "student"  # the same, in Korean

DEFAULT_CELL_TIMEOUT = 120  # seconds, for each cell and for each self-check
DEFAULT_TOTAL_TIMEOUT = 900  # seconds, for all the cells of one notebook
DEFAULT_MEMORY_MB = 4096  # address space of the kernel (a chapter's kernel uses ~1.3 GB)

PASSED, FAILED, NOT_ATTEMPTED, ERROR = "passed", "failed", "not attempted", "error"
MANUAL = "manual"  # an exercise, or a function, that no self-check grades: read it
STATUSES = (PASSED, FAILED, NOT_ATTEMPTED, ERROR, MANUAL)
NOTEBOOK_ROW = "(notebook)"
FILE_ROW = "(not a notebook)"
COLUMNS = (
    "student",
    "chapter",
    "exercise",
    "check",
    "function",
    "status",
    "message",
    "notebook",
    "flags",
    "points",
    "max_points",
)
# Points of a part (a self-check, a written answer, a function no check grades) unless
# book/exercises.yml gives the exercise ``points: {written: 3, my_softmax: 2, ...}`` (a
# key is "written", a function or a check): by the exercise's difficulty.
DEFAULT_POINTS = {"warm-up": 1, "core": 2, "challenge": 3}
MAX_OUTPUT = 2_000_000  # characters of output kept per cell; a flood beyond it is dropped
# One answer of the kernel: its arrays (grade_wire.MAX_ARRAY_BYTES) in base64, and the rest.
MAX_ANSWER = 4 * grade_wire.MAX_ARRAY_BYTES // 3 + 4 * grade_wire.MAX_NODES * grade_wire.MAX_TEXT
MAX_ANSWERS = 8  # answers kept per call cell (all but the first as small stubs)
WATCHDOG_GRACE = 2.0  # seconds a check may run past its time limit in the grader's code
# Run in the kernel before the submission's cells. Nothing a submission displays is kept
# (grading reads answers, never outputs), so the kernel formats plain text only: no figure
# is rendered to a PNG and no explorer renders its frames (helpers.widgets), which was a
# third of the time a chapter takes to grade. The grader's answers do not go through the
# formatters (scripts/grade_wire.py publishes them as they are).
PLAIN_TEXT_ONLY = "get_ipython().display_formatter.active_types = ['text/plain']"
MAX_NOTEBOOK_MB = 50  # a larger file is not read
# The flags column: what an instructor should know about a row.
UNSEALED = "unsealed"  # graded without isolation (--without-isolation)
# (and, where they are made: "duplicate (also ...)", the student submitted this chapter more
# than once; "the file's name names ...", another student than its folder does; "calls the
# book's own helpers.x.y", not attempted; "near-copy of helpers.x.y", scripts/grade_copies.py)
MEMORY_FLAG = msg("peak memory measured in the submission's process")
WATCH_OFF_FLAG = msg("the grader's watch for the book's own code was switched off in the kernel")
UNSEALED_WARNING = (
    "WARNING: these submissions were NOT sealed off (--without-isolation): their code ran "
    "with your permissions and could read and change your files, other submissions and "
    "this CSV. Every row is flagged 'unsealed'."
)


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


def student_edition_exercises(stem: str) -> dict[str, dict]:
    """Exercise label -> {"number", "functions", "checks"} from the repository's own student
    notebook of the chapter (never from a submission, which a student can edit)."""
    path = STUDENT_EDITION / f"{stem}.ipynb"
    if not path.exists():
        return {}
    metadata = json.loads(path.read_text()).get("metadata", {})
    return metadata.get("student_edition", {}).get("exercises", {})


def student_edition_answers(stem: str) -> dict[str, str]:
    """Exercise label -> the starting text of its answer cell ("✏️ Your answer to Exercise
    1.2 ... Write your answer here."), from the repository's own student notebook: the
    exercises with a written part (a proof, a derivation, a prediction). The Korean
    student notebook's starting text (editions/ko/student/) follows on the next lines: a
    submission of either edition that left the cell as it was has written nothing."""
    path = STUDENT_EDITION / f"{stem}.ipynb"
    if not path.exists():
        return {}
    answers: dict[str, str] = {}
    for edition in (path, KO_STUDENT_EDITION / path.name):
        if not edition.exists():
            continue
        for cell in json.loads(edition.read_text()).get("cells", []):
            role = cell.get("metadata", {}).get("student_edition", {})
            if role.get("role") == "answer":
                before = answers.get(role["exercise"])
                text = cell_source(cell)
                answers[role["exercise"]] = text if before is None else f"{before}\n{text}"
    return answers


def hand_items(stem: str, exercises: list[dict]) -> list[tuple[str, str, str]]:
    """(exercise label, "", function) for what no self-check grades, in the book's order:
    each exercise's written part (function ""; every exercise with an answer cell, and
    every exercise with neither a check nor a function), then each starting function of
    an exercise that no check is called on."""
    listed = student_edition_exercises(stem)
    written = student_edition_answers(stem)
    items = []
    for e in exercises:
        checked = {c["function"] for c in e["checks"]}
        functions = [f for f in listed.get(e["label"], {}).get("functions", []) if f not in checked]
        if e["label"] in written or (not e["checks"] and not functions):
            items.append((e["label"], "", ""))
        items += [(e["label"], "", f) for f in functions]
    return items


def written_answer(nb, label: str, start: str) -> str | None:
    """What a submission wrote in the answer cell of exercise ``label`` (and in markdown
    cells the student added right after it), without the starting text; None when the
    notebook has no answer cell for it."""
    cells = nb.get("cells", []) if isinstance(nb, dict) else []
    cells = cells if isinstance(cells, list) else []
    prompt = {line.strip() for line in start.splitlines()}
    found, parts, inside = False, [], False
    for cell in cells:
        if not isinstance(cell, dict):
            continue
        metadata = cell.get("metadata")
        role = metadata.get("student_edition") if isinstance(metadata, dict) else None
        if isinstance(role, dict):
            inside = role.get("role") == "answer" and role.get("exercise") == label
            found = found or inside
        elif cell.get("cell_type") != "markdown" or cell_source(cell).lstrip().startswith("#"):
            inside = False  # a code cell or a heading ends what the student added
        if inside and cell.get("cell_type") == "markdown":
            lines = [x for x in cell_source(cell).splitlines() if x.strip() not in prompt]
            parts.append("\n".join(re.sub(r"^\s*>\s?", "", x) for x in lines).strip())
    return "\n\n".join(p for p in parts if p) if found else None


def function_source(nb, function: str) -> str:
    """The source of the cell that last defines ``function`` at its top level ("" if none)."""
    source = ""
    cells = nb.get("cells", []) if isinstance(nb, dict) else []
    for cell in cells if isinstance(cells, list) else []:
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            text = cell_source(cell)
            if re.search(rf"^(async\s+)?def\s+{re.escape(function)}\s*\(", text, re.M):
                source = text
    return source


def _is_stub(node: ast.FunctionDef) -> bool:
    """A starting cell's body: an optional docstring, then ``raise NotImplementedError``."""
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc.func if isinstance(body[0].exc, ast.Call) else body[0].exc
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def defined_functions(nb) -> dict[str, bool]:
    """Function name -> whether its last top-level definition in the notebook is a stub.

    Read from the cells' source, never run: a cell that does not parse (a shell command,
    an unfinished edit) is skipped."""
    found: dict[str, bool] = {}
    cells = nb.get("cells", []) if isinstance(nb, dict) else []
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        try:
            tree = ast.parse(cell_source(cell))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # (an expression nested thousands deep exhausts the parser's stack)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found[node.name] = _is_stub(node)
    return found


def hand_rows(stem: str, exercises: list[dict], nb, language: str = "en") -> list[dict]:
    """The rows of what an instructor reads: "manual", or "not attempted" for a listed
    function that is undefined or still its starting cell; messages in ``language``."""
    listed = student_edition_exercises(stem)
    written = student_edition_answers(stem)
    defined = defined_functions(nb)
    rows = []
    for label, _, function in hand_items(stem, exercises):
        number = listed.get(label, {}).get("number", label)
        answer = ""
        if not function and label not in written:  # no answer cell: the whole notebook
            status = MANUAL
            message = msg("graded by hand: read the answer to Exercise {number}", number=number)
        elif not function:
            text = written_answer(nb, label, written[label])
            if not text:
                status = NOT_ATTEMPTED
                message = (
                    msg(
                        "the answer to Exercise {number} is still its starting cell: not attempted",
                        number=number,
                    )
                    if text is not None
                    else msg("no answer cell for Exercise {number}: not attempted", number=number)
                )
            else:
                status, answer = MANUAL, text
                message = msg(
                    "graded by hand: a written answer of {length} characters", length=len(text)
                )
        elif function not in defined:
            status = NOT_ATTEMPTED
            message = msg("{name} is not defined: not attempted", name=function)
        elif defined[function]:
            status = NOT_ATTEMPTED
            message = msg(
                "{function} raises NotImplementedError: not attempted yet", function=function
            )
        else:
            status, answer = MANUAL, function_source(nb, function)
            message = msg(
                "graded by hand: {function} of Exercise {number} has no self-check",
                function=function,
                number=number,
            )
        rows.append({"exercise": label, "check": "", "function": function})
        rows[-1] |= {"status": status, "message": localize(message, language), "answer": answer}
    return rows


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


def cell_source(cell) -> str:
    """A cell's source as one string, whatever a submitted file holds there (a list of
    lines, a string, or nothing)."""
    source = cell.get("source", "") if isinstance(cell, dict) else ""
    if isinstance(source, list):
        return "".join(x for x in source if isinstance(x, str))
    return source if isinstance(source, str) else ""


def first_heading(nb) -> str:
    """The text of the first level-1 heading, without a section number ("1. ")."""
    cells = nb.get("cells", []) if isinstance(nb, dict) else []
    for cell in cells if isinstance(cells, list) else []:
        if isinstance(cell, dict) and cell.get("cell_type") == "markdown":
            match = re.search(r"^# +(?:\d+\.\s+)?(.+?)\s*$", cell_source(cell), re.M)
            if match:
                return match.group(1)
    return ""


def identify_chapter(nb, path: Path, stems: list[str], titles: dict[str, str]) -> str | None:
    """The chapter a submitted notebook belongs to (see the module docstring), or None."""
    metadata = nb.get("metadata", {}) if isinstance(nb, dict) else {}
    for value in metadata.values() if isinstance(metadata, dict) else ():
        chapter = value.get("chapter") if isinstance(value, dict) else None
        if isinstance(chapter, str) and Path(chapter).stem in stems:
            return Path(chapter).stem
    named = [s for s in stems if s in path.name]
    if len(named) == 1:
        return named[0]
    title = first_heading(nb)
    matches = [s for s, t in titles.items() if t == title]
    return matches[0] if len(matches) == 1 else None


def submission_language(nb) -> str:
    """The language of the edition a submitted notebook comes from: "ko" for the Korean
    edition's notebooks (``metadata.colab_edition.language``, which scripts/ko_edition.py's
    Colab and student notebooks carry and Colab and Jupyter keep when they save), else
    "en". Read from the file as submitted, before any of its code runs; it decides the
    language of the messages only, never a verdict."""
    metadata = nb.get("metadata") if isinstance(nb, dict) else None
    edition = metadata.get("colab_edition") if isinstance(metadata, dict) else None
    language = edition.get("language") if isinstance(edition, dict) else None
    return language if isinstance(language, str) and language in LANGUAGES else "en"


# The file names of the exports of learning-management systems: the student's part.
LMS_NAMES = (
    # Canvas: lastfirst_12345_67890_original.ipynb (and lastfirst_LATE_12345_67890_...)
    ("Canvas", re.compile(r"^(?P<name>[a-z][a-z0-9-]*?)(?:_LATE|_late)?_\d+_\d+_(?P<file>.+)$")),
    # Moodle: Full Name_123456_assignsubmission_file_original.ipynb (a file or a folder)
    (
        "Moodle",
        re.compile(r"^(?P<name>.+?)_\d+_assignsubmission_(?:file|onlinetext)_(?P<file>.*)$"),
    ),
    # Blackboard: Assignment_username_attempt_2024-01-31-12-00-00_original.ipynb
    ("Blackboard", re.compile(r"^.+?_(?P<name>[^_]+)_attempt_[\d-]+(?:_(?P<file>.+))?$")),
)


def shown(name: str) -> str:
    """A file name as text that can be written anywhere: bytes that are not UTF-8 (a
    Latin-1 name from a legacy zip, extracted as it is) become escapes such as \\xe9."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def lms_student(name: str) -> str | None:
    """The student named by an LMS export's file or folder name, if it is one."""
    for _, pattern in LMS_NAMES:
        match = pattern.match(name)
        if match:
            return match.group("name")
    return None


def named_by_file(name: str, chapter: str | None) -> str:
    """The student a file's own name gives: an LMS export's name, else the name without
    Colab's "Copy of " and " (1)" and the chapter's file name ("" when nothing is left)."""
    from_lms = lms_student(name)
    if from_lms:
        return shown(from_lms)
    stem = re.sub(r"^Copy of ", "", Path(name).stem)
    stem = re.sub(r"\s*\(\d+\)$", "", stem)
    if chapter:
        stem = stem.replace(chapter, " ")
    return shown(stem.strip(" _-."))


def student_name(path: Path, root: Path, chapter: str | None) -> str:
    """The student a submission belongs to (see the module docstring).

    A file in a folder belongs to the folder's student, whatever the file is called: the
    outermost folder that an LMS export names (Moodle's ``Full Name_123456_
    assignsubmission_file_``), else the first folder under ``root``. A file directly in
    ``root`` is named by its own name."""
    folders = path.relative_to(root).parts[:-1]
    if folders:
        for folder in folders:
            from_lms = lms_student(folder)
            if from_lms:
                return shown(from_lms)
        return shown(folders[0])
    return named_by_file(path.name, chapter) or shown(re.sub(r"^Copy of ", "", path.stem))


# ---------------------------------------------------------------------------
# The worker: one notebook in one kernel, under the limits
# ---------------------------------------------------------------------------


def _cell_name(index: int, cell) -> str:
    first = next((line for line in cell.source.splitlines() if line.strip()), "")
    if len(first) > 50:
        first = first[:47] + "..."
    return msg("cell {number} ({first!r})", number=index + 1, first=first.strip())


def grade_notebook(
    path: Path,
    items: list[tuple[str, str, str]],
    *,
    cell_timeout: float,
    total_timeout: float,
    memory_mb: int,
    sealed: bool,
) -> dict:
    """Execute one notebook and grade its functions (in the worker, under the limits).

    The cells run in the student's kernel (sealed in a sandbox when ``sealed``); the
    self-checks run here, in the grader's process, on stand-ins that call the student's
    functions in that kernel (scripts/grade_wire.py). Returns {"events": [str, ...],
    "results": [{label, check, function, status, message, memory}]}.
    """
    import nbformat
    from grade_i18n import attach
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    from helpers.checks import run_self_check
    from helpers.checks.core import IMPLEMENTATIONS
    from helpers.checks.shortcuts import public_names

    attach()  # helpers.i18n: the module whose language worker_main set (grade_i18n)

    class Unresponsive(Exception):
        """The kernel did not stop when interrupted."""

    class Client(NotebookClient):
        timed_out: set
        budget: dict
        answers: dict  # index of a grader's call cell -> whether its answer has come

        async def _async_handle_timeout(self, timeout, cell=None):
            key = id(cell)
            if key in self.timed_out:  # interrupted once already, and still running
                raise Unresponsive
            self.timed_out.add(key)
            return await super()._async_handle_timeout(timeout, cell)

        def process_message(self, msg, cell, cell_index):
            # Everything the kernel sends counts toward the cell's budget of MAX_OUTPUT
            # characters, errors included; beyond it, outputs are dropped. The grader's
            # own MIME type is kept only in the grader's call cells: the first answer
            # whole (up to MAX_ANSWER), a few more as stubs (grade_wire.answer_stub: a
            # second answer means the notebook's code answers too). Nothing is rendered:
            # widget messages and display updates are ignored.
            msg_type = msg.get("msg_type", "")
            content = msg.get("content")
            if msg_type == "status" or not isinstance(content, dict):
                return super().process_message(msg, cell, cell_index)
            if msg_type.startswith("comm") or msg_type in ("update_display_data", "clear_output"):
                return None
            size = _size(content)
            used = self.budget.get(cell_index, 0) + size
            self.budget[cell_index] = used
            data = content.get("data")
            if isinstance(data, dict) and grade_wire.MIME in data:
                seen = self.answers.get(cell_index)
                if seen is None or seen >= MAX_ANSWERS:
                    return None  # not a call cell, or enough answers have come
                self.answers[cell_index] = seen + 1
                if seen or size > MAX_ANSWER:  # another answer, or one too large
                    stub = grade_wire.answer_stub(data[grade_wire.MIME])
                    msg = {**msg, "content": {**content, "data": {grade_wire.MIME: stub}}}
                    content = msg["content"]
            elif used > MAX_OUTPUT:
                return None
            if content.get("transient"):  # no display ids: nothing is updated later
                msg = {**msg, "content": {**content, "transient": {}}}
            return super().process_message(msg, cell, cell_index)

    nb = nbformat.read(path, as_version=4)
    events: list[str] = []
    results: list[dict] = []
    limit_text = msg("the memory limit of {memory_mb} MB", memory_mb=memory_mb)
    with contextlib.ExitStack() as stack:
        if sealed:
            from grade_sandbox import Isolation, Sandbox

            sandbox = stack.enter_context(Sandbox(path, Isolation.detect(), memory_mb))
            km = sandbox.kernel_manager()
            cwd = str(sandbox.root)
            write_request = sandbox.request_file
        else:
            sandbox = None
            km = None
            cwd = stack.enter_context(tempfile.TemporaryDirectory(prefix="grade-"))
            requests = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="grade-in-")))

            def write_request(name: str, text: str) -> str:
                (requests / name).write_text(text)
                return str(requests / name)

        client = Client(
            nb,
            km=km,
            timeout=math.ceil(cell_timeout),
            kernel_name="python3",
            allow_errors=True,
            interrupt_on_timeout=True,
            store_widget_state=False,
            record_timing=False,
            shutdown_kernel="immediate",
            resources={"metadata": {"path": cwd}},
        )
        client.timed_out = set()
        client.budget = {}
        client.answers = {}

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
        with client.setup_kernel(cleanup_kc=True):
            if sandbox is not None:
                sandbox.seal(client.km)
            nb.cells.append(nbformat.v4.new_code_cell(PLAIN_TEXT_ONLY))
            run(nb.cells[-1], len(nb.cells) - 1, cell_timeout)  # (a dead kernel: see below)
            nb.cells.pop()
            client.budget.clear()
            deadline = time.monotonic() + total_timeout
            code = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
            for k, (index, cell) in enumerate(code):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    events.append(
                        msg(
                            "the notebook reached the total time limit of {seconds:g} s: "
                            "{count} code cells from {cell} on were not run",
                            seconds=total_timeout,
                            count=len(code) - k,
                            cell=_cell_name(index, cell),
                        )
                    )
                    break
                timeout = min(cell_timeout, remaining)
                name = _cell_name(index, cell)
                if _too_deep(cell.source):  # the kernel would wait for it forever
                    events.append(
                        msg(
                            "{cell} was not run: its code is nested too deeply to compile",
                            cell=name,
                        )
                    )
                    continue
                problem = run(cell, index, timeout)
                if problem:
                    gone = (
                        msg("the kernel did not stop when interrupted in {cell}", cell=name)
                        if problem == "unresponsive"
                        else msg(
                            "the kernel died in {cell} ({why})",
                            cell=name,
                            why=_death(client, limit_text),
                        )
                    )
                    events.append(gone)
                    break
                if id(cell) in client.timed_out:
                    which = (
                        msg("the time limit of {seconds:g} s per cell", seconds=cell_timeout)
                        if timeout == cell_timeout
                        else msg("the total time limit of {seconds:g} s", seconds=total_timeout)
                    )
                    events.append(msg("{cell} was stopped by {which}", cell=name, which=which))
                elif any(o.get("ename") == "MemoryError" for o in cell.get("outputs", [])):
                    events.append(
                        msg(
                            "{cell} ran out of memory (MemoryError at {limit})",
                            cell=name,
                            limit=limit_text,
                        )
                    )
                cell.outputs = []  # graded from here on: the outputs are not needed

            # The watch for calls into the book's own implementations of what the checks
            # grade (grade_wire's module docstring), armed before the first check.
            keys = grade_wire.watch_keys(
                [name for _, check, _ in items for name in IMPLEMENTATIONS.get(check, ())]
            )
            if keys and not gone:
                arm = nbformat.v4.new_code_cell(grade_wire.arm_source(keys))
                nb.cells.append(arm)
                problem = run(arm, len(nb.cells) - 1, cell_timeout)
                nb.cells.pop()
                if problem:
                    gone = (
                        msg(
                            "the kernel did not stop when interrupted while the grader "
                            "prepared the checks"
                        )
                        if problem == "unresponsive"
                        else msg(
                            "the kernel died ({why}) while the grader prepared the checks",
                            why=_death(client, limit_text),
                        )
                    )
                    events.append(gone)

            current = {"function": ""}

            def run_call(source: str, timeout: float) -> dict:
                nonlocal gone
                function = current["function"]
                cell = nbformat.v4.new_code_cell(source)
                nb.cells.append(cell)
                index = len(nb.cells) - 1
                client.answers[index] = 0
                try:
                    problem = run(cell, index, timeout)
                    if problem:
                        names = {"check": current["check"], "function": function}
                        gone = (
                            msg("the kernel did not stop while {check} ran {function}", **names)
                            if problem == "unresponsive"
                            else msg("the kernel died while {check} ran {function}", **names)
                        )
                        return {"problem": gone}
                    if id(cell) in client.timed_out:
                        return {
                            "problem": msg(
                                "time limit: {function} did not return within {seconds:g} s",
                                function=function,
                                seconds=cell_timeout,
                            )
                        }
                    answers = [
                        o["data"][grade_wire.MIME]
                        for o in cell.get("outputs", [])
                        if o.get("output_type") == "display_data"
                        and grade_wire.MIME in o.get("data", {})
                    ]
                    raised = [o.get("ename") for o in cell.get("outputs", [])]
                    if not answers and "MemoryError" in raised:  # sending the answer
                        return {
                            "problem": msg(
                                "memory limit: the answer of {function} did not fit in {limit}",
                                function=function,
                                limit=limit_text,
                            )
                        }
                    return {"answers": answers}
                finally:
                    nb.cells.pop()
                    client.budget.pop(index, None)
                    client.answers.pop(index, None)

            remote = grade_wire.Remote(run_call, write_request)
            for label, check, function in items:
                result = {"label": label, "check": check, "function": function, "memory": False}
                results.append(result)
                if gone:
                    result.update(status=ERROR, message=msg("not graded: {why}", why=gone))
                    continue
                current.update(function=function, check=check)
                remote.deadline = time.monotonic() + cell_timeout
                remote.measured_memory = False
                remote.overdue = ""
                remote.start_check(tuple(n for n in IMPLEMENTATIONS.get(check, ()) if n in keys))
                try:
                    with _watchdog(
                        remote,
                        cell_timeout + WATCHDOG_GRACE,
                        msg(
                            "time limit: {check} did not finish with {function} within "
                            "{seconds:g} s (reading and judging its answers included)",
                            check=check,
                            function=function,
                            seconds=cell_timeout,
                        ),
                    ):
                        found = remote.probe(function, cell_timeout)
                        if not found["defined"]:
                            missing = msg("{name} is not defined: not attempted", name=function)
                            result.update(status=NOT_ATTEMPTED, message=missing)
                            continue
                        stand_in = _stand_in(remote, function, found, cell_timeout)
                        verdict = run_self_check(check, {function: stand_in}, function)
                except grade_wire.GradingAborted as err:
                    why = err.args[0] if err.args and isinstance(err.args[0], str) else str(err)
                    if gone and str(err) == gone:
                        events.append(gone)
                    stopped = isinstance(err, grade_wire.SubmissionStopped)
                    result.update(status=FAILED if stopped else ERROR, message=why)
                    result.update(_book_code(remote, function, public_names, result))
                    continue
                result["memory"] = remote.measured_memory
                report = verdict.report
                if report is not None and any(r.raised == "MemoryError" for r in report.results):
                    result.update(
                        status=ERROR,
                        message=msg(
                            "memory limit: {function} ran out of memory (MemoryError at "
                            "{limit}); {report}",
                            function=function,
                            limit=limit_text,
                            report=verdict.message,
                        ),
                    )
                else:
                    result.update(status=verdict.status, message=verdict.message)
                result.update(_book_code(remote, function, public_names, result))
    return {"events": events, "results": results}


def _book_code(remote, function: str, public_names, result: dict) -> dict:
    """The flags (and, for a row that would pass, the verdict) of what the kernel's watch
    reported during one check: the book's own implementation of what the check grades
    was entered (not attempted, as the self-check says in Colab), or the watch was found
    switched off (an error: what the function called cannot be known)."""
    flags, update = [], {}
    if remote.book_calls:
        called = ", ".join(public_names(remote.book_calls))
        flags.append(msg("calls the book's own {called}", called=called))
        if result.get("status") == PASSED:
            update = {
                "status": NOT_ATTEMPTED,
                "message": msg(
                    "not attempted: {function} calls {called}, the book's own version: "
                    "the exercise asks the student to write it",
                    function=function,
                    called=called,
                ),
            }
    if remote.watched and remote.watch_off:
        flags.append(WATCH_OFF_FLAG)
        if result.get("status") == PASSED and not update:
            update = {
                "status": ERROR,
                "message": msg(
                    "the notebook's code switched off the grader's watch for calls of the "
                    "book's own code while {function} ran: read its code",
                    function=function,
                ),
            }
    return {**update, "flags": flags}


def _too_deep(source: str) -> bool:
    """Whether Python's compiler gives up on this code for its depth (3000 ``.a`` or
    ``+ 1`` in a row): ipykernel then never answers the cell, so it is not sent."""
    try:
        ast.parse(source)
    except (RecursionError, MemoryError):
        return True
    except (SyntaxError, ValueError):
        pass  # IPython's own syntax (magics, !shell), or a mistake the kernel reports
    return False


def _size(content: object) -> int:
    """About how many characters a kernel message's content holds (every string, every
    other value counted as 8), walked without recursion."""
    total, stack = 0, [content]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            total += len(node)
        elif isinstance(node, dict):
            stack += node.keys()
            stack += node.values()
        elif isinstance(node, list):
            stack += node
        else:
            total += 8
    return total


@contextlib.contextmanager
def _watchdog(remote, seconds: float, message: str):
    """Stop a self-check that runs longer than ``seconds`` in the grader's own process
    (a huge answer to format, say): SIGALRM raises GradingAborted there; during a call
    to the kernel, which has its own time limit, it leaves a note the call raises on."""

    def expired(signum, frame):
        remote.overdue = message
        if not remote.in_call:
            raise grade_wire.GradingAborted(message)

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _stand_in(remote, function: str, found: dict, timeout: float) -> object:
    """What the check is given in place of the student's object named ``function``."""
    type_name = found.get("type")
    if not isinstance(type_name, str) or not grade_wire._IDENTIFIER.fullmatch(type_name):
        type_name = "object"
    if found.get("callable") is not True:
        return type(type_name, (), {"__module__": "submission"})()  # not callable: as in Colab
    shown = found.get("name")
    if not isinstance(shown, str) or len(shown) > 200:
        shown = type_name
    return grade_wire.RemoteFunction(remote, function, shown, timeout)


def _death(client, limit_text: str) -> str:
    """How the kernel ended: its exit status, or the signal that killed it."""
    process = getattr(getattr(client.km, "provisioner", None), "process", None)
    code = process.poll() if process is not None else None
    if code is not None and code > 128 and code - 128 in signal.Signals._value2member_map_:
        code = -(code - 128)  # bwrap reports a signal as 128 + its number
    if code is not None and code >= 0:
        return msg("exit status {code}", code=code)
    if code is None:
        return msg("no exit status; an allocation at {limit} can do that", limit=limit_text)
    return msg(
        "killed by {signal}; an allocation at {limit} can do that",
        signal=signal.Signals(-code).name,
        limit=limit_text,
    )


def worker_main(args: argparse.Namespace) -> int:
    """`grade.py --worker`: limit this process, grade one notebook, write JSON.

    Unsealed, the kernel inherits this process's address-space limit; sealed, the kernel
    gets its own limits in its sandbox, and this process (which holds the answers the
    kernel sends back, and replays a measured peak) gets twice as much plus 1 GB.
    """
    import resource

    from grade_i18n import set_language

    # The self-checks' reports in the submission's language (never the environment's:
    # ATTENTION_BOOK_LANGUAGE of the instructor's shell must not change an English row).
    language = args.language if args.language in LANGUAGES else "en"
    set_language(language)
    mb = args.memory_mb * 2 + 1024 if args.sealed else args.memory_mb
    resource.setrlimit(resource.RLIMIT_AS, (mb * 2**20, mb * 2**20))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    items = [tuple(item) for item in json.loads(args.items)]
    outcome = grade_notebook(
        Path(args.worker),
        items,
        cell_timeout=args.cell_timeout,
        total_timeout=args.total_timeout,
        memory_mb=args.memory_mb,
        sealed=args.sealed,
    )
    try:  # a flag for the instructor: never a reason to lose the verdicts
        copies = copy_flags(read_notebook(Path(args.worker)), args.chapter or "", items)
    except Exception:
        copies = [[] for _ in items]
    for result, flags in zip(outcome["results"], copies, strict=False):
        result["flags"] = [*result.get("flags", []), *flags]
    # Messages are written in English (msg) and shown in the submission's language: made
    # text here, since JSON keeps a message's English only.
    for result in outcome["results"]:
        result["message"] = localize(result["message"], language)
        result["flags"] = [localize(flag, language) for flag in result["flags"]]
    outcome["events"] = [localize(event, language) for event in outcome["events"]]
    Path(args.result).write_text(json.dumps(outcome))
    return 0


def notebook_functions(nb) -> dict[str, list[ast.AST]]:
    """Every function (and lambda bound to a name) the code cells of ``nb`` define, by
    name, read cell by cell (a cell that does not parse, a magic say, is skipped)."""
    import grade_copies

    found: dict[str, list[ast.AST]] = {}
    cells = nb.get("cells", []) if isinstance(nb, dict) else []
    for cell in cells if isinstance(cells, list) else []:
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            for name, nodes in grade_copies.functions_in(cell_source(cell)).items():
                found.setdefault(name, []).extend(nodes)
    return found


def copy_flags(nb, stem: str, items: list[tuple[str, str, str]]) -> list[list[str]]:
    """For each graded item, the flag of a near-copy of the book's own code
    (scripts/grade_copies.py): the function graded, or a function of the notebook it calls
    (by name, however deep), whose source holds most of the source of a helper that
    computes what the check grades. Functions the chapter's student notebook itself
    defines, unchanged, are the book's to give, not the student's: left out."""
    import grade_copies

    from helpers.checks.core import IMPLEMENTATIONS

    functions = notebook_functions(nb)
    given = STUDENT_EDITION / f"{stem}.ipynb"
    book = notebook_functions(read_notebook(given)) if stem and given.exists() else {}
    shapes = {ast.dump(node) for nodes in book.values() for node in nodes}
    own = {
        name: [n for n in nodes if ast.dump(n) not in shapes] for name, nodes in functions.items()
    }
    flags = []
    for _, check, function in items:
        reached, queue = set(), [function]
        while queue:  # the function, and the notebook's functions it calls, by name
            name = queue.pop()
            if name in reached or name not in own:
                continue
            reached.add(name)
            for node in own[name]:
                for call in ast.walk(node):
                    if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
                        queue.append(call.func.id)
        candidates = [(name, node) for name in sorted(reached) for node in own[name]]
        matches = grade_copies.near_copies(candidates, IMPLEMENTATIONS.get(check, ()))
        flags.append([matches[0].flag()] if matches else [])
    return flags


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
    notebook: bool = True
    shown: str = ""  # the path under the submissions folder, as text (see shown())
    claimed: str = ""  # the student the file's own name gives, when a folder names another
    skipped: bool = False  # a copy Jupyter or the system makes (.ipynb_checkpoints, ...)
    language: str = "en"  # of the edition it comes from (submission_language): its messages


# Made by Jupyter or the operating system, not by a student: listed in the summary only.
SYSTEM_FOLDERS = {".ipynb_checkpoints", "__MACOSX", ".git", "__pycache__"}
SYSTEM_FILES = {".DS_Store", "Thumbs.db", "desktop.ini"}


def _is_system_copy(relative: Path) -> bool:
    parts = relative.parts
    name = parts[-1]
    return (
        any(part in SYSTEM_FOLDERS for part in parts[:-1])
        or name in SYSTEM_FILES
        or name.startswith("._")  # macOS's AppleDouble files in a zip
    )


def find_submissions(root: Path, chapters: dict[str, list[dict]]) -> list[Submission]:
    """Every file under ``root``: notebooks to grade, and the other files (listed, not
    graded), grouped by student. Nothing a file holds or is called stops the run: a file
    that cannot be read or understood is a Submission with its ``problem``."""
    stems = list(chapters)
    titles = chapter_titles(stems)
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() or p.is_symlink()):
        try:
            submission = _submission(path, root, stems, titles)
        except Exception as err:  # whatever the file is, it gets a row saying why
            submission = Submission(path, "?", None, f"the grader could not read it: {_why(err)}")
            submission.shown = shown(str(path.relative_to(root)))
            try:
                submission.student = student_name(path, root, None)
            except Exception:
                pass
        found.append(submission)
    found.sort(key=lambda s: (s.student.lower(), s.student, s.chapter or "", s.shown))
    return found


def _submission(path: Path, root: Path, stems: list[str], titles: dict[str, str]) -> Submission:
    import nbformat

    relative = path.relative_to(root)
    if _is_system_copy(relative):
        skipped = Submission(path, "", None, "a copy Jupyter or the system makes: not graded")
        skipped.notebook, skipped.skipped, skipped.shown = False, True, shown(str(relative))
        return skipped
    if path.suffix != ".ipynb" or path.is_symlink():
        why = "a link, not a notebook" if path.is_symlink() else "not a notebook"
        other = Submission(path, student_name(path, root, None), None, f"{why}: not graded")
        other.notebook, other.shown = False, shown(str(relative))
        return other
    if path.stat().st_size > MAX_NOTEBOOK_MB * 2**20:
        problem = f"the notebook is larger than {MAX_NOTEBOOK_MB} MB: not graded"
        chapter, nb = None, None
    else:
        try:
            nb = nbformat.read(path, as_version=4)
            chapter, problem = identify_chapter(nb, path, stems, titles), ""
        except Exception as err:  # not a notebook at all
            chapter, nb = None, None
            problem = f"cannot read the notebook: {_first(str(err)) or type(err).__name__}"
    submission = Submission(path, student_name(path, root, chapter), chapter, problem)
    submission.shown = shown(str(relative))
    if nb is not None:
        submission.language = submission_language(nb)
    if len(relative.parts) > 1:
        submission.claimed = named_by_file(path.name, chapter)
    if nb is not None and chapter is None:
        submission.problem = msg(
            "cannot tell which chapter this is: name the file after the chapter, "
            "e.g. alice_{stem}.ipynb",
            stem=stems[0],
        )
    return submission


def _why(err: BaseException) -> str:
    """An exception in one line, its type first."""
    text = _first(str(err))
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _first(text: str, limit: int = 200) -> str:
    line = next((x for x in text.splitlines() if x.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


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


def _remove_leftover_cgroups(worker_pid: int) -> None:
    """The cgroups of a worker that was killed before it could remove them."""
    from grade_sandbox import Isolation

    isolation = Isolation.detect()
    for base in isolation.cgroups:
        for cg in base.glob(f"grade-{worker_pid}-*"):
            for pid in (cg / "cgroup.procs").read_text().split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for _ in range(50):
                try:
                    cg.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)


def grade_submission(submission: Submission, root: Path, chapters, limits, sealed) -> Submission:
    """Grade one submission in a worker process; fill submission.rows. Never raises: an
    exception while handling this submission is its own "error" row, and the run goes on."""
    try:
        return _grade_submission(submission, root, chapters, limits, sealed)
    except Exception as err:
        failed = msg("the grader failed on this notebook: {why}", why=_why(err))
        submission.rows = [
            {**_base(submission, sealed), "exercise": NOTEBOOK_ROW, "check": "", "function": ""}
            | {"status": ERROR, "message": localize(failed, submission.language)}
        ]
        return submission


def _base(submission: Submission, sealed: bool) -> dict:
    """The columns every row of a submission shares."""
    return {
        "student": submission.student,
        "chapter": submission.chapter or "",
        "notebook": submission.shown or shown(submission.path.name),
        "flags": "" if sealed else UNSEALED,
    }


def _grade_submission(submission: Submission, root: Path, chapters, limits, sealed) -> Submission:
    base = _base(submission, sealed)
    if submission.skipped:
        return submission
    if submission.problem:
        exercise = NOTEBOOK_ROW if submission.notebook else FILE_ROW
        submission.rows = [
            {**base, "exercise": exercise, "check": "", "function": "", "status": ERROR}
            | {"message": localize(submission.problem, submission.language)}
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
            "--chapter",
            submission.chapter or "",
            "--result",
            str(result),
            "--cell-timeout",
            str(cell_timeout),
            "--total-timeout",
            str(total_timeout),
            "--memory-mb",
            str(memory_mb),
            *(["--sealed"] if sealed else []),
            "--language",
            submission.language,
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
            failure = msg(
                "grading this notebook took more than {seconds:g} s and was stopped",
                seconds=backstop,
            )
        if sealed and failure:
            _remove_leftover_cgroups(proc.pid)
        outcome = json.loads(result.read_text()) if not failure else None
    submission.seconds = time.monotonic() - start
    if outcome is None:
        last = [line for line in failure.strip().splitlines() if line.strip()][-1:]
        if isinstance(failure, Msg):  # the backstop: the whole reason is the grader's
            last = [failure]
        message = msg(
            "the grader failed on this notebook: {why}",
            why=last[0] if last else msg("no output"),
        )
        language = submission.language
        outcome = {
            "events": [localize(message, language)],
            "results": [
                {"label": label, "check": check, "function": function, "status": ERROR}
                | {"message": localize(msg("not graded: {why}", why=message), language)}
                | {"memory": False}
                for label, check, function in items
            ],
        }
    submission.rows = [
        {**base, "exercise": r["label"], "check": r["check"], "function": r["function"]}
        | {"status": r["status"], "message": r["message"]}
        | {
            "flags": _join_flags(
                base["flags"],
                localize(MEMORY_FLAG, submission.language) if r.get("memory") else "",
                *r.get("flags", []),
            )
        }
        for r in outcome["results"]
    ]
    submission.rows = in_book_order(
        submission.rows,
        [
            {**base, **row}
            for row in hand_rows(
                submission.chapter,
                chapters[submission.chapter],
                read_notebook(submission.path),
                submission.language,
            )
        ],
        chapters[submission.chapter],
    )
    for row in submission.rows:
        row.update(points_of(row, chapters[submission.chapter]))
    if outcome["events"]:
        submission.rows.append(
            {**base, "exercise": NOTEBOOK_ROW, "check": "", "function": "", "status": ERROR}
            | {"message": "; ".join(outcome["events"])}
        )
    return submission


def max_points(exercise: dict, check: str, function: str) -> float:
    """The points of one part of an exercise (see DEFAULT_POINTS)."""
    given = exercise.get("points") or {}
    default = DEFAULT_POINTS.get(exercise.get("difficulty", ""), 1)
    if not function:
        return given.get("written", default)
    return given.get(check, given.get(function, default)) if check else given.get(function, default)


def points_of(row: dict, exercises: list[dict]) -> dict:
    """A row's points: all of them when passed, none when failed, not attempted or stopped
    by a limit, blank ("to mark") when manual."""
    exercise = next((e for e in exercises if e["label"] == row["exercise"]), None)
    if exercise is None:
        return {"points": "", "max_points": ""}
    most = max_points(exercise, row["check"], row["function"])
    got = "" if row["status"] == MANUAL else most if row["status"] == PASSED else 0
    return {"points": got, "max_points": most}


def score(rows: list[dict]) -> tuple[float, float, float]:
    """(points, the most there are, the points still to mark by hand) of a submission."""
    parts = [r for r in rows if r.get("max_points") not in ("", None)]
    got = sum(float(r["points"]) for r in parts if r.get("points") not in ("", None))
    to_mark = sum(float(r["max_points"]) for r in parts if r.get("points") in ("", None))
    return got, sum(float(r["max_points"]) for r in parts), to_mark


def read_notebook(path: Path) -> dict:
    """The submission's JSON, for reading its source only ({} if it cannot be read)."""
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return nb if isinstance(nb, dict) else {}


def in_book_order(checked: list[dict], by_hand: list[dict], exercises: list[dict]) -> list[dict]:
    """Both kinds of rows, exercise by exercise in the book's order, as the student notebook
    has them: the written answer, the self-checks, then the functions no check grades."""
    order = {e["label"]: k for k, e in enumerate(exercises)}
    rows = [(order.get(r["exercise"], len(order)), 1, k, r) for k, r in enumerate(checked)]
    rows += [
        (order.get(r["exercise"], len(order)), 0 if not r["function"] else 2, k, r)
        for k, r in enumerate(by_hand)
    ]
    return [r for *_, r in sorted(rows, key=lambda t: t[:3])]


def _join_flags(*flags: str) -> str:
    return "; ".join(f for f in flags if f)


def flag_duplicates(submissions: list[Submission]) -> list[list[Submission]]:
    """Flag the rows of a student's second (third, ...) submission of a chapter; return
    the groups of duplicates."""
    groups: dict[tuple[str, str], list[Submission]] = {}
    for s in submissions:
        if s.notebook and s.chapter:
            groups.setdefault((s.student, s.chapter), []).append(s)
    duplicates = [g for g in groups.values() if len(g) > 1]
    for group in duplicates:
        for s in group:
            others = ", ".join(_file(o) for o in group if o is not s)
            flag = localize(msg("duplicate (also {others})", others=others), s.language)
            for row in s.rows:
                row["flags"] = _join_flags(row["flags"], flag)
    return duplicates


def _file(s: Submission) -> str:
    return Path(s.shown).name if s.shown else shown(s.path.name)


def flag_other_names(submissions: list[Submission]) -> list[Submission]:
    """Flag the rows of a file whose own name names someone other than the folder it is
    in (which names the student it is graded as): another student of the class, or a
    person an LMS export's name gives. Return those submissions."""
    students = {s.student for s in submissions if s.notebook}
    flagged = []
    for s in submissions:
        if not s.claimed or s.claimed == s.student or s.skipped:
            continue
        if s.claimed in students or lms_student(s.path.name):
            flagged.append(s)
            for row in s.rows:
                named = msg("the file's name names {student}", student=s.claimed)
                row["flags"] = _join_flags(row["flags"], localize(named, s.language))
    return flagged


_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value: str) -> str:
    """A cell value a spreadsheet shows as text: one that starts with = + - @ (or a tab,
    a carriage return) would be evaluated as a formula, so it gets a leading '."""
    return "'" + value if value.startswith(_FORMULA) else value


def text(value: object) -> str:
    """A value as text that UTF-8 can encode (an undecodable byte of a file name, kept as
    a lone surrogate by Python, becomes an escape such as \\udce9)."""
    return str(value).encode("utf-8", "backslashreplace").decode("utf-8")


def write_csv(rows: list[dict], out: Path) -> None:
    with out.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: spreadsheet_safe(text(row.get(k, ""))) for k in COLUMNS})


def summary(submissions: list[Submission], sealed: bool, duplicates, named=()) -> str:
    """One line per submission: counts of each status, and what went wrong in the notebook."""
    head = ("student", "chapter", *STATUSES, "points", "to mark", "seconds")
    table = [head]
    notes = []
    others = [s for s in submissions if not s.notebook and not s.skipped]
    skipped = [s for s in submissions if s.skipped]
    for s in submissions:
        if not s.notebook:
            continue
        graded = [r for r in s.rows if r["exercise"] != NOTEBOOK_ROW]
        counts = Counter(r["status"] for r in graded)
        got, most, to_mark = score(graded)
        table.append(
            (
                s.student,
                s.chapter or "?",
                *(str(counts[status]) for status in STATUSES),
                f"{got:g}/{most:g}" if most else "",
                f"{to_mark:g}" if most else "",
                f"{s.seconds:.0f}",
            )
        )
        notes += [
            f"  {s.student} ({_file(s)}): {r['message']}"
            for r in s.rows
            if r["exercise"] == NOTEBOOK_ROW
        ]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in table
    ]
    if notes:
        lines += ["", "Notebooks that hit a limit or could not be graded:", *notes]
    if duplicates:
        lines += ["", "Students with more than one submission of a chapter (all graded, flagged):"]
        lines += [
            f"  {g[0].student}, {g[0].chapter}: " + ", ".join(s.shown for s in g)
            for g in duplicates
        ]
    if named:
        lines += ["", "Files named for another student than their folder (graded as the folder's):"]
        lines += [f"  {s.shown}: graded as {s.student}" for s in named]
    if others:
        lines += ["", "Files that are not notebooks (not graded):"]
        lines += [f"  {s.shown}" for s in others]
    if skipped:
        lines += ["", f"Copies made by Jupyter or the system, not graded ({len(skipped)}):"]
        lines += [f"  {s.shown}" for s in skipped[:5]] + (["  ..."] if len(skipped) > 5 else [])
    if not sealed:
        lines += ["", UNSEALED_WARNING]
    return "\n".join(lines)


def marking_folder(out: Path) -> Path:
    """Where the marking sheets of a CSV go: results.csv -> results-marking/."""
    return out.parent / f"{out.stem}-marking"


def progress(done: int, total: int, elapsed: float) -> str:
    """``[3/30, about 4 min left]``: how far a class is, and the time left at this pace."""
    left = elapsed / done * (total - done) if done else 0
    when = f"{left / 60:.0f} min" if left >= 90 else f"{left:.0f} s"
    return f"[{done}/{total}, about {when} left]" if done < total else f"[{done}/{total}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("submissions", nargs="?", type=Path, help="folder of submitted notebooks")
    parser.add_argument("--out", type=Path, default=Path("results.csv"), help="the CSV to write")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks graded at once")
    parser.add_argument(
        "--cell-timeout",
        type=float,
        default=DEFAULT_CELL_TIMEOUT,
        help="seconds for each cell and for each self-check",
    )
    parser.add_argument(
        "--total-timeout",
        type=float,
        default=DEFAULT_TOTAL_TIMEOUT,
        help="seconds for all the cells of one notebook",
    )
    parser.add_argument(
        "--memory-mb",
        type=int,
        default=DEFAULT_MEMORY_MB,
        help="memory of one submission (all its processes together, when sealed)",
    )
    parser.add_argument(
        "--without-isolation",
        action="store_true",
        help="do not seal the submissions off (needed where they cannot be: not root, no "
        "bwrap, no cgroup): their code runs with your permissions; every row is flagged, "
        "and the summary says so",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--items", help=argparse.SUPPRESS)
    parser.add_argument("--chapter", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    parser.add_argument("--sealed", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--language", default="en", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker_main(args)
    if args.submissions is None or not args.submissions.is_dir():
        parser.error("SUBMISSIONS_DIR must be a folder of submitted notebooks")
    from grade_sandbox import Isolation

    isolation = Isolation.detect()
    sealed = isolation.available and not args.without_isolation
    if not isolation.available and not args.without_isolation:
        print(
            f"Cannot seal the submissions off from each other and from this machine: "
            f"{isolation.missing}.\nRun as root on Linux with bubblewrap installed "
            "(see the instructor's page), or pass --without-isolation to grade anyway, "
            "with your permissions (every row is then flagged 'unsealed').",
            file=sys.stderr,
        )
        return 2
    if sealed:
        from grade_sandbox import sealed_python_problem

        problem = sealed_python_problem(isolation)
        if problem:
            print(f"Cannot grade: {problem}.", file=sys.stderr)
            return 2
    root = args.submissions.resolve()
    out = args.out.resolve()
    chapters = load_exercises()
    submissions = [s for s in find_submissions(root, chapters) if s.path.resolve() != out]
    if not any(s.notebook for s in submissions):
        parser.error(f"no notebooks (*.ipynb) under {args.submissions}")
    limits = (args.cell_timeout, args.total_timeout, args.memory_mb)
    start = time.monotonic()
    print(
        f"Grading {sum(s.notebook for s in submissions)} notebooks from {args.submissions}, "
        f"{args.jobs} at a time (limits: {args.cell_timeout:g} s per cell, "
        f"{args.total_timeout:g} s per notebook, {args.memory_mb} MB; "
        + ("each sealed off" if sealed else "NOT sealed off: " + isolation.missing)
        + ")",
        flush=True,
    )
    total = sum(s.notebook for s in submissions)
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [
            pool.submit(grade_submission, s, root, chapters, limits, sealed) for s in submissions
        ]
        count = 0
        for future in as_completed(futures):
            s = future.result()
            if s.notebook:
                count += 1
                print(
                    f"  {progress(count, total, time.monotonic() - start)}  {s.student} "
                    f"({_file(s)}): graded in {s.seconds:.0f} s",
                    flush=True,
                )
    duplicates = flag_duplicates(submissions)
    named = flag_other_names(submissions)
    rows = [row for s in submissions for row in s.rows]
    write_csv(rows, args.out)
    print()
    print(text(summary(submissions, sealed, duplicates, named)))
    try:  # the CSV is written: nothing here can cost it
        import marking

        sheets = marking.write_sheets(submissions, chapters, marking_folder(args.out))
    except Exception as err:
        print(f"\nThe marking sheets could not be written: {_why(err)}")
        sheets = []
    if sheets:
        print("\nMarking sheets of the work read by hand (open in a browser; Save marks, then")
        print(f"make marks RESULTS={args.out} MARKS=...):")
        print("\n".join(f"  {sheet}" for sheet in sheets))
    print(f"\n{len(rows)} rows written to {args.out} in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
