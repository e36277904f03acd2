"""Reading a self-check's report in tests (shared by the tests of every chapter's checks).

Every report read through :func:`failed` is also checked for a recipe: no hint, pointer
or fuller hint of a failing report may print code or a formula (:func:`recipe_in`). A
hint diagnoses and points to the book; it never gives the answer.
"""

from __future__ import annotations

import re

from helpers.checks import NOT_ATTEMPTED, CheckReport

# Checks that no exercise uses (exercises 4.1 and 6.1 now ask for what the chapter has not
# printed): they check a reader's copy of a formula the chapter prints, and their hints
# quote it. Every check that an exercise uses is scanned.
NOT_SCANNED = frozenset({"check_layer_norm", "check_sinusoidal_encoding"})

# Code a hint must not show: numpy calls, axes, products, slices, index tricks.
_CODE = re.compile(
    r"\bnp\.|\bnumpy\.|\baxis\s*=|keepdims|\.T\b|\s@\s|\[\s*:|\[\s*\.\.\.|\.reshape\(|"
    r"\.sum\(|\.max\(|\.mean\(|\btril\b|\btriu\b|argsort|cumsum|einsum|\bwhere\(|"
    r"\bdtype\s*=|\brange\(|\+=|-=|\*="
)
# A formula: "=" followed by a term and an operation or a call ("= a * b", "= exp(").
_FORMULA = re.compile(r"=\s*-?[\w.]+\s*(?:[*/+^-]\s*[\w(]|\(|\*\*)")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![\w.])")


def recipe_in(text: str) -> str:
    """The code or formula ``text`` shows ("" if none): what a hint must never print."""
    found = _CODE.search(text)
    if found:
        return found.group(0)
    found = _FORMULA.search(_NUMBER.sub("N", text))
    return found.group(0) if found else ""


def hint_texts(report: CheckReport) -> list[str]:
    """What a failing report says beyond the facts: each failure's hint, the pointer and
    the fuller hint."""
    return [r.hint for r in report.failures if r.hint] + [t for t in (report.see, report.more) if t]


def assert_no_recipe(report: CheckReport) -> None:
    """No hint, pointer or fuller hint of ``report`` shows code or a formula."""
    if report.check in NOT_SCANNED:
        return
    for text in hint_texts(report):
        assert not recipe_in(text), f"{report.check} hints {recipe_in(text)!r}: {text!r}"


def flat(report: CheckReport) -> str:
    """The report's text with the line wrapping undone, for substring assertions."""
    return " ".join(repr(report).split())


def failed(report: CheckReport) -> dict[str, str]:
    """Failing case name -> its problem text, with the line wrapping undone.

    The report's hints are checked on the way: none may show code or a formula.
    """
    assert_no_recipe(report)
    return {r.name: " ".join(r.problem.split()) for r in report.results if not r.passed}


def assert_all_passed(report: CheckReport) -> None:
    """A right answer: every case passed and the report says so, naming each case."""
    assert report
    assert report.passed and all(r.passed for r in report.results)
    text = flat(report)
    assert f"All {len(report.results)} checks passed" in text
    assert all(r.name in text for r in report.results)


def assert_refused(report: CheckReport, *names: str) -> None:
    """A function that calls the book's implementation: not attempted, whatever it returns,
    and the report names what it called (``names``: dotted names, all of them)."""
    assert not report and not report.passed
    assert report.status == NOT_ATTEMPTED, report.status
    assert set(names) <= set(report.book_calls), report.book_calls
    called = ", ".join(report.book_calls)
    assert report.message.startswith("this calls ") and "the book's own version" in (report.message)
    assert report.to_dict()["book_calls"] == called
    text = flat(report)
    assert text.startswith(f"{report.check}({report.function}): not attempted: it calls")
    assert "The exercise asks you to write it" in text
    assert len(repr(report).splitlines()) <= 4, "a refusal is short, with no case shown"
