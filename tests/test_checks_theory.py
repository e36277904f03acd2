"""Tests of chapter 9's self-checks: right answers pass, typical wrong answers are named."""

from __future__ import annotations

import math

import numpy as np
import pytest

import helpers
from helpers.checks import (
    check_min_head_width,
    check_self_attention_jacobian,
    check_truncated_attention,
)
from tests.report_text import assert_all_passed, assert_refused, failed, flat

# ---------------------------------------------------------------------------
# check_self_attention_jacobian
# ---------------------------------------------------------------------------


def reader_jacobian(X, W_Q, W_K, W_V, *, slip=None):
    """The Jacobian as a reader writes it, token pair by token pair; ``slip`` = a mistake."""
    n, d = X.shape
    d_v = W_V.shape[1]
    s = 1.0 if slip == "no scale" else 1 / math.sqrt(W_Q.shape[1])
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    S = s * Q @ K.T
    P = np.exp(S - S.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    out = P @ V
    if slip == "no -o_i":  # the softmax's derivative without its rank-one term
        out = np.zeros_like(out)
    J = np.zeros((n, d_v, n, d))
    for i in range(n):
        for j in range(n):
            block = P[i, j] * W_V.T  # (d_v, d)
            if slip != "constant weights":
                if slip != "no key path":
                    block = block + s * P[i, j] * np.outer(V[j] - out[i], Q[i] @ W_K.T)
                if i == j and slip != "no query path":
                    for m in range(n):
                        block = block + s * P[i, m] * np.outer(V[m] - out[i], K[m] @ W_Q.T)
            J[i, :, j, :] = block
    if slip == "column-major":
        return J.transpose(1, 0, 3, 2).reshape(n * d_v, n * d)
    J = J.reshape(n * d_v, n * d)
    return J.T if slip == "transposed" else J


def jacobian_with(slip):
    def fn(X, W_Q, W_K, W_V):
        return reader_jacobian(X, W_Q, W_K, W_V, slip=slip)

    fn.__name__ = "jacobian_" + slip.replace(" ", "_").replace("-", "_")
    return fn


JACOBIAN_CASES = ["one token", "three tokens", "every size different", "large scores"]


def test_correct_jacobians_pass():
    report = check_self_attention_jacobian(reader_jacobian)
    assert_all_passed(report)
    assert [r.name for r in report.results] == JACOBIAN_CASES


def test_the_books_jacobian_is_refused():
    for fn in (
        helpers.self_attention_jacobian,
        helpers.theory.self_attention_jacobian,
        lambda X, W_Q, W_K, W_V: helpers.self_attention_jacobian(X, W_Q, W_K, W_V),
    ):
        assert_refused(check_self_attention_jacobian(fn), "helpers.theory.self_attention_jacobian")


@pytest.mark.parametrize(
    ("slip", "cases", "problem"),
    [
        ("constant weights", JACOBIAN_CASES[1:], "treated as constants"),
        ("no query path", JACOBIAN_CASES[1:], "path through the query is missing"),
        ("no key path", JACOBIAN_CASES[1:], "path through the keys is missing"),
        ("no scale", JACOBIAN_CASES[1:], "without the 1/sqrt(d_k) scaling"),
        ("no -o_i", JACOBIAN_CASES[1:], "the score paths use v_m where the softmax's derivative"),
        ("column-major", JACOBIAN_CASES[1:], "column-major order"),
        ("transposed", ["three tokens"], "this is the transpose"),
    ],
)
def test_jacobian_slips_are_named(slip, cases, problem):
    report = check_self_attention_jacobian(jacobian_with(slip))
    assert not report
    found = failed(report)
    for case in cases:
        assert problem in found[case], (case, found)


def test_jacobian_of_one_token_passes_even_when_the_weights_are_held_constant():
    # For n = 1 the weight is 1 whatever X is: only the value path exists.
    report = check_self_attention_jacobian(jacobian_with("constant weights"))
    assert "one token" not in failed(report)


def test_transposed_jacobian_of_another_shape_is_reported_as_a_shape():
    report = check_self_attention_jacobian(jacobian_with("transposed"))
    text = flat(report)
    assert "every size different" in failed(report)
    assert "shape" in text


def test_jacobian_unknown_mistake_gets_the_generic_hint():
    report = check_self_attention_jacobian(
        lambda X, W_Q, W_K, W_V: 2 * reader_jacobian(X, W_Q, W_K, W_V)
    )
    assert not report
    assert all("values differ" in p for p in failed(report).values())


def test_jacobian_not_attempted():
    def my_jacobian(X, W_Q, W_K, W_V):
        raise NotImplementedError

    report = check_self_attention_jacobian(my_jacobian)
    assert report.status == "not attempted"


# ---------------------------------------------------------------------------
# check_min_head_width
# ---------------------------------------------------------------------------

WIDTH_CASES = [
    "each token reads itself",
    "rank one plus a constant per row",
    "a bonus per key",
    "uniform weights",
    "5 queries and 6 keys",
]


def reader_width(L):
    return int(np.linalg.matrix_rank(L - L.mean(axis=1, keepdims=True)))


def test_correct_widths_pass():
    report = check_min_head_width(reader_width)
    assert_all_passed(report)
    assert [r.name for r in report.results] == WIDTH_CASES


def test_the_books_width_is_refused():
    import functools

    from helpers.theory import min_head_width as imported

    for fn in (
        helpers.theory.min_head_width,
        imported,
        functools.partial(helpers.theory.min_head_width, rtol=1e-9),
        lambda L: getattr(helpers.theory, "min_head_width")(L),  # noqa: B009
    ):
        report = check_min_head_width(fn)
        assert_refused(report, "helpers.theory.min_head_width")
        assert report.message.endswith(
            "calls helpers.theory.min_head_width, the book's own version: the exercise asks "
            "you to write it"
        )


@pytest.mark.parametrize(
    ("wrong", "cases", "problem"),
    [
        (
            lambda L: np.linalg.matrix_rank(L),
            ["each token reads itself", "rank one plus a constant per row", "uniform weights"],
            "rank of the pattern as given",
        ),
        (
            lambda L: np.linalg.matrix_rank(helpers.softmax(L)),
            ["each token reads itself", "rank one plus a constant per row", "uniform weights"],
            "rank of the pattern as given",
        ),
        (
            lambda L: np.linalg.matrix_rank(L - L.mean(axis=0, keepdims=True)),
            ["a bonus per key", "5 queries and 6 keys"],
            "each column (each key) was centred",
        ),
    ],
)
def test_width_slips_are_named(wrong, cases, problem):
    report = check_min_head_width(wrong)
    found = failed(report)
    assert not report
    for case in cases:
        assert problem in found[case], (case, found)


def test_width_off_by_one_is_shown_as_whole_numbers():
    report = check_min_head_width(lambda L: reader_width(L) + 1)
    first = report.failures[0]
    assert first.name == "uniform weights"  # the smallest input comes first
    assert first.expected == "0" and first.got == "1"
    assert [r.expected for r in report.failures if r.name == "each token reads itself"] == ["3"]


# ---------------------------------------------------------------------------
# check_truncated_attention
# ---------------------------------------------------------------------------

TRUNC_CASES = [
    "by hand (k = 2)",
    "k = m (nothing dropped)",
    "k = 1 (the largest score only)",
    "several queries (k = 3)",
    "scores of order 1e4 (k = 2)",
]


def reader_truncated(scores, V, k, *, slip=None):
    kk = {"k - 1": k - 1, "k + 1": k + 1}.get(slip, k)
    idx = np.argsort(scores if slip == "smallest" else -scores, axis=1)[:, :kk]
    keep = np.zeros(scores.shape, dtype=bool)
    np.put_along_axis(keep, idx, True, axis=1)
    if slip == "not renormalised":
        w = np.exp(scores - scores.max(axis=1, keepdims=True))
        w = w / w.sum(axis=1, keepdims=True)
        return np.where(keep, w, 0.0) @ V
    s = np.where(keep, scores, 0.0 if slip == "zeros" else -np.inf)
    if slip == "naive exp":
        w = np.exp(s)
    else:
        w = np.exp(s - s.max(axis=1, keepdims=True))
    return (w / w.sum(axis=1, keepdims=True)) @ V


def truncated_with(slip):
    def fn(scores, V, k):
        return reader_truncated(scores, V, k, slip=slip)

    fn.__name__ = "truncated_" + slip.replace(" ", "_").replace("-", "minus").replace("+", "plus")
    return fn


def test_correct_truncations_pass():
    report = check_truncated_attention(reader_truncated)
    assert_all_passed(report)
    assert [r.name for r in report.results] == TRUNC_CASES


def test_the_books_truncation_is_refused():
    assert_refused(
        check_truncated_attention(lambda s, V, k: helpers.theory.truncated_attention(s, V, k)),
        "helpers.theory.truncated_attention",
    )


def test_a_legitimate_helper_call_is_not_refused():
    # helpers.softmax computes a part, not the truncated attention itself: allowed.
    def with_the_books_softmax(scores, V, k):
        kth = np.sort(scores, axis=-1)[:, -k][:, None]
        return helpers.softmax(np.where(scores >= kth, scores, -np.inf)) @ V

    assert_all_passed(check_truncated_attention(with_the_books_softmax))


@pytest.mark.parametrize(
    ("slip", "cases", "problem"),
    [
        ("not renormalised", [TRUNC_CASES[0], TRUNC_CASES[2], TRUNC_CASES[3]], "not renormalised"),
        ("zeros", [TRUNC_CASES[0], TRUNC_CASES[2], TRUNC_CASES[3]], "set to 0 instead of being"),
        ("smallest", [TRUNC_CASES[0], TRUNC_CASES[2], TRUNC_CASES[3]], "k smallest scores"),
        ("k - 1", [TRUNC_CASES[0], TRUNC_CASES[3]], "only k - 1 keys"),
        ("k + 1", [TRUNC_CASES[0], TRUNC_CASES[2], TRUNC_CASES[3]], "k + 1 keys were kept"),
    ],
)
def test_truncation_slips_are_named(slip, cases, problem):
    report = check_truncated_attention(truncated_with(slip))
    assert not report
    found = failed(report)
    for case in cases:
        assert problem in found[case], (case, found)
    assert "k = m (nothing dropped)" not in found or slip in ("k + 1", "smallest", "k - 1")


def test_truncation_overflow_fails_only_the_large_scores():
    with np.errstate(all="ignore"):
        report = check_truncated_attention(truncated_with("naive exp"))
    assert list(failed(report)) == ["scores of order 1e4 (k = 2)"]
