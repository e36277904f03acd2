"""Introduced in chapter 5, the cost of attention: linear attention and random features.

Softmax attention weighs value ``j`` for query ``i`` by ``exp(q_i · k_j / sqrt(d))``
normalised over ``j``. Replacing that exponential by a product of features,
``φ(q_i) · φ(k_j)``, lets the products be regrouped, ``φ(Q) (φ(K)ᵀ V)``, and the cost
drops from ``O(n m d)`` to ``O((n + m) r d_v)`` for ``r`` features.

* :func:`linear_attention` with ``feature_map="elu"``: ``φ(x) = elu(x) + 1``
  (Katharopoulos et al., 2020), a different model, not an approximation of softmax
  attention; or with any non-negative feature map given as a function.
* :func:`random_features` and :func:`performer_attention`: FAVOR+ (Choromanski et al.,
  2021), positive random features whose products estimate ``exp(q · k / sqrt(d))``
  without bias; :func:`favor_features` are the features themselves.

``causal=True`` uses the alignment of :func:`helpers.masks.causal_mask` (query ``i``
sees key ``j`` iff ``j <= i + m - n``) and is computed as running prefix sums, a state
of ``r × (d_v + 1)`` numbers carried along the sequence, exactly equal to the masked
quadratic form. Shapes, broadcasting, dtypes and input checks follow
:func:`helpers.attention.scaled_dot_product_attention`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from helpers._validate import as_integer, as_real_array
from helpers.attention import _as_float_array, _check_finite, _check_qkv, _flat, _work_dtype
from helpers.softmax import _to_out_dtype

__all__ = ["favor_features", "linear_attention", "performer_attention", "random_features"]

# Queries per step of the causal prefix sums: each step multiplies a (C, C) masked block
# and carries the state; larger C means fewer Python iterations but more wasted
# products above the diagonal.
_CAUSAL_CHUNK = 256


# ---------------------------------------------------------------------------
# The shared core: normalised kernel attention from features
# ---------------------------------------------------------------------------


def _with_ones(v: np.ndarray) -> np.ndarray:
    """``v`` (B, m, d_v) with a column of ones appended: products then carry the normaliser."""
    out = np.empty((*v.shape[:-1], v.shape[-1] + 1), dtype=v.dtype)
    out[..., :-1] = v
    out[..., -1] = 1
    return out


def _normalise(num_den: np.ndarray) -> np.ndarray:
    """Split ``[numerator | denominator]`` and divide; a zero denominator gives output 0."""
    den = num_den[..., -1:]
    safe = np.where(den > 0, den, 1)
    return np.where(den > 0, num_den[..., :-1] / safe, 0)


def _kernel_attention(phi_q: np.ndarray, phi_k: np.ndarray, v: np.ndarray, causal: bool):
    """``(φ(Q) φ(K)ᵀ V) / (φ(Q) φ(K)ᵀ 1)`` for (B, n, r), (B, m, r), (B, m, d_v) arrays."""
    B, n, _ = phi_q.shape
    m = phi_k.shape[1]
    ve = _with_ones(v)  # (B, m, d_v + 1)
    if not causal:
        state = phi_k.transpose(0, 2, 1) @ ve  # (B, r, d_v + 1): Σ_j φ(k_j) [v_j, 1]
        return _normalise(phi_q @ state)
    offset = m - n  # query i sees keys j <= i + offset
    out = np.empty((B, n, ve.shape[-1]), dtype=phi_q.dtype)
    state = np.zeros((B, phi_q.shape[-1], ve.shape[-1]), dtype=phi_q.dtype)
    done = 0  # keys [0, done) are in the state
    for i0 in range(0, n, _CAUSAL_CHUNK):
        i1 = min(n, i0 + _CAUSAL_CHUNK)
        start = min(max(i0 + offset, 0), m)  # keys every row of the chunk sees
        end = min(max(i1 + offset, 0), m)  # keys some row of the chunk sees
        if start > done:
            state += phi_k[:, done:start].transpose(0, 2, 1) @ ve[:, done:start]
            done = start
        pq = phi_q[:, i0:i1]
        res = pq @ state  # the keys before the chunk (B, rows, d_v + 1)
        if end > start:
            W = pq @ phi_k[:, start:end].transpose(0, 2, 1)  # (B, rows, cols)
            # key start + j comes after the position i0 + i + offset of query i0 + i
            hidden = np.arange(start, end)[None, :] > np.arange(i0, i1)[:, None] + offset
            np.copyto(W, 0, where=hidden)
            res += W @ ve[:, start:end]
        out[:, i0:i1] = res
    return _normalise(out)


def _prepare(Q, K, V):
    Q = _as_float_array(Q, "Q", "(..., n, d_k)")
    K = _as_float_array(K, "K", "(..., m, d_k)")
    V = _as_float_array(V, "V", "(..., m, d_v)")
    batch = _check_qkv(Q, K, V)
    for arr, name in ((Q, "Q"), (K, "K"), (V, "V")):
        _check_finite(arr, name)
    work, out_dtype = _work_dtype(Q, K, V)
    q, k, v = (_flat(x, batch, work) for x in (Q, K, V))
    return q, k, v, batch, work, out_dtype


def _check_causal(causal: bool) -> bool:
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    return bool(causal)


def _finish(out: np.ndarray, batch: tuple[int, ...], out_dtype: np.dtype) -> np.ndarray:
    out = _to_out_dtype(np.ascontiguousarray(out), out_dtype)
    return out.reshape(*batch, *out.shape[1:])


# ---------------------------------------------------------------------------
# elu + 1 (or any non-negative feature map)
# ---------------------------------------------------------------------------


def _elu_plus_one(x: np.ndarray) -> np.ndarray:
    """``elu(x) + 1``: ``x + 1`` for ``x > 0``, ``exp(x)`` otherwise; always ``> 0``."""
    out = np.minimum(x, 0)
    np.exp(out, out=out)
    out += np.maximum(x, 0)
    return out


def linear_attention(
    Q: npt.ArrayLike,
    K: npt.ArrayLike,
    V: npt.ArrayLike,
    *,
    feature_map: str | Callable[[np.ndarray], np.ndarray] = "elu",
    causal: bool = False,
) -> npt.NDArray[np.floating]:
    r"""Linear attention: ``φ(Q) (φ(K)ᵀ V)``, normalised row by row.

    Parameters
    ----------
    Q : (..., n, d_k) array_like
        Queries.
    K : (..., m, d_k) array_like
        Keys.
    V : (..., m, d_v) array_like
        Values. The leading axes of ``Q``, ``K`` and ``V`` broadcast.
    feature_map : "elu" or callable, default "elu"
        ``"elu"``: :math:`\varphi(x) = \operatorname{elu}(x) + 1` entry by entry
        (Katharopoulos et al., 2020), so ``r = d_k``. A callable maps a
        ``(B, rows, d_k)`` array to ``(B, rows, r)`` **non-negative** features (the
        same ``r`` for queries and keys).
    causal : bool, default False
        Query ``i`` sees key ``j`` only if ``j <= i + m - n`` (as
        :func:`helpers.masks.causal_mask`), computed as running sums.

    Returns
    -------
    output : (..., n, d_v) ndarray
        Row ``i`` is :math:`\sum_j \varphi(q_i)\cdot\varphi(k_j)\, v_j \big/
        \sum_j \varphi(q_i)\cdot\varphi(k_j)`; a row whose denominator is 0 (it sees
        no key, or every term underflowed) is 0.

    Raises
    ------
    TypeError
        If an input is not real-valued, ``causal`` is not a bool, or ``feature_map``
        is neither ``"elu"`` nor callable.
    ValueError
        If the shapes do not fit together, an input is not finite, ``feature_map`` is
        an unknown name, or a callable returns features of the wrong shape, of
        different widths for queries and keys, or negative or non-finite.

    See Also
    --------
    performer_attention, helpers.attention.scaled_dot_product_attention

    Notes
    -----
    With :math:`\kappa(q, k) = \varphi(q)\cdot\varphi(k)` in place of
    :math:`e^{q\cdot k/\sqrt{d_k}}`, associativity regroups the products:

    .. math::

        o_i = \frac{\varphi(q_i)^\top \sum_j \varphi(k_j)\, v_j^\top}
                   {\varphi(q_i)^\top \sum_j \varphi(k_j)}
            = \frac{\bigl[\varphi(Q)\,(\varphi(K)^\top V)\bigr]_i}
                   {\bigl[\varphi(Q)\,(\varphi(K)^\top \mathbf 1_m)\bigr]_i},

    :math:`O((n + m)\, r\, d_v)` operations and no :math:`n \times m` matrix. Causal:
    the sums run over :math:`j \le i + m - n`, a state
    :math:`\sum_{j \le t} \varphi(k_j) [v_j^\top, 1]` of :math:`r (d_v + 1)` numbers
    updated once per key, like a recurrent network's. It is computed in chunks of
    queries (the masked quadratic form inside a chunk, the state between chunks),
    which equals the masked quadratic form to rounding error.

    **The denominator.** With non-negative features it is a sum of non-negative
    terms, so it cannot cross zero; it is 0 only when every term is (no visible key,
    or all products underflowed), and then the output is set to 0 instead of
    ``0/0``. Features of either sign (the identity map, say) could make the
    denominator pass through zero and the output explode, so they are rejected.
    The ``elu + 1`` map is positive but underflows for very negative inputs
    (``exp(-800) = 0``): a row whose every term underflows gets output 0.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.linear_attention import linear_attention
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(6, 4)), rng.normal(size=(6, 4)), rng.normal(size=(6, 3))
    >>> phi = lambda x: np.where(x > 0, x + 1, np.exp(x))  # elu + 1
    >>> W = phi(Q) @ phi(K).T  # the quadratic form, for comparison
    >>> bool(np.allclose(linear_attention(Q, K, V), (W / W.sum(1, keepdims=True)) @ V))
    True
    >>> Wc = np.tril(W)  # causal: query i sees keys 0 .. i
    >>> causal = linear_attention(Q, K, V, causal=True)
    >>> bool(np.allclose(causal, (Wc / Wc.sum(1, keepdims=True)) @ V))
    True
    """
    causal = _check_causal(causal)
    if isinstance(feature_map, str):
        if feature_map != "elu":
            raise ValueError(
                f'feature_map must be "elu" or a function of the rows, got {feature_map!r}'
            )
        fmap = _elu_plus_one
    elif callable(feature_map):
        fmap = feature_map
    else:
        raise TypeError(
            f'feature_map must be "elu" or a function of the rows, got {type(feature_map).__name__}'
        )
    q, k, v, batch, work, out_dtype = _prepare(Q, K, V)
    phi_q = _features(fmap, q, "Q", work)
    phi_k = _features(fmap, k, "K", work)
    if phi_q.shape[-1] != phi_k.shape[-1]:
        raise ValueError(
            "feature_map must give queries and keys the same number of features r: got "
            f"φ(Q).shape = {phi_q.shape}, φ(K).shape = {phi_k.shape}"
        )
    return _finish(_kernel_attention(phi_q, phi_k, v, causal), batch, out_dtype)


def _features(fmap: Callable, x: np.ndarray, name: str, work: np.dtype) -> np.ndarray:
    phi = as_real_array(fmap(x), f"feature_map({name})", bool_hint="")
    if phi.shape[:-1] != x.shape[:-1] or phi.ndim != x.ndim:
        raise ValueError(
            f"feature_map must map the rows of {name} (shape {x.shape}) to rows of "
            f"features (shape {x.shape[:-1]} + (r,)); got shape {phi.shape}"
        )
    if not np.isfinite(phi).all() or (phi < 0).any():
        raise ValueError(
            f"feature_map({name}) must be finite and non-negative (a sum of features of "
            "either sign can make the denominator cross zero); got values in "
            f"[{np.nanmin(phi)}, {np.nanmax(phi)}]"
        )
    return phi.astype(work, copy=False)


# ---------------------------------------------------------------------------
# FAVOR+: positive orthogonal random features
# ---------------------------------------------------------------------------


def random_features(
    r: int, d: int, *, rng: np.random.Generator, orthogonal: bool = True
) -> npt.NDArray[np.float64]:
    r"""A random ``(r, d)`` projection for :func:`performer_attention`.

    Parameters
    ----------
    r : int
        Number of features (rows), ``>= 1``.
    d : int
        Width of the queries and keys, ``>= 1``.
    rng : numpy.random.Generator
        Source of randomness.
    orthogonal : bool, default True
        Orthogonal rows in blocks of ``d`` (Performer's ORF); else independent
        Gaussian rows.

    Returns
    -------
    W : (r, d) ndarray of float64
        Every row is distributed as a standard Gaussian vector :math:`N(0, I_d)`.
        With ``orthogonal``, the rows of each block of ``d`` are moreover exactly
        orthogonal (the last block has ``r mod d`` rows if ``d`` does not divide ``r``).

    Raises
    ------
    TypeError
        If ``rng`` is not a :class:`numpy.random.Generator`, or ``r``, ``d`` are not
        integers.
    ValueError
        If ``r`` or ``d`` is smaller than 1.

    Notes
    -----
    An orthogonal block is a uniformly random (Haar) orthogonal matrix (the ``Q`` of
    the QR decomposition of a Gaussian matrix, with the signs fixed by ``R``'s
    diagonal) whose rows are rescaled to the lengths of independent Gaussian vectors
    (chi-distributed with ``d`` degrees of freedom). Each row is then a uniformly
    random direction times an independent chi length, that is :math:`N(0, I_d)`, so
    each feature alone is unbiased; orthogonality within a block lowers the variance
    of their average (Choromanski et al., 2021).

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.linear_attention import random_features
    >>> W = random_features(6, 4, rng=np.random.default_rng(0))
    >>> W.shape
    (6, 4)
    >>> G = W[:4] @ W[:4].T  # the first block: orthogonal rows
    >>> bool(np.allclose(G - np.diag(np.diag(G)), 0))
    True
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"rng must be a numpy.random.Generator (np.random.default_rng(seed)), got "
            f"{type(rng).__name__}"
        )
    r = as_integer(r, "r", minimum=1)
    d = as_integer(d, "d", minimum=1)
    if not orthogonal:
        return rng.standard_normal((r, d))
    count = -(-r // d)  # blocks of d rows
    G = rng.standard_normal((count, d, d))
    basis, R = np.linalg.qr(G)  # (count, d, d), a Haar matrix once the signs are fixed
    basis *= np.where(np.diagonal(R, axis1=-2, axis2=-1) < 0, -1.0, 1.0)[:, None, :]
    lengths = np.linalg.norm(rng.standard_normal((count, d, d)), axis=-1)  # chi_d
    rows = basis.transpose(0, 2, 1) * lengths[..., None]  # orthogonal rows, Gaussian lengths
    return rows.reshape(count * d, d)[:r]


def _check_projection(projection: npt.ArrayLike, d: int, context: str) -> np.ndarray:
    W = as_real_array(projection, "projection", bool_hint="")
    if W.ndim != 2 or W.shape[0] < 1:
        raise ValueError(
            f"projection must be an (r, d) array with r >= 1 (from random_features); got "
            f"projection.shape = {W.shape}"
        )
    if W.shape[1] != d:
        raise ValueError(
            f"projection must have d = {d} columns, the width of the queries and keys: got "
            f"projection.shape = {W.shape}; {context}"
        )
    _check_finite(W, "projection")
    return W


def _favor_logits(x: np.ndarray, W: np.ndarray) -> np.ndarray:
    """``w · x' - |x'|²/2`` with ``x' = x / d^{1/4}``, shape (..., rows, r)."""
    d = x.shape[-1]
    xs = x * x.dtype.type(d**-0.25)
    logits = xs @ W.T.astype(x.dtype, copy=False)
    logits -= 0.5 * np.einsum("...d,...d->...", xs, xs)[..., None]
    return logits


def favor_features(X: npt.ArrayLike, projection: npt.ArrayLike) -> npt.NDArray[np.floating]:
    r"""FAVOR+ positive random features: ``exp(w · x - |x|²/2) / sqrt(r)``, ``x = X / d^{1/4}``.

    Parameters
    ----------
    X : (..., rows, d) array_like
        Queries or keys.
    projection : (r, d) array_like
        Rows :math:`w_1, \dots, w_r`, from :func:`random_features`.

    Returns
    -------
    phi : (..., rows, r) ndarray
        The features, not stabilised: they overflow when :math:`w \cdot x` is large
        (:func:`performer_attention` subtracts a maximum that cancels instead).

    Raises
    ------
    TypeError, ValueError
        If ``X`` or ``projection`` is not a finite real array, or the widths differ.

    Notes
    -----
    For :math:`w \sim N(0, I_d)`,
    :math:`\mathbb E\, e^{w\cdot(x + y)} = e^{|x + y|^2/2}`, so

    .. math::

        \mathbb E\bigl[e^{w\cdot x - |x|^2/2}\, e^{w\cdot y - |y|^2/2}\bigr]
        = e^{(|x + y|^2 - |x|^2 - |y|^2)/2} = e^{x\cdot y}.

    With :math:`x = q/d^{1/4}` and :math:`y = k/d^{1/4}`, :math:`x \cdot y =
    q\cdot k/\sqrt d`: :math:`\varphi(q)\cdot\varphi(k)`, the average over the ``r``
    rows, is an unbiased estimate of :math:`e^{q\cdot k/\sqrt d}`, and every feature
    is positive, so the estimate is too.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.linear_attention import favor_features, random_features
    >>> rng = np.random.default_rng(0)
    >>> q, k = rng.normal(size=4) / 2, rng.normal(size=4) / 2
    >>> W = random_features(100_000, 4, rng=rng)
    >>> estimate = favor_features(q[None], W) @ favor_features(k[None], W).T
    >>> exact = np.exp(q @ k / 2)
    >>> bool(abs(estimate[0, 0] / exact - 1) < 0.01)
    True
    """
    X = as_real_array(X, "X", bool_hint="")
    if X.ndim < 1:
        raise ValueError(f"X must have at least 1 axis, (..., d); got X.shape = {X.shape}")
    _check_finite(X, "X")
    if X.dtype == np.float16:
        X = X.astype(np.float32)
    W = _check_projection(projection, X.shape[-1], f"X.shape = {X.shape}")
    logits = _favor_logits(X, W)
    np.exp(logits, out=logits)
    logits *= logits.dtype.type(1 / math.sqrt(W.shape[0]))
    return logits


def performer_attention(
    Q: npt.ArrayLike,
    K: npt.ArrayLike,
    V: npt.ArrayLike,
    projection: npt.ArrayLike,
    *,
    causal: bool = False,
) -> npt.NDArray[np.floating]:
    r"""Performer (FAVOR+) attention: linear attention with positive random features.

    Parameters
    ----------
    Q : (..., n, d) array_like
        Queries.
    K : (..., m, d) array_like
        Keys.
    V : (..., m, d_v) array_like
        Values. The leading axes of ``Q``, ``K`` and ``V`` broadcast.
    projection : (r, d) array_like
        The random rows of :func:`random_features`; its width must be ``d``.
    causal : bool, default False
        Query ``i`` sees key ``j`` only if ``j <= i + m - n`` (running sums).

    Returns
    -------
    output : (..., n, d_v) ndarray
        :func:`linear_attention` with the features of :func:`favor_features`: an
        approximation of :func:`~helpers.attention.scaled_dot_product_attention`
        whose kernel estimates are unbiased, and which gets closer as ``r`` grows.

    Raises
    ------
    TypeError, ValueError
        As for :func:`linear_attention`, and if ``projection`` is not a finite
        ``(r, d)`` array with the queries' width ``d``.

    See Also
    --------
    random_features, favor_features, linear_attention

    Notes
    -----
    **Stabilised.** The features :math:`e^{w\cdot x - |x|^2/2}` overflow for large
    scores (``exp(710)`` is ``inf`` in float64, ``exp(89)`` in float32). Every query's
    features are divided by their largest, and every key's by the largest over all
    keys and features of the sequence: a factor common to a row's numerator and
    denominator, and one common to all keys, cancel in the ratio, so the output is
    unchanged while the largest exponent is 0. Features far below the maximum may
    then underflow to 0, as tiny softmax weights do; a row whose denominator is 0
    gets output 0 (see :func:`linear_attention`).

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.attention import scaled_dot_product_attention
    >>> from helpers.linear_attention import performer_attention, random_features
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = (rng.normal(size=(64, 8)) / 2 for _ in range(3))
    >>> exact, _ = scaled_dot_product_attention(Q, K, V)
    >>> few = performer_attention(Q, K, V, random_features(16, 8, rng=rng))
    >>> many = performer_attention(Q, K, V, random_features(4096, 8, rng=rng))
    >>> bool(np.abs(many - exact).max() < np.abs(few - exact).max())
    True
    """
    causal = _check_causal(causal)
    q, k, v, batch, _, out_dtype = _prepare(Q, K, V)
    d = q.shape[-1]
    W = _check_projection(
        projection,
        d,
        f"Q.shape = {np.shape(Q)}, K.shape = {np.shape(K)}",
    )
    lq = _favor_logits(q, W)  # (B, n, r)
    lq -= lq.max(axis=-1, keepdims=True) if lq.shape[1] else 0  # per query row
    lk = _favor_logits(k, W)  # (B, m, r)
    if lk.shape[1]:
        lk -= lk.max(axis=(-2, -1), keepdims=True)  # one constant for all keys
    np.exp(lq, out=lq)
    np.exp(lk, out=lk)
    return _finish(_kernel_attention(lq, lk, v, causal), batch, out_dtype)
