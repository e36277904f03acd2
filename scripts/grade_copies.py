"""Near-copies of the book's own code: a submitted function whose source is a helper's.

An exercise asks for a quantity that a function of ``helpers`` computes
(``helpers.checks.core.IMPLEMENTATIONS``). Calling that function is refused (the self-check
and the grader watch for the call); pasting its source, renamed, is a new function that no
watch sees. This module compares the *source* of a submitted function with the sources of
the book's implementations of what its check grades, and of the private functions of
``helpers`` they call (where the computation of a public helper often lives).

The comparison reads the code's shape, not its words. Each function is parsed and turned
into a sequence of tokens, one per syntax node in the order the code reads: the kind of
node (a call, a subtraction, a subscript, ``if``, ``return``), the attribute or keyword
named (``.mean``, ``axis=``: which NumPy functions are used, and how, is the substance of
the code) and the type of a constant; every name (variables, arguments, functions) is the
same token, and docstrings, comments, annotations and decorators are left out. So renaming
everything, reformatting, deleting the docstring and the type hints change nothing.

The score of a pair is the share of the helper's code found in the submission: the
fraction of the helper's runs of :data:`K` consecutive tokens that occur in the
submission's sequence. A function is flagged when, for one of the helpers, that share is
at least :data:`THRESHOLD`, and that helper has at least :data:`MIN_RUNS` runs (a helper
of a few lines is too short to tell a copy from the natural way to write it). The helper's
own input checking (statements that only raise, or only call a private function) is left
out of the helper's side, since a copy usually drops it; the private functions it calls
are compared too, each on its own (``helpers.softmax.softmax`` computes in ``_row_max``
and ``_shifted``; ``multi_head_attention`` in ``_forward``).

The threshold was measured (tests/test_grade_copies.py). The hardest honest answers are
the book's own solutions of the graded exercises, written by the authors of the helpers:
against the helpers long enough to tell, they share at most 0.59 of a helper's runs (the
solution of 9.2, the self-attention Jacobian, against ``self_attention_jacobian``). A
helper with every name changed, its docstring and checks dropped, laid out anew and a
statement added anywhere keeps at least 0.88 of its runs; a copy of ``softmax_jacobian``
whose private calls are replaced by plain NumPy keeps 0.82. So THRESHOLD is 0.7, with a
margin of 0.1 on each side. What it misses: a copy in which a third of the helper is
written anew (the same ``softmax_jacobian`` with its first lines rewritten and the
temperature dropped keeps 0.58), and the 18 declared helpers shorter than MIN_RUNS runs
(``prefix_matching_score`` has 57, and the book's solution of 8.1 shares 0.67 of them:
copy and honest answer cannot be told apart there).

This is a flag for an instructor to read, not a verdict: the self-check passes such a
function (it computes the right thing), and the row says which helper it resembles and
how much of it was found.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass

from grade_i18n import msg

K = 8  # tokens per run: about one short statement
THRESHOLD = 0.7  # the share of the helper's runs found in the submission
MIN_RUNS = 60  # of a helper that has at least this many runs (about eight lines)

_SKIPPED_FIELDS = {"annotation", "returns", "decorator_list", "type_comment", "type_params"}
_CONTEXTS = (ast.Load, ast.Store, ast.Del)


def tokens(node: ast.AST) -> list[str]:
    """The token sequence of a parsed function (or any node), as the module docstring says."""
    out: list[str] = []
    stack: list[ast.AST] = [node]
    while stack:  # depth first, children in source order (no recursion: deep code is fine)
        n = stack.pop()
        if isinstance(n, _CONTEXTS) or _is_docstring(n):
            continue
        kind = type(n).__name__
        if isinstance(n, ast.Attribute):
            out.append(f".{n.attr}")
        elif isinstance(n, ast.keyword):
            out.append(f"{n.arg}=")
        elif isinstance(n, ast.Constant):
            out.append(f"const:{type(n.value).__name__}")
        elif isinstance(n, ast.Name | ast.arg):
            out.append("name")
        elif not isinstance(n, ast.arguments):
            out.append(kind)
        children: list[ast.AST] = []
        for field, value in ast.iter_fields(n):
            if field in _SKIPPED_FIELDS:
                continue
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.AST):
                    children.append(child)
        stack.extend(reversed(children))
    return out


def _is_docstring(n: ast.AST) -> bool:
    return (
        isinstance(n, ast.Expr)
        and isinstance(n.value, ast.Constant)
        and isinstance(n.value.value, str)
    )


def runs(seq: list[str], k: int = K) -> set[tuple[str, ...]]:
    """The distinct runs of ``k`` consecutive tokens of ``seq``."""
    return {tuple(seq[i : i + k]) for i in range(len(seq) - k + 1)}


def _only_checks(statement: ast.stmt) -> bool:
    """A statement that only checks the input: raise, assert, ``if ...: raise``, or a call
    of a private validator (``_matrix(...)``, ``x = as_real_array(...)``)."""
    if isinstance(statement, ast.Raise | ast.Assert):
        return True
    if isinstance(statement, ast.If):
        return all(_only_checks(s) for s in statement.body + statement.orelse)
    if isinstance(statement, ast.For):  # for W, name in ...: _weights(X, W, name)
        return all(_only_checks(s) for s in statement.body)
    value = getattr(statement, "value", None)
    if isinstance(statement, ast.Expr | ast.Assign | ast.AnnAssign) and isinstance(value, ast.Call):
        called = value.func
        name = called.id if isinstance(called, ast.Name) else getattr(called, "attr", "")
        return name.startswith("_") or name.startswith(("as_real_array", "check_", "validate"))
    return False


def without_checks(function: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
    """A copy of a helper's definition without its input checks (see :func:`_only_checks`)."""
    copy = ast.parse(ast.unparse(function)).body[0]
    assert isinstance(copy, ast.FunctionDef | ast.AsyncFunctionDef)
    kept = [s for s in copy.body if not _only_checks(s) and not _is_docstring(s)]
    copy.body = kept or [ast.Pass()]
    return copy


@dataclass(frozen=True)
class Reference:
    """One function of helpers, as compared: its dotted name, and its runs of tokens."""

    name: str
    runs: frozenset[tuple[str, ...]]


@dataclass(frozen=True)
class Match:
    """A submitted function that resembles a helper."""

    function: str  # the submitted function's name
    helper: str  # the dotted name of the helper
    share: float  # the share of the helper's runs found in the submission
    found: int  # how many of them

    def flag(self) -> str:
        return msg(
            "near-copy of {helper}: {function} has {share:.0%} of its code",
            helper=self.helper,
            function=self.function,
            share=self.share,
        )


def _definition(dotted: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    module_name, _, attribute = dotted.rpartition(".")
    try:
        target = inspect.unwrap(getattr(importlib.import_module(module_name), attribute))
        source = textwrap.dedent(inspect.getsource(target))
    except (ImportError, AttributeError, TypeError, OSError):
        return None
    node = ast.parse(source).body[0]
    return node if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else None


def _private_callees(dotted: str, node: ast.AST) -> list[str]:
    """The private functions of the helper's own module that it calls (``_forward``)."""
    module_name = dotted.rpartition(".")[0]
    module = importlib.import_module(module_name)
    found = []
    for call in ast.walk(node):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
            name = call.func.id
            if name.startswith("_") and inspect.isfunction(getattr(module, name, None)):
                found.append(f"{module_name}.{name}")
    return found


@functools.cache
def references(declared: tuple[str, ...]) -> tuple[Reference, ...]:
    """The helpers a check's submissions are compared with: the declared implementations
    and, transitively, the private functions of their modules they call, each without its
    input checks. Validators (a body of checks only) are left out."""
    seen: dict[str, Reference] = {}
    queue = list(declared)
    while queue:
        dotted = queue.pop(0)
        if dotted in seen:
            continue
        node = _definition(dotted)
        if node is None:
            continue
        core = without_checks(node)
        seen[dotted] = Reference(dotted, frozenset(runs(tokens(core))))
        queue += _private_callees(dotted, node)
    return tuple(r for r in seen.values() if r.runs)


def score(submitted: ast.AST, reference: Reference) -> tuple[float, int]:
    """(share of the reference's runs found in ``submitted``, how many were found)."""
    found = len(reference.runs & runs(tokens(submitted)))
    return found / len(reference.runs), found


def near_copies(functions: Iterable[tuple[str, ast.AST]], declared: Iterable[str]) -> list[Match]:
    """The submitted ``(name, parsed function)`` that are near-copies of one of the helpers
    ``declared`` for a check (or of the private functions those call), best match first."""
    matches = []
    refs = references(tuple(declared))
    for name, node in functions:
        best: Match | None = None
        for ref in refs:
            share, found = score(node, ref)
            long_enough = len(ref.runs) >= MIN_RUNS
            if long_enough and share >= THRESHOLD and (best is None or share > best.share):
                best = Match(name, ref.name, share, found)
        if best is not None:
            matches.append(best)
    return sorted(matches, key=lambda m: -m.share)


def functions_in(source: str) -> dict[str, list[ast.AST]]:
    """Every function defined in ``source`` (top level or nested), by name; a lambda bound
    to a name at the top level counts under that name. Source that does not parse: none."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    found: dict[str, list[ast.AST]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, []).append(node.value)
    return found
