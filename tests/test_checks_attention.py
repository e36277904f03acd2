"""Tests of helpers.checks.attention: right answers pass, typical slips get useful feedback."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import helpers
from helpers import checks
from helpers.checks import (
    check_attention,
    check_attention_grad,
    check_causal_mask,
    check_masked_attention,
)
from tests.report_text import assert_all_passed, assert_refused, failed, flat

# ---------------------------------------------------------------------------
# From-scratch answers, as a reader would write them
# ---------------------------------------------------------------------------


def softmax_rows(S, axis=-1):
    E = np.exp(S - S.max(axis=axis, keepdims=True))
    return E / E.sum(axis=axis, keepdims=True)


def scores(Q, K):
    return Q @ K.T / np.sqrt(Q.shape[-1])


def four_steps(Q, K, V):
    return softmax_rows(scores(Q, K)) @ V


def four_steps_with_weights(Q, K, V):
    A = softmax_rows(scores(Q, K))
    return A @ V, A


def tril_mask(n):
    return np.tril(np.ones((n, n), dtype=bool))


def tril_mask_of_ones(n):  # 0/1 floats: the right pattern, but numbers, not booleans
    return np.tril(np.ones((n, n)))


def masked_attention(Q, K, V, mask):
    S = np.where(mask, scores(Q, K), -np.inf)
    top = S.max(axis=-1, keepdims=True)
    E = np.exp(S - np.where(np.isfinite(top), top, 0))
    total = E.sum(axis=-1, keepdims=True)
    return E / np.where(total == 0, 1, total) @ V


def grads(Q, K, V, G):
    s = 1 / np.sqrt(Q.shape[-1])
    A = softmax_rows(s * Q @ K.T)
    dA = G @ V.T
    dS = A * (dA - (dA * A).sum(axis=-1, keepdims=True))
    return s * dS @ K, s * dS.T @ Q, A.T @ G


def reference_grads(Q, K, V, G):  # the book's gradients: not an answer to check_attention_grad
    weights = helpers.scaled_dot_product_attention(Q, K, V)[1]
    return helpers.attention_backward(Q, K, V, weights, G)


# Plausible wrong answers.
def unscaled(Q, K, V):
    return softmax_rows(Q @ K.T) @ V


def divided_by_d_k(Q, K, V):
    return softmax_rows(Q @ K.T / Q.shape[-1]) @ V


def softmax_over_columns(Q, K, V):
    return softmax_rows(scores(Q, K), axis=0) @ V


def naive_softmax(Q, K, V):
    E = np.exp(scores(Q, K))
    return E / E.sum(axis=-1, keepdims=True) @ V


def naive_softmax_in_float32(Q, K, V):
    # ** 0.5 gives a Python float, which keeps float32 arrays in float32 (np.sqrt
    # returns a float64 scalar, which promotes them to float64)
    E = np.exp(Q @ K.T / Q.shape[-1] ** 0.5)
    return E / E.sum(axis=-1, keepdims=True) @ V


def K_not_transposed(Q, K, V):
    return softmax_rows(Q @ K / np.sqrt(Q.shape[-1])) @ V


def unnormalised(Q, K, V):
    return np.exp(scores(Q, K)) @ V


def returns_weights(Q, K, V):
    return softmax_rows(scores(Q, K))


def scales_in_place(Q, K, V):
    Q /= np.sqrt(Q.shape[-1])
    return softmax_rows(Q @ K.T) @ V


def upper_triangle(n):
    return np.triu(np.ones((n, n), dtype=bool))


def inverted_causal(n):
    return ~tril_mask(n)


def without_diagonal(n):
    return np.tril(np.ones((n, n), dtype=bool), k=-1)


def additive_causal(n):
    return np.where(tril_mask(n), 0.0, -np.inf)


def neg_inf_fill(Q, K, V, mask):
    return softmax_rows(np.where(mask, scores(Q, K), -np.inf)) @ V


def minus_1e9_fill(Q, K, V, mask):
    return softmax_rows(np.where(mask, scores(Q, K), -1e9)) @ V


def inverted_mask(Q, K, V, mask):
    return masked_attention(Q, K, V, ~mask)


def mask_after_softmax(Q, K, V, mask):
    return softmax_rows(scores(Q, K)) * mask @ V


def mask_times_scores(Q, K, V, mask):
    return softmax_rows(scores(Q, K) * mask) @ V


def mask_ignored(Q, K, V, mask):
    return four_steps(Q, K, V)


def grads_variant(slip):
    def variant(Q, K, V, G):
        s = 1 / np.sqrt(Q.shape[-1])
        A = softmax_rows(s * Q @ K.T)
        dA = G @ V.T
        dS = A * (dA - (dA * A).sum(axis=-1, keepdims=True))
        dQ, dK, dV = s * dS @ K, s * dS.T @ Q, A.T @ G
        if slip == "no scale":
            dQ, dK = dS @ K, dS.T @ Q
        elif slip == "no rowsum":
            dQ, dK = s * (A * dA) @ K, s * (A * dA).T @ Q
        elif slip == "no jacobian":
            dQ, dK = s * dA @ K, s * dA.T @ Q
        elif slip == "dV transposed":
            dV = A @ G  # runs only when n == m
        elif slip == "dK transposed":
            dK = s * dS @ Q
        elif slip == "two gradients":
            return dQ, dK
        return dQ, dK, dV

    variant.__name__ = "grads_" + slip.replace(" ", "_")
    return variant


ALL_CHECKS = [
    (check_attention, [four_steps, four_steps_with_weights]),
    (check_causal_mask, [tril_mask]),
    (check_masked_attention, [masked_attention]),
    (check_attention_grad, [grads]),
]
REFERENCE_PAIRS = [(check, fn) for check, fns in ALL_CHECKS for fn in fns]

# The book's own implementation of each quantity, called directly or through a wrapper.
BOOK_FUNCTIONS = [
    (check_attention, helpers.scaled_dot_product_attention, "scaled_dot_product_attention"),
    (check_attention, lambda Q, K, V: helpers.flash_attention(Q, K, V)[0], "flash_attention"),
    (check_causal_mask, helpers.causal_mask, "causal_mask"),
    (check_masked_attention, helpers.scaled_dot_product_attention, "scaled_dot_product_attention"),
    (check_attention_grad, reference_grads, "attention_backward"),
]


# ---------------------------------------------------------------------------
# Right answers pass
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("check", "fn"), REFERENCE_PAIRS)
def test_correct_answers_pass(check, fn):
    report = check(fn)
    assert_all_passed(report)
    text = flat(report)
    assert f"{check.__name__}({fn.__name__})" in text
    assert "FAILED" not in text


@pytest.mark.parametrize(("check", "fn", "name"), BOOK_FUNCTIONS)
def test_the_books_own_function_is_refused(check, fn, name):
    report = check(fn)
    assert_refused(report)
    assert any(called.endswith("." + name) for called in report.book_calls), report.book_calls


def test_checks_are_re_exported():
    for name in ("check_attention", "check_attention_grad", "check_causal_mask"):
        assert name in checks.__all__ and getattr(checks, name) is globals()[name]
    assert "check_masked_attention" in checks.__all__


def test_a_partial_is_reported_under_its_type_name():
    report = check_attention(functools.partial(four_steps))
    assert report and flat(report).startswith("check_attention(partial)")


@pytest.mark.parametrize("check", [c for c, _ in ALL_CHECKS])
def test_passing_a_result_instead_of_a_function_raises(check):
    with pytest.raises(TypeError, match=rf"{check.__name__} expects your function itself"):
        check(np.zeros((2, 2)))


def test_report_does_not_depend_on_print_options():
    plain = repr(check_masked_attention(minus_1e9_fill))
    with np.printoptions(precision=2, floatmode="fixed", linewidth=20):
        assert repr(check_masked_attention(minus_1e9_fill)) == plain


# ---------------------------------------------------------------------------
# (a) check_attention: wrong answers fail, with specific feedback
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fn", "cases", "problem", "hint"),
    [
        (
            unscaled,
            {"hand-sized 2 x 2", "cross shapes (n=2, m=4, d_k=3, d_v=5)", "wide d_k = 16"},
            "the scores are not scaled: it equals softmax(Q K^T) V",
            "the scaling keeps the scores' spread independent of d_k (chapter 2, \"Why the",
        ),
        (
            divided_by_d_k,
            {"hand-sized 2 x 2", "cross shapes (n=2, m=4, d_k=3, d_v=5)", "wide d_k = 16"},
            "divided by d_k instead of sqrt(d_k)",
            "Why the scores are scaled",
        ),
        (
            softmax_over_columns,
            {"hand-sized 2 x 2", "equal scores", "a single key", "wide d_k = 16"},
            "the softmax normalises each column of S instead of each row (axis=0)",
            "each query's weights, a row, are positive and sum to 1",
        ),
        (
            K_not_transposed,
            {"hand-sized 2 x 2"},
            "it uses Q @ K instead of Q @ K.T",
            "compares two rows: row i of Q and row j of K",
        ),
        (
            unnormalised,
            {"hand-sized 2 x 2", "wide d_k = 16"},
            "the weights are not normalised",
            "each query's weights, a row, are positive and sum to 1",
        ),
        (
            returns_weights,
            {"hand-sized 2 x 2"},
            "it returns the weights A, not the output",
            "the output has one row of width d_v per query",
        ),
    ],
)
def test_attention_slips_are_named(fn, cases, problem, hint):
    report = check_attention(fn)
    assert not report
    for name in cases:
        assert problem in failed(report)[name]
    assert hint in flat(report)


def test_naive_softmax_fails_on_large_scores_with_the_max_shift_hint():
    report = check_attention(naive_softmax)
    assert set(failed(report)) == {"large scores", "rows whose maxima differ by 800"}
    text = flat(report)
    assert "the output contains nan" in text
    assert '"overflow encountered in exp"' in text
    assert "the scores reach 1060, where exp overflows" in text
    assert "the weights are still finite and each row sums to 1" in text
    report = check_attention(naive_softmax_in_float32)
    assert set(failed(report)) == {
        "large scores",
        "rows whose maxima differ by 800",
        "float32 input",
    }
    assert "in float32 exp overflows above 88.7, and these scores reach 113" in flat(report)


def test_K_not_transposed_fails_to_run_on_cross_shapes():
    failures = failed(check_attention(K_not_transposed))
    assert failures["cross shapes (n=2, m=4, d_k=3, d_v=5)"] == "your function raised"
    text = flat(check_attention(K_not_transposed))
    assert "one weight per query and key, (n, m)" in text


def test_shape_errors_are_reported():
    report = check_attention(returns_weights)
    assert (
        "expected shape (2, 5), got shape (2, 4)"
        in failed(report)["cross shapes (n=2, m=4, d_k=3, d_v=5)"]
    )


def test_changing_an_input_in_place_is_reported():
    report = check_attention(scales_in_place)
    assert "your function changed its input Q in place" in flat(report)


def test_the_report_reads_well():
    text = repr(check_attention(unscaled))
    assert text.startswith("check_attention(unscaled): 4 of 8 checks passed, 4 failed.")
    assert "\nFAILED: hand-sized 2 x 2\n    input:    Q = [[1, 0],\n" in text
    assert "    expected: [[1.66048, 2.66048],\n               [2, 3]]" in text
    assert "Passed: large scores, equal scores, a single key, float32 input." in text


# ---------------------------------------------------------------------------
# (b) check_causal_mask
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fn", "cases", "problem", "hint"),
    [
        (
            upper_triangle,
            {"n = 2", "n = 3", "n = 6"},
            "it is the upper triangle: query i sees the keys j >= i, the future",
            "each query sees the past and itself, never the future",
        ),
        (
            inverted_causal,
            {"n = 2", "n = 3", "n = 6"},
            "the convention is inverted: True marks the keys a query may NOT see",
            "True means may attend",
        ),
        (
            without_diagonal,
            {"n = 1", "n = 2", "n = 3", "n = 6"},
            "the diagonal is missing: query i does not see key i",
            "each query may attend to itself",
        ),
    ],
)
def test_causal_mask_slips_are_named(fn, cases, problem, hint):
    report = check_causal_mask(fn)
    assert set(failed(report)) >= cases
    for name in cases:
        assert problem in failed(report)[name]
    assert hint in flat(report)


def test_upper_triangle_passes_only_the_one_by_one_case():
    report = check_causal_mask(upper_triangle)
    assert [r.name for r in report.results if r.passed] == ["n = 1"]


def test_additive_causal_mask_is_told_to_return_booleans():
    report = check_causal_mask(additive_causal)
    assert (
        "the output is -inf at index (0, 1) where the answer is finite" in failed(report)["n = 2"]
    )
    assert "as booleans (not the additive form of 0 and -inf)" in flat(report)


def test_causal_mask_receives_a_python_int():
    seen = []

    def spy(n):
        seen.append(n)
        return tril_mask(n)

    assert check_causal_mask(spy)
    assert seen == [1, 2, 3, 6] and all(type(n) is int for n in seen)
    assert "input: n = 2 expected" in flat(check_causal_mask(upper_triangle))  # no dtype


def test_no_mask_at_all_is_named():
    report = check_causal_mask(lambda n: np.ones((n, n), dtype=bool))
    assert "every query may attend to every key" in failed(report)["n = 2"]


# ---------------------------------------------------------------------------
# (c) check_masked_attention
# ---------------------------------------------------------------------------

ALL_MASKED_CASES = {
    "causal mask",
    "random mask",
    "padding mask of shape (1, m)",
    "large scores with a mask",
    "a query with no allowed key",
}


@pytest.mark.parametrize(
    ("fn", "cases", "problem"),
    [
        (
            inverted_mask,
            ALL_MASKED_CASES,
            "the mask is inverted: the queries attend to the keys it hides",
        ),
        (
            mask_after_softmax,
            ALL_MASKED_CASES,
            "the weights were masked after the softmax and not renormalised",
        ),
        (
            mask_times_scores,
            ALL_MASKED_CASES - {"large scores with a mask"},
            "the scores were multiplied by the mask: a hidden key gets score 0",
        ),
        (
            mask_ignored,
            ALL_MASKED_CASES,
            "the mask made no difference",
        ),
    ],
)
def test_masking_slips_are_named(fn, cases, problem):
    report = check_masked_attention(fn)
    for name in cases:
        assert problem in failed(report)[name]
    if fn is not inverted_mask:
        assert "a key the mask hides gets weight exactly 0" in flat(report)


def test_equal_weights_for_the_allowed_keys_are_named():
    def mean_of_allowed(Q, K, V, mask):
        allowed = np.broadcast_to(mask, (len(Q), len(K)))
        with np.errstate(all="ignore"):
            return allowed @ V / allowed.sum(axis=-1, keepdims=True)

    assert (
        "the scores are ignored" in failed(check_masked_attention(mean_of_allowed))["causal mask"]
    )


def test_neg_inf_fill_fails_only_on_the_fully_masked_row_with_nan():
    report = check_masked_attention(neg_inf_fill)
    failures = failed(report)
    assert set(failures) == {"a query with no allowed key"}
    assert failures["a query with no allowed key"].startswith(
        "the query with no allowed key got nan: all its scores are -inf"
    )
    text = flat(report)
    assert "weights 0 and output 0 for that row" in text
    assert '(chapter 2, "Fully masked rows")' in text


def test_minus_1e9_fill_fails_only_on_the_fully_masked_row_as_uniform():
    report = check_masked_attention(minus_1e9_fill)
    failures = failed(report)
    assert set(failures) == {"a query with no allowed key"}
    assert "got the mean of all the values" in failures["a query with no allowed key"]
    assert "such as -1e9" in failures["a query with no allowed key"]


# ---------------------------------------------------------------------------
# (d) check_attention_grad
# ---------------------------------------------------------------------------

GRAD_CASES = [
    f"{case}: {part}" for case in ("square", "cross shapes") for part in ("dQ", "dK", "dV")
]


@pytest.mark.parametrize(
    ("slip", "cases", "problem"),
    [
        ("no scale", GRAD_CASES[0:2] + GRAD_CASES[3:5], "lacks the factor 1/sqrt(d_k)"),
        (
            "no rowsum",
            GRAD_CASES[0:2] + GRAD_CASES[3:5],
            "one term of the softmax's Jacobian is missing",
        ),
        (
            "no jacobian",
            GRAD_CASES[0:2] + GRAD_CASES[3:5],
            "the softmax's Jacobian is missing entirely",
        ),
        ("dV transposed", ["square: dV"], "dV has a transpose in the wrong place"),
        ("dK transposed", ["square: dK"], "dK has a transpose in the wrong place"),
    ],
)
def test_gradient_slips_are_named(slip, cases, problem):
    report = check_attention_grad(grads_variant(slip))
    failures = failed(report)
    for name in cases:
        assert problem in failures[name]
    assert all(r.passed for r in report.results if r.name not in failures)


def test_gradient_slips_keep_the_right_gradients_passing():
    report = check_attention_grad(grads_variant("no scale"))
    assert [r.name for r in report.results if r.passed] == ["square: dV", "cross shapes: dV"]


def test_transposes_that_cannot_run_on_cross_shapes_are_reported_as_raised():
    report = check_attention_grad(grads_variant("dV transposed"))
    assert failed(report)["cross shapes: dV"] == "your function raised"
    assert "matmul" in flat(report)


def test_wrong_number_of_gradients():
    report = check_attention_grad(grads_variant("two gradients"))
    assert not report and len(report.failures) == 6
    assert "it must return three arrays (dQ, dK, dV); it returned a tuple of length 2" in flat(
        report
    )
    assert flat(report).startswith("check_attention_grad(grads_two_gradients): 0 of 6")


def test_the_grad_hints_point_to_the_backward_pass_without_its_formulas():
    text = flat(check_attention_grad(grads_variant("no scale"), hint=True))
    assert 'See chapter 2, "The backward pass"' in text
    assert "Fuller hint: go backwards through the four steps" in text
    assert "dS = A" not in text and "keepdims" not in text


# ---------------------------------------------------------------------------
# Wrong answers that used to pass
# ---------------------------------------------------------------------------


def global_max_attention(Q, K, V):
    """Subtracts the maximum of the whole score matrix, not of each row."""
    S = scores(Q, K)
    E = np.exp(S - S.max())
    return E / E.sum(axis=-1, keepdims=True) @ V


def test_subtracting_the_global_maximum_fails_when_row_maxima_differ_by_800():
    report = check_attention(global_max_attention)
    assert set(failed(report)) == {"rows whose maxima differ by 800"}
    problem = failed(report)["rows whose maxima differ by 800"]
    assert "the output contains nan" in problem
    assert "each row is a softmax of its own" in flat(report)
    with np.errstate(all="ignore"):  # the case is built so: row 2 underflows to 0/0
        case_Q = np.array([[400.0, 0.0], [0.0, 1.0]])
        case_K = np.array([[4.0, 0.0], [3.0, 1.0], [0.0, 2.0]])
        S = scores(case_Q, case_K)
        assert S[0].max() - S[1].max() > 745 and np.exp(S[1] - S.max()).sum() == 0


def test_a_float_causal_mask_of_zeros_and_ones_fails_every_case():
    report = check_causal_mask(tril_mask_of_ones)
    assert not report and len(report.failures) == 4
    for problem in failed(report).values():
        assert "the right pattern, but as numbers of dtype float64, not a boolean mask" in problem
    assert "(dtype float64)" in report.failures[0].got
    assert "return an array of booleans (dtype bool)" in flat(report)
    assert check_causal_mask(lambda n: tril_mask_of_ones(n).astype(bool))


def _self_attention_parts(X, W_Q, W_K, W_V, G):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    return helpers.attention_backward(Q, K, V, helpers.scaled_dot_product_attention(Q, K, V)[1], G)


def _self_attention_grad(X, W_Q, W_K, W_V, G):
    dQ, dK, dV = _self_attention_parts(X, W_Q, W_K, W_V, G)
    return dQ @ W_Q.T + dK @ W_K.T + dV @ W_V.T, X.T @ dQ, X.T @ dK, X.T @ dV


def _replace(index, value):
    def wrong(X, W_Q, W_K, W_V, G):
        right = list(_self_attention_grad(X, W_Q, W_K, W_V, G))
        right[index] = value(X, W_Q, W_K, W_V, G, *_self_attention_parts(X, W_Q, W_K, W_V, G))
        return tuple(right)

    return wrong


@pytest.mark.parametrize(
    ("wrong", "problem"),
    [
        (_replace(0, lambda X, Wq, Wk, Wv, G, dQ, dK, dV: dV @ Wv.T), "through Q, K are missing"),
        (
            _replace(0, lambda X, Wq, Wk, Wv, G, dQ, dK, dV: dQ @ Wq.T + dV @ Wv.T),
            "the path(s) through K are missing",
        ),
        (_replace(0, lambda X, Wq, Wk, Wv, G, dQ, dK, dV: dQ + dK + dV), "projections are missing"),
        (_replace(1, lambda X, Wq, Wk, Wv, G, dQ, dK, dV: dQ.T @ X), "dW_Q is transposed"),
        (
            _replace(2, lambda X, Wq, Wk, Wv, G, dQ, dK, dV: X.T @ dQ),
            "roles of Q and K are swapped",
        ),
        (lambda *args: _self_attention_grad(*args)[:3], "it must return four arrays"),
    ],
)
def test_check_self_attention_grad_names_each_mistake(wrong, problem):
    from helpers.checks import check_self_attention_grad

    assert check_self_attention_grad(_self_attention_grad).status == "passed"
    report = check_self_attention_grad(wrong)
    assert report.status == "failed"
    assert any(problem in f.problem + f.got for f in report.failures), report


# ---------------------------------------------------------------------------
# check_kernel_attention (exercise 2.2)
# ---------------------------------------------------------------------------


def kernel_expanded(Q, K, V, sigma):
    """A reader's answer: the square expanded, |q|^2 dropped (it cancels)."""
    A = softmax_rows((Q @ K.T - 0.5 * (K * K).sum(axis=-1)) / sigma**2)
    return A @ V, A


def kernel_by_distances(Q, K, V, sigma):
    """Another right answer: the squared distances themselves, max-shifted."""
    D = ((Q[:, None, :] - K[None, :, :]) ** 2).sum(axis=-1)  # (n, m)
    A = softmax_rows(-D / (2 * sigma**2))
    return A @ V, A


def kernel_with_slip(slip):
    def fn(Q, K, V, sigma):
        QK, kk = Q @ K.T, (K * K).sum(axis=-1)
        S = {
            "no key term": QK / sigma**2,
            "no half": (QK - kk) / sigma**2,
            "over sigma": (QK - 0.5 * kk) / sigma,
            "over 2 sigma^2": (QK - 0.5 * kk) / (2 * sigma**2),
            "sqrt d": QK / np.sqrt(Q.shape[-1]),
            "plus": (QK + 0.5 * kk) / sigma**2,
        }[slip]
        A = softmax_rows(S)
        return A @ V, A

    fn.__name__ = f"kernel_{slip.replace(' ', '_')}"
    return fn


def kernel_direct(Q, K, V, sigma):  # exp of the distance: 0/0 when every kernel underflows
    D = ((Q[:, None, :] - K[None, :, :]) ** 2).sum(axis=-1)
    W = np.exp(-D / (2 * sigma**2))
    return W / W.sum(axis=-1, keepdims=True) @ V


def test_check_kernel_attention_passes_right_answers():
    for fn in (kernel_expanded, kernel_by_distances, lambda *a: kernel_expanded(*a)[0]):
        assert_all_passed(checks.check_kernel_attention(fn))


def test_kernel_attention_is_attention_with_a_scale_and_a_key_bias():
    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(4, 3)), rng.normal(size=(6, 3)), rng.normal(size=(6, 2))
    out, A = kernel_by_distances(Q, K, V, 0.7)
    ref, A_ref = helpers.scaled_dot_product_attention(
        Q, K, V, scale=1 / 0.7**2, bias=-0.5 * (K * K).sum(axis=-1) / 0.7**2
    )
    np.testing.assert_allclose(out, ref, atol=1e-12)
    np.testing.assert_allclose(A, A_ref, atol=1e-12)


@pytest.mark.parametrize(
    ("slip", "problem"),
    [
        ("no key term", "the key's own term is missing"),
        ("no half", "the key's own term is twice as large as it should be"),
        ("over sigma", "divided by sigma, not by sigma^2"),
        ("over 2 sigma^2", "the scores are half as large as they should be"),
        ("sqrt d", "this is scaled dot-product attention"),
        ("plus", "the wrong sign"),
    ],
)
def test_check_kernel_attention_names_each_slip(slip, problem):
    report = checks.check_kernel_attention(kernel_with_slip(slip))
    problems = failed(report)
    assert problems and any(problem in p for p in problems.values())


def test_check_kernel_attention_catches_the_underflowing_kernel():
    with np.errstate(all="ignore"):
        report = checks.check_kernel_attention(kernel_direct)
    problems = failed(report)
    assert sorted(problems) == ["queries far from every key", "tiny sigma = 1e-3 (the nearest key)"]
    assert all("every kernel value underflows to 0, and 0/0 is nan" in p for p in problems.values())
    assert "a softmax of finite scores, which needs no kernel value" in flat(report)


def test_check_kernel_attention_names_the_softmax_over_the_queries():
    def over_queries(Q, K, V, sigma):
        A = softmax_rows((Q @ K.T - 0.5 * (K * K).sum(axis=-1)) / sigma**2, axis=0)
        return A @ V, A

    report = checks.check_kernel_attention(over_queries)
    assert "over the queries" in failed(report)["keys of different lengths"]


# ---------------------------------------------------------------------------
# check_left_padded_attention (exercise 2.4)
# ---------------------------------------------------------------------------


def left_padded(Q, K, V, lengths, *, slip=""):
    """A reader's answer: build the (b, n, n) mask, softmax with zero rows where empty."""
    n = Q.shape[-2]
    pos = np.arange(n)
    lengths = np.asarray(lengths)[:, None]
    real = pos < lengths if slip == "right-padded" else pos >= n - lengths  # (b, n)
    causal = np.tril(np.ones((n, n), dtype=bool))
    mask = {
        "no causal": real[:, None, :] & True,
        "no padding": causal[None] & True,
        "queries": causal & real[:, :, None],
        "transposed causal": causal.T & real[:, None, :],
    }.get(slip, causal & real[:, None, :])
    S = np.where(mask, Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]), -np.inf)
    if slip == "fill":
        S = np.where(mask, S, -1e9)
    top = S.max(axis=-1, keepdims=True)
    E = np.exp(S - np.where(np.isinf(top), 0.0, top))
    total = E.sum(axis=-1, keepdims=True)
    A = E / np.where(total > 0, total, 1.0)
    return A @ V, A


def test_check_left_padded_attention_passes_right_answers():
    def with_the_books_causal_mask(Q, K, V, lengths):  # part 1's mask, the book's: allowed
        n = Q.shape[-2]
        real = np.arange(n) >= n - np.asarray(lengths)[:, None]
        S = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
        S = np.where(helpers.causal_mask(n) & real[:, None, :], S, -np.inf)
        top = S.max(axis=-1, keepdims=True)
        E = np.exp(S - np.where(np.isinf(top), 0.0, top))
        return E / np.maximum(E.sum(axis=-1, keepdims=True), 1e-300) @ V

    for fn in (left_padded, with_the_books_causal_mask):
        assert_all_passed(checks.check_left_padded_attention(fn))


def test_check_left_padded_attention_refuses_the_books_masked_attention():
    def via_helpers(Q, K, V, lengths):  # the statement asks for the masked softmax by hand
        n = Q.shape[-2]
        real = np.arange(n) >= n - np.asarray(lengths)[:, None]
        return helpers.scaled_dot_product_attention(
            Q, K, V, mask=helpers.causal_mask(n) & real[:, None, :]
        )

    def via_padding_mask(Q, K, V, lengths):  # the book's right padding, flipped
        n = Q.shape[-2]
        mask = helpers.causal_mask(n) & helpers.padding_mask(lengths, n)[..., ::-1]
        return masked_attention_batch(Q, K, V, mask)

    assert_refused(
        checks.check_left_padded_attention(via_helpers),
        "helpers.attention.scaled_dot_product_attention",
    )
    assert_refused(
        checks.check_left_padded_attention(via_padding_mask), "helpers.masks.padding_mask"
    )


def masked_attention_batch(Q, K, V, mask):
    S = np.where(mask, Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]), -np.inf)
    top = S.max(axis=-1, keepdims=True)
    E = np.exp(S - np.where(np.isinf(top), 0.0, top))
    total = E.sum(axis=-1, keepdims=True)
    return E / np.where(total > 0, total, 1.0) @ V


def test_left_padding_leaves_the_real_tokens_as_if_unpadded():
    rng = np.random.default_rng(5)
    Q, K, V = rng.normal(size=(3, 6, 4)), rng.normal(size=(3, 6, 4)), rng.normal(size=(3, 6, 2))
    out, A = left_padded(Q, K, V, [6, 2, 4])
    alone, _ = left_padded(Q[2:, 2:], K[2:, 2:], V[2:, 2:], [4])  # the 4 real tokens alone
    np.testing.assert_allclose(out[2, 2:], alone[0], atol=1e-12)
    assert (out[1, :4] == 0).all() and (A[1, :4] == 0).all()  # padding queries: zero rows


@pytest.mark.parametrize(
    ("slip", "problem"),
    [
        ("right-padded", "the padding is taken to be on the right"),
        ("no causal", "the causal mask is missing"),
        ("no padding", "the padding mask is missing"),
        ("queries", "hides queries instead of keys"),
        ("fill", "uniform over keys it may not see"),
        ("transposed causal", "the causal mask is transposed"),
    ],
)
def test_check_left_padded_attention_names_each_slip(slip, problem):
    report = checks.check_left_padded_attention(functools.partial(left_padded, slip=slip))
    problems = failed(report)
    # near-one-hot weights (scores near 1e3) can make two slips give the same output
    named_right = [problem in p for p in problems.values()]
    assert len(named_right) >= 3 and sum(named_right) >= len(named_right) - 1


def test_check_left_padded_attention_catches_nan_rows():
    def nan_rows(Q, K, V, lengths):
        n = Q.shape[-2]
        real = np.arange(n) >= n - np.asarray(lengths)[:, None]
        mask = np.tril(np.ones((n, n), dtype=bool)) & real[:, None, :]
        S = np.where(mask, Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]), -np.inf)
        E = np.exp(S - S.max(axis=-1, keepdims=True))
        return E / E.sum(axis=-1, keepdims=True) @ V

    with np.errstate(all="ignore"):
        report = checks.check_left_padded_attention(nan_rows)
    problems = failed(report)
    assert "no padding (lengths = n)" not in problems
    assert problems and all(
        "a padding query, which may see no key, gets nan" in p for p in problems.values()
    )
    assert "weights 0 and output 0" in flat(report)
