"""Tests of helpers.checks: right answers pass, typical wrong answers get useful feedback."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

import helpers
from helpers import checks
from helpers.checks import (
    Case,
    CheckReport,
    check_entropy,
    check_log_softmax,
    check_logsumexp,
    check_softmax,
    check_softmax_jacobian,
    run_checks,
)
from tests.report_text import assert_all_passed, assert_refused, failed, flat

# ---------------------------------------------------------------------------
# From-scratch answers, as a reader would write them
# ---------------------------------------------------------------------------


def stable_softmax(z):
    e = np.exp(z - np.max(z, axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def stable_logsumexp(z):
    m = np.max(z)
    return m + np.log(np.sum(np.exp(z - m)))


def stable_log_softmax(z):
    m = np.max(z, axis=-1, keepdims=True)
    return z - m - np.log(np.sum(np.exp(z - m), axis=-1, keepdims=True))


def stable_jacobian(z):
    p = stable_softmax(z)
    return np.diag(p) - np.outer(p, p)


def stable_entropy(p):
    q = p[p > 0]
    return -np.sum(q * np.log(q))


def where_entropy(p):  # correct, though np.log(0) warns inside np.where
    return -np.sum(np.where(p > 0, p * np.log(p), 0.0))


# Plausible wrong answers.
def naive_softmax(z):
    return np.exp(z) / np.sum(np.exp(z))


def unnormalised_softmax(z):
    return np.exp(z - z.max())


def log_of_naive_softmax(z):
    return np.log(naive_softmax(z))


def log_of_stable_softmax(z):
    return np.log(stable_softmax(z))


def naive_logsumexp(z):
    return np.log(np.sum(np.exp(z)))


def jacobian_without_diagonal(z):
    p = stable_softmax(z)
    return -np.outer(p, p)


def jacobian_sign_flipped(z):
    p = stable_softmax(z)
    return np.outer(p, p) - np.diag(p)


def jacobian_plus_outer(z):
    p = stable_softmax(z)
    return np.diag(p) + np.outer(p, p)


def jacobian_asymmetric(z):
    j = stable_jacobian(z)
    j[0, -1] += 0.1
    return j


def naive_entropy(p):
    return -np.sum(p * np.log(p))


def entropy_in_bits(p):
    q = p[p > 0]
    return -np.sum(q * np.log2(q))


def entropy_sign_flipped(p):
    return -stable_entropy(p)


def raises(z):
    raise ZeroDivisionError("boom")


def returns_none(z):
    np.exp(z)


def returns_column(z):
    return stable_softmax(z)[:, None]


def returns_text(z):
    return "softmax"


def modifies_input(z):
    z -= z.max()
    e = np.exp(z)
    return e / e.sum()


ALL_CHECKS = [
    (check_softmax, [stable_softmax]),
    (check_log_softmax, [stable_log_softmax]),
    (check_logsumexp, [stable_logsumexp]),
    (check_softmax_jacobian, [stable_jacobian]),
    (check_entropy, [stable_entropy, where_entropy]),
]
REFERENCE_PAIRS = [(check, fn) for check, fns in ALL_CHECKS for fn in fns]

# The book's own function of each quantity, and ways a reader might call it.
BOOK_FUNCTIONS = [
    (check_softmax, helpers.softmax, "helpers.softmax.softmax"),
    (check_log_softmax, helpers.log_softmax, "helpers.softmax.log_softmax"),
    (check_logsumexp, helpers.logsumexp, "helpers.softmax.logsumexp"),
    (check_softmax_jacobian, helpers.softmax_jacobian, "helpers.softmax.softmax_jacobian"),
    (check_entropy, helpers.entropy, "helpers.softmax.entropy"),
]


# ---------------------------------------------------------------------------
# Right answers pass
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("check", "fn"), REFERENCE_PAIRS)
def test_correct_answers_pass(check, fn):
    report = check(fn)
    assert_all_passed(report)
    text = flat(report)
    assert "FAILED" not in text


@pytest.mark.parametrize(("check", "book", "dotted"), BOOK_FUNCTIONS)
def test_the_books_own_function_is_refused(check, book, dotted):
    # The function itself, or a reader's wrapper around it: not attempted, whatever it returns.
    assert_refused(check(book), dotted)
    assert_refused(check(lambda z: book(z)), dotted)


@pytest.mark.parametrize(
    ("check", "fn"), [(check_softmax, stable_softmax), (check_log_softmax, stable_log_softmax)]
)
def test_batched_variants_pass(check, fn):
    report = check(fn, batched=True)
    assert report
    assert "2-D batch (rows)" in flat(report)


def test_batched_case_fails_a_function_that_normalises_the_whole_array():
    report = check_softmax(naive_softmax, batched=True)
    assert "2-D batch (rows)" in failed(report)
    assert "each row (along the last axis) is a separate vector of logits" in flat(report)


# ---------------------------------------------------------------------------
# Wrong answers fail, with specific feedback
# ---------------------------------------------------------------------------


def test_naive_softmax_reports_overflow_and_nan():
    report = check_softmax(naive_softmax)
    assert not report
    assert set(failed(report)) == {"large logits", "very negative logits", "float32 input"}
    text = flat(report)
    assert "z = [1000, 1001, 1002]" in text
    assert "got: [nan, nan, nan]" in text
    assert "the output contains nan" in text
    assert "overflow encountered in exp" in text
    assert "the exact answer is finite, and adding the same constant to every logit" in text
    assert "5 of 8 checks passed, 3 failed" in text


def test_unnormalised_softmax_is_told_to_divide_by_the_sum():
    report = check_softmax(unnormalised_softmax)
    assert not report
    assert "the output sums to 1.50321, not 1" in failed(report)["small vector"]
    assert "the probabilities are positive and sum to 1" in flat(report)


def test_log_of_naive_softmax_fails_on_large_logits():
    report = check_log_softmax(log_of_naive_softmax)
    assert "large logits" in failed(report)
    assert "nan" in failed(report)["large logits"]
    assert "adding the same constant to every logit does not change it" in flat(report)


def test_log_of_stable_softmax_fails_only_on_spread_logits():
    report = check_log_softmax(log_of_stable_softmax)
    assert set(failed(report)) == {"widely spread logits"}
    text = flat(report)
    assert "z = [0, -1000]" in text
    assert "got: [0, -inf]" in text
    assert "the output is -inf at index 1 where the answer is finite" in text
    assert "need not be computed as the log of a probability" in text


def test_naive_logsumexp_fails_on_overflow_and_underflow():
    report = check_logsumexp(naive_logsumexp)
    problems = failed(report)
    assert set(problems) == {"large logits", "very negative logits", "float32 input"}
    assert "the output is inf where the answer is finite" in problems["large logits"]
    assert "the output is -inf" in problems["very negative logits"]
    assert "the exact value lies between max(z) and max(z) + log(n)" in flat(report)


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (jacobian_without_diagonal, "a term on the diagonal is missing"),
        (jacobian_sign_flipped, "the sign is flipped: it equals p p^T - diag(p)"),
        (jacobian_plus_outer, "the p p^T term has the wrong sign"),
        (jacobian_asymmetric, "J should be symmetric"),
        (jacobian_asymmetric, "rows should sum to 0"),
    ],
)
def test_wrong_jacobians_are_recognised(fn, message):
    report = check_softmax_jacobian(fn)
    assert not report
    assert message in failed(report)["small vector"]
    assert 'See chapter 1, "The Jacobian"' in flat(report)


def test_naive_entropy_fails_on_zero_probabilities_only():
    report = check_entropy(naive_entropy)
    problems = failed(report)
    assert set(problems) == {"one-hot", "with a zero entry"}
    assert "the output contains nan" in problems["with a zero entry"]
    assert "divide by zero encountered in log" in problems["with a zero entry"]
    assert "0 log 0 counts as 0 (its limit)" in flat(report)


@pytest.mark.parametrize(
    ("fn", "message"),
    [(entropy_in_bits, "this is in bits"), (entropy_sign_flipped, "the sign is flipped")],
)
def test_entropy_slips_are_recognised(fn, message):
    report = check_entropy(fn)
    assert not report
    assert message in failed(report)["uniform over 4"]


# ---------------------------------------------------------------------------
# Misbehaving functions are reported, never crash the check
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("check", "fns"), ALL_CHECKS)
def test_a_function_that_raises_is_reported(check, fns):
    report = check(raises)
    assert not report
    assert all(r.got == "raised ZeroDivisionError: boom" for r in report.results)
    text = flat(report)
    assert "your function raised" in text
    assert "same output and problem as" in text  # repeated failures are summarised


def test_returning_none_is_reported():
    report = check_softmax(returns_none)
    assert "did you forget `return`?" in failed(report)["small vector"]


def test_wrong_shape_is_reported():
    report = check_softmax(returns_column)
    assert "expected shape (3,), got shape (3, 1)" in failed(report)["small vector"]


def test_non_scalar_where_a_number_is_expected_is_reported():
    report = check_logsumexp(lambda z: np.atleast_1d(stable_logsumexp(z)))
    assert "expected a single number, shape (), got shape (1,)" in flat(report)


def test_non_numeric_output_is_reported():
    report = check_softmax(returns_text)
    assert "expected an array of real numbers" in failed(report)["small vector"]
    assert "str of dtype <U7" in flat(report)


def test_modifying_the_input_is_reported():
    report = check_softmax(modifies_input)
    assert "changed its input z in place" in failed(report)["small vector"]


def test_passing_a_result_instead_of_a_function_is_a_type_error():
    with pytest.raises(TypeError, match=r"check_softmax expects your function itself"):
        check_softmax(stable_softmax(np.array([1.0, 2.0])))


def test_warnings_of_the_checked_function_do_not_escape():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise"):
            report = check_softmax(naive_softmax)
    assert "overflow encountered in exp" in flat(report)


# ---------------------------------------------------------------------------
# The report: structure and deterministic text
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("check", "fn"), [(check_softmax, naive_softmax), (check_entropy, naive_entropy)]
)
def test_report_text_is_deterministic(check, fn):
    text = repr(check(fn))
    with np.printoptions(precision=2, suppress=True, linewidth=40):
        assert repr(check(fn)) == text
    assert str(check(fn)) == text
    assert "0x" not in text  # no memory addresses


def _counting_fmt_num(monkeypatch):
    """Count the numbers the report formats."""
    from helpers.checks import core

    calls = []
    original = core._fmt_num

    def counting(v):
        calls.append(v)
        return original(v)

    monkeypatch.setattr(core, "_fmt_num", counting)
    return calls


def test_a_huge_answer_is_reported_formatting_only_what_is_shown(monkeypatch):
    # A (12, 10**6) answer where (n, d_v) is expected: the report shows 10 numbers of each
    # of its 12 rows, and formats only those (formatting every one took minutes).
    huge = np.zeros((12, 10**6))
    calls = _counting_fmt_num(monkeypatch)
    report = checks.check_attention(lambda Q, K, V: huge)
    assert not report and len(report.failures) == len(report.results)
    assert all("got shape (12, 1000000)" in r.problem for r in report.failures)
    first = report.failures[0].got.splitlines()
    assert len(first) == 12 and first[0] == "[[0, 0, 0, 0, 0, 0, ..., 0, 0, 0],"
    # every case's input, expected and got: at most 12 rows of 10 numbers each
    assert len(calls) <= 3 * 12 * 10 * len(report.results), len(calls)
    assert len(repr(report)) < 20_000


def test_a_huge_list_of_the_wrong_shape_is_not_converted():
    # Converting a list of 12 million numbers to an array takes seconds: its shape is read
    # off its first elements. (Converted, the object at its end would make the report say
    # "expected an array of real numbers".)
    row = [0.0] * 10**6
    huge = [row] * 11 + [[*row[:-1], object()]]
    cases = [Case("c", {"x": np.ones((12, 10))}, np.zeros((12, 10)), "zeros")]
    report = run_checks(lambda x: huge, cases, check_name="check_x")
    (result,) = report.failures
    assert result.got == "a list of shape (12, 1000000)"
    assert result.problem == "expected shape (12, 10), got shape (12, 1000000)"
    small = run_checks(lambda x: [[0.0] * 10] * 12, cases, check_name="check_x")
    assert small.passed  # a list of the right shape is converted and compared


def test_an_unreadable_huge_result_is_described_briefly():
    # The merge check describes a pair it cannot read; under the reader's print options
    # (threshold=inf) repr would format every number of it.
    huge = np.zeros((12, 10**6))
    with np.printoptions(threshold=sys.maxsize):
        report = checks.check_online_softmax_merge(lambda m1, l1, m2, l2: (huge, "ell"))
    got = report.failures[0].got
    assert len(got) <= 80 and "an array of shape (12, 1000000)" in got, got


def test_report_structure():
    report = check_softmax(naive_softmax)
    assert isinstance(report, CheckReport)
    assert report.check == "check_softmax" and report.function == "naive_softmax"
    assert len(report.results) == 8
    assert [r.name for r in report.failures] == [
        "large logits",
        "very negative logits",
        "float32 input",
    ]
    large = report.failures[0]
    assert (large.input, large.got) == ("z = [1000, 1001, 1002]", "[nan, nan, nan]")
    assert large.expected == "[0.0900306, 0.244728, 0.665241]"
    assert large.hint.startswith("exp(1000) overflows to inf")


def test_lambda_and_callable_objects_are_named_without_addresses():
    class Softmax:
        def __call__(self, z):
            return stable_softmax(z)

    assert check_softmax(lambda z: stable_softmax(z)).function == "<lambda>"
    assert check_softmax(Softmax()).function == "Softmax"


def test_the_core_runs_new_checks_with_several_inputs():
    cases = [
        Case(
            "small",
            {"a": np.array([1.0, 2.0]), "b": np.array([3.0, 4.0])},
            np.array([4.0, 6.0]),
            hint="add them",
        ),
        Case(
            "float32",
            {"a": np.ones(2, np.float32), "b": np.ones(2, np.float32)},
            np.full(2, 2.0),
            hint="add them",
        ),
    ]
    assert run_checks(np.add, cases, check_name="check_add")
    report = run_checks(np.subtract, cases, check_name="check_add")
    text = flat(report)
    assert "check_add(subtract): 0 of 2 checks passed" in text
    assert "input:    a = [1, 2]\n              b = [3, 4]" in repr(report)  # one line each
    assert "FAILED: float32: values differ (rtol=0.0001, atol=1e-06)" in text  # briefly
    assert "largest difference 8 at index 1" in text
    assert (
        checks.RTOL_FLOAT32
        == Case("c", {"a": np.ones(1, np.float32)}, np.ones(1), "").tolerances()[0]
    )


def _log_softmax_vjp(z, g):
    return g - helpers.softmax(z) * g.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize(
    ("wrong", "problem"),
    [
        (lambda z, g: g - helpers.softmax(z), "the factor sum_i g_i is missing"),
        (lambda z, g: g, "went through the log-softmax unchanged"),
        (
            lambda z, g: g - (helpers.softmax(z) * g).sum(axis=-1, keepdims=True),
            "applied untransposed",
        ),
        (
            lambda z, g: (
                helpers.softmax(z) * (g - (helpers.softmax(z) * g).sum(axis=-1, keepdims=True))
            ),
            "the backward pass of softmax",
        ),
        (lambda z, g: g - helpers.softmax(z) * g.sum(), "over the whole array"),
        (
            lambda z, g: (
                g - np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True) * g.sum(-1, keepdims=True)
            ),
            "nan",
        ),
    ],
)
def test_check_log_softmax_backward_names_each_mistake(wrong, problem):
    from helpers.checks import check_log_softmax_backward

    assert check_log_softmax_backward(_log_softmax_vjp).status == "passed"
    with np.errstate(all="ignore"):
        report = check_log_softmax_backward(wrong)
    assert report.status == "failed"
    assert any(problem in f.problem for f in report.failures), report


# ---------------------------------------------------------------------------
# check_softmax_temperature (exercise 1.3)
# ---------------------------------------------------------------------------


def tempered_softmax(z, tau):
    """A reader's answer: shift by the row maximum (0 for a row of -inf), limit at tau = 0."""
    z = np.asarray(z, dtype=np.float64)  # float32 cannot hold tau = 1e-300
    m = z.max(axis=-1, keepdims=True)
    shift = np.where(np.isfinite(m), m, 0.0)
    if tau == 0:
        e = ((z == m) & np.isfinite(m)).astype(float)
    else:
        e = np.exp((z - shift) / tau)
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total > 0, total, 1)


def tempered_by_rows(z, tau):
    """Another right answer, one row at a time, counting the maxima."""
    z = np.asarray(z, dtype=float)
    out = np.zeros_like(z)
    for idx in np.ndindex(z.shape[:-1]):
        row = z[idx]
        if np.isneginf(row).all():
            continue
        top = row == row.max()
        out[idx] = top / top.sum() if tau == 0 else stable_softmax((row - row.max()) / tau)
    return out


def with_the_books_softmax(z, tau):
    """The chapter's softmax for tau > 0, the rest by hand: the book's softmax is the answer."""
    z = np.asarray(z, dtype=float)
    out = np.zeros_like(z)
    for idx in np.ndindex(z.shape[:-1]):
        row = z[idx]
        if np.isneginf(row).all():
            continue
        top = row == row.max()
        out[idx] = top / top.sum() if tau == 0 else helpers.softmax(row, temperature=tau)
    return out


def test_check_softmax_temperature_passes_right_answers():
    for fn in (tempered_softmax, tempered_by_rows):
        assert_all_passed(checks.check_softmax_temperature(fn))


def test_check_softmax_temperature_refuses_the_books_softmax():
    assert_refused(
        checks.check_softmax_temperature(with_the_books_softmax), "helpers.softmax.softmax"
    )


def _first_max_at_zero(z, tau):
    if tau > 0:
        return tempered_softmax(z, tau)
    z = np.asarray(z, dtype=float)
    out = np.zeros_like(z)
    np.put_along_axis(out, z.argmax(axis=-1)[..., None], 1.0, axis=-1)
    return np.where(np.isfinite(z.max(axis=-1, keepdims=True)), out, 0.0)


def _fill_masked(z, tau):  # a finite fill: uniform weights for a fully masked row
    z = np.where(np.isneginf(z), -1e9, z)
    return tempered_softmax(z, tau)


@pytest.mark.parametrize(
    ("wrong", "case", "problem"),
    [
        (  # the chapter's softmax: nan at tau = 0 and on a fully masked row
            lambda z, tau: stable_softmax(np.asarray(z) / tau),
            "tau = 0 with one maximum",
            "nan",
        ),
        (
            lambda z, tau: stable_softmax((z - np.max(z, axis=-1, keepdims=True)) / tau),
            "a fully masked row (tau = 1)",
            "nan",
        ),
        (
            lambda z, tau: tempered_softmax(np.asarray(z) * tau, 1.0),
            "a batch of 2 rows",
            "multiplied by tau",
        ),
        (lambda z, tau: tempered_softmax(z, 1.0), "tiny temperature", "temperature is ignored"),
        (_first_max_at_zero, "tau = 0 with tied maxima", "first of the tied maxima"),
        (_fill_masked, "a fully masked row (tau = 1)", "uniform weights"),
        (
            lambda z, tau: np.exp(np.asarray(z) / tau) / np.exp(np.asarray(z) / tau).sum(-1),
            "tiny temperature (tau = 1e-3)",
            "nan",
        ),
        (
            lambda z, tau: np.swapaxes(tempered_softmax(np.swapaxes(z, 0, -1), tau), 0, -1),
            "a batch of 2 rows (tau = 0.5)",
            "over the first axis",
        ),
    ],
)
def test_check_softmax_temperature_names_each_mistake(wrong, case, problem):
    with np.errstate(all="ignore"):
        report = checks.check_softmax_temperature(wrong)
    problems = failed(report)
    assert not report and problem in problems[next(k for k in problems if k.startswith(case))]


def test_check_softmax_temperature_needs_float64_for_a_tiny_temperature():
    def in_float32(z, tau):  # right in float64, but float32 logits are divided in float32
        z = np.asarray(z)
        if z.dtype == np.float32:  # where tau = 1e-300 rounds to 0
            return stable_softmax((z - z.max(axis=-1, keepdims=True)) / tau)
        return tempered_softmax(z, tau)

    with np.errstate(all="ignore"):
        problems = failed(checks.check_softmax_temperature(in_float32))
    assert list(problems) == ["float32 logits (tau = 1e-300)"]
    assert "nan" in problems["float32 logits (tau = 1e-300)"]
