"""The student edition: every chapter's Colab notebook with its solutions replaced.

Usage: python scripts/student_edition.py   write editions/student/ from editions/colab/
                                           (and editions/ko/student/ from editions/ko/colab/)

`make edition` and `make execute` (scripts/colab_edition.py) regenerate it together with
the Colab edition, from a fresh build; the command above only re-derives it from the
committed Colab edition. The Colab and Binder buttons of the published student edition
(/student/ on the site) open these notebooks.

Each notebook is the chapter's Colab edition (editions/colab/) in which every solution
(the collapsed "Solution to Exercise N" section: its heading, text and code cells, as the
Colab edition's metadata lists them) is replaced by starting cells:

- a "✏️ Your answer to Exercise N" quote (a markdown cell saying "Write your answer
  here.") where the solution has text: a proof, a derivation, an explanation;
- for every function (or class) the solution's code defines, its signature, as written
  in the solution, with its docstring (or a one-line one naming the exercise) and a body
  that raises ``NotImplementedError``. The signature is cut from the solution's source
  by its syntax tree (``ast``) and tokens, never written by hand. Where the solution's
  cell also computes something, "# Write your code here." follows;
- every self-check call of the solution (``helpers.checks.check_*(...)``) in a code cell
  of its own, so that it calls the student's function and reports "not attempted" until
  the student has written it;
- "# Write your code here." where a solution cell computes without defining anything;
- nothing for a cell the site leaves out (tagged ``remove-cell``): a glue cell, which
  only stores the numbers that the solution's text quotes (scripts/glue_cells.py).

A first cell, above the chapter's title, says what the notebook is (the student edition,
its exercises), how to run and work in it and where the solutions are not; it takes the
place of the Colab edition's first cell (how to run the notebook, ``role: about``). Everything else
(the exercise statements above all) is the Colab edition's cell,
unchanged, except that links to the online book point at the student edition of the
site (SITE/student/...), which has no solutions either. A solution that cannot be
converted (code that does not parse, a self-check of a name no starting cell defines)
stops the generation with a message naming the chapter and the exercise.
"""

from __future__ import annotations

import ast
import copy
import io
import json
import re
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COLAB = ROOT / "editions" / "colab"
EDITION = ROOT / "editions" / "student"
KO_COLAB = ROOT / "editions" / "ko" / "colab"  # the Korean editions (scripts/ko_edition.py)
KO_EDITION = ROOT / "editions" / "ko" / "student"
META = "colab_edition"  # the Colab edition's metadata (book/_ext/colab_edition.py)
STUDENT = "student_edition"  # what this edition adds
SITE_PATH = "student/"  # where the deploy publishes the student edition, under the site

ANSWER = "Write your answer here."
CODE_HERE = "# Write your code here."
#: A starting cell for text: a quote under a pencil, which reads apart from the chapter.
ANSWER_CELL = "> ✏️ **Your answer to {what}**\n>\n> {answer} (Double-click this cell to edit it.)"

#: The first cell of every student notebook: what it is and how to work in it.
ABOUT = [
    "**Student edition.** This notebook is the chapter below with its exercises and "
    "without their solutions{exercises}.",
    "",
    "- **Run the cells in order**, from the top (in Colab: Runtime ▸ Run all): the first "
    "one installs the book's `helpers` package in Colab. The figures with a slider "
    "(explorers) come alive once their cell has run.",
    "- **Answer in the starting cells** that follow each exercise: write text and maths in "
    "the cells marked ✏️ *Your answer*; complete each function whose body raises "
    "`NotImplementedError`, run its cell, then run the self-check below it. The check says "
    "whether your function passes and, when it does not, which input fails and why.",
    "- **The solutions are not here**, nor in the student edition of the book online, where "
    "this notebook's links lead. Whether and when you see them is for your instructor to "
    "decide.",
    "- **To keep your work**, save a copy (in Colab: File, then Save a copy in Drive).",
]


#: The same words in the Korean edition (editions/ko/student/, from editions/ko/colab/,
#: whose metadata says ``language: ko``; scripts/ko_edition.py).
WORDS = {
    "en": {
        "about": ABOUT,
        "answer": ANSWER,
        "answer_cell": ANSWER_CELL,
        "code_here": CODE_HERE,
        "what": "Exercise {number}",
        "what_alone": "this exercise",
        "docstring": "Your answer to {what}.",
        "raise": "{what}: write {name}",
        "exercises_heading": r"Exercises\b",
    },
    "ko": {
        "about": [
            "**학생판.** 이 노트북은 아래 장에서 연습 문제의 풀이만 뺀 것이다.{exercises}",
            "",
            "- **셀을 맨 위부터 차례로 실행한다**(Colab에서는 런타임 ▸ 모두 실행). 첫 번째 셀은 "
            "Colab에서 이 책의 `helpers` 패키지를 설치하고, 자가 점검 메시지와 그림의 글자를 "
            "한국어로 정한다. 슬라이더가 있는 그림(탐색기)은 그 셀을 실행하면 움직이기 시작한다.",
            "- **각 연습 문제 뒤의 시작 셀에 답한다.** 글과 수식은 ✏️ *답*이라고 표시된 셀에 "
            "쓴다. 본문이 `NotImplementedError`를 일으키는 함수는 완성한 뒤 그 셀을 실행하고, "
            "바로 아래의 자가 점검을 실행한다. 자가 점검은 함수가 통과하는지 알려 주고, "
            "통과하지 못하면 어떤 입력에서 왜 실패하는지 알려 준다.",
            "- **풀이는 여기에 없다.** 이 노트북의 링크가 가리키는 온라인 책의 학생판에도 없다. "
            "풀이를 보여 줄지, 언제 보여 줄지는 담당 교수자가 정한다.",
            "- **작업을 보관하려면** 사본을 저장한다(Colab에서는 파일 ▸ Drive에 사본 저장).",
        ],
        "answer": "여기에 답을 쓰라.",
        "answer_cell": "> ✏️ **{what}의 답**\n>\n> {answer} (이 셀을 두 번 클릭하면 고칠 수 있다.)",
        "code_here": "# 여기에 코드를 쓰라.",
        "what": "연습 문제 {number}",
        "what_alone": "이 연습 문제",
        "docstring": "{what}의 답.",
        "raise": "{what}: 이 함수({name})를 완성하라",
        "exercises_heading": r"연습 문제",
    },
}


def words_of(colab: dict) -> dict:
    """The words of the student edition in the Colab edition's language."""
    language = colab.get("metadata", {}).get(META, {}).get("language", "en")
    if language not in WORDS:
        raise StudentEditionError(f"no words for the language {language!r} (WORDS)")
    return WORDS[language]


class StudentEditionError(Exception):
    """A solution the generator cannot turn into starting cells."""


#: Tags with which the site leaves a cell out (myst-nb's).
REMOVED = frozenset({"remove-cell", "remove_cell"})


def removed_on_the_site(cell: dict) -> bool:
    return bool(REMOVED & set(cell.get("metadata", {}).get("tags", [])))


def source_of(cell: dict) -> str:
    text = cell.get("source", "")
    return "".join(text) if isinstance(text, list) else text


# ------------------------------------------------------------------ starting code


def header_end(lines: list[str], node: ast.AST) -> tuple[int, int]:
    """(line, column) just after the ":" that ends a def/class header (1-based line)."""
    start = node.lineno
    text = "\n".join(lines[start - 1 :]) + "\n"
    depth = 0
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    for token in tokens:
        if token.type != tokenize.OP:
            continue
        if token.string in "([{":
            depth += 1
        elif token.string in ")]}":
            depth -= 1
        elif token.string == ":" and depth == 0:
            return start + token.end[0] - 1, token.end[1]
    raise ValueError(f"no end of the header of {getattr(node, 'name', '?')}")


def stub(
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef,
    code: str,
    what: str,
    words: dict | None = None,
):
    """The starting code for one definition: its header as written, its docstring (or one
    naming `what`, the exercise), and a body that raises NotImplementedError (for a class:
    its methods' starting code)."""
    lines = code.split("\n")
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    end_line, end_col = header_end(lines, node)
    header = [line.rstrip() for line in lines[first - 1 : end_line]]
    header[-1] = lines[end_line - 1][:end_col]
    indent = " " * (node.col_offset + 4)
    words = words or WORDS["en"]
    if ast.get_docstring(node, clean=False) is not None:
        body = [indent + ast.get_source_segment(code, node.body[0])]
    else:
        body = [f'{indent}"""{words["docstring"].format(what=what)}"""']
    if isinstance(node, ast.ClassDef):
        methods = [n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        for method in methods:
            body += ["", stub(method, code, what, words)]
    else:
        message = words["raise"].format(what=what, name=node.name)
        body.append(f'{indent}raise NotImplementedError("{message}")')
    return "\n".join(header + body)


def is_check_call(statement: ast.stmt) -> bool:
    """A self-check call as a statement: ``helpers.checks.check_x(...)`` (or ``check_x``)."""
    if not isinstance(statement, ast.Expr) or not isinstance(statement.value, ast.Call):
        return False
    func = statement.value.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name.startswith("check_")


def check_name(statement: ast.Expr) -> str:
    func = statement.value.func
    return func.attr if isinstance(func, ast.Attribute) else func.id


DEFINITIONS = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


class Solution:
    """One exercise's solution cells and the starting cells that replace them."""

    def __init__(
        self, label: str, number: str, cells: list[dict], chapter: str, words: dict | None = None
    ) -> None:
        self.label, self.number, self.cells, self.chapter = label, number, cells, chapter
        self.words = words or WORDS["en"]
        what = self.words["what"].format(number=number)
        self.what = what if number else self.words["what_alone"]
        self.functions: list[str] = []  # names the starting cells define
        self.checks: list[list[str]] = []  # [check name, function name] per check call

    def fail(self, message: str) -> StudentEditionError:
        return StudentEditionError(
            f"{self.chapter}, solution of {self.label!r}: {message}. Extend "
            "scripts/student_edition.py or write the solution another way."
        )

    def new_cell(self, kind: str, like: dict, suffix: str, text: str, role: str) -> dict:
        cell: dict = {"cell_type": kind, "metadata": {STUDENT: {"exercise": self.label}}}
        cell["metadata"][STUDENT]["role"] = role
        if "id" in like:
            cell["id"] = f"{like['id']}-{suffix}"[-64:]
        if kind == "code":
            cell.update(execution_count=None, outputs=[])
        cell["source"] = text
        return cell

    def starting_cells(self) -> list[dict]:
        out: list[dict] = []
        prose = [
            c
            for c in self.cells
            if c["cell_type"] == "markdown" and not c["metadata"].get("jp-MarkdownHeadingCollapsed")
        ]
        if prose:
            text = self.words["answer_cell"].format(what=self.what, answer=self.words["answer"])
            out.append(self.new_cell("markdown", prose[0], "answer", text, "answer"))
        defined: set[str] = set()  # names the solution's code binds at top level
        for cell in self.cells:
            if cell["cell_type"] != "code" or removed_on_the_site(cell):
                continue  # a glue cell: the student glues nothing, and its text is gone
            code = source_of(cell)
            try:
                tree = ast.parse(code)
            except SyntaxError as err:
                raise self.fail(f"code cell {cell.get('id')} does not parse ({err.msg})") from None
            stubs, checks, other = [], [], False
            for statement in tree.body:
                if isinstance(statement, DEFINITIONS):
                    stubs.append(stub(statement, code, self.what, self.words))
                    self.functions.append(statement.name)
                elif is_check_call(statement):
                    checks.append(statement)
                else:
                    other = True
                    for node in ast.walk(statement):
                        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                            defined.add(node.id)
            if stubs:
                text = "\n\n\n".join(stubs + ([self.words["code_here"]] if other else []))
                out.append(self.new_cell("code", cell, "starter", text, "starter"))
            elif other and not (out and out[-1]["metadata"][STUDENT]["role"] == "code"):
                out.append(self.new_cell("code", cell, "code", self.words["code_here"], "code"))
            for k, statement in enumerate(checks):
                names = [
                    n.id
                    for n in ast.walk(statement.value)
                    if isinstance(n, ast.Name) and n.id in defined and n.id not in self.functions
                ]
                if names:
                    raise self.fail(
                        f"its self-check {check_name(statement)} uses {names}, which only the "
                        "solution's code defines (no starting cell would)"
                    )
                args = statement.value.args
                function = args[0].id if args and isinstance(args[0], ast.Name) else ""
                self.checks.append([check_name(statement), function])
                text = ast.get_source_segment(code, statement)
                out.append(self.new_cell("code", cell, f"check{k}", text, "check"))
        return out


# ------------------------------------------------------------------ the notebook


def student_notebook(colab: dict, name: str) -> dict:
    """The student edition of one chapter, from its Colab edition (a notebook dict)."""
    meta = colab["metadata"].get(META, {})
    words = words_of(colab)
    solutions: dict[str, list[str]] = meta.get("solutions", {})
    numbers: dict[str, str] = meta.get("exercises", {})
    site = meta.get("site", "")
    if not site:
        raise StudentEditionError(f"{name}: the Colab edition does not name the site")
    owner = {cell_id: label for label, ids in solutions.items() for cell_id in ids}
    cells = colab["cells"]
    out: list[dict] = []
    exercises: dict[str, dict] = {}
    k = 0
    while k < len(cells):
        label = owner.get(cells[k].get("id"))
        if cells[k].get("metadata", {}).get(META, {}).get("role") == "about":
            k += 1  # the Colab edition's note: the student edition says more (about_cell)
            continue
        if label is None:
            out.append(with_student_links(copy.deepcopy(cells[k]), site))
            k += 1
            continue
        ids = set(solutions[label])
        end = k
        while end < len(cells) and cells[end].get("id") in ids:
            end += 1
        if end - k != len(ids):
            raise StudentEditionError(f"{name}: the solution of {label!r} is not contiguous")
        solution = Solution(label, numbers.get(label, ""), cells[k:end], name, words)
        out.extend(solution.starting_cells())
        exercises[label] = {
            "number": solution.number,
            "functions": solution.functions,
            "checks": solution.checks,
        }
        k = end
    missing = set(solutions) - set(exercises)
    if missing:
        raise StudentEditionError(f"{name}: solutions not found among the cells: {missing}")
    out.insert(0, about_cell(out, numbers, exercises, words))
    metadata = copy.deepcopy(colab["metadata"])
    metadata[META] = {k: v for k, v in meta.items() if k != "solutions"}
    kept = {c.get("id") for c in out}
    colab_meta = metadata.setdefault("colab", {})
    colab_meta["collapsed_sections"] = [
        i for i in colab_meta.get("collapsed_sections", []) if i in kept
    ]
    metadata[STUDENT] = {"site": site + SITE_PATH, "exercises": exercises}
    return {**colab, "metadata": metadata, "cells": out}


def about_cell(
    cells: list[dict],
    numbers: dict[str, str],
    exercises: dict[str, dict],
    words: dict | None = None,
) -> dict:
    """The notebook's first cell, a quote: the student edition, and how to work in it."""
    words = words or WORDS["en"]
    heading_pattern = r"^#{1,6} (\d+(?:\.\d+)*)\. " + words["exercises_heading"]
    where = ""
    for cell in cells:
        heading = re.search(heading_pattern, source_of(cell), re.M)
        if cell["cell_type"] == "markdown" and heading:
            where = heading.group(1)
    if words is not WORDS["en"]:
        lines = [
            line.format(exercises=korean_count(numbers, exercises, where))
            for line in words["about"]
        ]
        return about_quote(cells, lines)
    where = f", in section {where} at the end" if where else ""
    count = ""
    if numbers:
        checked = sum(1 for e in exercises.values() if e["checks"])
        count = f": {len(numbers)} exercise{'s' if len(numbers) != 1 else ''}"
        count += f", {checked} of them with a self-check" if checked else ""
        count += where
    lines = [line.format(exercises=count) for line in ABOUT]
    return about_quote(cells, lines)


def korean_count(numbers: dict[str, str], exercises: dict[str, dict], where: str) -> str:
    """The Korean first cell's count: " 연습 문제는 6개이고, 그 가운데 4개에는 자가 점검이
    있으며, 맨 끝의 1.9절에 있다." """
    if not numbers:
        return ""
    checked = sum(1 for e in exercises.values() if e["checks"])
    parts = [f"연습 문제는 {len(numbers)}개"]
    if checked:
        parts.append(f"그 가운데 {checked}개에는 자가 점검이 있")
    if where:
        parts.append(f"맨 끝의 {where}절에 있다.")
    if len(parts) == 1:
        return f" {parts[0]}이다."
    if len(parts) == 2 and checked:
        return f" {parts[0]}이고, {parts[1]}다."
    if len(parts) == 2:
        return f" {parts[0]}이며, {parts[1]}"
    return f" {parts[0]}이고, {parts[1]}으며, {parts[2]}"


def about_quote(cells: list[dict], lines: list[str]) -> dict:
    text = "\n".join("> " + line if line else ">" for line in lines)
    cell = {"cell_type": "markdown", "metadata": {STUDENT: {"role": "about"}}, "source": text}
    if cells and "id" in cells[0]:
        cell["id"] = "student-edition-about"
    return cell


def with_student_links(cell: dict, site: str) -> dict:
    """Links to the online book go to its student edition (which has no solutions).

    The Colab edition writes every link to the site as ``[text](SITE...)``.
    """
    if cell["cell_type"] == "markdown":
        text = source_of(cell).replace(f"]({site}", f"]({site}{SITE_PATH}")
        cell["source"] = text
    return cell


def generate(colab: dict[str, bytes]) -> dict[str, bytes]:
    """{file name: bytes} of the student edition, from the Colab edition's."""
    out = {}
    for name, data in colab.items():
        notebook = student_notebook(json.loads(data), name)
        out[name] = (json.dumps(notebook, indent=1, ensure_ascii=False) + "\n").encode()
    return out


def write(fresh: dict[str, bytes], directory: Path = EDITION) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    where = directory.relative_to(ROOT)
    for path in directory.glob("*.ipynb"):
        if path.name not in fresh:
            path.unlink()
            print(f"removed {where}/{path.name}")
    for name, data in fresh.items():
        target = directory / name
        if not target.exists() or target.read_bytes() != data:
            target.write_bytes(data)
            print(f"wrote {where}/{name}")
    print(f"{where}/ is current ({len(fresh)} chapters)")


def main() -> int:
    colab = {p.name: p.read_bytes() for p in sorted(COLAB.glob("[0-9][0-9]_*.ipynb"))}
    if not colab:
        raise SystemExit("editions/colab/ is empty: run `make edition`")
    write(generate(colab))
    korean = {p.name: p.read_bytes() for p in sorted(KO_COLAB.glob("[0-9][0-9]_*.ipynb"))}
    if korean:  # the Korean student edition, from the Korean Colab edition
        write(generate(korean), KO_EDITION)
    return 0


if __name__ == "__main__":
    sys.exit(main())
