"""Introduced in chapter 3, multi-head attention.

:func:`multi_head_attention` runs ``h`` attention heads side by side on slices of one
packed projection, :func:`split_heads` and :func:`merge_heads` are the two reshapes
that move between the packed and the per-head layout,
:func:`multi_head_attention_backward` is its gradient, and
:func:`grouped_query_attention` lets groups of query heads share key/value heads
(multi-query attention when there is a single key/value head). :func:`init_mha_params`
draws the weights as PyTorch's ``nn.MultiheadAttention`` does, and
:func:`mha_parameter_count` and :func:`kv_cache_elements` count what a layer stores.

Conventions shared by all functions here
----------------------------------------
* Row vectors (``book/notation.md``): a projection is ``X @ W``, and every weight
  matrix is ``(d_model, d_model)`` (``W_K``, ``W_V``: ``(d_model, h_kv d_k)`` in
  grouped-query attention). Head ``i`` owns columns ``i d_k, ..., (i + 1) d_k - 1`` of
  ``W_Q``, ``W_K``, ``W_V`` and the same rows of ``W_O``, with ``d_k = d_model / h``.
* Batched over leading axes: ``X_q`` is ``(..., n, d_model)``, ``X_kv`` is
  ``(..., m, d_model)``, and their batch shapes broadcast against each other.
* The mask: boolean, True = *may attend* (the book's one convention), shaped like the
  attention weights ``(..., h, n, m)`` with axes of length 1 where it is shared. Two
  forms are accepted:

  - at most 2 axes, ``(n, m)``, ``(1, m)`` or ``(m,)``: the same for every batch element
    and head (``causal_mask(n)``);
  - exactly as many axes as the weights, ``(*batch, h, n, m)``, each of length 1 or
    full: ``(b, 1, n, m)`` varies over the batch, ``(1, h, n, m)`` over the heads.

  A mask of chapter 2's batch shape ``(b, n, m)`` (``padding_mask(lengths, m)`` is
  ``(b, 1, m)``) has no head axis and is rejected rather than broadcast: NumPy would
  align its batch axis with the heads. Insert the head axis: ``mask[:, None]``, the
  ``(b, 1, n, m)`` layout PyTorch's ``scaled_dot_product_attention`` also expects.
  A query that may attend to no key at all gets weights 0 and head output 0 (chapter
  2's convention; ``nn.MultiheadAttention`` gives ``nan`` there).
* Inputs must be finite (chapter 2's :func:`~helpers.attention.scaled_dot_product_attention`
  checks the projected queries, keys and values).
* dtypes: float32 and float64 inputs are kept (mixed inputs are promoted as NumPy
  does); integer inputs are converted to float64; bool, complex and object arrays raise
  :class:`TypeError`.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from helpers._validate import as_integer
from helpers.attention import attention_backward, scaled_dot_product_attention

__all__ = [
    "grouped_query_attention",
    "init_mha_params",
    "kv_cache_elements",
    "merge_heads",
    "mha_parameter_count",
    "multi_head_attention",
    "multi_head_attention_backward",
    "split_heads",
]

_WEIGHTS = ("W_Q", "W_K", "W_V", "W_O")


# ---------------------------------------------------------------------------
# Input validation
# ---------------------------------------------------------------------------


def _count(value: object, name: str, *, minimum: int = 1) -> int:
    """``value`` as a Python int ``>= minimum``; TypeError/ValueError naming ``name``."""
    return as_integer(value, name, minimum=minimum)


def _head_width(d_model: int, num_heads: int, num_kv_heads: int | None = None) -> int:
    """``d_k = d_model / num_heads``; both divisibility conditions are checked here."""
    if d_model % num_heads:
        raise ValueError(
            f"d_model = {d_model} is not divisible by num_heads = {num_heads}: every head "
            f"gets d_k = d_model / num_heads columns"
        )
    if num_kv_heads is not None and num_heads % num_kv_heads:
        raise ValueError(
            f"num_heads = {num_heads} is not divisible by num_kv_heads = {num_kv_heads}: "
            "each key/value head serves a group of num_heads / num_kv_heads query heads"
        )
    return d_model // num_heads


def _as_float(x: npt.ArrayLike, name: str) -> np.ndarray:
    """``x`` as a real float array (integers become float64); TypeError otherwise."""
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} must be an array of real numbers: {err}") from err
    if arr.dtype.kind == "f":
        return arr
    if arr.dtype.kind in "iu":
        return arr.astype(np.float64)
    if arr.dtype.kind == "b":
        raise TypeError(
            f"{name} must be an array of real numbers, got dtype bool (a mask passed in "
            "the wrong position?)"
        )
    raise TypeError(f"{name} must be an array of real numbers, got dtype {arr.dtype}")


def _check_shape(arr: np.ndarray, name: str, expected: tuple[int, ...], meaning: str) -> None:
    if arr.shape != expected:
        raise ValueError(f"{name} must have shape {meaning} = {expected}, got {arr.shape}")


def _prepare(
    X_q: npt.ArrayLike,
    X_kv: npt.ArrayLike,
    weights: dict[str, npt.ArrayLike],
    biases: dict[str, npt.ArrayLike | None],
    num_heads: object,
    num_kv_heads: object,
    mask: npt.ArrayLike | None,
) -> tuple[np.ndarray, np.ndarray, dict, dict, int, int, np.ndarray | None, tuple[int, ...]]:
    """Validate every argument; return them as arrays of one float dtype.

    Returns ``(X_q, X_kv, weights, biases, h, h_kv, mask, batch)`` where ``biases``
    holds only the biases given and ``batch`` is the broadcast batch shape.
    """
    h = _count(num_heads, "num_heads")
    h_kv = h if num_kv_heads is None else _count(num_kv_heads, "num_kv_heads")
    xq, xkv = _as_float(X_q, "X_q"), _as_float(X_kv, "X_kv")
    for name, x, rows in (("X_q", xq, "n"), ("X_kv", xkv, "m")):
        if x.ndim < 2:
            raise ValueError(
                f"{name} must have shape (..., {rows}, d_model), at least 2 axes, got "
                f"shape {x.shape}; a single token is a (1, d_model) array"
            )
    d_model = xq.shape[-1]
    if xkv.shape[-1] != d_model:
        raise ValueError(
            "X_q and X_kv must have the same width d_model (the last axis): "
            f"X_q.shape = {xq.shape}, X_kv.shape = {xkv.shape}"
        )
    if d_model == 0:
        raise ValueError(f"d_model (the last axis of X_q) must be positive, X_q.shape = {xq.shape}")
    if xkv.shape[-2] == 0:
        raise ValueError(
            f"X_kv has no keys (X_kv.shape = {xkv.shape}): every query needs at least one key"
        )
    try:
        batch = np.broadcast_shapes(xq.shape[:-2], xkv.shape[:-2])
    except ValueError:
        raise ValueError(
            f"the batch shapes of X_q and X_kv do not broadcast: X_q.shape = {xq.shape}, "
            f"X_kv.shape = {xkv.shape} (the last two axes are (tokens, d_model))"
        ) from None
    d_k = _head_width(d_model, h, h_kv)
    kv_width = h_kv * d_k
    widths = {"W_Q": d_model, "W_K": kv_width, "W_V": kv_width, "W_O": d_model}
    ws = {}
    for name in _WEIGHTS:
        w = _as_float(weights[name], name)
        if widths[name] == d_model:
            meaning = "(d_model, d_model)"
        else:
            meaning = "(d_model, num_kv_heads * d_k)"
        _check_shape(w, name, (d_model, widths[name]), meaning)
        ws[name] = w
    bs = {}
    for name, b in biases.items():
        if b is None:
            continue
        b = _as_float(b, name)
        width = widths["W_" + name[-1]]
        _check_shape(
            b, name, (width,), "(d_model,)" if width == d_model else "(num_kv_heads * d_k,)"
        )
        bs[name] = b
    dtype = np.result_type(xq, xkv, *ws.values(), *bs.values())
    xq, xkv = xq.astype(dtype, copy=False), xkv.astype(dtype, copy=False)
    ws = {k: v.astype(dtype, copy=False) for k, v in ws.items()}
    bs = {k: v.astype(dtype, copy=False) for k, v in bs.items()}
    n, m = xq.shape[-2], xkv.shape[-2]
    return xq, xkv, ws, bs, h, h_kv, _check_mask(mask, (*batch, h, n, m)), batch


def _check_mask(mask: npt.ArrayLike | None, shape: tuple[int, ...]) -> np.ndarray | None:
    """The mask as a boolean array of at most 2 axes or of ``len(shape)`` axes."""
    if mask is None:
        return None
    arr = np.asarray(mask)
    if arr.dtype.kind not in "biuf":  # 0/1 numbers are accepted as in chapter 2 (checked there)
        raise TypeError(f"mask must be a boolean array (True = may attend), got dtype {arr.dtype}")
    full = "(*batch, h, n, m) = " + str(shape)
    if arr.ndim > 2 and arr.ndim != len(shape):
        advice = (
            "; for a per-sequence mask (b, n, m) or padding_mask(lengths, m) (b, 1, m), "
            "insert the head axis: mask[:, None]"
            if arr.ndim == len(shape) - 1
            else ""
        )
        raise ValueError(
            f"mask.shape = {arr.shape} does not match the attention weights {full}: a mask "
            "has at most 2 axes (n, m), shared by every batch element and head, or one "
            f"axis per axis of the weights{advice}"
        )
    if any(s not in (1, t) for s, t in zip(arr.shape[::-1], shape[::-1], strict=False)):
        raise ValueError(
            f"mask.shape = {arr.shape} does not broadcast to the attention weights {full}; "
            "every axis must have length 1 or the weights' length"
        )
    return arr


# ---------------------------------------------------------------------------
# Reshapes
# ---------------------------------------------------------------------------


def split_heads(X: npt.ArrayLike, num_heads: int) -> np.ndarray:
    r"""Split the columns of ``X`` into ``num_heads`` consecutive blocks, one per head.

    Parameters
    ----------
    X : (..., n, d_model) array_like
        Packed projections of ``n`` tokens, such as ``Q = X_q @ W_Q``.
    num_heads : int
        Number of heads ``h``; must divide ``d_model``.

    Returns
    -------
    heads : (..., h, n, d_k) ndarray
        ``heads[..., i, :, :] = X[..., :, i*d_k:(i+1)*d_k]`` with ``d_k = d_model / h``.
        A view of ``X`` (no copy) when ``X`` is an ndarray.

    Raises
    ------
    TypeError
        If ``num_heads`` is not an integer.
    ValueError
        If ``X`` has fewer than 2 axes, ``num_heads`` is not positive or does not
        divide ``d_model``.

    See Also
    --------
    merge_heads : its inverse.

    Notes
    -----
    The reshape splits the last axis as ``(h, d_k)``, head-major, so head ``i`` gets a
    *contiguous* block of columns; ``(d_k, h)`` would interleave the heads' columns. The
    transpose then moves the head axis before the token axis:

    .. math::

        (\ldots, n, d_\text{model}) \to (\ldots, n, h, d_k) \to (\ldots, h, n, d_k).

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.multihead import split_heads
    >>> X = np.arange(8).reshape(2, 4)  # 2 tokens, d_model = 4
    >>> split_heads(X, 2)  # head 0 gets columns 0-1, head 1 columns 2-3
    array([[[0, 1],
            [4, 5]],
    <BLANKLINE>
           [[2, 3],
            [6, 7]]])
    """
    arr = np.asarray(X)
    h = _count(num_heads, "num_heads")
    if arr.ndim < 2:
        raise ValueError(f"X must have shape (..., n, d_model), at least 2 axes, got {arr.shape}")
    *lead, n, d_model = arr.shape
    if d_model % h:
        raise ValueError(
            f"d_model = {d_model} (X.shape = {arr.shape}) is not divisible by "
            f"num_heads = {h}: every head gets d_k = d_model / num_heads columns"
        )
    heads = arr.reshape(*lead, n, h, d_model // h)  # (..., n, h, d_k)
    return np.swapaxes(heads, -3, -2)  # (..., h, n, d_k)


def merge_heads(X: npt.ArrayLike) -> np.ndarray:
    r"""Concatenate the heads of ``X`` side by side: the inverse of :func:`split_heads`.

    Parameters
    ----------
    X : (..., h, n, d_k) array_like
        One ``(n, d_k)`` block per head.

    Returns
    -------
    merged : (..., n, h * d_k) ndarray
        ``merged[..., :, i*d_k:(i+1)*d_k] = X[..., i, :, :]``: row ``t`` is the
        concatenation of the heads' outputs for token ``t``.

    Raises
    ------
    ValueError
        If ``X`` has fewer than 3 axes.

    See Also
    --------
    split_heads

    Notes
    -----
    :math:`(\ldots, h, n, d_k) \to (\ldots, n, h, d_k) \to (\ldots, n, h d_k)`; the
    transpose is needed before the reshape (reshaping ``(h, n, d_k)`` straight to
    ``(n, h d_k)`` would mix tokens).

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.multihead import merge_heads, split_heads
    >>> X = np.arange(12.0).reshape(3, 4)
    >>> merge_heads(split_heads(X, 2)).shape
    (3, 4)
    >>> bool(np.array_equal(merge_heads(split_heads(X, 2)), X))
    True
    """
    arr = np.asarray(X)
    if arr.ndim < 3:
        raise ValueError(f"X must have shape (..., h, n, d_k), at least 3 axes, got {arr.shape}")
    *lead, h, n, d_k = arr.shape
    return np.swapaxes(arr, -3, -2).reshape(*lead, n, h * d_k)  # (..., n, h d_k)


# ---------------------------------------------------------------------------
# Forward and backward
# ---------------------------------------------------------------------------


def _project(X: np.ndarray, W: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """``X @ W + b``: every head's projection in one matrix product."""
    Y = X @ W
    if b is not None:
        Y += b
    return Y


def _grouped(mask: np.ndarray | None, h_kv: int, group: int) -> np.ndarray | None:
    """Reshape the head axis of a ``(*batch, h, n, m)`` mask to ``(h_kv, group)``."""
    if mask is None or mask.ndim <= 2:
        return mask  # broadcasts against any leading axes
    if mask.shape[-3] == 1:
        return mask[..., None, :, :]  # (*batch, 1, 1, n, m)
    return mask.reshape(*mask.shape[:-3], h_kv, group, *mask.shape[-2:])


def _forward(xq, xkv, ws, bs, h, h_kv, mask, batch):
    """The layer; returns ``(output, weights, (Q, K, V, concat))`` for the backward.

    ``Q`` keeps the batch shape of ``X_q`` and ``K``, ``V`` that of ``X_kv``;
    :func:`~helpers.attention.scaled_dot_product_attention` broadcasts them.
    """
    n, m = xq.shape[-2], xkv.shape[-2]
    Q = split_heads(_project(xq, ws["W_Q"], bs.get("b_Q")), h)  # (b, h, n, d_k)
    K = split_heads(_project(xkv, ws["W_K"], bs.get("b_K")), h_kv)  # (b, h_kv, m, d_k)
    V = split_heads(_project(xkv, ws["W_V"], bs.get("b_V")), h_kv)  # (b, h_kv, m, d_k)
    if h_kv == h:
        heads, A = scaled_dot_product_attention(Q, K, V, mask)  # (b, h, n, d_k), (b, h, n, m)
    else:
        g = h // h_kv  # query heads per key/value head; query head i uses kv head i // g
        d_k = Q.shape[-1]
        Qg = Q.reshape(*Q.shape[:-3], h_kv, g, n, d_k)  # (b, h_kv, g, n, d_k)
        Kg, Vg = K[..., None, :, :], V[..., None, :, :]  # (b, h_kv, 1, m, d_k): shared by g
        heads, A = scaled_dot_product_attention(Qg, Kg, Vg, _grouped(mask, h_kv, g))
        heads = heads.reshape(*batch, h, n, d_k)  # (b, h, n, d_k)
        A = A.reshape(*batch, h, n, m)  # (b, h, n, m)
    concat = merge_heads(heads)  # (b, n, d_model)
    output = _project(concat, ws["W_O"], bs.get("b_O"))  # (b, n, d_model)
    return output, A, (Q, K, V, concat)


def multi_head_attention(
    X_q: npt.ArrayLike,
    X_kv: npt.ArrayLike,
    W_Q: npt.ArrayLike,
    W_K: npt.ArrayLike,
    W_V: npt.ArrayLike,
    W_O: npt.ArrayLike,
    num_heads: int,
    mask: npt.ArrayLike | None = None,
    *,
    b_Q: npt.ArrayLike | None = None,
    b_K: npt.ArrayLike | None = None,
    b_V: npt.ArrayLike | None = None,
    b_O: npt.ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Multi-head attention: ``h`` scaled dot-product attentions side by side, then ``W_O``.

    Parameters
    ----------
    X_q : (..., n, d_model) array_like
        The tokens that ask (queries).
    X_kv : (..., m, d_model) array_like
        The tokens attended to (keys and values); pass ``X_q`` again for
        self-attention. Its batch shape broadcasts against that of ``X_q``.
    W_Q, W_K, W_V : (d_model, d_model) array_like
        Packed projections; head ``i`` uses columns ``i d_k, ..., (i + 1) d_k - 1``,
        ``d_k = d_model / num_heads``.
    W_O : (d_model, d_model) array_like
        Output projection; rows ``i d_k, ..., (i + 1) d_k - 1`` act on head ``i``.
    num_heads : int
        Number of heads ``h``; must divide ``d_model``.
    mask : (n, m) or (*batch, h, n, m) array_like of bool, optional
        True where query ``i`` may attend to key ``j``; axes of length 1 broadcast.
        At most 2 axes, or exactly one per axis of the weights (see the module
        docstring: a ``(b, n, m)`` mask needs a head axis, ``mask[:, None]``).
    b_Q, b_K, b_V, b_O : (d_model,) array_like, optional
        Biases added after each projection; omitted ones are 0.

    Returns
    -------
    output : (..., n, d_model) ndarray
        ``concat(head_1, ..., head_h) W_O + b_O``.
    weights : (..., h, n, m) ndarray
        Every head's attention weights; each row sums to 1 (0 for a query with no
        allowed key), masked entries are exactly 0.

    Raises
    ------
    TypeError
        If an input is not real-valued, ``mask`` is not boolean or ``num_heads`` is
        not an integer.
    ValueError
        If ``num_heads`` is not positive or does not divide ``d_model``, a weight or
        bias has the wrong shape, ``X_q`` and ``X_kv`` differ in width or in batch
        shape (beyond broadcasting), or ``mask`` does not fit the weights' shape.

    See Also
    --------
    grouped_query_attention, multi_head_attention_backward, init_mha_params,
    helpers.attention.scaled_dot_product_attention

    Notes
    -----
    With ``d_k = d_model / h`` and :math:`W_Q^{(i)}` the ``i``-th block of ``d_k``
    columns of :math:`W_Q` (likewise :math:`W_K^{(i)}, W_V^{(i)}`, and :math:`W_O^{(i)}`
    the ``i``-th block of ``d_k`` rows of :math:`W_O`),

    .. math::

        \text{head}_i = \operatorname{softmax}\!\left(
            \frac{(X_q W_Q^{(i)})(X_{kv} W_K^{(i)})^\top}{\sqrt{d_k}} + B\right)
            X_{kv} W_V^{(i)}, \qquad
        \text{MHA} = [\text{head}_1, \ldots, \text{head}_h]\, W_O
            = \sum_{i=1}^{h} \text{head}_i\, W_O^{(i)},

    with :math:`B_{ij} = 0` where the mask is True and :math:`-\infty` where it is
    False (biases omitted). All heads come from one product per projection,
    ``X_q @ W_Q``, reshaped by :func:`split_heads`; there is no loop over heads.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.masks import causal_mask
    >>> from helpers.multihead import init_mha_params, multi_head_attention
    >>> rng = np.random.default_rng(0)
    >>> params = init_mha_params(8, rng=rng)
    >>> X = rng.normal(size=(2, 5, 8))  # 2 sequences of 5 tokens, d_model = 8
    >>> out, weights = multi_head_attention(X, X, num_heads=2, mask=causal_mask(5), **params)
    >>> out.shape, weights.shape
    ((2, 5, 8), (2, 2, 5, 5))
    >>> weights[0, 1].round(3)  # head 1 of sequence 0: each row sums to 1, no peeking ahead
    array([[1.   , 0.   , 0.   , 0.   , 0.   ],
           [0.663, 0.337, 0.   , 0.   , 0.   ],
           [0.478, 0.064, 0.458, 0.   , 0.   ],
           [0.211, 0.249, 0.364, 0.175, 0.   ],
           [0.048, 0.12 , 0.122, 0.235, 0.475]])
    """
    args = _prepare(
        X_q,
        X_kv,
        {"W_Q": W_Q, "W_K": W_K, "W_V": W_V, "W_O": W_O},
        {"b_Q": b_Q, "b_K": b_K, "b_V": b_V, "b_O": b_O},
        num_heads,
        None,
        mask,
    )
    output, weights, _ = _forward(*args)
    return output, weights


def grouped_query_attention(
    X_q: npt.ArrayLike,
    X_kv: npt.ArrayLike,
    W_Q: npt.ArrayLike,
    W_K: npt.ArrayLike,
    W_V: npt.ArrayLike,
    W_O: npt.ArrayLike,
    num_heads: int,
    num_kv_heads: int,
    mask: npt.ArrayLike | None = None,
    *,
    b_Q: npt.ArrayLike | None = None,
    b_K: npt.ArrayLike | None = None,
    b_V: npt.ArrayLike | None = None,
    b_O: npt.ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Grouped-query attention: groups of query heads share one key/value head.

    Parameters
    ----------
    X_q : (..., n, d_model) array_like
        The tokens that ask (queries).
    X_kv : (..., m, d_model) array_like
        The tokens attended to (keys and values).
    W_Q : (d_model, d_model) array_like
        Query projection of the ``h`` query heads, ``d_k = d_model / h`` columns each.
    W_K, W_V : (d_model, num_kv_heads * d_k) array_like
        Key and value projections of the ``h_kv`` key/value heads.
    W_O : (d_model, d_model) array_like
        Output projection.
    num_heads : int
        Number of query heads ``h``; must divide ``d_model``.
    num_kv_heads : int
        Number of key/value heads ``h_kv``; must divide ``num_heads``. ``1`` is
        multi-query attention, ``num_heads`` is ordinary multi-head attention.
    mask : (n, m) or (*batch, h, n, m) array_like of bool, optional
        As in :func:`multi_head_attention` (one entry per *query* head).
    b_Q, b_O : (d_model,) array_like, optional
        Query and output biases.
    b_K, b_V : (num_kv_heads * d_k,) array_like, optional
        Key and value biases.

    Returns
    -------
    output : (..., n, d_model) ndarray
        The layer's output.
    weights : (..., h, n, m) ndarray
        The attention weights of every *query* head.

    Raises
    ------
    TypeError, ValueError
        As for :func:`multi_head_attention`; also if ``num_kv_heads`` is not a
        positive integer dividing ``num_heads``, or ``W_K``, ``W_V``, ``b_K``, ``b_V``
        do not have ``num_kv_heads * d_k`` columns.

    See Also
    --------
    multi_head_attention, kv_cache_elements, mha_parameter_count

    Notes
    -----
    With ``g = h / h_kv`` query heads per group, query head ``i`` uses key/value head
    ``⌊i / g⌋`` (consecutive query heads share, the order of Hugging Face's
    ``repeat_kv`` and of PyTorch's ``enable_gqa``):

    .. math::

        \text{head}_i = \operatorname{softmax}\!\left(
            \frac{(X_q W_Q^{(i)})(X_{kv} W_K^{(\lfloor i/g \rfloor)})^\top}{\sqrt{d_k}}
            + B\right) X_{kv} W_V^{(\lfloor i/g \rfloor)} .

    The key/value heads are not copied: the query heads are reshaped to
    ``(..., h_kv, g, n, d_k)`` and each key/value head is broadcast over its group.
    The cache of keys and values a decoder keeps shrinks by the factor ``g``.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.multihead import grouped_query_attention, init_mha_params
    >>> rng = np.random.default_rng(0)
    >>> p = init_mha_params(8, num_heads=4, num_kv_heads=2, rng=rng, bias=False)
    >>> p["W_Q"].shape, p["W_K"].shape  # 4 query heads, 2 key/value heads, d_k = 2
    ((8, 8), (8, 4))
    >>> X = rng.normal(size=(5, 8))
    >>> out, weights = grouped_query_attention(X, X, num_heads=4, num_kv_heads=2, **p)
    >>> out.shape, weights.shape
    ((5, 8), (4, 5, 5))
    """
    args = _prepare(
        X_q,
        X_kv,
        {"W_Q": W_Q, "W_K": W_K, "W_V": W_V, "W_O": W_O},
        {"b_Q": b_Q, "b_K": b_K, "b_V": b_V, "b_O": b_O},
        num_heads,
        num_kv_heads,
        mask,
    )
    output, weights, _ = _forward(*args)
    return output, weights


# Stacked products X_b^T dY_b, summed afterwards, while the stack of (d_in, d_out)
# results stays below this many entries (8 MiB in float64); one flat product beyond.
_STACKED_GRAD_ENTRIES = 1 << 20


def _weight_grad(X: np.ndarray, dY: np.ndarray) -> np.ndarray:
    """``X^T dY`` summed over the batch and the tokens, for ``Y = X @ W``: ``(d_in, d_out)``.

    ``X`` is ``(..., n, d_in)`` and ``dY`` ``(..., n, d_out)`` with the same leading
    axes. Flattening both to ``(B n, d)`` makes one matrix product whose inner
    dimension ``B n`` is large, so OpenBLAS runs it on every core; when the cores are
    busy with other work (two notebooks executed side by side on 2 cores), its
    threads wait for each other and a product of microseconds takes milliseconds
    (measured with other work running: chapter 6's training step took 4 ms with the
    stacked products and 50 to 100 ms with the flat one). A stack of ``B``
    products ``(d_in, n) @ (n, d_out)``, one per sequence, stays below OpenBLAS's
    threading threshold for small models; large ones take the flat product.
    """
    d_in, d_out = X.shape[-1], dY.shape[-1]
    if X.ndim == 2:
        return X.T @ dY
    batch = math.prod(X.shape[:-2])
    if batch * d_in * d_out <= _STACKED_GRAD_ENTRIES:
        n = X.shape[-2]
        stacked = X.reshape(batch, n, d_in).transpose(0, 2, 1) @ dY.reshape(batch, n, d_out)
        return stacked.sum(axis=0)  # (d_in, d_out)
    return X.reshape(-1, d_in).T @ dY.reshape(-1, d_out)


def multi_head_attention_backward(
    X_q: npt.ArrayLike,
    X_kv: npt.ArrayLike,
    W_Q: npt.ArrayLike,
    W_K: npt.ArrayLike,
    W_V: npt.ArrayLike,
    W_O: npt.ArrayLike,
    num_heads: int,
    grad_output: npt.ArrayLike,
    mask: npt.ArrayLike | None = None,
    *,
    b_Q: npt.ArrayLike | None = None,
    b_K: npt.ArrayLike | None = None,
    b_V: npt.ArrayLike | None = None,
    b_O: npt.ArrayLike | None = None,
) -> dict[str, np.ndarray]:
    r"""Gradients of a loss through :func:`multi_head_attention`, every head at once.

    Parameters
    ----------
    X_q, X_kv, W_Q, W_K, W_V, W_O, num_heads, mask, b_Q, b_K, b_V, b_O
        Exactly as for :func:`multi_head_attention`.
    grad_output : (..., n, d_model) array_like
        ``∂L/∂output`` for a scalar loss ``L``, the shape of the layer's output.

    Returns
    -------
    grads : dict of str to ndarray
        ``"dX_q"`` ``(..., n, d_model)`` and ``"dX_kv"`` ``(..., m, d_model)``, each of
        its input's shape; ``"dW_Q"``, ``"dW_K"``, ``"dW_V"``, ``"dW_O"``
        ``(d_model, d_model)``; and ``"db_Q"`` ... ``"db_O"`` ``(d_model,)`` for the
        biases that were passed. Weight and bias gradients are summed over the batch.
        In self-attention (the same array as ``X_q`` and ``X_kv``) the gradient with
        respect to ``X`` is ``dX_q + dX_kv``.

    Raises
    ------
    TypeError, ValueError
        As for :func:`multi_head_attention`; also if ``grad_output`` does not have the
        output's shape.

    See Also
    --------
    multi_head_attention, helpers.attention.attention_backward

    Notes
    -----
    The forward pass is recomputed. With :math:`C = [\text{head}_1, \ldots,
    \text{head}_h]` and :math:`G = \partial L / \partial\,\text{output}`, going
    backwards through ``output = C W_O + b_O``, the heads and the projections
    (sums over the batch and the tokens):

    .. math::

        \frac{\partial L}{\partial W_O} = C^\top G, \quad
        \frac{\partial L}{\partial b_O} = \mathbf{1}^\top G, \quad
        \frac{\partial L}{\partial C} = G W_O^\top ;

    :func:`~helpers.attention.attention_backward` maps :math:`\partial L/\partial C`,
    split into heads, to :math:`\partial L/\partial Q, \partial L/\partial K,
    \partial L/\partial V` (all heads in one batched call; merged back to
    ``(..., tokens, d_model)``), and then

    .. math::

        \frac{\partial L}{\partial W_Q} = X_q^\top \frac{\partial L}{\partial Q}, \quad
        \frac{\partial L}{\partial X_q} = \frac{\partial L}{\partial Q} W_Q^\top, \quad
        \frac{\partial L}{\partial X_{kv}} = \frac{\partial L}{\partial K} W_K^\top
            + \frac{\partial L}{\partial V} W_V^\top ,

    likewise for ``W_K`` and ``W_V``; each bias gradient sums its projection's gradient
    over the tokens.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.multihead import (
    ...     init_mha_params,
    ...     multi_head_attention,
    ...     multi_head_attention_backward,
    ... )
    >>> rng = np.random.default_rng(0)
    >>> params = init_mha_params(4, rng=rng)
    >>> X, G = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    >>> grads = multi_head_attention_backward(X, X, num_heads=2, grad_output=G, **params)
    >>> sorted(grads)
    ['dW_K', 'dW_O', 'dW_Q', 'dW_V', 'dX_kv', 'dX_q', 'db_K', 'db_O', 'db_Q', 'db_V']

    A finite-difference check of one entry of ``dW_Q`` for ``L = sum(G * output)``:

    >>> def loss(W_Q):
    ...     out, _ = multi_head_attention(X, X, num_heads=2, **{**params, "W_Q": W_Q})
    ...     return float(np.sum(G * out))
    >>> E = np.zeros((4, 4))
    >>> E[1, 2] = 1e-6
    >>> fd = (loss(params["W_Q"] + E) - loss(params["W_Q"] - E)) / 2e-6
    >>> bool(np.isclose(fd, grads["dW_Q"][1, 2], atol=1e-8))
    True
    """
    xq, xkv, ws, bs, h, h_kv, mask_arr, batch = _prepare(
        X_q,
        X_kv,
        {"W_Q": W_Q, "W_K": W_K, "W_V": W_V, "W_O": W_O},
        {"b_Q": b_Q, "b_K": b_K, "b_V": b_V, "b_O": b_O},
        num_heads,
        None,
        mask,
    )
    output, A, (Q, K, V, concat) = _forward(xq, xkv, ws, bs, h, h_kv, mask_arr, batch)
    G = _as_float(grad_output, "grad_output")
    if G.shape != output.shape:
        raise ValueError(
            f"grad_output must have the output's shape (..., n, d_model) = {output.shape}, "
            f"got {G.shape}"
        )
    G = G.astype(output.dtype, copy=False)  # (b, n, d_model)
    grads = {"dW_O": _weight_grad(concat, G)}  # (d_model, d_model)
    dheads = split_heads(G @ ws["W_O"].T, h)  # (b, h, n, d_k)
    dQ, dK, dV = attention_backward(Q, K, V, A, dheads, mask_arr)  # (b, h, n|m, d_k)
    dQ, dK, dV = merge_heads(dQ), merge_heads(dK), merge_heads(dV)  # (b, n|m, d_model)
    grads["dW_Q"] = _weight_grad(xq, dQ)
    grads["dW_K"] = _weight_grad(xkv, dK)
    grads["dW_V"] = _weight_grad(xkv, dV)
    grads["dX_q"] = dQ @ ws["W_Q"].T  # (..., n, d_model)
    grads["dX_kv"] = dK @ ws["W_K"].T + dV @ ws["W_V"].T  # (..., m, d_model)
    for name, dY in (("b_Q", dQ), ("b_K", dK), ("b_V", dV), ("b_O", G)):
        if name in bs:
            grads["d" + name] = dY.reshape(-1, dY.shape[-1]).sum(axis=0)  # (d_model,)
    return grads


# ---------------------------------------------------------------------------
# Parameters: initialisation and counting
# ---------------------------------------------------------------------------


def init_mha_params(
    d_model: int,
    *,
    rng: np.random.Generator,
    num_heads: int | None = None,
    num_kv_heads: int | None = None,
    bias: bool = True,
    dtype: npt.DTypeLike = np.float64,
) -> dict[str, np.ndarray]:
    r"""Random weights for :func:`multi_head_attention`, drawn as PyTorch draws them.

    Parameters
    ----------
    d_model : int
        Width of the token representations.
    rng : numpy.random.Generator
        Source of randomness (``np.random.default_rng(seed)``).
    num_heads, num_kv_heads : int, optional
        Only for :func:`grouped_query_attention`: with both given, ``W_K`` and ``W_V``
        (and ``b_K``, ``b_V``) get ``num_kv_heads * d_k`` columns, ``d_k = d_model /
        num_heads``. Multi-head attention's weights do not depend on the number of heads.
    bias : bool, default True
        Whether to include the biases ``b_Q``, ``b_K``, ``b_V``, ``b_O``.
    dtype : dtype, default float64
        Floating dtype of every array.

    Returns
    -------
    params : dict of str to ndarray
        ``"W_Q"``, ``"W_K"``, ``"W_V"``, ``"W_O"`` and, with ``bias``, ``"b_Q"``,
        ``"b_K"``, ``"b_V"``, ``"b_O"``, named like the arguments of
        :func:`multi_head_attention` (pass them as ``**params``). The total number of
        entries, ``sum(p.size for p in params.values())``, is
        :func:`mha_parameter_count`.

    Raises
    ------
    TypeError
        If ``rng`` is not a ``numpy.random.Generator``, ``dtype`` is not a floating
        dtype or a count is not an integer.
    ValueError
        If ``num_kv_heads`` is given without ``num_heads``, or the counts do not divide
        as :func:`grouped_query_attention` requires.

    Notes
    -----
    The same distributions as ``torch.nn.MultiheadAttention`` (``_reset_parameters``):

    * ``W_Q``, ``W_K``, ``W_V``: PyTorch stores them as one packed ``in_proj_weight``
      of shape ``(3 d_model, d_model)`` and applies ``xavier_uniform_`` to it as a
      whole, so the fans are ``d_model`` and ``3 d_model`` and every entry is
      :math:`U(-a, a)` with :math:`a = \sqrt{6 / (d_\text{model} + 3 d_\text{model})}
      = \sqrt{3 / (2 d_\text{model})}` (not Glorot's :math:`\sqrt{3 / d_\text{model}}`
      for a single square matrix). Grouped-query attention packs
      ``d_model + 2 h_kv d_k`` rows the same way.
    * ``W_O``: ``out_proj`` is an ``nn.Linear`` that ``_reset_parameters`` leaves at
      ``Linear``'s default, ``kaiming_uniform_(a=√5)``, which is
      :math:`U(-1/\sqrt{d_\text{model}}, 1/\sqrt{d_\text{model}})`.
    * Every bias is 0 (``constant_(…, 0.0)``, including ``out_proj.bias``).

    Matching PyTorch's scales means a layer built here behaves like a freshly created
    ``nn.MultiheadAttention`` (the same output variance); the numbers themselves
    differ, as the generators differ. The packed draw is split column-wise into
    ``W_Q``, ``W_K``, ``W_V`` (the transpose of PyTorch's row blocks, as
    ``X @ W`` is ``x @ in_proj_weight[:d].T``).

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.multihead import init_mha_params
    >>> params = init_mha_params(6, rng=np.random.default_rng(0))
    >>> {k: v.shape for k, v in params.items()}  # doctest: +NORMALIZE_WHITESPACE
    {'W_Q': (6, 6), 'W_K': (6, 6), 'W_V': (6, 6), 'W_O': (6, 6),
     'b_Q': (6,), 'b_K': (6,), 'b_V': (6,), 'b_O': (6,)}
    >>> bool(np.abs(params["W_Q"]).max() <= np.sqrt(3 / (2 * 6)))
    True
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            "rng must be a numpy.random.Generator, e.g. np.random.default_rng(0), got "
            f"{type(rng).__name__}"
        )
    d = _count(d_model, "d_model")
    dt = np.dtype(dtype)
    if dt.kind != "f":
        raise TypeError(f"dtype must be a floating dtype, got {dt}")
    if num_kv_heads is None:
        kv_width = d
        if num_heads is not None:
            _head_width(d, _count(num_heads, "num_heads"))
    else:
        if num_heads is None:
            raise ValueError("num_kv_heads needs num_heads (to know d_k = d_model / num_heads)")
        h, h_kv = _count(num_heads, "num_heads"), _count(num_kv_heads, "num_kv_heads")
        kv_width = h_kv * _head_width(d, h, h_kv)
    fan_out = d + 2 * kv_width  # rows of PyTorch's packed in_proj_weight
    a_in = math.sqrt(6.0 / (d + fan_out))
    packed = rng.uniform(-a_in, a_in, size=(d, fan_out))  # (d_model, d + 2 kv_width)
    a_out = 1.0 / math.sqrt(d)
    params = {
        "W_Q": packed[:, :d],
        "W_K": packed[:, d : d + kv_width],
        "W_V": packed[:, d + kv_width :],
        "W_O": rng.uniform(-a_out, a_out, size=(d, d)),
    }
    if bias:
        widths = {"b_Q": d, "b_K": kv_width, "b_V": kv_width, "b_O": d}
        params.update({k: np.zeros(w) for k, w in widths.items()})
    return {k: np.ascontiguousarray(v, dtype=dt) for k, v in params.items()}


def mha_parameter_count(
    d_model: int, num_heads: int, *, bias: bool = True, num_kv_heads: int | None = None
) -> int:
    r"""Number of trainable parameters of one attention layer.

    Parameters
    ----------
    d_model : int
        Width of the token representations.
    num_heads : int
        Number of (query) heads ``h``; must divide ``d_model``.
    bias : bool, default True
        Whether the four projections have biases.
    num_kv_heads : int, optional
        Number of key/value heads for grouped-query attention; defaults to
        ``num_heads`` (multi-head attention). Must divide ``num_heads``.

    Returns
    -------
    count : int
        The number of entries of ``W_Q, W_K, W_V, W_O`` (and the biases).

    Raises
    ------
    TypeError
        If a count is not an integer.
    ValueError
        If a count is not positive or the divisibility conditions fail.

    See Also
    --------
    init_mha_params, kv_cache_elements

    Notes
    -----
    Each head has three ``d_model × d_k`` matrices and ``d_k`` rows of ``W_O``; with
    ``h d_k = d_model`` that is

    .. math::

        h \cdot 3 d_\text{model} d_k + d_\text{model}^2 = 4 d_\text{model}^2
        \quad (+\, 4 d_\text{model} \text{ with biases}),

    whatever ``h`` is: more heads split the same parameters more finely. With
    ``h_kv`` key/value heads, ``W_K`` and ``W_V`` shrink to ``d_model × h_kv d_k``:
    :math:`2 d_\text{model}^2 + 2 d_\text{model} h_{kv} d_k` (plus
    :math:`2 d_\text{model} + 2 h_{kv} d_k` with biases).

    Examples
    --------
    >>> from helpers.multihead import mha_parameter_count
    >>> mha_parameter_count(512, 8)  # 4 * 512**2 + 4 * 512
    1050624
    >>> mha_parameter_count(512, 1) == mha_parameter_count(512, 64)
    True
    >>> mha_parameter_count(512, 8, bias=False, num_kv_heads=1)  # MQA: 2 * 512**2 + 2 * 512 * 64
    589824
    """
    d = _count(d_model, "d_model")
    h = _count(num_heads, "num_heads")
    h_kv = h if num_kv_heads is None else _count(num_kv_heads, "num_kv_heads")
    kv_width = h_kv * _head_width(d, h, h_kv)
    count = 2 * d * d + 2 * d * kv_width  # W_Q, W_O; W_K, W_V
    if bias:
        count += 2 * d + 2 * kv_width
    return count


def kv_cache_elements(
    n: int,
    d_model: int,
    num_heads: int,
    num_kv_heads: int | None = None,
    num_layers: int = 1,
) -> int:
    r"""Number of entries a decoder caches (keys and values) for one sequence.

    Parameters
    ----------
    n : int
        Number of tokens cached (the sequence length so far).
    d_model : int
        Width of the token representations.
    num_heads : int
        Number of query heads ``h``; must divide ``d_model``.
    num_kv_heads : int, optional
        Number of key/value heads; defaults to ``num_heads`` (multi-head attention).
    num_layers : int, default 1
        Number of attention layers, each with its own cache.

    Returns
    -------
    count : int
        ``2 · num_layers · n · num_kv_heads · d_k``; multiply by the bytes per entry
        (2 in float16) and by the batch size for memory.

    Raises
    ------
    TypeError
        If an argument is not an integer.
    ValueError
        If ``n`` is negative, another count is not positive, or the divisibility
        conditions fail.

    See Also
    --------
    mha_parameter_count, grouped_query_attention

    Notes
    -----
    Generating token ``t`` needs the keys and values of the tokens before it, so a
    decoder keeps them: per layer a ``(n, h_kv d_k)`` array of keys and one of values,

    .. math::

        2 \, L \, n \, h_{kv} d_k = 2 \, L \, n \, d_\text{model} \, \frac{h_{kv}}{h} .

    Grouped-query attention divides the cache by ``h / h_kv``; multi-query attention
    (``h_kv = 1``) by ``h``. The number of parameters barely changes.

    Examples
    --------
    >>> from helpers.multihead import kv_cache_elements
    >>> kv_cache_elements(1024, 512, 8)  # MHA: 2 * 1024 * 512
    1048576
    >>> kv_cache_elements(1024, 512, 8, num_kv_heads=1)  # MQA: 8 times smaller
    131072
    """
    tokens = _count(n, "n", minimum=0)
    d = _count(d_model, "d_model")
    h = _count(num_heads, "num_heads")
    h_kv = h if num_kv_heads is None else _count(num_kv_heads, "num_kv_heads")
    layers = _count(num_layers, "num_layers")
    return 2 * layers * tokens * h_kv * _head_width(d, h, h_kv)
