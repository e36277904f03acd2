"""Tests of chapter 8's self-checks: right answers pass, typical wrong answers are named."""

from __future__ import annotations

import numpy as np
import pytest

import helpers
from helpers.checks import (
    check_k_composition_score,
    check_prefix_matching_score,
    check_previous_token_score,
)
from tests.report_text import assert_all_passed, assert_refused, failed

# ---------------------------------------------------------------------------
# Answers as a reader would write them; keywords reproduce the usual slips
# ---------------------------------------------------------------------------


def reader_prev(weights, *, slip=None):
    A = np.asarray(weights)
    n = A.shape[-1]
    if slip == "main diagonal":
        return np.diagonal(A, axis1=-2, axis2=-1).mean(axis=(1, 3))
    total = sum(A[..., i, i - 1] for i in range(1, n))  # (L, B, H)
    if slip == "divide by n":
        return total.mean(axis=1) / n
    if slip == "sum":
        return total.mean(axis=1)
    return total.mean(axis=1) / (n - 1)


def reader_prefix(weights, tokens, *, slip=None):
    A = np.asarray(weights)
    L, B, H, n, _ = A.shape
    if slip == "per sequence":  # each sequence's score, then their mean
        return np.mean([reader_prefix(A[:, b : b + 1], tokens[b : b + 1]) for b in range(B)], 0)
    total, count = np.zeros((L, H)), 0
    for b in range(B):
        for i in range(n):
            earlier = [j for j in range(i) if tokens[b, j] == tokens[b, i]]
            if not earlier:
                if slip == "every query":
                    count += 1
                continue
            if slip == "most recent":
                earlier = earlier[-1:]
            shift = 0 if slip == "the copy itself" else 1
            total += sum(A[:, b, :, i, j + shift] for j in earlier)
            count += 1
    return total / count


def reader_kcomp(W_QK, W_OV, *, slip=None):
    if slip == "no transpose":
        M = W_QK @ W_OV
    elif slip == "Q-composition":
        M = W_OV @ W_QK
    elif slip == "quoted formula":  # ||W_QK^T W_OV||_F, Elhage et al.'s Q-composition form
        M = W_QK.T @ W_OV
    else:
        M = W_QK @ W_OV.T
    if slip == "not normalised":
        return np.linalg.norm(M)
    if slip == "spectral":
        return np.linalg.norm(M, 2) / (np.linalg.norm(W_QK, 2) * np.linalg.norm(W_OV, 2))
    return np.linalg.norm(M) / (np.linalg.norm(W_QK) * np.linalg.norm(W_OV))


def test_right_answers_pass():
    assert_all_passed(check_previous_token_score(reader_prev))
    assert_all_passed(check_prefix_matching_score(reader_prefix))
    assert_all_passed(check_k_composition_score(reader_kcomp))


@pytest.mark.parametrize(
    ("slip", "words"),
    [
        ("main diagonal", "own position"),
        ("divide by n", "query 0"),
        ("sum", "summed over the queries"),
    ],
)
def test_previous_token_slips_are_named(slip, words):
    report = check_previous_token_score(lambda w: reader_prev(w, slip=slip))
    problems = failed(report)
    assert problems and all(words in p for p in problems.values()), problems


@pytest.mark.parametrize(
    ("slip", "words"),
    [
        ("the copy itself", "earlier occurrences themselves"),
        ("every query", "averaged over every query"),
        ("most recent", "most recent earlier copy"),
        ("per sequence", "averaged sequence by sequence, then over the batch"),
    ],
)
def test_prefix_matching_slips_are_named(slip, words):
    report = check_prefix_matching_score(lambda w, t: reader_prefix(w, t, slip=slip))
    problems = failed(report)
    assert problems and any(words in p for p in problems.values()), problems


@pytest.mark.parametrize(
    ("slip", "words"),
    [
        ("no transpose", "has no transpose"),
        ("Q-composition", "Q-composition"),
        ("quoted formula", "the transpose is on W_QK instead of W_OV"),
        ("not normalised", "not normalised"),
        ("spectral", "spectral norms"),
    ],
)
def test_k_composition_slips_are_named(slip, words):
    report = check_k_composition_score(lambda a, b: reader_kcomp(a, b, slip=slip))
    problems = failed(report)
    assert problems and all(words in p for p in problems.values()), problems


def test_the_prefix_batch_has_unequal_counts_per_sequence():
    # The batch case has 3 and 1 queries with an earlier copy, so a mean per sequence
    # differs from the mean over the batch's queries (equal counts would hide the slip).
    report = check_prefix_matching_score(lambda w, t: reader_prefix(w, t, slip="per sequence"))
    assert list(failed(report)) == ["random causal weights, two layers, two sequences"]


def test_the_quoted_formula_is_named_without_printing_the_right_one():
    report = check_k_composition_score(lambda a, b: reader_kcomp(a, b, slip="quoted formula"))
    text = " ".join(repr(report).split()) + " ".join(
        repr(
            check_k_composition_score(
                lambda a, b: reader_kcomp(a, b, slip="quoted formula"), hint=True
            )
        ).split()
    )
    assert "Elhage et al." in text and "Q-composition" in text
    assert "W_OV.T" not in text and "W_OVᵀ" not in text and "W_OV^T" not in text


@pytest.mark.parametrize(
    ("check", "fn", "dotted"),
    [
        (
            check_previous_token_score,
            helpers.previous_token_score,
            "helpers.circuits.previous_token_score",
        ),
        (
            check_prefix_matching_score,
            lambda w, t: helpers.prefix_matching_score(w, t),
            "helpers.circuits.prefix_matching_score",
        ),
        (  # 8.3 in one line: the example
            check_k_composition_score,
            lambda a, b: helpers.composition_score(a, b.T),
            "helpers.circuits.composition_score",
        ),
    ],
)
def test_the_books_scores_are_refused(check, fn, dotted):
    assert_refused(check(fn), dotted)


def test_starting_cells_are_not_attempted():
    def todo(*args):
        raise NotImplementedError

    for check in (check_previous_token_score, check_prefix_matching_score):
        assert check(todo).status == "not attempted"
    assert check_k_composition_score(todo).status == "not attempted"
