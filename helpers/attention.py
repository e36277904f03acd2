"""Introduced in chapter 2, scaled dot-product attention.

:func:`scaled_dot_product_attention` computes the attention output and the weights,
and :func:`attention_backward` its gradients by the formulas derived in chapter 2.
Masks are built by :mod:`helpers.masks`.

Conventions shared by both functions
------------------------------------
* Shapes follow ``book/notation.md``: ``Q (..., n, d_k)``, ``K (..., m, d_k)``,
  ``V (..., m, d_v)``, scores and weights ``(..., n, m)``, output ``(..., n, d_v)``.
  The leading (batch) axes of ``Q``, ``K`` and ``V`` broadcast against each other,
  so one ``K``, ``V`` of shape ``(m, d)`` can serve a batch of queries.
* ``mask`` follows PyTorch's boolean ``attn_mask``: broadcastable to ``(..., n, m)``,
  True where query ``i`` **may attend** to key ``j``. A numeric mask holding only 0
  and 1 is read the same way (1 = may attend). Anything else (say an additive mask
  of 0 and ``-inf``) is rejected with a :class:`ValueError`; an additive term goes in
  ``bias=`` instead, where ``-inf`` entries act as masked.
* A query with no key it may attend to (a *fully masked row*) gets weights exactly 0
  and output exactly 0, and contributes nothing to any gradient. See the Notes of
  :func:`scaled_dot_product_attention` for why, and for what PyTorch does.
* dtypes: float32 and float64 inputs are computed and returned in their own dtype
  (the widest of ``Q``, ``K``, ``V`` when they differ); float16 is computed in float32
  and rounded to float16 once at the end; integers are converted to float64; bool,
  complex and object arrays raise :class:`TypeError`.
* Inputs must be finite: ``nan`` or ``inf`` in ``Q``, ``K``, ``V`` raises
  :class:`ValueError` naming the argument.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from helpers._validate import as_real_array
from helpers.softmax import _to_out_dtype

__all__ = ["attention_backward", "scaled_dot_product_attention"]

# The forward pass works through the (..., n, m) scores in chunks of about this many
# entries (8 MiB in float64), each chunk going from the matrix product that writes it,
# through exp and the normalisation, to the product with V while it is still in the
# cache. Measured on the book's 2-core Xeon (n = 4096, d = 64, float64): 2**16 entries
# (a chunk that fits in L2) is 1.6x slower, as matrix products of 16 rows are
# inefficient; 2**20 to 2**21 is fastest; 2**24 (the whole matrix) is 1.2x slower.
_CHUNK_ENTRIES = 1 << 20

# Scores within ±_EXP_SAFE need no max-shift: e^64 ~ 6e27 times any realistic number
# of keys stays far below float32's largest value (3e38), and e^-64 ~ 2e-28 far above
# its smallest normal number (1e-38). Softmax is shift invariant, so the shift only
# prevents overflow and underflow; skipping it saves two passes over the chunk.
_EXP_SAFE = 64.0


# ---------------------------------------------------------------------------
# Input validation
# ---------------------------------------------------------------------------


def _as_float_array(x: npt.ArrayLike, name: str, layout: str) -> np.ndarray:
    """``x`` as a float array of at least 2 dimensions; ints become float64."""
    arr = as_real_array(x, name, bool_hint=", which goes in mask=")
    if arr.ndim < 2:
        raise ValueError(
            f"{name} must have at least 2 dimensions, {layout}; got {name}.shape = {arr.shape}"
        )
    return arr


def _check_finite(arr: np.ndarray, name: str) -> None:
    finite = np.isfinite(arr)
    if not finite.all():
        i = tuple(int(k) for k in np.argwhere(~finite)[0])
        raise ValueError(
            f"{name} must be finite, but {name}[{', '.join(map(str, i))}] = {arr[i]} "
            f"({name}.shape = {arr.shape})"
        )


def _check_scale(scale: float | None, d_k: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(d_k)
    is_real = isinstance(scale, numbers.Real) or (
        isinstance(scale, np.ndarray) and scale.ndim == 0 and scale.dtype.kind in "iuf"
    )
    if not is_real or isinstance(scale, (bool, np.bool_)):
        raise TypeError(f"scale must be a real number, got {scale!r}")
    value = float(scale)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"scale must be positive and finite, got {value!r}")
    return value


def _shapes(**arrays: np.ndarray) -> str:
    return ", ".join(f"{k}.shape = {v.shape}" for k, v in arrays.items())


def _check_qkv(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> tuple[int, ...]:
    """Check the shapes of Q, K, V against each other; return the batch shape."""
    if Q.shape[-1] != K.shape[-1]:
        raise ValueError(f"Q and K must have the same last axis (d_k): {_shapes(Q=Q, K=K)}")
    if K.shape[-2] != V.shape[-2]:
        raise ValueError(
            f"K and V must have the same number of rows (m, one value per key): {_shapes(K=K, V=V)}"
        )
    if Q.shape[-1] == 0:
        raise ValueError(f"Q and K must have d_k >= 1: {_shapes(Q=Q, K=K)}")
    try:
        return np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    except ValueError:
        raise ValueError(
            "the batch axes of Q, K and V (all but the last two) must broadcast against "
            f"each other: {_shapes(Q=Q, K=K, V=V)}"
        ) from None


def _check_mask(mask: npt.ArrayLike, target: tuple[int, ...], context: str) -> np.ndarray:
    """``mask`` as a bool array broadcastable to ``target`` = (..., n, m)."""
    arr = np.asarray(mask)
    kind = arr.dtype.kind
    if kind in "iuf":
        is_01 = (arr == 0) | (arr == 1)
        if not is_01.all():
            bad = arr[~is_01].flat[0]
            raise ValueError(
                "mask must be boolean (True = may attend) or hold only 0 and 1 "
                f"(1 = may attend); got mask of dtype {arr.dtype} containing {bad}. "
                "An additive mask (0 where allowed, -inf where not) or any other term "
                "added to the scores goes in bias= instead, e.g. "
                "bias=np.where(allowed, 0.0, -np.inf)"
            )
        arr = arr != 0
    elif kind != "b":
        raise TypeError(f"mask must be a boolean array, got dtype {arr.dtype}")
    _check_broadcast(arr, "mask", target, context)
    return arr


def _check_bias(bias: npt.ArrayLike, target: tuple[int, ...], context: str) -> np.ndarray:
    arr = np.asarray(bias)
    if arr.dtype.kind == "b":
        raise TypeError(
            "bias must be an array of real numbers, got dtype bool; a boolean mask goes in mask="
        )
    if arr.dtype.kind in "iu":
        arr = arr.astype(np.float64)
    elif arr.dtype.kind != "f":
        raise TypeError(f"bias must be an array of real numbers, got dtype {arr.dtype}")
    if np.isnan(arr).any() or np.isposinf(arr).any():
        raise ValueError("bias contains nan or +inf; only -inf (a masked entry) is allowed")
    _check_broadcast(arr, "bias", target, context)
    return arr


def _check_broadcast(arr: np.ndarray, name: str, target: tuple[int, ...], context: str) -> None:
    try:
        fits = np.broadcast_shapes(arr.shape, target) == target
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(
            f"{name} must broadcast to (..., n, m) = {target} (the batch axes, then "
            f"n = Q.shape[-2] queries and m = K.shape[-2] keys): got {name}.shape = "
            f"{arr.shape}; {context}"
        )


def _work_dtype(*arrays: np.ndarray) -> tuple[np.dtype, np.dtype]:
    """``(dtype computed in, dtype returned)``: float16 is computed in float32."""
    out = np.result_type(*arrays)
    return (np.dtype(np.float32) if out == np.float16 else out), out


def _flat(arr: np.ndarray, batch: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """``arr`` (..., r, c) broadcast to ``batch`` and flattened to (B, r, c).

    Copies only when ``arr`` is broadcast along the batch or changes dtype; either
    copy is of an input, far smaller than the (B, n, m) scores.
    """
    full = np.broadcast_to(arr, batch + arr.shape[-2:])
    return full.reshape(math.prod(batch), *arr.shape[-2:]).astype(dtype, copy=False)


def _flat_mask(arr: np.ndarray, batch: tuple[int, ...]) -> np.ndarray:
    """A mask or bias broadcastable to (..., n, m) as (B or 1, n or 1, m or 1).

    A mask without batch axes (a causal mask) is not copied once per batch element.
    """
    arr = arr.reshape((1,) * (2 - arr.ndim) + arr.shape) if arr.ndim < 2 else arr
    if arr.ndim == 2:
        return arr[None]
    return _flat(arr, batch, arr.dtype)


def _part(arr: np.ndarray, b: slice, r: slice) -> np.ndarray:
    """The chunk ``[b, r]`` of a (B or 1, n or 1, ...) array; broadcast axes stay whole."""
    return arr[b if arr.shape[0] > 1 else slice(None), r if arr.shape[1] > 1 else slice(None)]


def _chunks(B: int, n: int, m: int) -> Iterator[tuple[slice, slice]]:
    """Yield ``(batch slice, row slice)`` covering (B, n, m) in chunks of ~_CHUNK_ENTRIES."""
    rows = max(1, _CHUNK_ENTRIES // max(m, 1))
    if rows >= n:  # whole matrices fit: take several batch elements at once
        per = max(1, _CHUNK_ENTRIES // max(n * m, 1))
        for b0 in range(0, B, per):
            yield slice(b0, b0 + per), slice(None)
    else:  # one batch element at a time, in blocks of rows
        for b in range(B):
            for r0 in range(0, n, rows):
                yield slice(b, b + 1), slice(r0, r0 + rows)


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------


def scaled_dot_product_attention(
    Q: npt.ArrayLike,
    K: npt.ArrayLike,
    V: npt.ArrayLike,
    mask: npt.ArrayLike | None = None,
    *,
    scale: float | None = None,
    bias: npt.ArrayLike | None = None,
) -> tuple[npt.NDArray[np.floating], npt.NDArray[np.floating]]:
    r"""Scaled dot-product attention: ``softmax(Q Kᵀ · scale + bias, masked) V``.

    Parameters
    ----------
    Q : (..., n, d_k) array_like
        Queries, one per row.
    K : (..., m, d_k) array_like
        Keys, one per row.
    V : (..., m, d_v) array_like
        Values, one per key. The leading axes of ``Q``, ``K`` and ``V`` broadcast.
    mask : (..., n, m) array_like of bool, optional
        Broadcastable to ``(..., n, m)``; True where query ``i`` **may attend** to
        key ``j`` (PyTorch's boolean ``attn_mask``). A numeric array of 0s and 1s is
        accepted and read the same way. See :mod:`helpers.masks`.
    scale : float, optional
        Positive factor applied to the scores; defaults to ``1 / sqrt(d_k)``.
    bias : (..., n, m) array_like of float, optional
        Added to the scaled scores before the softmax (an additive mask, ALiBi,
        relative positions). ``-inf`` entries act as masked; ``nan`` and ``+inf``
        are rejected.

    Returns
    -------
    output : (..., n, d_v) ndarray
        ``weights @ V``; row ``i`` is the weighted average of the values that
        query ``i`` attends to.
    weights : (..., n, m) ndarray
        The attention weights ``A``. Each row sums to 1, except a fully masked row,
        which is all 0; masked entries are exactly 0.

    Raises
    ------
    TypeError
        If an input is not real-valued (``Q``, ``K``, ``V`` or ``bias`` of dtype bool,
        complex, ...), ``mask`` is neither boolean nor numeric, or ``scale`` is not
        a real number.
    ValueError
        If ``Q`` and ``K`` differ in ``d_k``, ``K`` and ``V`` in ``m``, the batch axes
        do not broadcast, ``mask`` or ``bias`` does not broadcast to ``(..., n, m)``,
        a numeric ``mask`` holds values other than 0 and 1, an input is not finite,
        or ``scale`` is not positive and finite. The message names the arguments and
        their shapes.

    See Also
    --------
    attention_backward : the gradients.
    helpers.masks.causal_mask, helpers.masks.padding_mask : building masks.
    helpers.softmax.softmax

    Notes
    -----
    With scale :math:`s` (default :math:`1/\sqrt{d_k}`), bias :math:`B` (default 0)
    and mask :math:`M`,

    .. math::

        S = s\, Q K^\top + B, \qquad
        A_{ij} = \frac{M_{ij}\, e^{S_{ij} - \mu_i}}{\sum_{l} M_{il}\, e^{S_{il} - \mu_i}},
        \qquad O = A V,

    where :math:`\mu_i = \max_{j : M_{ij}} S_{ij}` is the largest allowed score of
    row :math:`i`. Subtracting it is the max-shift of :func:`helpers.softmax.softmax`:
    every exponent is :math:`\le 0` and the largest term is exactly 1, so scores of
    any size (tested up to :math:`10^4` in float32 and float64) give finite, correct
    weights.

    **Fully masked rows.** If query :math:`i` may attend to no key, the fraction is
    0/0. This function returns :math:`A_{i\cdot} = 0` and :math:`O_{i\cdot} = 0`, and
    :func:`attention_backward` gives such a row zero gradient: there is nothing to
    attend to, so nothing contributes. The alternative, ``nan``, is what the bare
    softmax formula gives (``torch.softmax`` of an all ``-inf`` row is ``nan``), and a
    single ``nan`` row (say the first queries of a left-padded sequence under a
    causal mask, which see only padding) would spread through the next layer's
    matrix products into the whole batch and its loss. PyTorch's
    ``torch.nn.functional.scaled_dot_product_attention`` makes the same choice
    (checked with torch 2.13 on the CPU): both its math and its fused (flash)
    backend return an output row of 0, with zero gradients, for a fully masked row.
    :func:`helpers.softmax.softmax` itself raises on an all ``-inf`` row;
    this function decides what such a row means before taking the softmax.

    **Computation.** The result is the four steps of chapter 2, arranged for speed
    (``bench/bench_attention.py``: 1.6x to 1.8x as fast as PyTorch's math backend at
    ``n = 4096``). The scores are written straight into the ``weights`` array that is
    returned, in blocks of query rows (or of several small matrices), and each block
    is exponentiated, normalised in place and multiplied by ``V`` while it is still
    in the cache. The max-shift is skipped for a block whose scores provably lie
    within ``±64`` (by Cauchy-Schwarz, :math:`|S_{ij}| \le s\,\|q_i\|\,\|k_j\|`):
    there ``exp`` can neither overflow nor underflow, and since softmax is shift
    invariant the weights are the same up to rounding.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.attention import scaled_dot_product_attention
    >>> Q = np.array([[1.0, 0.0], [0.0, 1.0]])  # (n, d_k) = (2, 2)
    >>> K = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # (m, d_k) = (3, 2)
    >>> V = np.array([[1.0], [2.0], [3.0]])  # (m, d_v) = (3, 1)
    >>> output, weights = scaled_dot_product_attention(Q, K, V)
    >>> weights.round(4)
    array([[0.4011, 0.1978, 0.4011],
           [0.1978, 0.4011, 0.4011]])
    >>> output.round(4)
    array([[2.    ],
           [2.2033]])

    With a mask (True = may attend), the second query sees only the first two keys:

    >>> mask = np.array([[True, True, True], [True, True, False]])
    >>> scaled_dot_product_attention(Q, K, V, mask)[1].round(4)
    array([[0.4011, 0.1978, 0.4011],
           [0.3302, 0.6698, 0.    ]])
    """
    Q = _as_float_array(Q, "Q", "(..., n, d_k)")
    K = _as_float_array(K, "K", "(..., m, d_k)")
    V = _as_float_array(V, "V", "(..., m, d_v)")
    batch = _check_qkv(Q, K, V)
    n, (m, d_k), d_v = Q.shape[-2], K.shape[-2:], V.shape[-1]
    scale = _check_scale(scale, d_k)
    context = _shapes(Q=Q, K=K, V=V)
    target = (*batch, n, m)
    if mask is not None:
        mask = _check_mask(mask, target, context)
    if bias is not None:
        bias = _check_bias(bias, target, context)
    for arr, name in ((Q, "Q"), (K, "K"), (V, "V")):
        _check_finite(arr, name)
    work, out_dtype = _work_dtype(Q, K, V)

    B = math.prod(batch)
    q = _flat(Q, batch, work) * work.type(scale)  # (B, n, d_k): the scale applied once
    k = _flat(K, batch, work)  # (B, m, d_k)
    v = _flat(V, batch, work)  # (B, m, d_v)
    hidden = None if mask is None else ~_flat_mask(mask, batch)  # (B|1, n|1, m|1)
    add = None if bias is None else _flat_mask(bias, batch).astype(work, copy=False)

    weights = np.empty((B, n, m), dtype=work)
    output = np.zeros((B, n, d_v), dtype=work)  # stays 0 if there are no keys
    if m == 0 or n == 0:  # no keys (every row is fully masked), or no rows at all
        return _result(output, weights, batch, out_dtype)
    # Cauchy-Schwarz: |S_ij| <= |q_i| |k_j|. Where every score of a chunk is within
    # ±_EXP_SAFE, exp can neither overflow nor underflow, and the max-shift is skipped.
    sq_norm = "...d,...d->..."  # squared norm of each row
    bound = np.sqrt(np.einsum(sq_norm, q, q) * np.einsum(sq_norm, k, k).max(axis=-1)[:, None])
    kt = k.transpose(0, 2, 1)  # (B, d_k, m)
    for b, r in _chunks(B, n, m):
        E = weights[b, r]  # (g, rows, m): this chunk of the result, filled in place
        np.matmul(q[b, r], kt[b], out=E)  # scaled scores S
        if add is not None:
            E += _part(add, b, r)
        if hidden is not None:
            np.copyto(E, -np.inf, where=_part(hidden, b, r))
        if add is not None or bound[b, r].max() > _EXP_SAFE:
            top = E.max(axis=-1, keepdims=True)  # (g, rows, 1)
            top[np.isneginf(top)] = 0  # a fully masked row: exp(-inf - 0) = 0
            E -= top
        np.exp(E, out=E)  # unnormalised weights
        total = E.sum(axis=-1, keepdims=True)  # (g, rows, 1)
        total[total == 0] = 1  # a fully masked row: weights and output stay 0
        E *= 1 / total  # one division per row, then a product per entry
        np.matmul(E, v[b], out=output[b, r])
    return _result(output, weights, batch, out_dtype)


def _result(
    output: np.ndarray, weights: np.ndarray, batch: tuple[int, ...], out_dtype: np.dtype
) -> tuple[np.ndarray, np.ndarray]:
    """Restore the batch axes and the output dtype."""
    output = _to_out_dtype(output, out_dtype)
    weights = _to_out_dtype(weights, out_dtype)
    return output.reshape(*batch, *output.shape[1:]), weights.reshape(*batch, *weights.shape[1:])


def _sum_to_shape(grad: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum ``grad`` over the axes along which an input of ``shape`` was broadcast."""
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, s in enumerate(shape) if s == 1 and grad.shape[lead + i] != 1
    )
    return grad.sum(axis=axes).reshape(shape) if axes else grad


def attention_backward(
    Q: npt.ArrayLike,
    K: npt.ArrayLike,
    V: npt.ArrayLike,
    weights: npt.ArrayLike,
    grad_output: npt.ArrayLike,
    mask: npt.ArrayLike | None = None,
    *,
    scale: float | None = None,
) -> tuple[npt.NDArray[np.floating], npt.NDArray[np.floating], npt.NDArray[np.floating]]:
    r"""Gradients of scaled dot-product attention with respect to ``Q``, ``K``, ``V``.

    Parameters
    ----------
    Q : (..., n, d_k) array_like
        Queries, as passed to :func:`scaled_dot_product_attention`.
    K : (..., m, d_k) array_like
        Keys.
    V : (..., m, d_v) array_like
        Values. The leading axes of ``Q``, ``K`` and ``V`` broadcast.
    weights : (..., n, m) array_like
        The weights :math:`A` returned by the forward pass (its full batch shape).
    grad_output : (..., n, d_v) array_like
        :math:`G = \partial L / \partial O`, the gradient of a scalar loss with
        respect to the output, same shape as the output.
    mask : (..., n, m) array_like of bool, optional
        The forward pass's mask. Masked weights are already 0, which zeroes their
        gradient; passing the mask checks its shape too and makes the zeros exact
        even if ``weights`` came from elsewhere.
    scale : float, optional
        The forward pass's scale; defaults to ``1 / sqrt(d_k)``.

    Returns
    -------
    dQ : (..., n, d_k) ndarray
        :math:`\partial L / \partial Q`, same shape as ``Q``.
    dK : (..., m, d_k) ndarray
        :math:`\partial L / \partial K`, same shape as ``K`` (summed over the batch
        axes along which ``K`` was broadcast).
    dV : (..., m, d_v) ndarray
        :math:`\partial L / \partial V`, same shape as ``V`` (likewise summed).

    Raises
    ------
    TypeError, ValueError
        As for :func:`scaled_dot_product_attention`, and if ``weights`` or
        ``grad_output`` does not have the shape of the forward pass's result.

    See Also
    --------
    scaled_dot_product_attention

    Notes
    -----
    With :math:`S = s\,QK^\top`, :math:`A = \operatorname{softmax}(S)` by rows,
    :math:`O = AV` and :math:`G = \partial L/\partial O`:

    .. math::

        dV = A^\top G, \qquad dA = G V^\top, \qquad
        dS = A \odot \bigl(dA - \operatorname{rowsum}(dA \odot A)\bigr),

    .. math::

        dQ = s\, dS\, K, \qquad dK = s\, dS^\top Q .

    The middle line is the softmax Jacobian :math:`\operatorname{diag}(a) - a a^\top`
    applied to each row without forming it. Where :math:`A_{ij} = 0` (masked),
    :math:`dS_{ij} = 0`: a masked score gets no gradient, and a fully masked row
    none at all. A bias added to the scores does not change these formulas (its own
    gradient would be :math:`dS`).

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.attention import attention_backward, scaled_dot_product_attention
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(4, 3)), rng.normal(size=(5, 3)), rng.normal(size=(5, 2))
    >>> output, weights = scaled_dot_product_attention(Q, K, V)
    >>> G = np.ones_like(output)  # the gradient of L = output.sum()
    >>> dQ, dK, dV = attention_backward(Q, K, V, weights, G)
    >>> dQ.shape, dK.shape, dV.shape
    ((4, 3), (5, 3), (5, 2))
    >>> np.allclose(dV.sum(axis=0), 4.0)  # dV = Aᵀ G: 4 rows of weights, each summing to 1
    True
    """
    Q = _as_float_array(Q, "Q", "(..., n, d_k)")
    K = _as_float_array(K, "K", "(..., m, d_k)")
    V = _as_float_array(V, "V", "(..., m, d_v)")
    A = _as_float_array(weights, "weights", "(..., n, m)")
    G = _as_float_array(grad_output, "grad_output", "(..., n, d_v)")
    batch = _check_qkv(Q, K, V)
    n, (m, d_k), d_v = Q.shape[-2], K.shape[-2:], V.shape[-1]
    scale = _check_scale(scale, d_k)
    context = _shapes(Q=Q, K=K, V=V)
    for arr, name, want in ((A, "weights", (*batch, n, m)), (G, "grad_output", (*batch, n, d_v))):
        if arr.shape != want:
            raise ValueError(
                f"{name} must have shape {want} (the forward pass's): got {name}.shape = "
                f"{arr.shape}; {context}"
            )
    if mask is not None:
        mask = _check_mask(mask, (*batch, n, m), context)
    for arr, name in ((Q, "Q"), (K, "K"), (V, "V"), (A, "weights"), (G, "grad_output")):
        _check_finite(arr, name)
    work, out_dtype = _work_dtype(Q, K, V, A, G)
    Q, K, V, A, G = (x.astype(work, copy=False) for x in (Q, K, V, A, G))

    dV = np.swapaxes(A, -1, -2) @ G  # (..., m, d_v)
    dA = G @ np.swapaxes(V, -1, -2)  # (..., n, m)
    dS = dA
    dS -= (dA * A).sum(axis=-1, keepdims=True)
    dS *= A  # (..., n, m): A ⊙ (dA - rowsum(dA ⊙ A))
    if mask is not None:
        np.copyto(dS, 0, where=~mask)
    dS *= work.type(scale)
    dQ = dS @ K  # (..., n, d_k)
    dK = np.swapaxes(dS, -1, -2) @ Q  # (..., m, d_k)
    return tuple(
        _to_out_dtype(_sum_to_shape(g, x.shape), out_dtype) for g, x in ((dQ, Q), (dK, K), (dV, V))
    )
