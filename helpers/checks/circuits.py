"""Self-checks of chapter 8 (induction heads), built on :mod:`helpers.checks.core`.

Each check runs the reader's function on small hand-made inputs, compares with the
reference in :mod:`helpers.circuits`, and recognises the usual slips by recomputing the
answer with each slip and naming the one that reproduces the reader's numbers: a
previous-token score that counts query 0 or reads the main diagonal, a prefix-matching
score that looks at the earlier copy itself instead of the token after it or averages over
every query, a composition score without the transpose or without its normalisation.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from helpers.checks.core import Case, CheckReport, Finding, run_checks

# the slip-recognising helpers chapter 7's checks already have
from helpers.checks.models import _recognise, _require_callable
from helpers.circuits import composition_score, prefix_matching_score, previous_token_score

__all__ = [
    "check_k_composition_score",
    "check_prefix_matching_score",
    "check_previous_token_score",
]


def _causal_rows(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Random causal attention weights of ``shape`` (..., n, n): rows sum to 1."""
    n = shape[-1]
    raw = rng.random(shape) * np.tri(n)
    return raw / raw.sum(axis=-1, keepdims=True)


def _patterns() -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(name, weights (L, B, H, n, n), tokens (B, n)) cases shared by the two score checks."""
    rng = np.random.default_rng(8)
    n = 6
    prev = np.eye(n, k=-1)
    prev[0, 0] = 1.0
    tokens_a = np.array([[9, 1, 2, 3, 1, 2]])
    induct = np.zeros((n, n))
    induct[np.arange(n), [0, 0, 0, 0, 2, 3]] = 1.0  # token after the earlier copy
    uniform = np.tri(n) / np.arange(1, n + 1)[:, None]
    one = np.stack([prev, induct, uniform])[None, None]  # (1, 1, 3, n, n)
    tokens_b = np.array([[7, 1, 5, 1, 6, 1, 5], [7, 2, 2, 3, 4, 3, 2]])
    rand = _causal_rows(rng, (2, 2, 2, 7, 7))
    return [
        ("previous-token, induction and uniform heads", one, tokens_a),
        ("random causal weights, two layers, two sequences", rand, tokens_b),
    ]


# ---------------------------------------------------------------------------
# The previous-token score
# ---------------------------------------------------------------------------


def check_previous_token_score(fn: Callable[..., object]) -> CheckReport:
    """Check ``fn(weights) -> (num_layers, num_heads)``: the mean of ``A[i, i - 1]``, ``i >= 1``.

    ``weights`` has shape ``(num_layers, batch, num_heads, n, n)``; the mean runs over the
    batch and the queries ``1, ..., n - 1``. Recognised slips: reading the main diagonal
    (the query's own token), counting query 0 (dividing by ``n``), summing instead of
    averaging over the queries.
    """
    _require_callable(fn, "check_previous_token_score")

    @functools.wraps(fn)
    def call(weights: np.ndarray) -> object:
        return fn(weights)

    cases = [
        Case(
            name,
            {"weights": A},
            previous_token_score(A),
            hint="take A[..., i, i - 1] for i = 1, ..., n - 1 (np.diagonal with offset=-1 "
            "over the last two axes), then average over the batch axis and those queries",
        )
        for name, A, _ in _patterns()
    ]

    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        A = case.inputs["weights"]
        n = A.shape[-1]
        sub = np.diagonal(A, offset=-1, axis1=-2, axis2=-1)  # (L, B, H, n - 1)
        main = np.diagonal(A, axis1=-2, axis2=-1)
        slips = [
            (
                main.mean(axis=(1, 3)),
                Finding(
                    "this is the weight on the query's own position (the main diagonal)",
                    "the previous token of query i is key i - 1: offset -1",
                ),
            ),
            (
                sub.sum(axis=3).mean(axis=1) / n,
                Finding(
                    "divided by n: query 0 has no previous token and must not be counted",
                    "average over the n - 1 queries 1, ..., n - 1",
                ),
            ),
            (
                sub.sum(axis=3).mean(axis=1),
                Finding(
                    "summed over the queries instead of averaged",
                    "divide by the number of queries, n - 1",
                ),
            ),
        ]
        return _recognise(got, slips)

    return run_checks(call, cases, check_name="check_previous_token_score", diagnose=diagnose)


# ---------------------------------------------------------------------------
# The prefix-matching score
# ---------------------------------------------------------------------------


def _targets(tokens: np.ndarray, shift: int, include_self: bool = False) -> np.ndarray:
    """(B, n, n) bool: True at (i, j + shift) for each j < i (or <= i) with t_j = t_i."""
    n = tokens.shape[1]
    same = (tokens[:, :, None] == tokens[:, None, :]) & np.tri(
        n, k=0 if include_self else -1, dtype=bool
    )
    out = np.zeros_like(same)
    if shift:
        out[:, :, shift:] = same[:, :, :-shift]
    else:
        out = same
    return out


def _score(A: np.ndarray, target: np.ndarray, has: np.ndarray) -> np.ndarray:
    on = (A * target[None, :, None]).sum(axis=-1)  # (L, B, H, n)
    return (on * has[None, :, None]).sum(axis=(1, 3)) / has.sum()


def check_prefix_matching_score(fn: Callable[..., object]) -> CheckReport:
    """Check ``fn(weights, tokens) -> (num_layers, num_heads)``: Olsson et al.'s score.

    For each query ``i`` whose token occurred before (``t_j = t_i`` for some ``j < i``),
    the weight on the positions ``j + 1`` after those occurrences, summed over them, then
    averaged over all such queries of the batch. Recognised slips: the weight on the
    earlier occurrences themselves (``j`` instead of ``j + 1``), an average over every
    query instead of those with an earlier copy, only the most recent earlier copy.
    """
    _require_callable(fn, "check_prefix_matching_score")

    @functools.wraps(fn)
    def call(weights: np.ndarray, tokens: np.ndarray) -> object:
        return fn(weights, tokens)

    cases = [
        Case(
            name,
            {"weights": A, "tokens": t},
            prefix_matching_score(A, t),
            hint="for query i, find the j < i with tokens[j] == tokens[i]; add up the "
            "weights A[i, j + 1]; average over the queries that have such a j",
        )
        for name, A, t in _patterns()
    ]

    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        A, t = case.inputs["weights"], case.inputs["tokens"]
        target = _targets(t, 1)
        has = target.any(axis=-1)
        same = _targets(t, 0)
        # only the most recent earlier copy of each query's token
        last = np.zeros_like(target)
        for b, i in zip(*np.nonzero(has), strict=True):
            j = np.flatnonzero(same[b, i]).max()
            last[b, i, j + 1] = True
        slips = [
            (
                _score(A, same, has),
                Finding(
                    "this is the weight on the earlier occurrences themselves: an induction "
                    "head attends to the token *after* the earlier copy",
                    "look at position j + 1, not j",
                ),
            ),
            (
                _score(A, target, np.ones_like(has)),
                Finding(
                    "averaged over every query, including those whose token never occurred "
                    "before (they cannot score)",
                    "divide by the number of queries that have an earlier copy of their token",
                ),
            ),
            (
                _score(A, last, has),
                Finding(
                    "only the most recent earlier copy counts here: sum the weights after "
                    "every earlier copy",
                    "a token can occur several times before the query; add A[i, j + 1] for "
                    "each of them",
                ),
            ),
        ]
        return _recognise(got, slips)

    return run_checks(call, cases, check_name="check_prefix_matching_score", diagnose=diagnose)


# ---------------------------------------------------------------------------
# The K-composition score
# ---------------------------------------------------------------------------


def check_k_composition_score(fn: Callable[..., object]) -> CheckReport:
    """Check ``fn(W_QK, W_OV) -> float``: ``||W_QK W_OVᵀ||_F / (||W_QK||_F ||W_OV||_F)``.

    ``W_QK = W_Q W_Kᵀ`` of the later head and ``W_OV = W_V W_O`` of the earlier one, both
    ``(d_model, d_model)`` in the row-vector convention. Recognised slips: no transpose
    (``W_QK W_OV``), the other order (``W_OV W_QK``, Q-composition), no normalisation,
    spectral norms instead of Frobenius norms.
    """
    _require_callable(fn, "check_k_composition_score")

    @functools.wraps(fn)
    def call(W_QK: np.ndarray, W_OV: np.ndarray) -> object:
        return fn(W_QK, W_OV)

    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((2, 6, 2))
    c, e = rng.standard_normal((2, 6, 2))
    raw = [
        ("low-rank heads, d_model = 6", a @ b.T, c @ e.T),
        (
            "non-symmetric 3 x 3",
            np.array([[1.0, 2, 0], [0, 1, 0], [0, 0, 0]]),
            np.triu(np.ones((3, 3))),
        ),
        ("large entries", 1e4 * (a @ b.T), 1e-3 * (c @ e.T)),
    ]
    cases = [
        Case(
            name,
            {"W_QK": A, "W_OV": B},
            np.array(composition_score(A, B.T)),
            hint="Frobenius norm (np.linalg.norm of a matrix) of W_QK @ W_OV.T, divided by "
            "the product of the Frobenius norms of W_QK and W_OV",
        )
        for name, A, B in raw
    ]

    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        A, B = case.inputs["W_QK"], case.inputs["W_OV"]
        norms = np.linalg.norm(A) * np.linalg.norm(B)
        slips = [
            (
                np.array(np.linalg.norm(A @ B) / norms),
                Finding(
                    "W_QK @ W_OV without the transpose: in the row-vector convention a key "
                    "x W_OV enters the score as x_i W_QK (x_j W_OV)ᵀ",
                    "use W_QK @ W_OV.T",
                ),
            ),
            (
                np.array(np.linalg.norm(B @ A) / norms),
                Finding(
                    "W_OV @ W_QK is Q-composition (a query that reads the earlier head)",
                    "K-composition multiplies W_QK by W_OV.T on the right",
                ),
            ),
            (
                np.array(np.linalg.norm(A @ B.T)),
                Finding(
                    "not normalised: the score must not change when a head is rescaled",
                    "divide by ||W_QK||_F ||W_OV||_F",
                ),
            ),
            (
                np.array(
                    np.linalg.norm(A @ B.T, 2) / (np.linalg.norm(A, 2) * np.linalg.norm(B, 2))
                ),
                Finding(
                    "spectral norms (the largest singular value): the score uses Frobenius norms",
                    "np.linalg.norm(M) with no second argument is the Frobenius norm",
                ),
            ),
        ]
        return _recognise(got, slips)

    return run_checks(call, cases, check_name="check_k_composition_score", diagnose=diagnose)
