"""A self-check's report shows where the check runs, once, in a notebook (IPython)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import helpers.checks
from helpers.checks import CheckReport


def right_softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def wrong_softmax(z):
    return np.exp(z) / np.exp(z).sum()


@pytest.fixture
def shell():
    shell = InteractiveShell.instance()
    shell.user_ns.update(helpers=helpers, right_softmax=right_softmax, wrong=wrong_softmax)
    yield shell
    InteractiveShell.clear_instance()


def shown(shell, source: str) -> list[str]:
    """The text of every output a cell displays (rich outputs and the Out[] value)."""
    with capture_output() as captured:
        result = shell.run_cell(source, store_history=True)
    assert result.success, result.error_in_exec
    texts = [o.data.get("text/plain", "") for o in captured.outputs]
    # The terminal shell prints an empty "Out[n]: " for a value that displays itself;
    # a kernel sends nothing for it (an execute_result needs data).
    value = re.sub(r"^Out\[\d+\]: *$", "", captured.stdout, flags=re.M)
    return texts + ([value] if value.strip() else [])


def test_a_check_in_a_loop_shows_every_report(shell):
    texts = shown(
        shell,
        "for f in (right_softmax, wrong):\n    helpers.checks.check_softmax(f)\nx = 1",
    )
    assert len(texts) == 2, texts
    assert texts[0].startswith("check_softmax(right_softmax): All")
    assert texts[1].startswith("check_softmax(wrong_softmax):") and "failed" in texts[1]


def test_a_check_on_the_last_line_shows_its_report_once(shell):
    texts = shown(shell, "helpers.checks.check_softmax(right_softmax)")
    assert len(texts) == 1, texts
    assert texts[0].startswith("check_softmax(right_softmax): All")


def test_a_report_shown_again_from_a_later_cell_shows(shell):
    assert len(shown(shell, "report = helpers.checks.check_softmax(wrong)")) == 1
    again = shown(shell, "report")
    assert len(again) == 1 and again[0].startswith("check_softmax(wrong_softmax):"), again


def test_outside_ipython_a_check_only_returns_its_report():
    InteractiveShell.clear_instance()
    with capture_output() as captured:
        report = helpers.checks.check_softmax(right_softmax)
    assert isinstance(report, CheckReport) and report.passed
    assert captured.outputs == [] and captured.stdout == ""


def test_the_wrapped_checks_keep_their_names_and_docstrings():
    from helpers.checks import softmax as module

    wrapped = helpers.checks.check_softmax
    assert wrapped.__name__ == "check_softmax" and wrapped.__doc__ == module.check_softmax.__doc__
    assert wrapped.__wrapped__ is module.check_softmax
