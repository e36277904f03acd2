"""What a failing report says: a diagnosis or a property, a pointer into the book, and a
fuller hint only on request; never the code or the formula of the answer.

Every check (found by introspection) is run on answers that are wrong in the plainest ways
(zeros, the wrong shape, an exception), as a student who wants the answer would try, with
and without ``hint=True``: no hint, pointer or fuller hint may show code or a formula
(``tests.report_text.recipe_in``). Every pointer names a section that exists, by its title.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import numpy as np
import pytest

import helpers
from helpers import checks
from helpers.checks.core import SECTIONS
from tests.report_text import NOT_SCANNED, assert_no_recipe, flat, recipe_in

ROOT = Path(__file__).resolve().parents[1]
CHECKS = sorted(name for name in checks.__all__ if name.startswith("check_"))
SCANNED = [name for name in CHECKS if name not in NOT_SCANNED]


def zeros_like_first(*args, **kwargs):
    return np.zeros_like(np.asarray(args[0], dtype=float)) if args else 0.0


def raises(*args, **kwargs):
    raise ValueError("not yet")


WRONG = [zeros_like_first, raises]  # values that differ (slips looked for); every case's hint


@pytest.mark.parametrize("name", SCANNED)
def test_every_check_offers_a_fuller_hint_and_shows_it_only_when_asked(name):
    check = getattr(checks, name)
    assert "hint" in inspect.signature(check).parameters
    plain, asked = check(zeros_like_first), check(zeros_like_first, hint=True)
    assert not plain and not asked
    assert plain.see and plain.more, f"{name} has no pointer or no fuller hint"
    text, text_asked = flat(plain), flat(asked)
    assert f"A fuller hint: {name}(zeros_like_first, hint=True)." in text
    shown = "Fuller hint: " + " ".join(plain.more.split())[:40]
    assert shown not in text and shown in text_asked
    assert f"See {plain.see}." in text


@pytest.mark.parametrize("wrong", WRONG, ids=lambda f: f.__name__)
@pytest.mark.parametrize("name", SCANNED)
def test_no_report_gives_a_recipe(name, wrong):
    with np.errstate(all="ignore"):
        report = getattr(checks, name)(wrong)
    assert_no_recipe(report)  # the fuller hint is in the report, shown or not


def test_the_recipe_detector_catches_code_and_formulas():
    # the hints the issue found, verbatim or nearly: each is caught
    for text in (
        "causal_mask(n) & (np.arange(n) >= n - lengths[:, None])[:, None, :]",
        "ell' = exp(mu - mu') * ell + rowsum P",
        "use W_QK @ W_OV.T",
        "S = Q @ K.T / np.sqrt(d_k)",
        "mu = max(mu1, mu2)",
        "keep the lower triangle, np.tril, and mask the rest",
        "d_k = d_model / num_heads",
    ):
        assert recipe_in(text), text
    for text in (
        "each query's weights sum to 1 over the keys",
        "k = 2: the expected value is 0.25",
        'chapter 2, "Masks"',
        "tau = 1e-300 is below the smallest float32",
    ):
        assert not recipe_in(text), text


def _headings(chapter: int) -> set[str]:
    (path,) = ROOT.glob(f"notebooks/{chapter:02d}_*.ipynb")
    cells = json.loads(path.read_text())["cells"]
    text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return {m.group(1).strip() for m in re.finditer(r"^#{1,4} (.+)$", text, flags=re.M)}


def test_every_pointer_names_a_section_of_its_chapter():
    for name in CHECKS:  # the pointers are recorded as the checks build their reports
        getattr(checks, name)(raises)
    assert len(SECTIONS) >= 30
    missing = sorted((c, t) for c, t in SECTIONS if t not in _headings(c))
    assert missing == [], f"pointers to sections that do not exist: {missing}"


def test_a_pointer_to_a_missing_section_is_caught():
    assert "Masks" in _headings(2)
    assert "Masking" not in _headings(2)


def test_the_smallest_failing_input_comes_first():
    report = checks.check_softmax(lambda z: np.zeros_like(z))
    sizes = [r.size for r in report.failures]
    assert sizes == sorted(sizes) and report.failures[0].name == "single logit"
    assert report.message.startswith("single logit: ")


def test_a_slip_seen_again_is_summarised():
    report = checks.check_causal_mask(lambda n: ~np.tril(np.ones((n, n), dtype=bool)))
    assert flat(report).count("the convention is inverted") == 1
    assert 'FAILED: n = 6: the same problem as "' in flat(report)


def test_an_output_of_zeros_is_said_to_be_zeros():
    report = checks.check_attention(lambda Q, K, V: np.zeros((len(Q), V.shape[1])))
    assert all("is 0" in r.problem for r in report.failures if "values differ" in r.problem)
    assert "every entry is 0" in report.failures[0].problem


def test_the_helpers_are_unchanged_by_the_checks():
    # the checks call the reader's function, never patch helpers
    before = helpers.softmax
    checks.check_softmax(raises)
    assert helpers.softmax is before


def test_every_check_an_exercise_uses_is_scanned():
    """The checks whose hints may quote a formula (NOT_SCANNED) are used by no exercise."""
    import yaml

    used = set()
    for chapter in yaml.safe_load((ROOT / "book" / "exercises.yml").read_text())["chapters"]:
        for exercise in chapter["exercises"]:
            for entry in exercise.get("checks") or []:
                used.add(entry["check"] if isinstance(entry, dict) else str(entry))
    assert used, "no check found in book/exercises.yml"
    assert not used & NOT_SCANNED, sorted(used & NOT_SCANNED)
