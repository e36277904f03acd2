"""No self-check's help shows a function that passes it.

A student who types ``help(check_x)`` to see its signature must not read a working
solution in its Examples. Each ``check_*`` function of ``helpers.checks`` (found by
introspection, so a new check is covered without a line here) has its docstring's example
code executed in a scratch namespace; every function that code defines is then given to
that check, and must not pass. Examples of wrong answers being caught are welcome: they
fail the check, as they should.
"""

from __future__ import annotations

import doctest
import inspect
import types

import numpy as np
import pytest

import helpers
import helpers.checks

CHECKS = sorted(
    name
    for name in helpers.checks.__all__
    if name.startswith("check_") and callable(getattr(helpers.checks, name))
)


def defined_in_examples(docstring: str) -> dict[str, types.FunctionType]:
    """Run the doctest examples of `docstring`; the functions they define, by name."""
    code = "\n".join(e.source for e in doctest.DocTestParser().get_examples(docstring))
    namespace: dict[str, object] = {"np": np, "helpers": helpers}
    exec(compile(code, "<docstring examples>", "exec"), namespace)
    return {
        name: value
        for name, value in namespace.items()
        if isinstance(value, types.FunctionType)
        and value.__code__.co_filename == "<docstring examples>"
    }


def test_the_checks_are_found():
    # Introspection finds every chapter's checks, not only chapter 1's.
    assert len(CHECKS) >= 20
    assert {"check_softmax", "check_attention_grad", "check_rope"} <= set(CHECKS)


@pytest.mark.parametrize(
    "name",
    CHECKS,
)
def test_no_function_in_a_checks_docstring_passes_it(name):
    check = getattr(helpers.checks, name)
    passing = [
        fn_name
        for fn_name, fn in defined_in_examples(inspect.getdoc(check) or "").items()
        if check(fn).status == "passed"
    ]
    assert passing == [], f"help({name}) defines {passing}, which pass(es) {name}"


def test_a_docstring_with_a_solution_is_caught():
    # The test itself can fail: a docstring that defines a correct softmax is found.
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
