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

from helpers.checks.core import Case, CheckReport, Finding
from helpers.checks.multihead import _append, _run, _Spec
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


_JACOBIAN_SLIPS = {
    "weights constant": (
        "only the path through the values is there, P[i, j] W_V^T: the attention weights "
        "were treated as constants, but they depend on X through the queries and the keys",
        "add the derivative of the softmax: the paths through the keys and the query",
    ),
    "no query path": (
        "the path through the query is missing: x_i enters its own scores through "
        "q_i = x_i W_Q, which adds a term to the block j = i",
        "for j = i add sum_m P[i,m] (v_m - o_i)_c (k_m W_Q^T)_a / sqrt(d_k)",
    ),
    "no key path": (
        "the path through the keys is missing: x_j enters every score s_ij through k_j = x_j W_K",
        "add P[i,j] (v_j - o_i)_c (q_i W_K^T)_a / sqrt(d_k) to every block (i, j)",
    ),
    "no scale": (
        "this is the Jacobian of attention without the 1/sqrt(d_k) scaling",
        "the scores are (X W_Q)(X W_K)^T / sqrt(d_k): the scale enters the weights and "
        "both score paths",
    ),
    "column-major": (
        "the entries are right but laid out in column-major order (output feature first, "
        "then token)",
        "row i * d_v + c, column j * d + a: flatten O and X in row-major order, as "
        "O.reshape(-1) does",
    ),
    "transposed": (
        "this is the transpose: rows must be the outputs dO[i, c], columns the inputs dX[j, a]",
        "return J with shape (n * d_v, n * d)",
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


def check_self_attention_jacobian(fn: Callable[..., object]) -> CheckReport:
    """Check the reader's Jacobian of single-head dot-product self-attention.

    Parameters
    ----------
    fn : callable
        ``fn(X, W_Q, W_K, W_V) -> J``: ``X`` of shape ``(n, d)``, ``W_Q`` and ``W_K`` of
        shape ``(d, d_k)``, ``W_V`` of shape ``(d, d_v)``; returns the Jacobian of
        ``softmax((X W_Q)(X W_K)^T / sqrt(d_k)) X W_V`` with respect to ``X``, of shape
        ``(n * d_v, n * d)``, entry ``[i * d_v + c, j * d + a] = dO[i, c] / dX[j, a]``.

    Returns
    -------
    CheckReport
        Truthy iff every case passed. The report recognises weights treated as
        constants, a missing query or key path, a missing scale, the column-major
        layout and the transpose.

    Notes
    -----
    Cases: one token (the Jacobian is ``W_V^T``); three tokens with ``d = d_k = d_v``;
    every size different; large scores (nearly one-hot weights). The expected Jacobians
    come from :func:`helpers.theory.self_attention_jacobian` (checked there against
    PyTorch's autograd).

    Examples
    --------
    >>> from helpers.checks import check_self_attention_jacobian
    >>> from helpers.theory import self_attention_jacobian
    >>> check_self_attention_jacobian(self_attention_jacobian)  # doctest: +NORMALIZE_WHITESPACE
    check_self_attention_jacobian(self_attention_jacobian): All 4 checks passed: one token,
        three tokens, every size different, large scores.
    """
    rng = np.random.default_rng(9)
    layouts = (
        ("one token", 1, 3, 2, 2, 1.0),
        ("three tokens", 3, 2, 2, 2, 1.0),
        ("every size different", 4, 3, 2, 5, 1.0),
        ("large scores", 3, 2, 2, 3, 4.0),
    )
    hint = (
        "three paths: P[i,j] W_V^T (values), P[i,j] (v_j - o_i) (q_i W_K^T) / sqrt(d_k) "
        "(keys) and, for j = i, sum_m P[i,m] (v_m - o_i) (k_m W_Q^T) / sqrt(d_k) (query)"
    )
    specs = []
    for name, n, d, d_k, d_v, size in layouts:
        inputs = {
            "X": size * rng.standard_normal((n, d)),
            "W_Q": rng.standard_normal((d, d_k)),
            "W_K": rng.standard_normal((d, d_k)),
            "W_V": rng.standard_normal((d, d_v)),
        }
        expected = self_attention_jacobian(*inputs.values())
        shown = f"X {(n, d)}, W_Q and W_K {(d, d_k)}, W_V {(d, d_v)}"
        case = Case(name, inputs, expected, hint, rtol=1e-6, atol=1e-8)
        specs.append(_Spec(case, _append(), shown, _jacobian_diagnose))
    return _run(fn, "check_self_attention_jacobian", specs)


# ---------------------------------------------------------------------------
# check_min_head_width
# ---------------------------------------------------------------------------


def _rank(M: np.ndarray) -> int:
    s = np.linalg.svd(M, compute_uv=False)
    return 0 if s[0] == 0 else int(np.sum(s > 1e-9 * s[0]))


def _width_diagnose(case: Case, got: np.ndarray) -> list[Finding]:
    L = case.inputs["log_weights"]
    value = np.asarray(got).item()
    as_given = (
        "this is the rank of the pattern as given (of the log-weights or of the weights "
        "themselves): the softmax ignores a constant added to a row, so subtract each "
        "row's mean from the log-weights before taking the rank",
        "which scores give the same weights as L? Only the rank that survives every such "
        "change counts",
    )
    slips = (
        (_rank(L), *as_given),
        (_rank(softmax(L, axis=-1)), *as_given),
        (
            _rank(L - L.mean(axis=0, keepdims=True)),
            "each column was centred; the softmax ignores a constant per row (per query)",
            "centre each row (each query's scores), not each column",
        ),
    )
    for candidate, problem, hint in slips:
        if value == candidate:
            return [Finding(problem, hint)]
    return []


def check_min_head_width(fn: Callable[..., object]) -> CheckReport:
    """Check the reader's smallest head width that expresses an attention pattern exactly.

    Parameters
    ----------
    fn : callable
        ``fn(log_weights) -> int``: ``log_weights`` of shape ``(n, m)``, the logarithms
        of a target pattern up to a constant per row; returns the smallest ``d_k`` such
        that ``softmax(Q K^T)`` equals the pattern for some ``Q`` ``(n, d_k)`` and ``K``
        ``(m, d_k)``.

    Returns
    -------
    CheckReport
        Truthy iff every answer is exact. The report recognises the rank of the
        log-weights without centring, the rank of the weights, and columns centred
        instead of rows.

    Notes
    -----
    Cases: each token reading itself (``3 I``, 4 tokens); a rank-one score matrix with
    a different constant added to each row; a pattern where key ``j`` gets a bonus
    ``u_j`` from every query; uniform weights; random log-weights of 5 queries and 6
    keys. The expected widths come from :func:`helpers.theory.min_head_width`.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_min_head_width
    >>> def width(L):  # a typical slip: the rank of the pattern as given
    ...     return np.linalg.matrix_rank(L)
    >>> report = check_min_head_width(width)
    >>> report.status, report.message.split(":")[0]
    ('failed', 'each token reads itself')
    """
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal(4), rng.standard_normal(4)
    u = rng.standard_normal(4)
    patterns = (
        ("each token reads itself", 3.0 * np.eye(4)),
        ("rank one plus a constant per row", np.outer(a, b) + rng.standard_normal((4, 1))),
        ("a bonus per key", np.outer(a, b) + u[None, :]),
        ("uniform weights", np.full((3, 3), -math.log(3))),
        ("5 queries and 6 keys", rng.standard_normal((5, 6))),
    )
    hint = (
        "softmax(S) = softmax(L) iff S - L is constant along each row: the width needed is "
        "the rank of L with each row's mean subtracted"
    )
    specs = [
        _Spec(
            Case(name, {"log_weights": L}, np.array(min_head_width(L)), hint, rtol=0, atol=0),
            _append(),
            f"log_weights of shape {L.shape}",
            _width_diagnose,
            exact_integer=True,
        )
        for name, L in patterns
    ]
    return _run(fn, "check_min_head_width", specs)


# ---------------------------------------------------------------------------
# check_truncated_attention
# ---------------------------------------------------------------------------


def _truncated_variant(s: np.ndarray, V: np.ndarray, k: int, slip: str) -> np.ndarray:
    """Truncated attention as written with one usual slip."""
    m = s.shape[-1]
    kk = {"k - 1 keys": k - 1, "k + 1 keys": k + 1}.get(slip, k)
    if not 1 <= kk <= m:
        return np.full(s.shape[:-1] + V.shape[-1:], np.nan)
    order = np.argsort(s if slip == "smallest" else -s, axis=-1, kind="stable")[..., :kk]
    keep = np.zeros(s.shape, dtype=bool)
    np.put_along_axis(keep, order, True, axis=-1)
    if slip == "not renormalised":
        return np.where(keep, softmax(s, axis=-1), 0.0) @ V
    if slip == "zeros":
        return softmax(np.where(keep, s, 0.0), axis=-1) @ V
    return softmax(np.where(keep, s, -np.inf), axis=-1) @ V


_TRUNCATION_SLIPS = {
    "not renormalised": (
        "the kept weights are those of the full softmax, not renormalised: they sum to "
        "1 - (the discarded mass), so the output shrinks towards 0",
        "divide the kept weights by their sum (or take the softmax of the kept scores only)",
    ),
    "zeros": (
        "the dropped scores were set to 0 instead of -inf, so the dropped keys still get "
        "weight exp(0) each",
        "set the dropped scores to -np.inf before the softmax",
    ),
    "smallest": (
        "the k smallest scores were kept instead of the k largest",
        "sort in decreasing order: np.argsort(-scores, axis=-1)[..., :k]",
    ),
    "k - 1 keys": ("only k - 1 keys were kept", "keep exactly k keys: [..., :k]"),
    "k + 1 keys": ("k + 1 keys were kept", "keep exactly k keys: [..., :k]"),
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


def check_truncated_attention(fn: Callable[..., object]) -> CheckReport:
    """Check the reader's attention truncated to the k largest weights of each row.

    Parameters
    ----------
    fn : callable
        ``fn(scores, V, k) -> O``: ``scores`` of shape ``(n, m)``, ``V`` of shape
        ``(m, d_v)``, ``k`` a Python int in ``[1, m]``; returns the ``(n, d_v)`` output
        of the softmax over each row's ``k`` largest scores (the others dropped) times
        the values.

    Returns
    -------
    CheckReport
        Truthy iff every case passed. The report recognises weights that are not
        renormalised, dropped scores set to 0 instead of ``-inf``, the k smallest scores
        kept, and ``k - 1`` or ``k + 1`` keys kept.

    Notes
    -----
    Cases: the chapter's example by hand; ``k = m`` (full attention); ``k = 1`` (the
    value of the largest score); several queries; scores of order ``1e4``, where a
    softmax without the max subtracted overflows. The expected outputs come from
    :func:`helpers.theory.truncated_attention`.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_truncated_attention
    >>> def trunc(scores, V, k):  # a typical slip: dropped scores set to 0, not -inf
    ...     kth = np.sort(scores, axis=-1)[:, -k][:, None]
    ...     s = np.where(scores >= kth, scores, 0.0)
    ...     w = np.exp(s - s.max(axis=-1, keepdims=True))
    ...     return (w / w.sum(axis=-1, keepdims=True)) @ V
    >>> report = check_truncated_attention(trunc)
    >>> report.status, "set to 0 instead of -inf" in report.message
    ('failed', True)
    """
    rng = np.random.default_rng(13)
    layouts = (
        ("by hand (k = 2)", np.array([[2.0, 1.0, -1.0]]), np.array([[1.0], [0.0], [-1.0]]), 2),
        ("k = m (nothing dropped)", rng.standard_normal((2, 4)), rng.standard_normal((4, 3)), 4),
        (
            "k = 1 (the largest score only)",
            rng.standard_normal((3, 5)),
            rng.standard_normal((5, 2)),
            1,
        ),
        (
            "several queries (k = 3)",
            2 * rng.standard_normal((4, 6)),
            rng.standard_normal((6, 3)),
            3,
        ),
        (
            "scores of order 1e4 (k = 2)",
            np.array([[1e4, 9999.0, -1e4, 0.0], [-1e4, 5e3, 5e3 - 0.5, 1.0]]),
            rng.standard_normal((4, 2)),
            2,
        ),
    )
    hint = (
        "keep each row's k largest scores, set the others to -inf, take the softmax (max "
        "subtracted) and multiply by V"
    )
    specs = [
        _Spec(
            Case(name, {"scores": s, "V": V}, truncated_attention(s, V, k), hint),
            _append(k),
            f"scores of shape {s.shape}, V of shape {V.shape}, k = {k}",
            _truncation_diagnose(k),
        )
        for name, s, V, k in layouts
    ]
    return _run(fn, "check_truncated_attention", specs)
