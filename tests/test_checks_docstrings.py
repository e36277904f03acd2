"""No self-check's help shows a passing answer or names the book's own.

A student who types ``help(check_x)`` to see its signature must not read a working
solution in it. A check's documentation says what it checks and shows a wrong answer
caught; it never shows or names a passing one. For each ``check_*`` function of
``helpers.checks`` (found by introspection, so a new check is covered without a line
here), its docstring's example code is executed in a scratch namespace and:

1. every function that code defines is given to that check, and must not pass;
2. no such function is one edit from passing: each is mutated once in every way a reader
   could fix a slip in one keystroke or two (a constant changed, ``0.0`` to ``-np.inf``, an
   operator or a comparison swapped, a ``.T`` dropped, an assignment wrapped in
   ``np.tril``), and no mutant may pass;
3. every call of a check that the examples make (``check_x(helpers.x)`` included) must not
   come back "passed", and must not be given the book's own implementation of what that
   check grades (``helpers.checks.core.IMPLEMENTATIONS``);
4. the docstring does not name that implementation (``:func:`helpers.theory.x``` or an
   import of it), as if it were the reference to copy.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import doctest
import inspect
import re
import types

import numpy as np
import pytest

import helpers
import helpers.checks
from helpers.checks import core
from helpers.checks.core import IMPLEMENTATIONS
from tests.report_text import NOT_SCANNED

CHECKS = sorted(
    name
    for name in helpers.checks.__all__
    if name.startswith("check_") and callable(getattr(helpers.checks, name))
)
# The checks of no exercise (tests/report_text.py) are left out: they check a reader's copy
# of a formula the chapter prints.
SCANNED = [name for name in CHECKS if name not in NOT_SCANNED]
_EXAMPLES = "<docstring examples>"


def example_code(docstring: str) -> str:
    return "\n".join(e.source for e in doctest.DocTestParser().get_examples(docstring))


def defined_in(code: str, namespace: dict | None = None) -> dict[str, types.FunctionType]:
    """Run ``code``; the functions it defines, by name."""
    namespace = {"np": np, "helpers": helpers} if namespace is None else namespace
    exec(compile(code, _EXAMPLES, "exec"), namespace)
    return {
        name: value
        for name, value in namespace.items()
        if isinstance(value, types.FunctionType) and value.__code__.co_filename == _EXAMPLES
    }


def defined_in_examples(docstring: str) -> dict[str, types.FunctionType]:
    """Run the doctest examples of `docstring`; the functions they define, by name."""
    return defined_in(example_code(docstring))


# ---------------------------------------------------------------------------
# One edit from passing: the mutants of a function
# ---------------------------------------------------------------------------

_NUMBERS = (0, 1, -1, 2, 0.5)
_BINARY = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.MatMult)
_COMPARE = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)


def _expression(source: str) -> ast.expr:
    return ast.parse(source, mode="eval").body


def _edits(node: ast.AST) -> list[ast.AST]:
    """Every node that one small edit of ``node`` could give."""
    out: list[ast.AST] = []
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        value = node.value
        for new in {*_NUMBERS, value + 1, value - 1, -value} - {value}:
            out.append(ast.Constant(new))
        out += [_expression("-np.inf"), _expression("np.inf")]
    elif isinstance(node, ast.BinOp):
        out += [
            ast.BinOp(node.left, op(), node.right) for op in _BINARY if not isinstance(node.op, op)
        ]
    elif isinstance(node, ast.Compare) and len(node.ops) == 1:
        out += [
            ast.Compare(node.left, [op()], node.comparators)
            for op in _COMPARE
            if not isinstance(node.ops[0], op)
        ]
    elif isinstance(node, ast.Attribute) and node.attr == "T":
        out.append(node.value)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        out.append(node.operand)
    return out


def mutants(fn: types.FunctionType, code: str) -> list[tuple[str, str]]:
    """(description, source) of every one-edit variant of the example function ``fn``."""
    tree = ast.parse(code)
    definition = next(
        n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == fn.__name__
    )
    found: list[tuple[str, str]] = []
    sites = [n for n in ast.walk(definition) if _edits(n)]
    for index, site in enumerate(sites):
        for replacement in _edits(site):
            mutated = copy.deepcopy(definition)
            target = [n for n in ast.walk(mutated) if _edits(n)][index]
            _replace(mutated, target, replacement)
            found.append((f"{ast.unparse(site)} -> {ast.unparse(replacement)}", mutated))
    for index, node in enumerate(n for n in ast.walk(definition) if _wrappable(n)):
        for wrapper in ("np.tril", "np.triu"):
            mutated = copy.deepcopy(definition)
            target = [n for n in ast.walk(mutated) if _wrappable(n)][index]
            target.value = ast.Call(_expression(wrapper), [target.value], [])
            found.append((f"{wrapper} around {ast.unparse(node.value)}", mutated))
    return [(what, ast.unparse(ast.fix_missing_locations(m))) for what, m in found]


def _wrappable(node: ast.AST) -> bool:
    return isinstance(node, (ast.Assign, ast.Return)) and node.value is not None


def _replace(tree: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return
            if isinstance(value, list) and any(item is old for item in value):
                value[next(i for i, item in enumerate(value) if item is old)] = new
                return
    raise AssertionError("the mutated node was not found")


@contextlib.contextmanager
def no_diagnosis():
    """Run checks without their tables of slips: a mutant only needs a verdict."""
    original = core._run_case

    def run_case(fn, case, diagnose, watched=()):
        return original(fn, case, None, watched)

    core._run_case = run_case
    try:
        yield
    finally:
        core._run_case = original


def passing_mutants(check, docstring: str, only: str = "") -> list[str]:
    """The one-edit variants of the functions the examples define that pass ``check``
    (only those whose description contains ``only``, if given)."""
    code = example_code(docstring)
    namespace = {"np": np, "helpers": helpers}
    functions = defined_in(code, namespace)
    passing = []
    for name, fn in functions.items():
        for what, source in mutants(fn, code):
            if only not in what:
                continue
            scratch = dict(namespace)
            try:
                mutant = defined_in(source, scratch)[name]
                with no_diagnosis(), np.errstate(all="ignore"):
                    status = check(mutant).status
            except Exception:  # a mutant that does not compile or run is no answer
                continue
            if status == "passed":
                passing.append(f"{name}: {what}")
    return passing


# ---------------------------------------------------------------------------
# The calls of checks that the examples make
# ---------------------------------------------------------------------------


def checks_called_in_examples(name: str, monkeypatch) -> list:
    """Run ``name``'s examples; every report of a check they produced."""
    code = example_code(inspect.getdoc(getattr(helpers.checks, name)) or "")
    reports = []
    for other in CHECKS:
        original = getattr(helpers.checks, other)

        def recording(*args, original=original, **kwargs):
            report = original(*args, **kwargs)
            reports.append(report)
            return report

        monkeypatch.setattr(helpers.checks, other, recording)
    exec(compile(code, _EXAMPLES, "exec"), {"np": np, "helpers": helpers})
    return reports


def named_implementations(name: str, docstring: str) -> list[str]:
    """The book's implementations of what ``name`` grades that ``docstring`` names."""
    found = []
    for dotted in IMPLEMENTATIONS[name]:
        function = dotted.rpartition(".")[2]
        if function.startswith("_"):
            continue
        patterns = (
            rf"helpers(?:\.\w+)*\.{function}\b",  # helpers.theory.min_head_width
            rf"from helpers[\w.]* import [^\n]*\b{function}\b",  # an import of it
            rf":func:`~?{function}`",
        )
        if any(re.search(p, docstring) for p in patterns):
            found.append(dotted)
    return found


# ---------------------------------------------------------------------------
# The tests
# ---------------------------------------------------------------------------


def test_the_checks_are_found():
    # Introspection finds every chapter's checks, not only chapter 1's.
    assert len(CHECKS) >= 20
    assert {"check_softmax", "check_attention_grad", "check_rope"} <= set(CHECKS)


@pytest.mark.parametrize("name", CHECKS)
def test_no_function_in_a_checks_docstring_passes_it(name):
    check = getattr(helpers.checks, name)
    passing = [
        fn_name
        for fn_name, fn in defined_in_examples(inspect.getdoc(check) or "").items()
        if check(fn).status == "passed"
    ]
    assert passing == [], f"help({name}) defines {passing}, which pass(es) {name}"


@pytest.mark.parametrize("name", SCANNED)
def test_no_function_in_a_checks_docstring_is_one_edit_from_passing(name):
    check = getattr(helpers.checks, name)
    passing = passing_mutants(check, inspect.getdoc(check) or "")
    assert passing == [], f"help({name}) is one edit from a passing answer: {passing}"


@pytest.mark.parametrize("name", SCANNED)
def test_no_check_call_in_a_docstring_passes_or_is_given_the_books_answer(name, monkeypatch):
    for report in checks_called_in_examples(name, monkeypatch):
        assert report.status != "passed", f"help({name}) shows {report.check} passing"
        assert not report.book_calls, f"help({name}) gives {report.check} {report.book_calls}"


@pytest.mark.parametrize("name", SCANNED)
def test_no_docstring_names_the_books_implementation_of_what_it_checks(name):
    doc = inspect.getdoc(getattr(helpers.checks, name)) or ""
    named = named_implementations(name, doc)
    assert named == [], f"help({name}) names {named}, the book's own answer"


# ---------------------------------------------------------------------------
# The tests can fail: each catches what it is for
# ---------------------------------------------------------------------------


def test_a_docstring_with_a_solution_is_caught():
    doc = """
    >>> def my_softmax(z):
    ...     e = np.exp(z - np.max(z))
    ...     return e / e.sum()
    >>> def wrong(z):
    ...     return np.exp(z) / np.exp(z).sum()
    """
    found = defined_in_examples(doc)
    assert set(found) == {"my_softmax", "wrong"}
    assert helpers.checks.check_softmax(found["my_softmax"]).status == "passed"
    assert helpers.checks.check_softmax(found["wrong"]).status != "passed"


@pytest.mark.parametrize(
    ("check", "doc", "fix"),
    [
        (  # the chunked check's old example: add np.tril and it passes
            "check_chunked_linear_attention",
            """
    >>> def full_chunks(Q, K, V, chunk):
    ...     phi = lambda x: np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))
    ...     H, z, out = np.zeros((Q.shape[1], V.shape[1])), np.zeros(Q.shape[1]), []
    ...     for c0 in range(0, len(Q), chunk):
    ...         q, k, v = phi(Q[c0 : c0 + chunk]), phi(K[c0 : c0 + chunk]), V[c0 : c0 + chunk]
    ...         W = q @ k.T
    ...         out.append((q @ H + W @ v) / (q @ z + W.sum(axis=1))[:, None])
    ...         H, z = H + k.T @ v, z + k.sum(axis=0)
    ...     return np.concatenate(out)
    """,
            "np.tril around q @ k.T",
        ),
        (  # the truncated check's old example: 0.0 -> -np.inf and it passes
            "check_truncated_attention",
            """
    >>> def trunc(scores, V, k):
    ...     kth = np.sort(scores, axis=-1)[:, -k][:, None]
    ...     s = np.where(scores >= kth, scores, 0.0)
    ...     w = np.exp(s - s.max(axis=-1, keepdims=True))
    ...     return (w / w.sum(axis=-1, keepdims=True)) @ V
    """,
            "0.0 -> -np.inf",
        ),
    ],
)
def test_an_example_one_edit_from_passing_is_caught(check, doc, fix):
    # only the one-edit fix is tried here (the full search runs on the real docstrings)
    passing = passing_mutants(getattr(helpers.checks, check), doc, only=fix)
    assert any(fix in p for p in passing), passing


def test_a_check_call_given_the_books_answer_is_caught(monkeypatch):
    # check_causal_mask's old example, check_causal_mask(causal_mask), reintroduced
    doc = """
    >>> from helpers import causal_mask
    >>> from helpers.checks import check_causal_mask
    >>> check_causal_mask(causal_mask)
    """
    monkeypatch.setattr(helpers.checks.check_causal_mask, "__doc__", doc)
    reports = checks_called_in_examples("check_causal_mask", monkeypatch)
    assert [r.book_calls for r in reports] == [("helpers.masks.causal_mask",)]


def test_a_docstring_naming_the_reference_is_caught():
    doc = "Notes: the expected widths come from :func:`helpers.theory.min_head_width`."
    assert named_implementations("check_min_head_width", doc) == ["helpers.theory.min_head_width"]
    example = ">>> from helpers.theory import min_head_width"
    assert named_implementations("check_min_head_width", example)
    assert not named_implementations("check_min_head_width", "the smallest head width")
