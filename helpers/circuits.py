"""Induction heads: a task, an attention-only Transformer, its training, and its circuits.

Introduced in chapter 8, which trains a small attention-only model with the book's own
pieces (the attention and its backward pass of chapter 2, the heads of chapter 3, Adam
and cross-entropy of chapter 6) and takes it apart: which head attends to the previous
token, which to the token after an earlier occurrence of the current one, what happens
when either is removed, and what the heads' matrices do to tokens (Elhage et al. 2021,
Olsson et al. 2022).

The model (row-vector convention of ``book/notation.md``) reads token ids
``t_0, ..., t_{n-1}`` from a vocabulary of ``|V| = vocab`` tokens (plus a
beginning-of-sequence token) and writes to a residual stream of width ``d_model``:

* ``X_0 = W_E[t] + W_pos[:n]`` (token and position embeddings);
* for each layer ``ℓ``: ``X_{ℓ+1} = X_ℓ + sum_r A^{ℓ,r} X_ℓ W_V^{ℓ,r} W_O^{ℓ,r}``, with
  causal attention weights ``A^{ℓ,r} = softmax(X_ℓ W_Q^{ℓ,r} (X_ℓ W_K^{ℓ,r})ᵀ / sqrt(d_k))``
  for head ``r``;
* ``logits = X_L W_U``.

No MLP, no layer norm and no biases, so the logits are a sum of "paths" through the
heads. The parameters are a dict: ``"W_E"`` ``(vocab + 1, d_model)`` (the last row is
the beginning-of-sequence token), ``"W_pos"`` ``(max_len, d_model)``, ``"W_U"``
``(d_model, vocab)``, and for each layer ``ℓ`` the matrices ``f"W_Q{ℓ}"``,
``f"W_K{ℓ}"``, ``f"W_V{ℓ}"``, ``f"W_O{ℓ}"``, each ``(d_model, d_model)``; head ``r``
owns columns ``r d_k, ..., (r + 1) d_k - 1`` of ``W_Q``, ``W_K``, ``W_V`` and the
same rows of ``W_O`` (the layout of :func:`helpers.multihead.split_heads`), with
``d_k = d_v = d_model / num_heads``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from helpers._validate import as_integer
from helpers.attention import attention_backward, scaled_dot_product_attention
from helpers.masks import causal_mask
from helpers.softmax import log_softmax
from helpers.transformer import Adam, cross_entropy

__all__ = [
    "attention_only_backward",
    "attention_only_forward",
    "composition_score",
    "copying_score",
    "head_output_means",
    "init_attention_only_params",
    "k_composition_scores",
    "num_layers_of",
    "phase_change_step",
    "prefix_matching_score",
    "previous_token_score",
    "repeated_token_batch",
    "train_attention_only",
]

_LAYER_KEYS = ("W_Q", "W_K", "W_V", "W_O")


# ---------------------------------------------------------------------------
# The task
# ---------------------------------------------------------------------------


def repeated_token_batch(
    batch: int,
    length: int,
    vocab: int,
    *,
    rng: np.random.Generator,
    min_period: int,
    max_period: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    r"""Random token sequences in which one segment, of random length and place, repeats.

    Parameters
    ----------
    batch : int
        Number of sequences.
    length : int
        Tokens per sequence, the beginning-of-sequence token included.
    vocab : int
        Number of ordinary tokens, ids ``0, ..., vocab - 1``; id ``vocab`` is the
        beginning-of-sequence token.
    rng : numpy.random.Generator
        Source of randomness.
    min_period, max_period : int
        The segment's length ``p`` (the distance between a token and its copy) is drawn
        uniformly from ``min_period, ..., max_period``; ``2 max_period`` must fit after
        the beginning-of-sequence token: ``2 max_period <= length - 1``.

    Returns
    -------
    tokens : (batch, length) ndarray of int64
        ``tokens[:, 0] = vocab``; every other token is uniform on ``0, ..., vocab - 1``,
        except that positions ``s + p, ..., s + 2p - 1`` copy positions
        ``s, ..., s + p - 1``, with ``s`` uniform on ``1, ..., length - 2p``.
    predictable : (batch, length - 1) ndarray of bool
        ``predictable[b, i]`` is True when the token after position ``i`` can be read off
        the context: positions ``i`` and ``i + 1`` are both in the second copy, so the
        current token occurred before and the next one is the token that followed it.
        (The first token of the second copy is a copy too, but nothing before it says
        that the repetition starts there.)

    Raises
    ------
    TypeError, ValueError
        If a count is not a positive integer, ``rng`` is not a Generator, or the periods
        are out of order or do not fit in ``length``.

    Notes
    -----
    Every token outside the second copy is independent of everything before it and
    uniform, so no model can predict it with a loss below :math:`\log V`. Because ``p``
    and ``s`` vary, no fixed offset between a position and the one it should copy from
    solves the task: a model has to find the earlier occurrence of the current token.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.circuits import repeated_token_batch
    >>> rng = np.random.default_rng(0)
    >>> tokens, predictable = repeated_token_batch(2, 12, 10, rng=rng, min_period=3, max_period=5)
    >>> tokens.shape, predictable.shape, (tokens[:, 0] == 10).all()
    ((2, 12), (2, 11), np.True_)
    >>> b, i = np.argwhere(predictable)[0]  # a predictable position: its next token ...
    >>> earlier = np.flatnonzero(tokens[b, :i] == tokens[b, i])  # ... follows an earlier copy
    >>> bool(tokens[b, i + 1] in tokens[b, earlier + 1])
    True
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    batch = as_integer(batch, "batch", minimum=1)
    length = as_integer(length, "length", minimum=3)
    vocab = as_integer(vocab, "vocab", minimum=1)
    lo = as_integer(min_period, "min_period", minimum=1)
    hi = as_integer(max_period, "max_period", minimum=1)
    if lo > hi:
        raise ValueError(f"min_period must be <= max_period, got {lo} > {hi}")
    if 2 * hi > length - 1:
        raise ValueError(
            f"max_period = {hi} does not fit: two copies need 2 * max_period = {2 * hi} "
            f"positions after the beginning-of-sequence token, and length - 1 = {length - 1}"
        )
    tokens = rng.integers(0, vocab, size=(batch, length))
    tokens[:, 0] = vocab
    p = rng.integers(lo, hi + 1, size=batch)  # (batch,) segment lengths
    s = 1 + (rng.random(batch) * (length - 2 * p)).astype(np.int64)  # start in 1..length-2p
    pos = np.arange(length)
    second = (pos >= (s + p)[:, None]) & (pos < (s + 2 * p)[:, None])  # (batch, length)
    src = np.where(second, pos - p[:, None], pos)  # where each token is copied from
    tokens = np.take_along_axis(tokens, src, axis=1)
    predictable = second[:, :-1] & second[:, 1:]
    return tokens, predictable


# ---------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------


def init_attention_only_params(
    vocab: int,
    d_model: int,
    num_heads: int,
    num_layers: int,
    max_len: int,
    *,
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    r"""Random float64 parameters of an attention-only Transformer.

    Parameters
    ----------
    vocab : int
        Number of ordinary tokens; the embedding has one more row, the
        beginning-of-sequence token ``vocab``.
    d_model : int
        Width of the residual stream; a multiple of ``num_heads``.
    num_heads, num_layers : int
        Heads per layer and layers.
    max_len : int
        Number of learned positions.
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    params : dict of str to ndarray
        ``"W_E"`` ``(vocab + 1, d_model)`` and ``"W_pos"`` ``(max_len, d_model)`` with
        entries of standard deviation ``1 / sqrt(d_model)`` (rows of norm about 1);
        ``"W_U"`` ``(d_model, vocab)`` and every ``W_Q{l}``, ``W_K{l}``, ``W_V{l}``,
        ``W_O{l}`` ``(d_model, d_model)`` with standard deviation ``1 / sqrt(d_model)``
        (a product with them keeps the scale of its input).

    Raises
    ------
    TypeError, ValueError
        If a count is not a positive integer or ``num_heads`` does not divide ``d_model``.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.circuits import init_attention_only_params
    >>> p = init_attention_only_params(10, 8, 2, 2, 16, rng=np.random.default_rng(0))
    >>> sorted(p)
    ['W_E', 'W_K0', 'W_K1', 'W_O0', 'W_O1', 'W_Q0', 'W_Q1', 'W_U', 'W_V0', 'W_V1', 'W_pos']
    >>> p["W_E"].shape, p["W_U"].shape, p["W_Q1"].shape
    ((11, 8), (8, 10), (8, 8))
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    vocab = as_integer(vocab, "vocab", minimum=1)
    d = as_integer(d_model, "d_model", minimum=1)
    h = as_integer(num_heads, "num_heads", minimum=1)
    layers = as_integer(num_layers, "num_layers", minimum=1)
    max_len = as_integer(max_len, "max_len", minimum=1)
    if d % h:
        raise ValueError(f"num_heads = {h} must divide d_model = {d}")
    s = 1 / math.sqrt(d)
    params = {"W_E": s * rng.standard_normal((vocab + 1, d))}
    params["W_pos"] = s * rng.standard_normal((max_len, d))
    for layer in range(layers):
        for key in _LAYER_KEYS:
            params[f"{key}{layer}"] = s * rng.standard_normal((d, d))
    params["W_U"] = s * rng.standard_normal((d, vocab))
    return params


def num_layers_of(params: Mapping[str, np.ndarray]) -> int:
    """The number of layers of attention-only ``params`` (``W_Q0``, ``W_Q1``, ...)."""
    layers = 0
    while f"W_Q{layers}" in params:
        layers += 1
    return layers


def _check_params(params: object, num_heads: object) -> tuple[int, int, int, int, int]:
    """Validate ``params``; return ``(vocab, d_model, num_heads, num_layers, max_len)``."""
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a dict of arrays, got {type(params).__name__}")
    for key in ("W_E", "W_pos", "W_U", "W_Q0"):
        if key not in params:
            raise ValueError(f"params must have the key {key!r} (see init_attention_only_params)")
    W_E = np.asarray(params["W_E"])
    if W_E.ndim != 2:
        raise ValueError(f"params['W_E'] must be (vocab + 1, d_model), got shape {W_E.shape}")
    d = W_E.shape[1]
    vocab = W_E.shape[0] - 1
    layers = num_layers_of(params)
    h = as_integer(num_heads, "num_heads", minimum=1)
    if d % h:
        raise ValueError(f"num_heads = {h} must divide d_model = {d} (params['W_E'].shape[1])")
    want = {"W_pos": (None, d), "W_U": (d, vocab)}
    want |= {f"{k}{layer}": (d, d) for layer in range(layers) for k in _LAYER_KEYS}
    for key, shape in want.items():
        if key not in params:
            raise ValueError(f"params must have the key {key!r} (see init_attention_only_params)")
        arr = np.asarray(params[key])
        if arr.ndim != 2 or any(
            w is not None and w != g for w, g in zip(shape, arr.shape, strict=True)
        ):
            expected = tuple("max_len" if w is None else w for w in shape)
            raise ValueError(f"params[{key!r}] must have shape {expected}, got {arr.shape}")
    return vocab, d, h, layers, np.asarray(params["W_pos"]).shape[0]


def _check_tokens(tokens: object, vocab: int, max_len: int) -> np.ndarray:
    t = np.asarray(tokens)
    if t.dtype.kind not in "iu":
        raise TypeError(f"tokens must be integer token ids, got dtype {t.dtype}")
    if t.ndim != 2 or t.shape[1] == 0:
        raise ValueError(f"tokens must have shape (batch, length), got {t.shape}")
    if t.shape[1] > max_len:
        raise ValueError(
            f"tokens has length {t.shape[1]}, more than max_len = {max_len} positions "
            f"(params['W_pos'] has {max_len} rows)"
        )
    if t.size and (t.min() < 0 or t.max() > vocab):
        raise ValueError(
            f"tokens must be ids in 0, ..., {vocab} (vocab = {vocab} plus the "
            f"beginning-of-sequence token {vocab}), got {t.min()}..{t.max()}"
        )
    return t


def _check_ablate(ablate: object, layers: int, h: int) -> np.ndarray:
    """``ablate`` as a (layers, h) boolean array, True for a zeroed head."""
    out = np.zeros((layers, h), dtype=bool)
    if isinstance(ablate, (str, bytes)) or not isinstance(ablate, Sequence | np.ndarray):
        raise TypeError(f"ablate must be a sequence of (layer, head) pairs, got {ablate!r}")
    for pair in ablate:
        if len(pair) != 2:
            raise ValueError(f"ablate must hold (layer, head) pairs, got {pair!r}")
        layer = as_integer(pair[0], "ablate layer")
        head = as_integer(pair[1], "ablate head")
        if layer >= layers or head >= h:
            raise ValueError(
                f"ablate names head ({layer}, {head}), which does not exist: the model has "
                f"layers 0..{layers - 1} and heads 0..{h - 1}"
            )
        out[layer, head] = True
    return out


def attention_only_forward(
    tokens: npt.ArrayLike,
    params: Mapping[str, np.ndarray],
    *,
    num_heads: int,
    ablate: Sequence[tuple[int, int]] = (),
    replacement: npt.ArrayLike | None = None,
) -> tuple[npt.NDArray[np.floating], dict]:
    r"""Logits of an attention-only Transformer, and what the backward pass needs.

    Parameters
    ----------
    tokens : (batch, length) array_like of int
        Token ids in ``0, ..., vocab`` (``vocab`` is the beginning-of-sequence token);
        ``length <= max_len``.
    params : dict of str to ndarray
        As made by :func:`init_attention_only_params`.
    num_heads : int
        Heads per layer; divides ``d_model``.
    ablate : sequence of (layer, head) pairs, optional
        Heads whose output is replaced: by zeros (zero-ablation), or by ``replacement``
        (their attention is still computed and returned).
    replacement : (num_layers, num_heads, length, d_v) array_like, optional
        What each ablated head outputs instead of its own output, at each position, the
        same for every sequence of the batch (before ``W_O``; ``d_v = d_model /
        num_heads``). With the heads' mean outputs over a batch
        (:func:`head_output_means`), this is mean-ablation. Only the entries of ablated
        heads are read. Default: zeros.

    Returns
    -------
    logits : (batch, length, vocab) ndarray
        Row ``i`` scores every ordinary token as the token after position ``i``.
    cache : dict
        ``"weights"``: ``(num_layers, batch, num_heads, length, length)``, every head's
        causal attention weights; ``"resid"``: ``(num_layers + 1, batch, length,
        d_model)``, the residual stream before each layer and after the last; and the
        queries, keys, values, head outputs, tokens, parameters and ablation mask that
        :func:`attention_only_backward` reads.

    Raises
    ------
    TypeError, ValueError
        If the token ids are out of range, the sequence is longer than ``max_len``, a
        parameter has the wrong shape, ``num_heads`` does not divide ``d_model``, an
        ablated head does not exist or ``replacement`` has the wrong shape.

    Notes
    -----
    With :math:`X_0 = W_E[t] + W_\text{pos}` and, for each layer :math:`\ell`,

    .. math::

        X_{\ell+1} = X_\ell + \sum_r A^{\ell,r} X_\ell W_V^{\ell,r} W_O^{\ell,r}, \qquad
        \text{logits} = X_L W_U .

    Zeroing a head's output (zero-ablation) also moves the residual stream away from
    anything the later layers saw in training; replacing it by its mean over a batch
    (mean-ablation) removes only what the head's output says about the particular
    sequence. Where the two disagree, zero-ablation may be measuring its own
    disturbance of the residual stream rather than what the head contributes.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.circuits import attention_only_forward, init_attention_only_params
    >>> params = init_attention_only_params(10, 8, 2, 2, 16, rng=np.random.default_rng(0))
    >>> tokens = np.array([[10, 3, 4, 5, 3, 4]])
    >>> logits, cache = attention_only_forward(tokens, params, num_heads=2)
    >>> logits.shape, cache["weights"].shape
    ((1, 6, 10), (2, 1, 2, 6, 6))
    >>> bool(np.allclose(cache["weights"].sum(-1), 1))  # every row of weights sums to 1
    True
    """
    vocab, d, h, layers, max_len = _check_params(params, num_heads)
    t = _check_tokens(tokens, vocab, max_len)
    off = _check_ablate(ablate, layers, h)
    B, n = t.shape
    dh = d // h
    if replacement is not None:
        rep_ = np.asarray(replacement, dtype=np.float64)
        if rep_.shape != (layers, h, n, dh):
            raise ValueError(
                f"replacement must have shape (num_layers, num_heads, length, d_v) = "
                f"{(layers, h, n, dh)}, got {rep_.shape}"
            )
        if not np.isfinite(rep_).all():
            raise ValueError("replacement must be finite")
    mask = causal_mask(n)
    X = params["W_E"][t] + params["W_pos"][:n]  # (B, n, d)
    resid = [X]
    weights, qs, ks, vs, zs = [], [], [], [], []
    for layer in range(layers):
        Q, K, V = (
            (X @ params[f"{k}{layer}"]).reshape(B, n, h, dh).transpose(0, 2, 1, 3)
            for k in ("W_Q", "W_K", "W_V")
        )  # each (B, h, n, dh)
        Z, A = scaled_dot_product_attention(Q, K, V, mask)  # (B, h, n, dh), (B, h, n, n)
        Z = Z * ~off[layer][:, None, None]  # zero the ablated heads' outputs
        if replacement is not None:  # ... and put the replacement in their place
            Z = Z + off[layer][:, None, None] * rep_[layer]  # (B, h, n, dh)
        Zm = Z.transpose(0, 2, 1, 3).reshape(B, n, d)  # heads side by side
        X = X + Zm @ params[f"W_O{layer}"]
        resid.append(X)
        weights.append(A)
        qs.append(Q)
        ks.append(K)
        vs.append(V)
        zs.append(Zm)
    logits = X @ params["W_U"]  # (B, n, vocab)
    cache = {
        "weights": np.stack(weights),
        "resid": np.stack(resid),
        "Q": qs,
        "K": ks,
        "V": vs,
        "Z": zs,
        "tokens": t,
        "params": params,
        "ablate": off,
        "num_heads": h,
    }
    return logits, cache


def attention_only_backward(
    grad_logits: npt.ArrayLike, cache: Mapping[str, object]
) -> dict[str, np.ndarray]:
    r"""Gradients of a scalar loss with respect to every parameter of the model.

    Parameters
    ----------
    grad_logits : (batch, length, vocab) array_like
        :math:`\partial L / \partial\,\text{logits}`.
    cache : dict
        The second result of :func:`attention_only_forward` on the same batch.

    Returns
    -------
    grads : dict of str to ndarray
        Keyed and shaped like ``params``. An ablated head's ``W_O`` rows and its
        ``W_Q``, ``W_K``, ``W_V`` columns get zero gradient.

    Raises
    ------
    ValueError
        If ``grad_logits`` does not have the shape of the logits.

    Notes
    -----
    Backward through :math:`X_{l+1} = X_l + Z_l W_O`: the residual passes
    :math:`G = \partial L/\partial X_{l+1}` on unchanged, :math:`dW_O = Z_l^\top G`,
    :math:`dZ_l = G W_O^\top`; each head's :math:`dQ, dK, dV` come from
    :func:`helpers.attention.attention_backward`, and
    :math:`dX_l \mathrel{+}= dQ W_Q^\top + dK W_K^\top + dV W_V^\top`. The embedding rows
    of each token id collect the gradient of every position holding that id.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.circuits import (
    ...     attention_only_backward,
    ...     attention_only_forward,
    ...     init_attention_only_params,
    ... )
    >>> params = init_attention_only_params(10, 8, 2, 2, 16, rng=np.random.default_rng(0))
    >>> logits, cache = attention_only_forward(np.array([[10, 3, 4, 3]]), params, num_heads=2)
    >>> grads = attention_only_backward(np.ones_like(logits), cache)
    >>> all(grads[k].shape == params[k].shape for k in params)
    True
    """
    params = cache["params"]
    t = cache["tokens"]
    off = cache["ablate"]
    h = cache["num_heads"]
    resid = cache["resid"]
    layers, B, n, d = resid.shape[0] - 1, *resid.shape[1:]
    vocab = params["W_U"].shape[1]
    G = np.asarray(grad_logits, dtype=np.float64)
    if G.shape != (B, n, vocab):
        raise ValueError(
            f"grad_logits must have the shape of the logits, {(B, n, vocab)}, got {G.shape}"
        )
    dh = d // h
    mask = causal_mask(n)
    grads = {"W_U": resid[-1].reshape(-1, d).T @ G.reshape(-1, vocab)}
    dX = G @ params["W_U"].T  # (B, n, d)
    for layer in reversed(range(layers)):
        X = resid[layer].reshape(-1, d)  # (B n, d)
        Zm = cache["Z"][layer]
        grads[f"W_O{layer}"] = Zm.reshape(-1, d).T @ dX.reshape(-1, d)
        dZ = (dX @ params[f"W_O{layer}"].T).reshape(B, n, h, dh).transpose(0, 2, 1, 3)
        dZ = dZ * ~off[layer][:, None, None]  # (B, h, n, dh); ablated heads pass nothing
        Q, K, V = cache["Q"][layer], cache["K"][layer], cache["V"][layer]
        A = cache["weights"][layer]
        dQ, dK, dV = attention_backward(Q, K, V, A, dZ, mask)  # each (B, h, n, dh)
        for key, g in (("W_Q", dQ), ("W_K", dK), ("W_V", dV)):
            gm = g.transpose(0, 2, 1, 3).reshape(-1, d)  # (B n, d)
            grads[f"{key}{layer}"] = X.T @ gm
            dX = dX + (gm @ params[f"{key}{layer}"].T).reshape(B, n, d)
    dX0 = dX.reshape(-1, d)
    one_hot = np.zeros((vocab + 1, B * n))
    one_hot[t.ravel(), np.arange(B * n)] = 1.0
    grads["W_E"] = one_hot @ dX0
    W_pos = params["W_pos"]
    grads["W_pos"] = np.zeros_like(W_pos, dtype=np.float64)
    grads["W_pos"][:n] = dX.sum(axis=0)
    return {k: grads[k] for k in params}


def head_output_means(cache: Mapping[str, object]) -> npt.NDArray[np.floating]:
    r"""Each head's output at each position, averaged over the batch: what mean-ablation uses.

    Parameters
    ----------
    cache : dict
        The second result of :func:`attention_only_forward`, on a batch without ablation
        (a reference batch of the task).

    Returns
    -------
    means : (num_layers, num_heads, length, d_v) ndarray
        ``means[l, r, i]``: head ``r`` of layer ``l``'s output at position ``i`` (before
        ``W_O``), averaged over the sequences of the batch. Pass it as ``replacement``
        to :func:`attention_only_forward` to mean-ablate heads.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.circuits import (
    ...     attention_only_forward,
    ...     head_output_means,
    ...     init_attention_only_params,
    ... )
    >>> params = init_attention_only_params(10, 8, 2, 2, 16, rng=np.random.default_rng(0))
    >>> tokens = np.random.default_rng(1).integers(0, 10, size=(5, 6))
    >>> _, cache = attention_only_forward(tokens, params, num_heads=2)
    >>> means = head_output_means(cache)
    >>> means.shape  # (layers, heads, positions, d_v)
    (2, 2, 6, 4)
    >>> ablated, _ = attention_only_forward(
    ...     tokens, params, num_heads=2, ablate=[(0, 1)], replacement=means
    ... )
    >>> ablated.shape
    (5, 6, 10)
    """
    h = cache["num_heads"]
    Z = np.stack(cache["Z"])  # (L, B, n, d): the heads side by side
    L, B, n, d = Z.shape
    return Z.reshape(L, B, n, h, d // h).mean(axis=1).transpose(0, 2, 1, 3)


# ---------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------


def _token_losses(
    tokens: np.ndarray, params: Mapping[str, np.ndarray], num_heads: int
) -> tuple[np.ndarray, dict]:
    """(B, n - 1) next-token losses of ``tokens``, and the forward pass's cache."""
    logits, cache = attention_only_forward(tokens, params, num_heads=num_heads)
    logp = log_softmax(logits[:, :-1], axis=-1)
    return -np.take_along_axis(logp, tokens[:, 1:, None], axis=-1)[..., 0], cache


def train_attention_only(
    params: dict[str, np.ndarray],
    *,
    num_heads: int,
    steps: int,
    rng: np.random.Generator,
    eval_tokens: npt.ArrayLike,
    eval_predictable: npt.ArrayLike,
    batch: int = 32,
    lr: float = 1e-2,
    every: int = 25,
    min_period: int = 3,
    max_period: int = 11,
) -> dict[str, np.ndarray]:
    r"""Train an attention-only model on repeated segments, as chapter 8 does; record its history.

    Parameters
    ----------
    params : dict of str to ndarray
        As made by :func:`init_attention_only_params`; trained in place.
    num_heads : int
        Heads per layer.
    steps : int
        Number of Adam steps.
    rng : numpy.random.Generator
        Draws every step's batch (:func:`repeated_token_batch`, as long as
        ``eval_tokens``, with the vocabulary of ``params``).
    eval_tokens : (b, length) array_like of int
        A fixed evaluation batch of the task.
    eval_predictable : (b, length - 1) array_like of bool
        Which of its next tokens are predictable (the second result of
        :func:`repeated_token_batch`).
    batch : int, default 32
        Sequences per step.
    lr : float, default 1e-2
        Adam's learning rate.
    every : int, default 25
        Evaluate at every step that is a multiple of ``every``, from 0 to ``steps``.
    min_period, max_period : int, default 3 and 11
        The task's segment lengths.

    Returns
    -------
    history : dict of str to ndarray
        ``"train"`` ``(steps,)``: each step's training loss (mean next-token
        cross-entropy over every position of the batch). At each evaluation ``k``:
        ``"step"`` ``(k,)``; ``"in_context"`` and ``"other"``, the mean loss on the
        predictable next tokens of the evaluation batch and on all the others;
        ``"position_loss"`` ``(k, length - 1)``, the mean loss of each next-token
        position; ``"prev"`` and ``"prefix"`` ``(k, num_layers, num_heads)``, the
        scores of :func:`previous_token_score` and :func:`prefix_matching_score`;
        ``"frames"`` ``(k, num_layers, num_heads, length, length)``, the attention
        weights on the first evaluation sequence.

    Raises
    ------
    TypeError, ValueError
        If a count is not a positive integer, ``rng`` is not a Generator, or the
        evaluation batch does not fit the model.

    Notes
    -----
    Each step draws a fresh batch from ``rng``, runs :func:`attention_only_forward`,
    takes the cross-entropy of every next-token prediction
    (:func:`helpers.transformer.cross_entropy`), back-propagates with
    :func:`attention_only_backward` and takes one step of
    :class:`helpers.transformer.Adam`. Everything is float64 and deterministic: the
    same parameters and generator state give the same history, bit for bit.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.circuits import (
    ...     init_attention_only_params,
    ...     repeated_token_batch,
    ...     train_attention_only,
    ... )
    >>> params = init_attention_only_params(10, 8, 2, 2, 12, rng=np.random.default_rng(0))
    >>> tokens, pred = repeated_token_batch(
    ...     16, 12, 10, rng=np.random.default_rng(1), min_period=2, max_period=5
    ... )
    >>> hist = train_attention_only(
    ...     params,
    ...     num_heads=2,
    ...     steps=20,
    ...     rng=np.random.default_rng(2),
    ...     eval_tokens=tokens,
    ...     eval_predictable=pred,
    ...     every=10,
    ...     min_period=2,
    ...     max_period=5,
    ... )
    >>> hist["step"], hist["train"].shape, hist["prev"].shape
    (array([ 0, 10, 20]), (20,), (3, 2, 2))
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    vocab, _, h, _, max_len = _check_params(params, num_heads)
    steps = as_integer(steps, "steps")
    batch = as_integer(batch, "batch", minimum=1)
    every = as_integer(every, "every", minimum=1)
    e_tokens = _check_tokens(eval_tokens, vocab, max_len)
    e_pred = np.asarray(eval_predictable)
    if e_pred.dtype != bool or e_pred.shape != (e_tokens.shape[0], e_tokens.shape[1] - 1):
        raise ValueError(
            f"eval_predictable must be bool of shape (b, length - 1) = "
            f"{(e_tokens.shape[0], e_tokens.shape[1] - 1)}, got {e_pred.dtype} {e_pred.shape}"
        )
    if not e_pred.any() or e_pred.all():
        raise ValueError("eval_predictable must mark some next tokens predictable, not all")
    length = e_tokens.shape[1]
    optimiser = Adam(params, lr=lr)
    keys = ("step", "train", "in_context", "other", "position_loss", "prev", "prefix", "frames")
    history: dict[str, list] = {k: [] for k in keys}
    for step in range(steps + 1):
        if step % every == 0:
            nll, cache = _token_losses(e_tokens, params, h)  # (b, length - 1)
            history["step"].append(step)
            history["in_context"].append(nll[e_pred].mean())
            history["other"].append(nll[~e_pred].mean())
            history["position_loss"].append(nll.mean(axis=0))
            history["prev"].append(previous_token_score(cache["weights"]))
            history["prefix"].append(prefix_matching_score(cache["weights"], e_tokens))
            history["frames"].append(cache["weights"][:, 0])  # (L, H, n, n)
        if step == steps:
            break
        tokens, _ = repeated_token_batch(
            batch, length, vocab, rng=rng, min_period=min_period, max_period=max_period
        )
        logits, cache = attention_only_forward(tokens, params, num_heads=h)
        loss, grad = cross_entropy(logits[:, :-1].reshape(-1, vocab), tokens[:, 1:].ravel())
        grad_logits = np.zeros_like(logits)  # the last position predicts nothing
        grad_logits[:, :-1] = grad.reshape(batch, -1, vocab)
        optimiser.step(attention_only_backward(grad_logits, cache))
        history["train"].append(loss)
    return {k: np.array(v) for k, v in history.items()}


def phase_change_step(
    steps: npt.ArrayLike, in_context: npt.ArrayLike, threshold: float
) -> int | None:
    r"""The first evaluated step whose in-context loss is below ``threshold``, or None.

    Parameters
    ----------
    steps : (k,) array_like of int
        The evaluated steps, increasing (``history["step"]`` of
        :func:`train_attention_only`).
    in_context : (k,) array_like
        The in-context loss at those steps.
    threshold : float
        Chapter 8 takes half of :math:`\log |\mathcal V|`: "the in-context loss has
        halved".

    Returns
    -------
    int or None
        The step, at the resolution of the evaluations; None if the loss never goes
        below ``threshold``.

    Examples
    --------
    >>> from helpers.circuits import phase_change_step
    >>> phase_change_step([0, 25, 50, 75], [3.9, 3.8, 1.5, 1.0], threshold=1.9)
    50
    >>> phase_change_step([0, 25], [3.9, 3.8], threshold=1.9) is None
    True
    """
    s = np.asarray(steps)
    loss = np.asarray(in_context, dtype=np.float64)
    if s.ndim != 1 or loss.shape != s.shape:
        raise ValueError(
            f"steps and in_context must be 1-d of the same length, got {s.shape}, {loss.shape}"
        )
    below = np.flatnonzero(loss < threshold)
    return int(s[below[0]]) if below.size else None


# ---------------------------------------------------------------------------
# Scores
# ---------------------------------------------------------------------------


def _check_weights(weights: object) -> np.ndarray:
    A = np.asarray(weights)
    if A.dtype.kind not in "fiu":
        raise TypeError(f"weights must be an array of real numbers, got dtype {A.dtype}")
    if A.ndim != 5 or A.shape[-1] != A.shape[-2]:
        raise ValueError(
            f"weights must have shape (num_layers, batch, num_heads, length, length), got {A.shape}"
        )
    return A


def previous_token_score(weights: npt.ArrayLike) -> npt.NDArray[np.floating]:
    r"""The mean weight each head puts on the position just before the query.

    Parameters
    ----------
    weights : (num_layers, batch, num_heads, length, length) array_like
        Attention weights, as ``cache["weights"]`` of :func:`attention_only_forward`.

    Returns
    -------
    score : (num_layers, num_heads) ndarray
        :math:`\frac{1}{B (n - 1)} \sum_b \sum_{i=1}^{n-1} A_{b, i, i-1}`: 1 for a head
        that always attends to the previous token, about :math:`1/(i+1)` per query for
        uniform causal attention.

    Raises
    ------
    TypeError, ValueError
        If ``weights`` is not a real 5-dimensional array with square last axes, or has
        fewer than 2 positions.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.circuits import previous_token_score
    >>> A = np.eye(4, k=-1)[None, None, None]  # one head that attends to the previous token
    >>> A[..., 0, 0] = 1.0  # (query 0 has no previous token; it is not counted)
    >>> previous_token_score(A)
    array([[1.]])
    """
    A = _check_weights(weights)
    if A.shape[-1] < 2:
        raise ValueError(f"weights must cover at least 2 positions, got {A.shape}")
    diag = np.diagonal(A, offset=-1, axis1=-2, axis2=-1)  # (L, B, H, n - 1): A[i, i - 1]
    return diag.mean(axis=(1, 3))


def prefix_matching_score(
    weights: npt.ArrayLike, tokens: npt.ArrayLike
) -> npt.NDArray[np.floating]:
    r"""The mean weight a query puts on the tokens right after earlier copies of itself.

    Parameters
    ----------
    weights : (num_layers, batch, num_heads, length, length) array_like
        Attention weights, as ``cache["weights"]`` of :func:`attention_only_forward`.
    tokens : (batch, length) array_like of int
        The sequences the weights were computed on.

    Returns
    -------
    score : (num_layers, num_heads) ndarray
        For each query :math:`i` whose token occurred before, at positions
        :math:`j < i` with :math:`t_j = t_i`, the weight on the positions :math:`j + 1`
        after them, :math:`\sum_{j < i,\ t_j = t_i} A_{i, j+1}`, averaged over all such
        queries of the batch. An induction head scores near 1.

    Raises
    ------
    TypeError, ValueError
        If the arrays have the wrong dtype or shapes, or no query has an earlier copy of
        its token.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.circuits import prefix_matching_score
    >>> tokens = np.array([[9, 1, 2, 1, 2]])  # query 3 (token 1) should look at position 2
    >>> A = np.zeros((1, 1, 1, 5, 5))
    >>> A[..., np.arange(5), [0, 0, 0, 2, 3]] = 1.0  # queries 3, 4 attend after their copy
    >>> prefix_matching_score(A, tokens)
    array([[1.]])
    """
    A = _check_weights(weights)
    t = np.asarray(tokens)
    if t.dtype.kind not in "iu":
        raise TypeError(f"tokens must be integer token ids, got dtype {t.dtype}")
    B, n = A.shape[1], A.shape[3]
    if t.shape != (B, n):
        raise ValueError(
            f"tokens must have shape (batch, length) = {(B, n)} to match weights "
            f"{A.shape}, got {t.shape}"
        )
    target = _prefix_targets(t)  # (B, n, n): True at (i, j + 1) for each earlier copy j
    has = target.any(axis=-1)  # (B, n): queries with an earlier copy of their token
    if not has.any():
        raise ValueError("no query in tokens has an earlier copy of its token: nothing to score")
    on_target = (A * target[None, :, None]).sum(axis=-1)  # (L, B, H, n)
    return (on_target * has[None, :, None]).sum(axis=(1, 3)) / has.sum()


def _prefix_targets(t: np.ndarray) -> np.ndarray:
    """(B, n, n) bool: True at (i, j + 1) where j < i and t_j = t_i."""
    B, n = t.shape
    same = (t[:, :, None] == t[:, None, :]) & np.tri(n, k=-1, dtype=bool)  # j < i
    target = np.zeros((B, n, n), dtype=bool)
    target[:, :, 1:] = same[:, :, :-1]
    return target


# ---------------------------------------------------------------------------
# Composition
# ---------------------------------------------------------------------------


def composition_score(W_A: npt.ArrayLike, W_B: npt.ArrayLike) -> float:
    r"""How much ``W_A`` reads of what ``W_B`` writes: a normalised Frobenius norm.

    Parameters
    ----------
    W_A : (d, d) array_like
        The first factor (for K-composition, the later head's :math:`W_{QK}`; for
        Q-composition, the earlier head's :math:`W_{OV}`).
    W_B : (d, d) array_like
        The second factor (for K-composition, :math:`W_{OV}^\top` of the earlier head;
        for Q-composition, the later head's :math:`W_{QK}`).

    Returns
    -------
    float
        :math:`\|W_A W_B\|_F / (\|W_A\|_F \|W_B\|_F)`, in :math:`[0, 1]` by the
        submultiplicativity of the Frobenius norm (Elhage et al. 2021).

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.circuits import composition_score
    >>> composition_score(np.diag([1.0, 0.0]), np.diag([1.0, 0.0]))  # same direction
    1.0
    >>> composition_score(np.diag([1.0, 0.0]), np.diag([0.0, 1.0]))  # orthogonal
    0.0
    """
    A = np.asarray(W_A, dtype=np.float64)
    B = np.asarray(W_B, dtype=np.float64)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(
            f"W_A and W_B must be matrices with W_A @ W_B defined: {A.shape}, {B.shape}"
        )
    return float(np.linalg.norm(A @ B) / (np.linalg.norm(A) * np.linalg.norm(B)))


def k_composition_scores(
    params: Mapping[str, np.ndarray], *, num_heads: int, reader: int = 1, writer: int = 0
) -> npt.NDArray[np.floating]:
    r"""K-composition scores between every head of layer ``writer`` and of layer ``reader``.

    Parameters
    ----------
    params : dict of str to ndarray
        As made by :func:`init_attention_only_params`.
    num_heads : int
        Heads per layer.
    reader, writer : int
        The later layer (whose keys read) and the earlier one (whose output is read).

    Returns
    -------
    scores : (num_heads, num_heads) ndarray
        ``scores[r2, r1]``: :func:`composition_score` of
        :math:`W_{QK}^{r_2} = W_Q^{r_2} W_K^{r_2\top}` (head :math:`r_2` of ``reader``)
        and :math:`W_{OV}^{r_1\top}`, with :math:`W_{OV}^{r_1} = W_V^{r_1} W_O^{r_1}`
        (head :math:`r_1` of ``writer``).

    Notes
    -----
    In the row-vector convention the score of a query :math:`x_i` and a key
    :math:`x_j` is :math:`x_i W_{QK} x_j^\top`; a key that carries head :math:`r_1`'s
    output :math:`x_j W_{OV}` adds :math:`x_i W_{QK} W_{OV}^\top x_j^\top`, so the score
    is :math:`\|W_{QK} W_{OV}^\top\|_F / (\|W_{QK}\|_F \|W_{OV}\|_F)`. Elhage et al.
    (2021) work with column vectors: their :math:`W_{QK}` is this one, their
    :math:`W_{OV}` is the transpose of this one, and their K-composition
    :math:`\|W_{QK} W_{OV}\|_F / (\dots)` is the same number. Their
    :math:`\|W_{QK}^\top W_{OV}\|_F / (\dots)` is Q-composition (a query that reads
    the earlier head), here :math:`\|W_{OV} W_{QK}\|_F / (\dots)`.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.circuits import init_attention_only_params, k_composition_scores
    >>> p = init_attention_only_params(10, 8, 2, 2, 16, rng=np.random.default_rng(0))
    >>> k_composition_scores(p, num_heads=2).shape
    (2, 2)
    """
    _, d, h, layers, _ = _check_params(params, num_heads)
    for name, value in (("reader", reader), ("writer", writer)):
        v = as_integer(value, name)
        if v >= layers:
            raise ValueError(f"{name} = {v} is not a layer: the model has layers 0..{layers - 1}")
    dh = d // h
    scores = np.empty((h, h))
    for r2 in range(h):
        cols = slice(r2 * dh, (r2 + 1) * dh)
        W_QK = params[f"W_Q{reader}"][:, cols] @ params[f"W_K{reader}"][:, cols].T
        for r1 in range(h):
            c1 = slice(r1 * dh, (r1 + 1) * dh)
            W_OV = params[f"W_V{writer}"][:, c1] @ params[f"W_O{writer}"][c1, :]
            scores[r2, r1] = composition_score(W_QK, W_OV.T)
    return scores


def copying_score(M: npt.ArrayLike) -> float:
    r"""Elhage et al.'s positive-eigenvalue score of a square circuit: 1 for a copying head.

    Parameters
    ----------
    M : (k, k) array_like
        A square matrix from tokens to tokens, such as a head's OV circuit
        :math:`W_E W_{OV} W_U` (rows: the token attended to, columns: the logit it
        raises).

    Returns
    -------
    float
        :math:`\operatorname{Re} \sum_i \lambda_i / \sum_i |\lambda_i|` over the
        eigenvalues :math:`\lambda_i` of ``M``, in :math:`[-1, 1]`: near 1 when the
        eigenvalues are positive (the circuit raises the logit of the token it reads,
        "copying"), near -1 when they are negative (it lowers it).

    Raises
    ------
    ValueError
        If ``M`` is not a square, finite, nonzero matrix.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.circuits import copying_score
    >>> copying_score(np.diag([3.0, 1.0, 2.0]))  # raises each token's own logit
    1.0
    >>> copying_score(-np.eye(3))
    -1.0
    >>> abs(copying_score(np.array([[0.0, -1.0], [1.0, 0.0]]))) < 1e-12  # eigenvalues +-i
    True
    """
    A = np.asarray(M, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] == 0:
        raise ValueError(f"M must be a square matrix, got shape {A.shape}")
    if not np.isfinite(A).all():
        raise ValueError("M must be finite")
    ev = np.linalg.eigvals(A)
    total = np.abs(ev).sum()
    if total == 0:
        raise ValueError("M has only zero eigenvalues: the score is undefined")
    return float(ev.sum().real / total)
