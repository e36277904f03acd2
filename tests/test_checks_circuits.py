"""Tests of chapter 8's self-checks: right answers pass, typical wrong answers are named."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.checks import (
    check_k_composition_score,
    check_prefix_matching_score,
    check_previous_token_score,
)
from tests.report_text import assert_all_passed, failed

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
    ],
)
def test_prefix_matching_slips_are_named(slip, words):
    report = check_prefix_matching_score(lambda w, t: reader_prefix(w, t, slip=slip))
    problems = failed(report)
    assert problems and any(words in p for p in problems.values()), problems


@pytest.mark.parametrize(
    ("slip", "words"),
    [
        ("no transpose", "without the transpose"),
        ("Q-composition", "Q-composition"),
        ("not normalised", "not normalised"),
        ("spectral", "spectral norms"),
    ],
)
def test_k_composition_slips_are_named(slip, words):
    report = check_k_composition_score(lambda a, b: reader_kcomp(a, b, slip=slip))
    problems = failed(report)
    assert problems and all(words in p for p in problems.values()), problems


def test_starting_cells_are_not_attempted():
    def todo(*args):
        raise NotImplementedError

    for check in (check_previous_token_score, check_prefix_matching_score):
        assert check(todo).status == "not attempted"
    assert check_k_composition_score(todo).status == "not attempted"
