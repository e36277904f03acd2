"""What can be proved about attention (chapter 9).

Jacobians of dot-product and L2 self-attention, Kim, Papamakarios and Mnih's Lipschitz
bound for L2 self-attention, the rank-collapse residual of Dong, Cordonnier and Loukas,
the smallest head width that can express an attention pattern exactly, and attention
truncated to its k largest weights.

Every function works on a sequence ``X`` of shape ``(n, d)``, a row per token (the
row-vector convention of ``book/notation.md``); :func:`l2_self_attention`,
:func:`l2_self_attention_jacobian`, :func:`rank_collapse_residual` and
:func:`truncated_attention` also accept leading batch axes.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from helpers._validate import as_integer, as_real_array
from helpers.softmax import softmax

__all__ = [
    "l2_lipschitz_bound",
    "l2_self_attention",
    "l2_self_attention_jacobian",
    "min_head_width",
    "minimise_bfgs",
    "rank_collapse_residual",
    "self_attention_jacobian",
    "truncated_attention",
]

_BOOL = " (pass the input array itself)"


def _matrix(x: npt.ArrayLike, name: str, layout: str) -> np.ndarray:
    """``x`` as a finite 2-D float array; ValueError/TypeError naming ``name``."""
    arr = as_real_array(x, name, bool_hint=_BOOL)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D, {layout}; got shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} must not be empty; got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite; it contains nan or inf")
    return arr.astype(np.float64, copy=False)


def _weights(X: np.ndarray, W: np.ndarray, name: str) -> None:
    if W.shape[0] != X.shape[-1]:
        raise ValueError(
            f"{name} must have as many rows as X has columns (d = {X.shape[-1]}); "
            f"got X of shape {X.shape} and {name} of shape {W.shape}"
        )


def self_attention_jacobian(
    X: npt.ArrayLike, W_Q: npt.ArrayLike, W_K: npt.ArrayLike, W_V: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """The Jacobian of single-head dot-product self-attention with respect to its input.

    Parameters
    ----------
    X : (n, d) array_like
        The input tokens, one per row.
    W_Q, W_K : (d, d_k) array_like
        Query and key projections.
    W_V : (d, d_v) array_like
        Value projection.

    Returns
    -------
    J : (n * d_v, n * d) ndarray
        ``J[i * d_v + c, j * d + a] = dO[i, c] / dX[j, a]`` for
        ``O = softmax((X W_Q)(X W_K)^T / sqrt(d_k)) X W_V``: the output and the input
        flattened in row-major (C) order, as ``O.reshape(-1)`` and ``X.reshape(-1)``.

    Raises
    ------
    ValueError
        If an argument is not 2-D, is empty or not finite, or the shapes do not fit.
    TypeError
        If an argument is not an array of real numbers.

    Notes
    -----
    With ``P`` the weights, ``Q = X W_Q``, ``K = X W_K``, ``V = X W_V``, ``O = P V`` and
    ``C[i, m, c] = P[i, m] (V[m, c] - O[i, c])``,

    ``dO[i,c]/dX[j,a] = P[i,j] W_V[a,c] + (C[i,j,c] (Q W_K^T)[i,a]
    + delta_ij sum_m C[i,m,c] (K W_Q^T)[m,a]) / sqrt(d_k)``.

    The first term is the path through the values, the second through the keys, the
    third through the query. For ``n = 1`` the weight is 1, ``C = 0``, and ``J = W_V^T``.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.theory import self_attention_jacobian
    >>> rng = np.random.default_rng(0)
    >>> W_Q, W_K, W_V = rng.standard_normal((3, 2, 2))
    >>> J = self_attention_jacobian(rng.standard_normal((3, 2)), W_Q, W_K, W_V)
    >>> J.shape
    (6, 6)
    >>> bool(np.allclose(self_attention_jacobian(np.ones((1, 2)), W_Q, W_K, W_V), W_V.T))
    True
    """
    X = _matrix(X, "X", "(n, d)")
    W_Q = _matrix(W_Q, "W_Q", "(d, d_k)")
    W_K = _matrix(W_K, "W_K", "(d, d_k)")
    W_V = _matrix(W_V, "W_V", "(d, d_v)")
    for W, name in ((W_Q, "W_Q"), (W_K, "W_K"), (W_V, "W_V")):
        _weights(X, W, name)
    if W_K.shape != W_Q.shape:
        raise ValueError(f"W_Q and W_K must have the same shape; got {W_Q.shape} and {W_K.shape}")
    n, d = X.shape
    d_v = W_V.shape[1]
    scale = 1.0 / math.sqrt(W_Q.shape[1])
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (n, d_k), (n, d_k), (n, d_v)
    P = softmax(scale * (Q @ K.T), axis=-1)  # (n, n)
    out = P @ V  # (n, d_v)
    C = P[:, :, None] * (V[None, :, :] - out[:, None, :])  # (n, n, d_v)
    J = P[:, None, :, None] * W_V.T[None, :, None, :]  # values: (i, c, j, a)
    J += scale * np.einsum("ijc,ia->icja", C, Q @ W_K.T)  # keys
    query = scale * np.einsum("imc,ma->ica", C, K @ W_Q.T)  # (n, d_v, d)
    J[np.arange(n), :, np.arange(n), :] += query  # the query path: j = i only
    return J.reshape(n * d_v, n * d)


def _l2_parts(X: np.ndarray, W_Q: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Weights P (..., n, n), G = X W_Q W_Q^T (..., n, d), and sqrt(d_k) of L2 attention."""
    root = math.sqrt(W_Q.shape[1])
    Q = X @ W_Q  # (..., n, d_k)
    diff = Q[..., :, None, :] - Q[..., None, :, :]  # (..., n, n, d_k): exact for large,
    dist2 = np.sum(
        diff * diff, axis=-1
    )  # nearby tokens, where |q_i|^2 + |q_j|^2 - 2 q_i.q_j cancels
    return softmax(-dist2 / root, axis=-1), Q @ W_Q.T, root


def _tokens(X: npt.ArrayLike) -> np.ndarray:
    """X of shape (..., n, d), non-empty and finite, as float64; else a ValueError naming it."""
    X = as_real_array(X, "X", bool_hint=_BOOL)
    if X.ndim < 2:
        raise ValueError(f"X must have shape (..., n, d), at least 2-D; got shape {X.shape}")
    if X.shape[-1] == 0 or X.shape[-2] == 0:
        raise ValueError(f"X must not be empty; got shape {X.shape}")
    if not np.isfinite(X).all():
        raise ValueError("X must be finite; it contains nan or inf")
    X = X.astype(np.float64, copy=False)
    return X


def _l2_inputs(X, W_Q, W_V) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X = _tokens(X)
    W_Q = _matrix(W_Q, "W_Q", "(d, d_k)")
    W_V = _matrix(W_V, "W_V", "(d, d_v)")
    _weights(X, W_Q, "W_Q")
    _weights(X, W_V, "W_V")
    return X, W_Q, W_V


def l2_self_attention(
    X: npt.ArrayLike, W_Q: npt.ArrayLike, W_V: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """Single-head L2 self-attention with tied query and key maps (Kim et al. 2021).

    Parameters
    ----------
    X : (..., n, d) array_like
        The input tokens, one per row; leading axes are batch axes.
    W_Q : (d, d_k) array_like
        The query map, which is also the key map.
    W_V : (d, d_v) array_like
        The value map.

    Returns
    -------
    O : (..., n, d_v) ndarray
        ``P X A W_V`` with ``A = W_Q W_Q^T / sqrt(d_k)`` and
        ``P[i, j] = softmax_j(-||x_i W_Q - x_j W_Q||^2 / sqrt(d_k))``.

    Raises
    ------
    ValueError
        If ``X`` has fewer than 2 dimensions, a weight is not 2-D, an argument is empty
        or not finite, or the shapes do not fit.
    TypeError
        If an argument is not an array of real numbers.

    Notes
    -----
    This is one head of Kim, Papamakarios and Mnih's L2-MHA, with their head width
    ``D/H`` written ``d_k`` and no output projection. Tying the key map to the query
    map and using the values ``X A W_V`` is what makes it Lipschitz; see
    :func:`l2_lipschitz_bound`.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.theory import l2_self_attention
    >>> X = np.array([[0.0, 0.0], [4.0, 0.0]])
    >>> l2_self_attention(X, np.eye(2), np.eye(2)).round(4)  # far apart: each reads itself
    array([[0.    , 0.    ],
           [2.8284, 0.    ]])
    """
    X, W_Q, W_V = _l2_inputs(X, W_Q, W_V)
    P, G, root = _l2_parts(X, W_Q)
    return P @ (G @ W_V) / root


def l2_self_attention_jacobian(
    X: npt.ArrayLike, W_Q: npt.ArrayLike, W_V: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """The Jacobian of :func:`l2_self_attention` with respect to ``X``.

    Parameters
    ----------
    X : (..., n, d) array_like
        The input tokens; leading axes are batch axes (one Jacobian per sequence).
    W_Q : (d, d_k) array_like
    W_V : (d, d_v) array_like

    Returns
    -------
    J : (..., n * d_v, n * d) ndarray
        ``J[..., i * d_v + c, j * d + a] = dO[..., i, c] / dX[..., j, a]`` (row-major,
        as in :func:`self_attention_jacobian`).

    Raises
    ------
    ValueError, TypeError
        As :func:`l2_self_attention`.

    Notes
    -----
    With ``G = X W_Q W_Q^T``, ``M = W_Q W_Q^T W_V / sqrt(d_k)``, ``Y = X M``, ``O = P Y``
    and ``C[i, j, c] = P[i, j] (Y[j, c] - O[i, c])``,

    ``dO[i,c]/dX[j,a] = P[i,j] M[a,c] + (2 / sqrt(d_k)) (C[i,j,c] (G[i,a] - G[j,a])
    + delta_ij sum_m C[i,m,c] G[m,a])``,

    using ``sum_m C[i, m, c] = 0``.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.theory import l2_self_attention_jacobian
    >>> rng = np.random.default_rng(0)
    >>> l2_self_attention_jacobian(rng.standard_normal((4, 3)), np.eye(3), np.eye(3)).shape
    (12, 12)
    >>> l2_self_attention_jacobian(rng.standard_normal((5, 4, 3)), np.eye(3), np.eye(3)).shape
    (5, 12, 12)
    """
    X, W_Q, W_V = _l2_inputs(X, W_Q, W_V)
    n, d = X.shape[-2:]
    d_v = W_V.shape[1]
    P, G, root = _l2_parts(X, W_Q)
    M = W_Q @ W_Q.T @ W_V / root  # (d, d_v)
    Y = X @ M  # (..., n, d_v)
    C = P[..., None] * (Y[..., None, :, :] - (P @ Y)[..., :, None, :])  # (..., i, j, c)
    Ct = np.swapaxes(C, -1, -2)  # (..., i, c, j)
    J = P[..., :, None, :, None] * M.T[:, None, :]  # values: (..., i, c, j, a)
    J = J + (2 / root) * Ct[..., None] * (G[..., :, None, None, :] - G[..., None, None, :, :])
    query = (2 / root) * (Ct @ G[..., None, :, :])  # (..., i, c, a): sum_m C[i,m,c] G[m,a]
    J = J + query[..., :, :, None, :] * np.eye(n)[:, None, :, None]  # j = i only
    return J.reshape(*X.shape[:-2], n * d_v, n * d)


def _phi_inverse(y: float) -> float:
    """The x >= 0 with x exp(x + 1) = y (that is, W_0(y / e)), by Newton's method."""
    if y <= 0:
        return 0.0
    x = math.log1p(y)  # a start above the root; Newton then decreases monotonically
    for _ in range(100):
        step = (x - y * math.exp(-x - 1)) / (1 + x)  # (x e^{x+1} - y) / ((1 + x) e^{x+1})
        x -= step
        if abs(step) <= 1e-15 * max(1.0, x):
            break
    return x


def l2_lipschitz_bound(n: int, W_Q: npt.ArrayLike, W_V: npt.ArrayLike) -> float:
    """Kim et al.'s bound on the 2-norm Lipschitz constant of :func:`l2_self_attention`.

    Parameters
    ----------
    n : int
        The number of tokens.
    W_Q : (d, d_k) array_like
        The tied query and key map.
    W_V : (d, d_v) array_like
        The value map.

    Returns
    -------
    float
        ``sqrt(n / d_k) * (4 phi^{-1}(n - 1) + 1) * ||W_Q||_2^2 * ||W_V||_2``, where
        ``phi(x) = x exp(x + 1)`` and ``||.||_2`` is the spectral norm.

    Raises
    ------
    ValueError
        If ``n < 1`` or a matrix is not 2-D, is empty or not finite, or the shapes differ.
    TypeError
        If ``n`` is not an integer or a matrix is not real.

    Notes
    -----
    Theorem 3.2 of Kim, Papamakarios and Mnih (2021), their ℓ2 bound with one head
    (``H = 1``, head width ``D/H = d_k``) and no output projection: for all inputs
    ``X, X'`` of ``n`` tokens, ``||F(X) - F(X')||_F <= bound * ||X - X'||_F``, that is,
    the spectral norm of the Jacobian (:func:`l2_self_attention_jacobian`) never exceeds
    it. ``phi^{-1}(n - 1) = W_0((n - 1)/e)`` grows like ``log n - log log n``.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.theory import l2_lipschitz_bound
    >>> round(l2_lipschitz_bound(1, np.eye(2), np.eye(2)), 4)  # one token: sqrt(1/2)
    0.7071
    """
    n = as_integer(n, "n", minimum=1)
    W_Q = _matrix(W_Q, "W_Q", "(d, d_k)")
    W_V = _matrix(W_V, "W_V", "(d, d_v)")
    if W_V.shape[0] != W_Q.shape[0]:
        raise ValueError(
            f"W_Q and W_V must have the same number of rows d; got {W_Q.shape} and {W_V.shape}"
        )
    d_k = W_Q.shape[1]
    norm_q = np.linalg.norm(W_Q, 2)
    norm_v = np.linalg.norm(W_V, 2)
    return float(math.sqrt(n / d_k) * (4 * _phi_inverse(n - 1) + 1) * norm_q**2 * norm_v)


def rank_collapse_residual(X: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """How far the tokens of a sequence are from all being equal, relative to their size.

    Parameters
    ----------
    X : (..., n, d) array_like
        Sequences of ``n`` tokens; leading axes are batch axes.

    Returns
    -------
    r : (...) ndarray
        ``min_x ||X - 1 x^T||_F / ||X||_F`` for each sequence, in [0, 1]; 0 for a
        sequence of zeros.

    Raises
    ------
    ValueError
        If ``X`` has fewer than 2 dimensions, is empty or is not finite.
    TypeError
        If ``X`` is not an array of real numbers.

    Notes
    -----
    Dong, Cordonnier and Loukas (2021) define the residual ``res(X) = X - 1 x^T`` with
    ``x`` minimising a norm of it; their theorems use the composite norm
    ``sqrt(||.||_1 ||.||_inf)``. This function uses the Frobenius norm, for which the
    minimiser is the mean token, ``x = X^T 1 / n``, so that ``res(X)`` is ``X`` with
    its mean row subtracted. ``r = 0`` exactly when every token is the same vector, that
    is when ``X`` has collapsed to the rank-one matrix ``1 x^T``.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.theory import rank_collapse_residual
    >>> float(rank_collapse_residual(np.array([[1.0, 2.0], [1.0, 2.0]])))
    0.0
    >>> float(rank_collapse_residual(np.array([[1.0, 0.0], [-1.0, 0.0]])))
    1.0
    """
    X = _tokens(X)
    scale = np.abs(X).max(axis=(-2, -1), keepdims=True)  # avoid overflow in the squares
    Xs = X / np.where(scale > 0, scale, 1.0)
    res = np.linalg.norm(Xs - Xs.mean(axis=-2, keepdims=True), axis=(-2, -1))
    total = np.linalg.norm(Xs, axis=(-2, -1))
    return np.where(total > 0, res / np.where(total > 0, total, 1.0), 0.0)


def min_head_width(log_weights: npt.ArrayLike, *, rtol: float = 1e-9) -> int:
    """The smallest head width ``d_k`` whose scores can produce given attention weights.

    Parameters
    ----------
    log_weights : (n, m) array_like
        The logarithms of a target attention pattern (each row a distribution with no
        zero, up to a constant per row, which the softmax ignores).
    rtol : float, optional
        Singular values below ``rtol`` times the largest count as zero.

    Returns
    -------
    int
        The rank of ``log_weights`` with each row centred (its mean subtracted): the
        smallest ``r`` such that ``softmax(Q K^T) = softmax(log_weights)`` for some
        ``Q`` of shape ``(n, r)`` and ``K`` of shape ``(m, r)``.

    Raises
    ------
    ValueError
        If ``log_weights`` is not 2-D, is empty or is not finite.

    Notes
    -----
    With ``Lambda = log_weights`` and a bar for "each row's mean subtracted" (a product
    with ``I - 1 1^T / m`` on the right), ``softmax(S) = softmax(Lambda)`` row by row iff
    ``S - Lambda`` is constant along each row, iff ``bar(S) = bar(Lambda)``. Since
    ``rank(bar(S)) <= rank(S) <= d_k``, a head needs ``d_k >= rank(bar(Lambda))``; and
    ``S = bar(Lambda)`` itself has that rank, so the bound is reached. This assumes that
    ``Q`` and ``K`` may be any matrices and that every weight is positive (finite
    log-weights): in self-attention the scores also have rank at most ``rank(X)``, and
    masked (zero) weights leave their scores free, which can lower the width needed.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.theory import min_head_width
    >>> min_head_width(3.0 * np.eye(4))  # each token mostly reads itself: width n - 1
    3
    """
    L = _matrix(log_weights, "log_weights", "(n, m)")
    centred = L - L.mean(axis=-1, keepdims=True)
    s = np.linalg.svd(centred, compute_uv=False)
    if s[0] == 0:
        return 0
    return int(np.sum(s > rtol * s[0]))


def truncated_attention(scores: npt.ArrayLike, V: npt.ArrayLike, k: int) -> npt.NDArray[np.float64]:
    """Attention that keeps only the ``k`` largest weights of each row, renormalised.

    Parameters
    ----------
    scores : (..., n, m) array_like
        The scores (logits) of each query for each key.
    V : (..., m, d_v) array_like
        The values.
    k : int
        How many keys each query keeps, ``1 <= k <= m``.

    Returns
    -------
    O : (..., n, d_v) ndarray
        For each query, the softmax of its ``k`` largest scores (the others dropped)
        times the values of those keys. Ties are broken towards the lower key index.

    Raises
    ------
    ValueError
        If ``k`` is not in ``[1, m]``, the shapes do not fit or an input is not finite.
    TypeError
        If ``k`` is not an integer or an array is not real.

    Notes
    -----
    With ``p`` a row of ``softmax(scores)``, ``T`` the kept keys and
    ``eps = sum_{j not in T} p_j`` the discarded mass, the error is exactly
    ``o - o_k = eps (mean of the discarded values under p - mean of the kept ones)``,
    so ``||o - o_k|| <= eps max_{j, l} ||v_j - v_l|| <= 2 eps max_j ||v_j||``.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.theory import truncated_attention
    >>> s = np.array([[2.0, 1.0, -1.0]])
    >>> V = np.array([[1.0], [0.0], [-1.0]])
    >>> truncated_attention(s, V, 3).round(4), truncated_attention(s, V, 2).round(4)
    (array([[0.6703]]), array([[0.7311]]))
    """
    s = as_real_array(scores, "scores", bool_hint=_BOOL)
    V = as_real_array(V, "V", bool_hint=_BOOL)
    if s.ndim < 2 or V.ndim < 2:
        raise ValueError(
            f"scores must be (..., n, m) and V (..., m, d_v); got shapes {s.shape} and {V.shape}"
        )
    m = s.shape[-1]
    if V.shape[-2] != m:
        raise ValueError(
            f"V must have one row per key (m = {m}); got scores of shape {s.shape} and V of "
            f"shape {V.shape}"
        )
    for arr, name in ((s, "scores"), (V, "V")):
        if not np.isfinite(arr).all():
            raise ValueError(f"{name} must be finite; it contains nan or inf")
    k = as_integer(k, "k", minimum=1)
    if k > m:
        raise ValueError(f"k must be at most the number of keys m = {m}; got k = {k}")
    order = np.argsort(-s, axis=-1, kind="stable")[..., :k]  # (..., n, k)
    keep = np.zeros(s.shape, dtype=bool)
    np.put_along_axis(keep, order, True, axis=-1)
    kept = np.where(keep, s.astype(np.float64), -np.inf)
    return softmax(kept, axis=-1) @ V.astype(np.float64)


def minimise_bfgs(
    fun: Callable[[np.ndarray], tuple[npt.ArrayLike, npt.ArrayLike]],
    x0: npt.ArrayLike,
    *,
    steps: int = 200,
    gtol: float = 1e-10,
    step: float = 1.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Minimise a smooth function from many starts at once, by BFGS from every start.

    Parameters
    ----------
    fun : callable
        ``fun(x)`` takes ``x`` of shape ``(k, ...)``, ``k`` rows shaped like those of
        ``x0``, and returns ``(f, grad)``: the ``k`` values, shape ``(k,)``, and their
        gradients, the shape of ``x``. Row ``b`` of ``f`` may depend on row ``b`` of ``x``
        only (``fun`` is called on the rows that have not converged yet).
    x0 : (B, ...) array_like
        ``B`` starting points.
    steps : int, optional
        The largest number of iterations.
    gtol : float, optional
        A start stops once its gradient has a norm of at most ``gtol``.
    step : float, optional
        The first step length tried (at most 1; a smaller one keeps the first steps,
        taken along the gradient, short).

    Returns
    -------
    x : (B, ...) ndarray
        The point reached from each start.
    f : (B,) ndarray
        The values there.
    grad : (B, ...) ndarray
        The gradients there (each of norm at most ``gtol`` when converged).

    Raises
    ------
    ValueError
        If ``x0`` is not finite or has no batch axis, if ``steps`` is negative, ``gtol``
        negative or ``step`` outside (0, 1], or if ``fun`` returns values or gradients
        of the wrong shape.

    Notes
    -----
    Each start keeps its own estimate ``H`` of the inverse Hessian (the identity at
    first) and its own step length ``t``, and stops on its own once converged, so that
    a start ends where it would end alone. An iteration tries ``x - t H grad``: the step
    is taken if it decreases ``f`` by at least ``1e-4`` of the decrease predicted by
    the gradient (Armijo's condition), and then ``t`` doubles (up to 1); otherwise
    the start stays where it is and ``t`` is divided by 4. After a step ``s`` with
    change of gradient ``y``, ``H`` gets the BFGS update

    ``H <- (I - rho s y^T) H (I - rho y s^T) + rho s s^T``, ``rho = 1 / (s^T y)``,

    skipped when ``s^T y <= 0``. Only matrix-vector products are formed, so an
    iteration costs ``O(k dim^2)`` besides ``fun``; no randomness is involved.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.theory import minimise_bfgs
    >>> def f(x):  # a narrow quadratic valley around (1, -2), for rows of x (k, 2)
    ...     r = x - [1.0, -2.0]
    ...     return np.sum(r * r * [1.0, 100.0], axis=-1), 2 * r * [1.0, 100.0]
    >>> x, value, grad = minimise_bfgs(f, [[0.0, 0.0], [5.0, 3.0]])
    >>> x.round(8)
    array([[ 1., -2.],
           [ 1., -2.]])
    """
    x = as_real_array(x0, "x0", bool_hint=_BOOL)
    if x.ndim < 1 or x.shape[0] == 0 or x.size == 0:
        raise ValueError(f"x0 must have shape (B, ...) with B >= 1 starts; got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("x0 must be finite; it contains nan or inf")
    steps = as_integer(steps, "steps", minimum=0)
    if not gtol >= 0:
        raise ValueError(f"gtol must be at least 0; got {gtol}")
    if not 0 < step <= 1:
        raise ValueError(f"step must be in (0, 1]; got {step}")
    row = x.shape[1:]
    B = x.shape[0]
    dim = x.size // B
    x = x.astype(np.float64).reshape(B, dim)

    def evaluate(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        k = len(x)
        f, g = fun(x.reshape(k, *row))
        f, g = np.asarray(f, dtype=np.float64), np.asarray(g, dtype=np.float64)
        if f.shape != (k,) or g.shape != (k, *row):
            raise ValueError(
                f"fun must return values of shape {(k,)} and gradients of shape {(k, *row)} "
                f"for x of shape {(k, *row)}; got {f.shape} and {g.shape}"
            )
        return f, g.reshape(k, dim)

    f, g = evaluate(x)
    H = np.broadcast_to(np.eye(dim), (B, dim, dim)).copy()  # inverse-Hessian estimates
    t = np.full(B, float(step))
    for _ in range(steps):
        a = np.flatnonzero(np.linalg.norm(g, axis=1) > gtol)  # the starts still moving
        if a.size == 0:
            break
        p = -np.einsum("bij,bj->bi", H[a], g[a])  # quasi-Newton directions, (k, dim)
        x_new = x[a] + t[a, None] * p
        f_new, g_new = evaluate(x_new)
        taken = f_new <= f[a] + 1e-4 * t[a] * np.einsum("bi,bi->b", g[a], p)
        s, y = x_new - x[a], g_new - g[a]
        sy = np.einsum("bi,bi->b", s, y)
        rho = np.where(taken & (sy > 0), 1.0 / np.where(sy > 0, sy, 1.0), 0.0)  # 0: no update
        Hy = np.einsum("bij,bj->bi", H[a], y)
        yHy = np.einsum("bi,bi->b", y, Hy)
        H[a] = (
            H[a]
            - rho[:, None, None] * (s[:, :, None] * Hy[:, None, :] + Hy[:, :, None] * s[:, None, :])
            + (rho * rho * yHy + rho)[:, None, None] * s[:, :, None] * s[:, None, :]
        )
        x[a] = np.where(taken[:, None], x_new, x[a])
        f[a] = np.where(taken, f_new, f[a])
        g[a] = np.where(taken[:, None], g_new, g[a])
        t[a] = np.where(taken, np.minimum(1.0, 2 * t[a]), t[a] / 4)
    return x.reshape(B, *row), f, g.reshape(B, *row)
