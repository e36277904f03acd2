"""Self-checks of chapter 9 (what can be proved about attention), on :mod:`helpers.checks.core`.

``check_self_attention_jacobian`` takes the reader's Jacobian of self-attention,
``check_min_head_width`` the smallest head width that expresses a pattern, and
``check_truncated_attention`` attention kept to its k largest weights. When an answer
is wrong, the diagnosis recomputes it with each usual slip and names the one that
reproduces the reader's numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from helpers.checks.core import Case, CheckReport, Finding, section
from helpers.checks.multihead import _append, _run, _Spec
from helpers.i18n import msg
from helpers.softmax import softmax
from helpers.theory import min_head_width, self_attention_jacobian, truncated_attention

__all__ = ["check_min_head_width", "check_self_attention_jacobian", "check_truncated_attention"]


# ---------------------------------------------------------------------------
# check_self_attention_jacobian
# ---------------------------------------------------------------------------


def _jacobian_variant(X, W_Q, W_K, W_V, slip: str) -> np.ndarray:
    """The Jacobian as computed with one usual slip, in the (n d_v, n d) layout."""
    n, d = X.shape
    d_v = W_V.shape[1]
    scale = 1.0 if slip == "no scale" else 1.0 / math.sqrt(W_Q.shape[1])
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    P = softmax(scale * Q @ K.T, axis=-1)
    out = P @ V
    if slip == "no -o_i":  # the softmax's Jacobian without its rank-one term
        C = P[:, :, None] * V[None]
    else:
        C = P[:, :, None] * (V[None] - out[:, None])
    J = P[:, None, :, None] * W_V.T[None, :, None, :]
    if slip != "weights constant":
        if slip != "no key path":
            J = J + scale * np.einsum("ijc,ia->icja", C, Q @ W_K.T)
        if slip != "no query path":
            J[np.arange(n), :, np.arange(n), :] += scale * np.einsum("imc,ma->ica", C, K @ W_Q.T)
    if slip == "column-major":
        return J.transpose(1, 0, 3, 2).reshape(n * d_v, n * d)
    J = J.reshape(n * d_v, n * d)
    return J.T if slip == "transposed" else J


_JACOBIAN = section(9, "The Jacobian of self-attention")

_JACOBIAN_SLIPS = {
    "weights constant": (
        "only the path through the values is there: the attention weights were treated as "
        "constants, but they depend on X through the queries and the keys",
        "the weights are a softmax of scores that X makes: differentiate them too",
    ),
    "no -o_i": (
        "the score paths use v_m where the softmax's derivative gives v_m - o_i: the term of "
        "the softmax's Jacobian that keeps the weights summing to 1 is missing",
        "a change of one score moves weight from every other key to that one: chapter 1, "
        '"The Jacobian", has both terms of the softmax\'s derivative',
    ),
    "no query path": (
        "the path through the query is missing: x_i also enters its own scores through its "
        "query, which adds a term to the diagonal blocks (j = i)",
        "the blocks with j = i have one more path than the others",
    ),
    "no key path": (
        "the path through the keys is missing: x_j enters every score s_ij through its key",
        "every block (i, j) has a path through the key of token j",
    ),
    "no scale": (
        "this is the Jacobian of attention without the 1/sqrt(d_k) scaling",
        "the scaling of the scores enters the weights and both score paths",
    ),
    "column-major": (
        "the entries are right but laid out in column-major order (output feature first, "
        "then token)",
        "rows are ordered by output token, then feature; columns by input token, then "
        "feature (row-major, as the statement's index i d_v + c says)",
    ),
    "transposed": (
        "this is the transpose: rows must be the outputs o_ic, columns the inputs x_ja",
        "the shape is (n d_v, n d): one row per output entry",
    ),
}


def _jacobian_diagnose(case: Case, got: np.ndarray) -> list[Finding]:
    X, W_Q, W_K, W_V = (case.inputs[k] for k in ("X", "W_Q", "W_K", "W_V"))
    rtol, atol = case.tolerances()
    for slip, (problem, hint) in _JACOBIAN_SLIPS.items():
        candidate = _jacobian_variant(X, W_Q, W_K, W_V, slip)
        if candidate.shape == got.shape and np.allclose(got, candidate, rtol=rtol, atol=atol):
            return [Finding(problem, hint)]
    return []


def check_self_attention_jacobian(fn: Callable[..., object], *, hint: bool = False) -> CheckReport:
    """Check the reader's Jacobian of single-head dot-product self-attention.

    Parameters
    ----------
    fn : callable
        ``fn(X, W_Q, W_K, W_V) -> J``: ``X`` of shape ``(n, d)``, ``W_Q`` and ``W_K`` of
        shape ``(d, d_k)``, ``W_V`` of shape ``(d, d_v)``; returns the Jacobian of
        ``softmax((X W_Q)(X W_K)^T / sqrt(d_k)) X W_V`` with respect to ``X``, of shape
        ``(n * d_v, n * d)``, entry ``[i * d_v + c, j * d + a] = dO[i, c] / dX[j, a]``.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every case passed. The report recognises weights treated as
        constants, the softmax's derivative without its ``- o_i`` term, a missing query
        or key path, a missing scale, the column-major layout and the transpose.

    Notes
    -----
    Cases: one token; three tokens with ``d = d_k = d_v``; every size different; large
    scores (nearly one-hot weights).

    Examples
    --------
    The four-index array, before it is laid out as a matrix, is caught by its shape:

    >>> import numpy as np
    >>> from helpers.checks import check_self_attention_jacobian
    >>> def four_axes(X, W_Q, W_K, W_V):  # (n, d_v, n, d): not laid out as a matrix
    ...     return np.zeros((len(X), W_V.shape[1], *X.shape))
    >>> report = check_self_attention_jacobian(four_axes)
    >>> print(report.failures[0].problem)
    expected shape (6, 6), got shape (3, 2, 3, 2)
    """
    rng = np.random.default_rng(9)
    layouts = (
        (
            "one token",
            1,
            3,
            2,
            2,
            1.0,
            "with one token its weight is 1 whatever the scores: what can W_Q and W_K change here?",
        ),
        (
            "three tokens",
            3,
            2,
            2,
            2,
            1.0,
            "d = d_k = d_v = 2: entry [i d_v + c, j d + a] is the derivative of output "
            "(i, c) with respect to input (j, a)",
        ),
        (
            "every size different",
            4,
            3,
            2,
            5,
            1.0,
            "n = 4, d = 3, d_k = 2, d_v = 5: a product over the wrong axis, or two sizes "
            "swapped, shows here",
        ),
        (
            "large scores",
            3,
            2,
            2,
            3,
            4.0,
            "nearly one-hot weights: the score paths nearly vanish, and each block is close "
            "to the value path alone",
        ),
    )
    specs = []
    for name, n, d, d_k, d_v, size, text in layouts:
        inputs = {
            "X": size * rng.standard_normal((n, d)),
            "W_Q": rng.standard_normal((d, d_k)),
            "W_K": rng.standard_normal((d, d_k)),
            "W_V": rng.standard_normal((d, d_v)),
        }
        expected = self_attention_jacobian(*inputs.values())
        shown = msg(
            "X {value}, W_Q and W_K {value2}, W_V {value3}",
            value=(n, d),
            value2=(d, d_k),
            value3=(d, d_v),
        )
        case = Case(name, inputs, expected, text, rtol=1e-6, atol=1e-8)
        specs.append(_Spec(case, _append(), shown, _jacobian_diagnose))
    return _run(
        fn,
        "check_self_attention_jacobian",
        specs,
        see=_JACOBIAN,
        more="write o_i as a sum over the keys m of weight p_im times value v_m and "
        "differentiate it by the product rule: the values give one path; the weights depend "
        "on X through the scores, the score s_im through the key of token m and through the "
        "query of token i. The softmax's Jacobian (chapter 1) turns a change of the scores "
        "into a change of the weights. Then count, for a block (i, j), which of these paths "
        "exist",
        hint=hint,
    )


# ---------------------------------------------------------------------------
# check_min_head_width
# ---------------------------------------------------------------------------


def _rank(M: np.ndarray) -> int:
    s = np.linalg.svd(M, compute_uv=False)
    return 0 if s[0] == 0 else int(np.sum(s > 1e-9 * s[0]))


_WIDTH = section(9, "The low-rank bottleneck of a head")


def _width_diagnose(case: Case, got: np.ndarray) -> list[Finding]:
    L = case.inputs["log_weights"]
    value = np.asarray(got).item()
    as_given = (
        "this is the rank of the pattern as given (of the log-weights or of the weights "
        "themselves): other log-weights give exactly the same weights, and the width needed "
        "is the smallest rank among them",
        "which changes of the log-weights leave every weight unchanged?",
    )
    slips = (
        (_rank(L), *as_given),
        (_rank(softmax(L, axis=-1)), *as_given),
        (
            _rank(L - L.mean(axis=0, keepdims=True)),
            "each column (each key) was centred; the softmax ignores a constant per row "
            "(per query)",
            "which constant can be added without changing the weights: one per query, or "
            "one per key?",
        ),
    )
    for candidate, problem, hint in slips:
        if value == candidate:
            return [Finding(problem, hint)]
    return []


def check_min_head_width(fn: Callable[..., object], *, hint: bool = False) -> CheckReport:
    """Check the reader's smallest head width that expresses an attention pattern exactly.

    Parameters
    ----------
    fn : callable
        ``fn(log_weights) -> int``: ``log_weights`` of shape ``(n, m)``, the logarithms
        of a target pattern up to a constant per row; returns the smallest ``d_k`` such
        that ``softmax(Q K^T)`` equals the pattern for some ``Q`` ``(n, d_k)`` and ``K``
        ``(m, d_k)``.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every answer is exact. The report recognises the rank of the
        log-weights as given, the rank of the weights, and columns centred instead of
        rows.

    Notes
    -----
    Cases: each token reading itself (``3 I``, 4 tokens); a rank-one score matrix with
    a different constant added to each row; a pattern where key ``j`` gets a bonus
    ``u_j`` from every query; uniform weights; random log-weights of 5 queries and 6
    keys.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_min_head_width
    >>> def widest(L):  # the most any head could need: not the least this one needs
    ...     return min(L.shape)
    >>> report = check_min_head_width(widest)
    >>> report.status, report.failures[0].name
    ('failed', 'uniform weights')
    """
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal(4), rng.standard_normal(4)
    u = rng.standard_normal(4)
    patterns = (
        (
            "each token reads itself",
            3.0 * np.eye(4),
            "each token puts its largest weight on itself, the others sharing the rest "
            "equally: fewer than 4 dimensions suffice",
        ),
        (
            "rank one plus a constant per row",
            np.outer(a, b) + rng.standard_normal((4, 1)),
            "a rank-one score matrix, then a different constant added to each row: the "
            "weights are those of the rank-one scores",
        ),
        (
            "a bonus per key",
            np.outer(a, b) + u[None, :],
            "every query gives key j the same bonus u_j on top of rank-one scores: a "
            "bonus per key is not a constant per row",
        ),
        (
            "uniform weights",
            np.full((3, 3), -math.log(3)),
            "every weight is 1/3: a head whose queries and keys are all zero does it",
        ),
        (
            "5 queries and 6 keys",
            rng.standard_normal((5, 6)),
            "random log-weights of 5 queries and 6 keys",
        ),
    )
    specs = [
        _Spec(
            Case(name, {"log_weights": L}, np.array(min_head_width(L)), text, rtol=0, atol=0),
            _append(),
            msg("log_weights of shape {l_shape}", l_shape=L.shape),
            _width_diagnose,
            exact_integer=True,
        )
        for name, L, text in patterns
    ]
    return _run(
        fn,
        "check_min_head_width",
        specs,
        see=_WIDTH,
        more="two sets of log-weights give the same pattern exactly when they differ by a "
        "constant along each row (the softmax's shift invariance, chapter 1). A head of "
        "width d_k makes scores of rank at most d_k; so the width needed is the smallest "
        "rank over all the log-weights that give the pattern. Which choice of the constants "
        "makes that rank smallest?",
        hint=hint,
    )


# ---------------------------------------------------------------------------
# check_truncated_attention
# ---------------------------------------------------------------------------


def _truncated_variant(s: np.ndarray, V: np.ndarray, k: int, slip: str) -> np.ndarray:
    """Truncated attention as written with one usual slip."""
    m = s.shape[-1]
    kk = {"k - 1 keys": k - 1, "k + 1 keys": k + 1}.get(slip, k)
    if not 1 <= kk <= m:
        return np.full(s.shape[:-1] + V.shape[-1:], np.nan)
    if slip == "first k":
        order = np.broadcast_to(np.arange(kk), (*s.shape[:-1], kk))
    else:
        order = np.argsort(s if slip == "smallest" else -s, axis=-1, kind="stable")[..., :kk]
    keep = np.zeros(s.shape, dtype=bool)
    np.put_along_axis(keep, order, True, axis=-1)
    if slip == "not renormalised":
        return np.where(keep, softmax(s, axis=-1), 0.0) @ V
    if slip == "zeros":
        return softmax(np.where(keep, s, 0.0), axis=-1) @ V
    return softmax(np.where(keep, s, -np.inf), axis=-1) @ V


_TRUNCATION = section(9, "Truncating attention to the top-k keys")

_TRUNCATION_SLIPS = {
    "not renormalised": (
        "the kept weights are those of the full softmax, not renormalised: they sum to "
        "1 - (the discarded mass), so the output shrinks towards 0",
        "the weights of the kept keys must sum to 1",
    ),
    "zeros": (
        "the dropped scores were set to 0 instead of being dropped, so the dropped keys "
        "still get weight",
        "a dropped key must get weight exactly 0, whatever the kept scores are",
    ),
    "smallest": (
        "the k smallest scores were kept instead of the k largest",
        "truncation keeps the keys that matter most",
    ),
    "first k": (
        "the first k keys were kept, whatever their scores",
        "each row keeps its own k keys, chosen by their scores",
    ),
    "k - 1 keys": ("only k - 1 keys were kept", "keep exactly k keys in each row"),
    "k + 1 keys": ("k + 1 keys were kept", "keep exactly k keys in each row"),
}


def _truncation_diagnose(k: int):
    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        s, V = case.inputs["scores"], case.inputs["V"]
        rtol, atol = case.tolerances()
        for slip, (problem, hint) in _TRUNCATION_SLIPS.items():
            with np.errstate(all="ignore"):
                candidate = _truncated_variant(s, V, k, slip)
            if candidate.shape == got.shape and np.allclose(got, candidate, rtol=rtol, atol=atol):
                return [Finding(problem, hint)]
        return []

    return diagnose


def check_truncated_attention(fn: Callable[..., object], *, hint: bool = False) -> CheckReport:
    """Check the reader's attention truncated to the k largest weights of each row.

    Parameters
    ----------
    fn : callable
        ``fn(scores, V, k) -> O``: ``scores`` of shape ``(n, m)``, ``V`` of shape
        ``(m, d_v)``, ``k`` a Python int in ``[1, m]``; returns the ``(n, d_v)`` output
        of the softmax over each row's ``k`` largest scores (the others dropped) times
        the values.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every case passed. The report recognises weights that are not
        renormalised, dropped scores that still get weight, the k smallest or the first
        k scores kept, and ``k - 1`` or ``k + 1`` keys kept.

    Notes
    -----
    Cases: the chapter's example by hand; ``k = m`` (full attention); ``k = 1`` (the
    value of the largest score); several queries; scores of order ``1e4``, where a
    softmax without care overflows.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers import softmax
    >>> from helpers.checks import check_truncated_attention
    >>> def first_k(scores, V, k):  # the first k keys, not the k largest
    ...     return softmax(scores[:, :k]) @ V[:k]
    >>> report = check_truncated_attention(first_k)
    >>> report.status, report.message.split(":")[1].strip()
    ('failed', 'the first k keys were kept, whatever their scores')
    """
    rng = np.random.default_rng(13)
    overflow = section(1, "Computing softmax without overflow")
    layouts = (
        (
            "by hand (k = 2)",
            np.array([[2.0, 1.0, -1.0]]),
            np.array([[1.0], [0.0], [-1.0]]),
            2,
            "the scores 2 and 1 are kept, -1 dropped: the output is a weighted mean of the "
            "values 1 and 0 alone",
        ),
        (
            "k = m (nothing dropped)",
            rng.standard_normal((2, 4)),
            rng.standard_normal((4, 3)),
            4,
            "with k = m nothing is dropped: plain softmax attention",
        ),
        (
            "k = 1 (the largest score only)",
            rng.standard_normal((3, 5)),
            rng.standard_normal((5, 2)),
            1,
            "with k = 1 each query returns the value of its largest score",
        ),
        (
            "several queries (k = 3)",
            2 * rng.standard_normal((4, 6)),
            rng.standard_normal((6, 3)),
            3,
            "each row keeps its own 3 keys",
        ),
        (
            "scores of order 1e4 (k = 2)",
            np.array([[1e4, 9999.0, -1e4, 0.0], [-1e4, 5e3, 5e3 - 0.5, 1.0]]),
            rng.standard_normal((4, 2)),
            2,
            msg(
                "the kept scores are near 1e4 and 5e3 but differ by 1 and 0.5: the "
                "output is a finite weighted mean of two values ({overflow})",
                overflow=overflow,
            ),
        ),
    )
    specs = [
        _Spec(
            Case(name, {"scores": s, "V": V}, truncated_attention(s, V, k), text),
            _append(k),
            msg(
                "scores of shape {s_shape}, V of shape {v_shape}, k = {k}",
                s_shape=s.shape,
                v_shape=V.shape,
                k=k,
            ),
            _truncation_diagnose(k),
        )
        for name, s, V, k, text in layouts
    ]
    return _run(
        fn,
        "check_truncated_attention",
        specs,
        see=_TRUNCATION,
        more="three things decide the answer: which k keys each row keeps, that a dropped "
        "key gets weight exactly 0, and that the kept weights sum to 1. Work the first case "
        "out by hand and compare",
        hint=hint,
    )
