"""Reading a self-check's report in tests (shared by the tests of every chapter's checks)."""

from __future__ import annotations

from helpers.checks import CheckReport


def flat(report: CheckReport) -> str:
    """The report's text with the line wrapping undone, for substring assertions."""
    return " ".join(repr(report).split())


def failed(report: CheckReport) -> dict[str, str]:
    """Failing case name -> its problem text, with the line wrapping undone."""
    return {r.name: " ".join(r.problem.split()) for r in report.results if not r.passed}


def assert_all_passed(report: CheckReport) -> None:
    """A right answer: every case passed and the report says so, naming each case."""
    assert report
    assert report.passed and all(r.passed for r in report.results)
    text = flat(report)
    assert f"All {len(report.results)} checks passed" in text
    assert all(r.name in text for r in report.results)
