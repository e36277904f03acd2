"""Near-copies of the book's own code (scripts/grade_copies.py), and their flag in the
grader's rows (scripts/grade.py's copy_flags): the threshold measured on the book's own
solutions (the hardest honest answers: written by the authors of the helpers) against the
helpers themselves, renamed and edited. No kernel runs here."""

from __future__ import annotations

import ast
import copy
import re
import sys
import textwrap

import nbformat
import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import grade
import grade_copies
import marking

from helpers.checks.core import IMPLEMENTATIONS
from tests.test_grade import RIGHT

MARGIN = 0.1  # between the book's own solutions and THRESHOLD
DECLARED = tuple(sorted({name for names in IMPLEMENTATIONS.values() for name in names}))

# helpers.softmax.softmax_jacobian as a student copies it: every name changed, the
# docstring and the input checks gone, the private calls replaced by plain NumPy.
COPIED_JACOBIAN = """
def my_softmax_jacobian(z, axis=-1, tau=1.0):
    x = np.array(z, dtype=float)
    top = x.max(axis=axis, keepdims=True)
    x, top = np.moveaxis(x, axis, -1), np.moveaxis(top, axis, -1)
    q = (x - top) / tau
    np.exp(q, out=q)
    np.divide(q, q.sum(axis=-1, keepdims=True), out=q)
    J = np.multiply(q[..., :, None], q[..., None, :])
    np.negative(J, out=J)
    d = np.einsum("...ii->...i", J)
    np.multiply(q, 1 - q, out=d)
    if tau != 1.0:
        np.divide(J, tau, out=J)
    return J
"""


class Rename(ast.NodeTransformer):
    """Every name (variables, arguments, the function's own) changed."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def new(self, name: str) -> str:
        return self.names.setdefault(name, f"v{len(self.names)}")

    def visit_Name(self, node: ast.Name) -> ast.Name:
        return ast.copy_location(ast.Name(self.new(node.id), node.ctx), node)

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = self.new(node.arg)
        node.annotation = None
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.name = self.new(node.name)
        node.returns = None
        return self.generic_visit(node)


def renamed(node: ast.AST) -> ast.AST:
    """``node`` with every name changed, printed and parsed again (another layout)."""
    out = Rename().visit(copy.deepcopy(node))
    return ast.parse(ast.unparse(ast.fix_missing_locations(out))).body[0]


def book_solutions() -> list[tuple[str, str, ast.AST]]:
    """(check, function name, parsed function) for every function the book's solution of
    a graded exercise defines."""
    found = []
    for stem, exercises in grade.load_exercises().items():
        solutions = marking.book_solutions(stem)
        for label, check, _ in grade.graded_items(exercises):
            code = "\n".join(re.findall(r"```python\n(.*?)```", solutions.get(label, ""), re.S))
            for name, nodes in grade_copies.functions_in(code).items():
                found += [(check, name, node) for node in nodes]
    return found


def test_names_layout_docstrings_comments_and_annotations_change_no_token():
    plain = "def f(x, n):\n    y = np.exp(x - x.max(axis=-1))\n    return y / n\n"
    dressed = '''
def my_function(logits: np.ndarray, count: int) -> np.ndarray:
    """My own function."""
    # the largest logit first
    shifted_exponentials = np.exp(
        logits - logits.max(axis=-1)
    )
    return shifted_exponentials / count  # normalised
'''
    tokens = [grade_copies.tokens(ast.parse(s).body[0]) for s in (plain, dressed)]
    assert tokens[0] == tokens[1]
    assert ".exp" in tokens[0] and "axis=" in tokens[0] and "Div" in tokens[0]
    other = "def f(x, n):\n    y = np.exp(x - x.min(axis=-1))\n    return y / n\n"
    assert grade_copies.tokens(ast.parse(other).body[0]) != tokens[0]


def test_the_books_own_solutions_are_not_near_copies():
    """The measurement behind THRESHOLD: the book's solutions of every graded exercise
    (35 of them), against the helpers that compute what each check grades."""
    solutions = book_solutions()
    assert len({check for check, _, _ in solutions}) >= 30
    worst = 0.0
    for check, name, node in solutions:
        refs = grade_copies.references(IMPLEMENTATIONS.get(check, ()))
        for ref in refs:
            if len(ref.runs) >= grade_copies.MIN_RUNS:
                worst = max(worst, grade_copies.score(node, ref)[0])
        assert not grade_copies.near_copies([(name, node)], IMPLEMENTATIONS.get(check, ()))
    print(f"the closest solution shares {worst:.2f} of a helper's runs")
    assert 0.3 < worst <= grade_copies.THRESHOLD - MARGIN


@pytest.mark.parametrize("position", ["first", "middle", "last"])
def test_every_helper_renamed_and_edited_is_a_near_copy(position):
    """Each helper long enough to tell (MIN_RUNS runs), its docstring and checks dropped,
    every name changed, laid out anew and a statement of the student's own added."""
    added = ast.parse("print('my own version')").body[0]
    refs = grade_copies.references(DECLARED)
    long_enough = [r for r in refs if len(r.runs) >= grade_copies.MIN_RUNS]
    assert len(long_enough) >= 45
    for ref in long_enough:
        node = grade_copies.without_checks(grade_copies._definition(ref.name))
        body = node.body
        at = {"first": 0, "middle": len(body) // 2, "last": len(body)}[position]
        node.body = [*body[:at], added, *body[at:]]
        copied = renamed(node)
        (match,) = grade_copies.near_copies([("mine", copied)], [ref.name])
        assert match.helper == ref.name and match.share >= grade_copies.THRESHOLD + MARGIN


def test_a_copy_with_plain_numpy_for_the_private_calls_is_flagged_and_right_answers_not():
    node = ast.parse(COPIED_JACOBIAN).body[0]
    (match,) = grade_copies.near_copies(
        [("my_softmax_jacobian", node)], IMPLEMENTATIONS["check_softmax_jacobian"]
    )
    assert match.helper == "helpers.softmax.softmax_jacobian"
    assert match.flag() == (
        f"near-copy of helpers.softmax.softmax_jacobian: my_softmax_jacobian has "
        f"{match.share:.0%} of its code"
    )
    for function, source in RIGHT.items():  # tests/test_grade.py's right answers
        tree = ast.parse(textwrap.dedent(source)).body[0]
        assert not grade_copies.near_copies([(function, tree)], DECLARED), function


def test_source_that_does_not_parse_or_nests_too_deeply_has_no_function():
    assert grade_copies.functions_in("def f(:\n") == {}
    assert grade_copies.functions_in("x = 1" + " + 1" * 5000) == {}
    found = grade_copies.functions_in("g = lambda p: p\ndef f(x):\n    def inner(): pass\n")
    assert sorted(found) == ["f", "g", "inner"]


def chapter_one_submission(*cells: str) -> dict:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(textwrap.dedent(c)) for c in cells]
    return nb


ITEMS = grade.graded_items(grade.load_exercises()["01_softmax"])


def test_a_row_is_flagged_for_a_copy_in_the_function_or_in_one_it_calls():
    helper = COPIED_JACOBIAN.replace("def my_softmax_jacobian(", "def _jacobian(")
    nb = chapter_one_submission(
        "import numpy as np\n%matplotlib inline",  # a cell that does not parse
        helper,
        "def my_softmax_jacobian(z):\n    return _jacobian(z)\n",
        RIGHT["my_entropy"],
    )
    found = grade.copy_flags(nb, "01_softmax", ITEMS)
    flags = dict(zip([f for *_, f in ITEMS], found, strict=True))
    (flag,) = flags["my_softmax_jacobian"]
    assert flag.startswith("near-copy of helpers.softmax.softmax_jacobian: _jacobian has 8")
    assert flags["my_entropy"] == [] and flags["my_softmax"] == []
    # the same copy, not called by the graded function: not this row's concern
    alone = chapter_one_submission(helper, RIGHT["my_softmax_jacobian"])
    assert grade.copy_flags(alone, "01_softmax", ITEMS)[0] == []


def test_a_function_the_chapters_own_student_notebook_gives_is_not_the_students(
    tmp_path, monkeypatch
):
    given = chapter_one_submission(COPIED_JACOBIAN)
    nbformat.write(given, tmp_path / "01_softmax.ipynb")
    submission = chapter_one_submission(COPIED_JACOBIAN)
    assert grade.copy_flags(submission, "01_softmax", ITEMS)[0]
    monkeypatch.setattr(grade, "STUDENT_EDITION", tmp_path)
    assert grade.copy_flags(submission, "01_softmax", ITEMS)[0] == []
