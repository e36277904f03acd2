"""The verdict of every self-check: passed, failed, not attempted (starting cells), error.

A student edition's starting cell raises NotImplementedError: every check must report it
as "not attempted" (a sentence, not a traceback), and the grader reads the same verdict
as data (`CheckReport.status`, `.message`, `.to_dict()`, `run_self_check`).
"""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest

import helpers
from helpers import checks
from helpers.checks import (
    ERROR,
    FAILED,
    NOT_ATTEMPTED,
    PASSED,
    Case,
    CheckReport,
    run_checks,
    run_self_check,
)

CHECKS = sorted(name for name in checks.__all__ if name.startswith("check_"))


def not_written(*args, **kwargs):
    raise NotImplementedError("Exercise 9.9: write not_written")


def broken(*args, **kwargs):
    raise ValueError("a bug")


def test_every_check_is_covered():
    assert len(CHECKS) >= 20
    for name in CHECKS:
        assert inspect.signature(getattr(checks, name)).parameters, name


@pytest.mark.parametrize("name", CHECKS)
def test_a_starting_cell_is_not_attempted(name):
    report = getattr(checks, name)(not_written)
    assert isinstance(report, CheckReport)
    assert report.results, f"{name} ran no case"
    assert not report and not report.passed
    assert report.status == NOT_ATTEMPTED
    assert report.message == "not_written raises NotImplementedError: not attempted yet"
    text = repr(report)
    assert text.startswith(f"{name}(not_written): not attempted yet")
    assert "NotImplementedError" in text and "Traceback" not in text
    assert len(text.splitlines()) <= 3, "a starting cell gets a short message, not every case"


@pytest.mark.parametrize("name", CHECKS)
def test_a_function_that_raises_something_else_fails_every_case(name):
    report = getattr(checks, name)(broken)
    assert report.results and not report.passed
    assert report.status == FAILED
    assert all(not r.passed and r.raised == "ValueError" for r in report.results)
    assert "raised ValueError: a bug" in report.message


@pytest.mark.parametrize("name", CHECKS)
def test_run_self_check_never_raises(name):
    namespace = {"mine": not_written, "number": 3}
    assert run_self_check(name, namespace, "mine").status == NOT_ATTEMPTED
    missing = run_self_check(getattr(checks, name), namespace, "absent")
    assert (missing.status, missing.message) == (
        NOT_ATTEMPTED,
        "absent is not defined: not attempted",
    )
    wrong = run_self_check(name, namespace, "number")
    assert wrong.status == ERROR and wrong.message.startswith(f"{name} raised TypeError")
    assert json.loads(json.dumps(wrong.to_dict()))["status"] == "error"


def my_softmax(z):
    e = np.exp(z - z.max())
    return e / e.sum()


def naive_softmax(z):
    return np.exp(z) / np.exp(z).sum()


def test_statuses_of_a_right_and_a_wrong_answer():
    right = checks.check_softmax(my_softmax)
    assert (right.status, right.message) == (PASSED, "")
    assert right.to_dict() == {
        "check": "check_softmax",
        "function": "my_softmax",
        "status": "passed",
        "message": "",
        "passed": len(right.results),
        "total": len(right.results),
        "book_calls": "",
    }
    wrong = checks.check_softmax(naive_softmax)
    assert wrong.status == FAILED
    first = wrong.failures[0]
    assert wrong.message == f"{first.name}: {first.problem}" and "nan" in wrong.message
    data = run_self_check("check_softmax", {"my_softmax": naive_softmax}, "my_softmax")
    assert data.to_dict()["status"] == "failed"
    assert 0 < data.to_dict()["passed"] < data.to_dict()["total"]
    assert data.report == wrong


def test_partly_written_is_failed_not_unattempted():
    def partial(z):
        if z.dtype == np.float32:
            raise NotImplementedError("float32 later")
        return my_softmax(z)

    report = checks.check_softmax(partial)
    assert report.status == FAILED
    assert any(r.raised == "NotImplementedError" for r in report.results)


def test_a_name_error_inside_the_function_is_a_failure_with_its_message():
    def uses_undefined(z):
        return undefined_helper(z)  # noqa: F821

    report = checks.check_softmax(uses_undefined)
    assert report.status == FAILED
    assert "raised NameError: name 'undefined_helper' is not defined" in report.message


def test_unknown_check_is_an_error():
    result = run_self_check("check_nothing", {}, "f")
    assert result.status == ERROR and "no self-check named" in result.message
    assert run_self_check("softmax", {"f": my_softmax}, "f").status == ERROR  # not a check


def test_a_report_without_cases_does_not_pass():
    empty = run_checks(my_softmax, [], check_name="check_empty")
    assert not empty.passed and empty.status == FAILED


def test_run_checks_records_the_exception_name():
    case = Case("one", {"z": np.array([1.0, 2.0])}, np.array([0.5, 0.5]), hint="h")
    report = run_checks(not_written, [case], check_name="check_x")
    assert report.results[0].raised == "NotImplementedError"
    assert report.status == NOT_ATTEMPTED
    fine = run_checks(lambda z: np.array([0.5, 0.5]), [case], check_name="check_x")
    assert fine.results[0].raised == "" and fine.status == PASSED


def test_the_statuses_are_exported():
    assert (PASSED, FAILED, NOT_ATTEMPTED, ERROR) == ("passed", "failed", "not attempted", "error")
    assert helpers.checks.run_self_check is run_self_check
