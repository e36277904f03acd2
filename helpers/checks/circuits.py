"""Self-checks of chapter 8 (induction heads), built on :mod:`helpers.checks.core`.

Each check runs the reader's function on small hand-made inputs and recognises the usual
slips by recomputing the answer with each slip and naming the one that reproduces the
reader's numbers: a previous-token score that counts query 0 or reads the main diagonal,
a prefix-matching score that looks at the earlier copy itself instead of the token after
it, averages over every query or sequence by sequence, a composition score with its
transpose missing or misplaced, or without its normalisation.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from helpers.checks.core import Case, CheckReport, Finding, run_checks, section

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
    # 3 queries with an earlier copy in the first sequence, 1 in the second: a mean per
    # sequence, then over the batch, differs from the mean over the batch's queries
    tokens_b = np.array([[7, 1, 5, 1, 6, 1, 5], [7, 2, 3, 2, 4, 5, 6]])
    rand = _causal_rows(rng, (2, 2, 2, 7, 7))
    return [
        ("previous-token, induction and uniform heads", one, tokens_a),
        ("random causal weights, two layers, two sequences", rand, tokens_b),
    ]


_SCORES = section(8, "Looking inside: two scores per head")


# ---------------------------------------------------------------------------
# The previous-token score
# ---------------------------------------------------------------------------


def check_previous_token_score(fn: Callable[..., object], *, hint: bool = False) -> CheckReport:
    """Check ``fn(weights) -> (num_layers, num_heads)``: each head's previous-token score.

    ``weights`` has shape ``(num_layers, batch, num_heads, n, n)``; the score of a head
    is the mean weight its queries put on the previous position, over the batch and the
    queries that have one. ``hint=True`` adds a fuller hint to a failing report.

    Recognised slips: reading the main diagonal (the query's own token), counting query 0
    (dividing by ``n``), summing instead of averaging over the queries.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_previous_token_score
    >>> def first_key(weights):  # the weight on position 0, not on the previous one
    ...     return weights[..., 0].mean(axis=(1, 3))
    >>> check_previous_token_score(first_key).status
    'failed'
    """
    _require_callable(fn, "check_previous_token_score")

    @functools.wraps(fn)
    def call(weights: np.ndarray) -> object:
        return fn(weights)

    hints = [
        "the first head always attends to the previous token: its score is 1 (query 0, "
        "which has no previous token, does not count); the induction head scores 1/5",
        "one score per layer and head, over both sequences and every query that has a "
        "previous token",
    ]
    cases = [
        Case(name, {"weights": A}, previous_token_score(A), hint=text)
        for (name, A, _), text in zip(_patterns(), hints, strict=True)
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
                    "the previous token of a query sits one position before it",
                ),
            ),
            (
                sub.sum(axis=3).mean(axis=1) / n,
                Finding(
                    "divided by n: query 0 has no previous token and must not be counted",
                    "a head that always attends to the previous token must score exactly 1",
                ),
            ),
            (
                sub.sum(axis=3).mean(axis=1),
                Finding(
                    "summed over the queries instead of averaged",
                    "a head that always attends to the previous token must score exactly 1",
                ),
            ),
        ]
        return _recognise(got, slips)

    return run_checks(
        call,
        cases,
        check_name="check_previous_token_score",
        diagnose=diagnose,
        see=_SCORES,
        more="a head's score is a mean of one weight per query: which weight of query i, "
        "and which queries and sequences take part? Work the first case out by hand: the "
        "previous-token head must come out at 1 and the uniform head below it",
        hint=hint,
    )


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


def _score_per_sequence(A: np.ndarray, target: np.ndarray, has: np.ndarray) -> np.ndarray:
    """The slip: each sequence's mean over its queries, then the mean over the batch."""
    on = (A * target[None, :, None]).sum(axis=-1)  # (L, B, H, n)
    per = (on * has[None, :, None]).sum(axis=3) / np.maximum(has.sum(axis=1), 1)[:, None]
    return per[:, has.any(axis=1)].mean(axis=1)  # sequences without such a query dropped


def check_prefix_matching_score(fn: Callable[..., object], *, hint: bool = False) -> CheckReport:
    """Check ``fn(weights, tokens) -> (num_layers, num_heads)``: Olsson et al.'s score.

    ``weights`` has shape ``(num_layers, batch, num_heads, n, n)`` and ``tokens``
    ``(batch, n)``. The score of a head looks at the queries whose token occurred earlier
    in their sequence and measures how much weight they put on the positions just after
    those earlier occurrences (what an induction head attends to), every such query of the
    batch counting once. ``hint=True`` adds a fuller hint to a failing report.

    Recognised slips: the weight on the earlier occurrences themselves instead of the
    positions after them, an average over every query instead of those with an earlier
    copy, a mean per sequence and then over the batch (the sequences have different
    numbers of such queries), only the most recent earlier copy.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_prefix_matching_score
    >>> def last_key(weights, tokens):  # the weight on the query's own position
    ...     return np.diagonal(weights, axis1=-2, axis2=-1).mean(axis=(1, 3))
    >>> check_prefix_matching_score(last_key).status
    'failed'
    """
    _require_callable(fn, "check_prefix_matching_score")

    @functools.wraps(fn)
    def call(weights: np.ndarray, tokens: np.ndarray) -> object:
        return fn(weights, tokens)

    hints = [
        "only queries 4 and 5 have an earlier copy of their token (tokens 1 and 2, at "
        "positions 1 and 2): the head that attends just after that copy scores 1, the "
        "previous-token head 0",
        "the sequences have 3 and 1 queries with an earlier copy of their token (one of "
        "them with two earlier copies); each of these 4 queries counts once",
    ]
    cases = [
        Case(name, {"weights": A, "tokens": t}, prefix_matching_score(A, t), hint=text)
        for (name, A, t), text in zip(_patterns(), hints, strict=True)
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
                    "check the first case by hand: its induction head must score 1",
                ),
            ),
            (
                _score(A, target, np.ones_like(has)),
                Finding(
                    "averaged over every query, including those whose token never occurred "
                    "before (they cannot score)",
                    "a head that always attends just after the earlier copy must score 1",
                ),
            ),
            (
                _score_per_sequence(A, target, has),
                Finding(
                    "averaged sequence by sequence, then over the batch: a sequence with few "
                    "queries that have an earlier copy weighs as much as one with many",
                    "every query with an earlier copy counts once, whichever sequence it is in",
                ),
            ),
            (
                _score(A, last, has),
                Finding(
                    "only the most recent earlier copy counts here: sum the weights after "
                    "every earlier copy",
                    "a token can occur several times before the query, and each occurrence "
                    "is a place an induction head may attend after",
                ),
            ),
        ]
        return _recognise(got, slips)

    return run_checks(
        call,
        cases,
        check_name="check_prefix_matching_score",
        diagnose=diagnose,
        see=_SCORES,
        more="for each query, list the earlier positions that hold its token; an induction "
        "head would attend to the position just after each of them. Which queries take "
        "part in the mean, and which of their weights count? Work the first case out by "
        "hand, head by head",
        hint=hint,
    )


# ---------------------------------------------------------------------------
# The K-composition score
# ---------------------------------------------------------------------------


def check_k_composition_score(fn: Callable[..., object], *, hint: bool = False) -> CheckReport:
    """Check ``fn(W_QK, W_OV) -> float``: the K-composition score of two heads.

    ``W_QK = W_Q W_Kᵀ`` of the later head and ``W_OV = W_V W_O`` of the earlier one, both
    ``(d_model, d_model)`` in the book's row-vector convention; the score is a Frobenius
    norm of their product, normalised so that it lies in ``[0, 1]`` and does not change
    when either head is rescaled. ``hint=True`` adds a fuller hint to a failing report.

    Recognised slips: no transpose, the transpose on ``W_QK`` instead of ``W_OV`` (the
    form Elhage et al. give for Q-composition in their column-vector convention, where
    ``W_OV`` is the transpose of the book's), the other order (Q-composition), no
    normalisation, spectral norms instead of Frobenius norms.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_k_composition_score
    >>> def cosine(W_QK, W_OV):  # how alike the two matrices are: another quantity
    ...     return np.sum(W_QK * W_OV) / (np.linalg.norm(W_QK) * np.linalg.norm(W_OV))
    >>> check_k_composition_score(cosine).status
    'failed'
    """
    _require_callable(fn, "check_k_composition_score")

    @functools.wraps(fn)
    def call(W_QK: np.ndarray, W_OV: np.ndarray) -> object:
        return fn(W_QK, W_OV)

    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((2, 6, 2))
    c, e = rng.standard_normal((2, 6, 2))
    raw = [
        (
            "low-rank heads, d_model = 6",
            a @ b.T,
            c @ e.T,
            "a number in [0, 1]: heads of rank 2 in 6 dimensions, neither symmetric",
        ),
        (
            "non-symmetric 3 x 3",
            np.array([[1.0, 2, 0], [0, 1, 0], [0, 0, 0]]),
            np.triu(np.ones((3, 3))),
            "with matrices this small and this far from symmetric, each place a transpose "
            "could go gives a different number: only one is the K-composition",
        ),
        (
            "large entries",
            1e4 * (a @ b.T),
            1e-3 * (c @ e.T),
            "the first case's heads multiplied by 1e4 and 1e-3: the score must not change",
        ),
    ]
    cases = [
        Case(name, {"W_QK": A, "W_OV": B}, np.array(composition_score(A, B.T)), hint=text)
        for name, A, B, text in raw
    ]

    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        A, B = case.inputs["W_QK"], case.inputs["W_OV"]
        norms = np.linalg.norm(A) * np.linalg.norm(B)
        where = (
            "the earlier head's output reaches the later head's score through its keys: "
            "follow it there, in the row-vector convention"
        )
        slips = [
            (
                np.array(np.linalg.norm(A @ B) / norms),
                Finding(
                    "the product of W_QK and W_OV has no transpose: the earlier head's "
                    "output enters the later head's score on the side of the key, as a row "
                    "vector",
                    where,
                ),
            ),
            (
                np.array(np.linalg.norm(A.T @ B) / norms),
                Finding(
                    "the transpose is on W_QK instead of W_OV: that form is Elhage et al.'s "
                    "Q-composition in their column-vector convention, where W_OV is the "
                    "transpose of this book's; with the book's W_OV it measures neither "
                    "composition",
                    where,
                ),
            ),
            (
                np.array(np.linalg.norm(B @ A) / norms),
                Finding(
                    "W_OV @ W_QK is Q-composition (a query that reads the earlier head)",
                    where,
                ),
            ),
            (
                np.array(np.linalg.norm(A @ B.T)),
                Finding(
                    "not normalised: the score must not change when a head is rescaled",
                    "compare the third case with the first: the same heads, rescaled",
                ),
            ),
            (
                np.array(
                    np.linalg.norm(A @ B.T, 2) / (np.linalg.norm(A, 2) * np.linalg.norm(B, 2))
                ),
                Finding(
                    "spectral norms (the largest singular value): the score uses Frobenius norms",
                    "the Frobenius norm is the square root of the sum of the squared entries",
                ),
            ),
        ]
        return _recognise(got, slips)

    return run_checks(
        call,
        cases,
        check_name="check_k_composition_score",
        diagnose=diagnose,
        see=_KCOMP,
        more="K-composition asks how much of what the earlier head writes can be read by "
        "the later head's keys. A key that the earlier head wrote is x_j W_OV; put it where "
        "a key goes in the later head's score, in the row-vector convention, and the matrix "
        "between x_i and x_j is the one to measure. Then divide by what makes the score "
        "blind to rescaling either head",
        hint=hint,
    )


_KCOMP = section(8, "K-composition: the induction head's keys read the previous-token head")
