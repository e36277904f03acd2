"""Introduced in chapter 5, the cost of attention: the key/value cache of a decoder.

A decoder generates one token at a time, and token ``t`` attends to the keys and values
of every earlier token. Without a cache each step recomputes them all; with one, each
step computes the new token's key and value, appends them, and attends.

* :class:`KVCache` holds one attention layer's keys and values: ``update(k, v)``
  appends the rows of the new tokens and returns all keys and values so far.
* :func:`init_attention_decoder` and :func:`attention_decoder` are a small
  attention-only decoder (a stack of causal multi-head self-attention layers with
  residual connections) on which the chapter measures what the cache saves. The same
  function runs the whole sequence at once (no caches) or only the new tokens (one
  :class:`KVCache` per layer), and the two give the same outputs.

Shapes follow ``book/notation.md``: keys ``(..., t, d_k)``, values ``(..., t, d_v)``,
where ``...`` are batch (and head) axes, ``t`` the number of tokens.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from helpers._validate import as_integer, as_real_array
from helpers.attention import scaled_dot_product_attention
from helpers.masks import causal_mask
from helpers.multihead import init_mha_params, merge_heads, split_heads

__all__ = ["KVCache", "attention_decoder", "init_attention_decoder"]


def _as_rows(x: npt.ArrayLike, name: str, layout: str) -> np.ndarray:
    arr = as_real_array(x, name, bool_hint="; the cache stores keys and values")
    if arr.ndim < 2:
        raise ValueError(
            f"{name} must have at least 2 axes, {layout}; got {name}.shape = {arr.shape}"
            " (one token is a (..., 1, d) array)"
        )
    return arr


class KVCache:
    r"""The keys and values one attention layer has seen so far.

    Parameters
    ----------
    capacity : int, optional
        Number of tokens to reserve room for at the first :meth:`update`. The buffer
        doubles whenever it fills up, so appending ``T`` tokens one at a time copies
        ``O(T)`` rows in all (not ``O(T^2)`` as ``np.concatenate`` at every step would).

    Attributes
    ----------
    keys : (..., t, d_k) ndarray or None
        The cached keys (a read-only view), None before the first update.
    values : (..., t, d_v) ndarray or None
        The cached values (a read-only view), None before the first update.

    See Also
    --------
    attention_decoder : a decoder that uses one cache per layer.
    helpers.multihead.kv_cache_elements : the size of the caches of a whole model.

    Notes
    -----
    With ``t`` cached tokens and ``s`` new ones, :meth:`update` returns

    .. math::

        K = \begin{bmatrix} K_\text{cached} \\ k_\text{new} \end{bmatrix}
        \in \mathbb{R}^{(t + s) \times d_k}, \qquad
        V = \begin{bmatrix} V_\text{cached} \\ v_\text{new} \end{bmatrix}
        \in \mathbb{R}^{(t + s) \times d_v},

    batched over the leading axes. The new queries are then the last ``s`` of the
    ``t + s`` positions: their causal mask is ``causal_mask(s, t + s)`` (bottom-right
    alignment, the default of :func:`helpers.causal_mask`), and for ``s = 1`` no mask
    is needed at all.

    The batch shape (the leading axes, e.g. ``(b, h_kv)``), the widths ``d_k`` and
    ``d_v`` and the dtype are fixed by the first update; a later update that differs
    raises an error. The arrays returned are read-only views into the cache's buffer:
    a later update never changes them (it writes past their end, or into a new buffer).
    The cache stores ``2 · t · d · (batch entries)`` numbers; :attr:`nbytes` reports
    the bytes in use.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.kv_cache import KVCache
    >>> cache = KVCache()
    >>> K, V = cache.update(np.ones((2, 3, 4)), np.zeros((2, 3, 5)))  # 3 tokens, 2 heads
    >>> K.shape, V.shape
    ((2, 3, 4), (2, 3, 5))
    >>> K, V = cache.update(np.full((2, 1, 4), 7.0), np.ones((2, 1, 5)))  # one more token
    >>> K.shape, len(cache), K[0, :, 0].tolist()
    ((2, 4, 4), 4, [1.0, 1.0, 1.0, 7.0])
    >>> cache.nbytes  # 2 heads * 4 tokens * (4 + 5) numbers * 8 bytes
    576
    """

    def __init__(self, capacity: int | None = None) -> None:
        self._capacity = None if capacity is None else as_integer(capacity, "capacity", minimum=1)
        self._k: np.ndarray | None = None  # (..., capacity, d_k) buffer
        self._v: np.ndarray | None = None  # (..., capacity, d_v) buffer
        self._length = 0

    def __len__(self) -> int:
        """The number of tokens cached, ``t``."""
        return self._length

    def __repr__(self) -> str:
        if self._k is None:
            return "KVCache(empty)"
        batch, d_k, d_v = self._k.shape[:-2], self._k.shape[-1], self._v.shape[-1]
        return (
            f"KVCache({self._length} tokens, batch shape {batch}, d_k = {d_k}, d_v = {d_v}, "
            f"{self._k.dtype}, {self.nbytes:,} bytes)"
        )

    @property
    def keys(self) -> np.ndarray | None:
        return None if self._k is None else self._view(self._k)

    @property
    def values(self) -> np.ndarray | None:
        return None if self._v is None else self._view(self._v)

    @property
    def nbytes(self) -> int:
        """Bytes of the cached keys and values (the part of the buffer in use)."""
        if self._k is None:
            return 0
        return (self._k[..., : self._length, :].nbytes) + (self._v[..., : self._length, :].nbytes)

    def reset(self) -> None:
        """Forget every token (start a new sequence); the buffer is released."""
        self._k = self._v = None
        self._length = 0

    def _view(self, buffer: np.ndarray) -> np.ndarray:
        view = buffer[..., : self._length, :]
        view.flags.writeable = False
        return view

    def _check(self, k: np.ndarray, v: np.ndarray) -> None:
        if k.shape[:-1] != v.shape[:-1]:
            raise ValueError(
                "k and v must have the same batch axes and number of new tokens (all axes but "
                f"the last): got k.shape = {k.shape}, v.shape = {v.shape}"
            )
        if self._k is None:
            return
        want_k = (*self._k.shape[:-2], k.shape[-2], self._k.shape[-1])
        want_v = (*self._v.shape[:-2], v.shape[-2], self._v.shape[-1])
        if k.shape != want_k or v.shape != want_v:
            raise ValueError(
                f"this cache holds keys of shape (..., t, d_k) = {self._k.shape[:-2]} + "
                f"(t, {self._k.shape[-1]}) and values (..., t, d_v) with d_v = "
                f"{self._v.shape[-1]}: new rows must have shape k {want_k}, v {want_v}; got "
                f"k.shape = {k.shape}, v.shape = {v.shape}"
            )
        if k.dtype != self._k.dtype or v.dtype != self._k.dtype:
            raise TypeError(
                f"this cache stores {self._k.dtype}; got k of dtype {k.dtype} and v of dtype "
                f"{v.dtype} (convert them, or start a new cache)"
            )

    def update(
        self, k: npt.ArrayLike, v: npt.ArrayLike
    ) -> tuple[npt.NDArray[np.floating], npt.NDArray[np.floating]]:
        """Append the keys and values of new tokens; return all keys and values so far.

        Parameters
        ----------
        k : (..., s, d_k) array_like
            Keys of the ``s`` new tokens (``s >= 0``; usually 1 while decoding, the
            prompt's length for the first update).
        v : (..., s, d_v) array_like
            Their values; the same leading axes and ``s`` as ``k``.

        Returns
        -------
        keys : (..., t + s, d_k) ndarray
            Every cached key, oldest first, the new ones last (read-only).
        values : (..., t + s, d_v) ndarray
            Every cached value, in the same order (read-only).

        Raises
        ------
        TypeError
            If ``k`` or ``v`` is not real-valued, or its dtype differs from the cache's.
        ValueError
            If ``k`` or ``v`` has fewer than 2 axes, their leading axes or token counts
            differ, or they do not match the batch shape and widths of the cache.
        """
        k = _as_rows(k, "k", "(..., s, d_k)")
        v = _as_rows(v, "v", "(..., s, d_v)")
        if self._k is None:
            dtype = np.result_type(k, v)
            k, v = k.astype(dtype, copy=False), v.astype(dtype, copy=False)
        self._check(k, v)
        s = k.shape[-2]
        need = self._length + s
        if self._k is None:
            cap = max(need, self._capacity or 0, 1)
            self._k = np.empty((*k.shape[:-2], cap, k.shape[-1]), dtype=k.dtype)
            self._v = np.empty((*v.shape[:-2], cap, v.shape[-1]), dtype=k.dtype)
        elif need > self._k.shape[-2]:
            cap = max(need, 2 * self._k.shape[-2])
            for name in ("_k", "_v"):
                old = getattr(self, name)
                new = np.empty((*old.shape[:-2], cap, old.shape[-1]), dtype=old.dtype)
                new[..., : self._length, :] = old[..., : self._length, :]
                setattr(self, name, new)
        self._k[..., self._length : need, :] = k
        self._v[..., self._length : need, :] = v
        self._length = need
        return self._view(self._k), self._view(self._v)


# ---------------------------------------------------------------------------
# A small attention-only decoder
# ---------------------------------------------------------------------------

_LAYER_KEYS = ("W_Q", "W_K", "W_V", "W_O")


def init_attention_decoder(
    num_layers: int,
    d_model: int,
    num_heads: int,
    *,
    rng: np.random.Generator,
    num_kv_heads: int | None = None,
    dtype: npt.DTypeLike = np.float64,
) -> list[dict[str, np.ndarray]]:
    """Random weights of an attention-only decoder, one dict per layer.

    Parameters
    ----------
    num_layers : int
        Number of layers ``L``.
    d_model : int
        Width of the token representations.
    num_heads : int
        Query heads ``h``; must divide ``d_model``.
    rng : numpy.random.Generator
        Source of randomness.
    num_kv_heads : int, optional
        Key/value heads ``h_kv`` (grouped-query attention); defaults to ``num_heads``.
    dtype : dtype, default float64
        Floating dtype of the weights.

    Returns
    -------
    layers : list of dict
        ``num_layers`` dicts with ``"W_Q"`` ``(d_model, d_model)``, ``"W_K"`` and
        ``"W_V"`` ``(d_model, h_kv d_k)`` and ``"W_O"`` ``(d_model, d_model)``, drawn by
        :func:`helpers.init_mha_params` (no biases).

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.kv_cache import init_attention_decoder
    >>> layers = init_attention_decoder(2, 8, 4, rng=np.random.default_rng(0), num_kv_heads=2)
    >>> len(layers), layers[0]["W_K"].shape
    (2, (8, 4))
    """
    L = as_integer(num_layers, "num_layers", minimum=1)
    h_kv = num_heads if num_kv_heads is None else num_kv_heads
    return [
        init_mha_params(
            d_model, rng=rng, num_heads=num_heads, num_kv_heads=h_kv, bias=False, dtype=dtype
        )
        for _ in range(L)
    ]


def _rms_normalise(X: np.ndarray) -> np.ndarray:
    """Each row divided by its root mean square (a pre-norm without a learned gain)."""
    return X / np.sqrt(np.mean(X * X, axis=-1, keepdims=True) + 1e-6)


def attention_decoder(
    layers: list[dict[str, npt.ArrayLike]],
    X: npt.ArrayLike,
    num_heads: int,
    *,
    caches: list[KVCache] | None = None,
) -> npt.NDArray[np.floating]:
    r"""An attention-only decoder: causal self-attention layers with residual connections.

    Parameters
    ----------
    layers : list of dict
        The weights of each layer, as from :func:`init_attention_decoder`. The number
        of key/value heads is read from the width of ``W_K``.
    X : (..., s, d_model) array_like
        Token representations. Without caches, the whole sequence; with caches, only
        the ``s`` new tokens that follow the ``t`` tokens already cached.
    num_heads : int
        Query heads ``h``.
    caches : list of KVCache, optional
        One cache per layer. Each layer appends the new tokens' keys and values to its
        cache and attends over everything cached; pass fresh caches for the prompt.

    Returns
    -------
    Y : (..., s, d_model) ndarray
        The last layer's output for the ``s`` tokens of ``X``.

    Raises
    ------
    ValueError
        If ``caches`` does not hold one cache per layer, or the shapes do not fit.

    Notes
    -----
    Layer :math:`\ell` maps the residual stream :math:`X^{(\ell)}` to

    .. math::

        X^{(\ell + 1)} = X^{(\ell)} + \operatorname{MultiHead}\bigl(\hat X^{(\ell)}\bigr),
        \qquad \hat x = x / \sqrt{\operatorname{mean}(x^2) + 10^{-6}} \text{ row by row},

    with a causal mask. There is no feed-forward block: the cache concerns attention
    only, and a position-wise block would cost the same with or without it. Position
    ``i`` of every layer depends only on positions ``<= i`` of the layer below, so the
    keys and values of earlier tokens never change as tokens are appended: that is what
    makes a cache exact.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.kv_cache import KVCache, attention_decoder, init_attention_decoder
    >>> rng = np.random.default_rng(0)
    >>> layers = init_attention_decoder(2, 8, 2, rng=rng)
    >>> X = rng.normal(size=(5, 8))
    >>> full = attention_decoder(layers, X, 2)  # all 5 tokens at once
    >>> caches = [KVCache() for _ in layers]
    >>> steps = [attention_decoder(layers, X[t : t + 1], 2, caches=caches) for t in range(5)]
    >>> bool(np.allclose(np.concatenate(steps), full, rtol=0, atol=1e-12))
    True
    """
    if caches is not None and len(caches) != len(layers):
        raise ValueError(
            f"caches must hold one KVCache per layer: got {len(caches)} caches for "
            f"{len(layers)} layers"
        )
    X = as_real_array(X, "X", bool_hint="")
    if X.ndim < 2:
        raise ValueError(f"X must have shape (..., s, d_model), got X.shape = {X.shape}")
    h = as_integer(num_heads, "num_heads", minimum=1)
    s = X.shape[-2]
    for index, p in enumerate(layers):
        W_Q, W_K, W_V, W_O = (np.asarray(p[key]) for key in _LAYER_KEYS)
        h_kv = h * W_K.shape[1] // W_Q.shape[1]
        g = h // h_kv  # query heads per key/value head
        H = _rms_normalise(X)
        Q = split_heads(H @ W_Q, h)  # (..., h, s, d_k)
        k = split_heads(H @ W_K, h_kv)  # (..., h_kv, s, d_k)
        v = split_heads(H @ W_V, h_kv)  # (..., h_kv, s, d_k)
        if caches is None:
            K, V = k, v
        else:
            K, V = caches[index].update(k, v)  # (..., h_kv, t + s, d_k)
        m = K.shape[-2]
        mask = None if s == 1 else causal_mask(s, m)  # the new queries are the last s
        Qg = Q.reshape(*Q.shape[:-3], h_kv, g, s, Q.shape[-1])  # (..., h_kv, g, s, d_k)
        heads, _ = scaled_dot_product_attention(Qg, K[..., None, :, :], V[..., None, :, :], mask)
        heads = heads.reshape(Q.shape)  # (..., h, s, d_k)
        X = X + merge_heads(heads) @ W_O  # (..., s, d_model)
    return X
