"""Introduced in chapter 7, mixture-of-experts layers: routing, balancing, counting.

A mixture-of-experts (MoE) layer replaces the feed-forward block of a Transformer by
``E`` feed-forward networks, the *experts*, and a *router* ``W_g`` that sends each
token to ``k`` of them. This module has the pieces chapter 7 derives:

* :func:`top_k_gating`: the gate vector of each token, zero outside its ``k`` largest
  router logits and renormalised over them (Shazeer et al. 2017; Mixtral);
* :func:`moe_layer`: the whole layer, with an optional capacity factor (dropped
  tokens, as in the Switch Transformer) and the router's softmax optionally computed in
  another dtype (Hugging Face's Mixtral computes it in float32 in every model dtype);
* :func:`load_balancing_loss`: the Switch Transformer's auxiliary loss ``N Σ f_i P_i``;
* :func:`router_z_loss`: ST-MoE's penalty on the router's log-partition function;
* :func:`expert_capacity`: the number of token slots of each expert;
* :func:`moe_parameter_count`: total versus active parameters of a Mixtral-style model.

Conventions
-----------
Tokens are rows (``book/notation.md``): ``X`` has shape ``(..., n, d_model)`` and the
router logits are ``X @ W_g``, shape ``(..., n, E)``. Every batch axis is flattened into
one axis of ``T`` tokens where the computation needs it (routing is per token; the
balancing statistics and the capacity are per batch).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from helpers._validate import as_integer, as_real_array
from helpers.softmax import logsumexp, softmax

__all__ = [
    "expert_capacity",
    "load_balancing_loss",
    "moe_layer",
    "moe_parameter_count",
    "router_z_loss",
    "top_k_gating",
]

# router_probs passed to load_balancing_loss must have rows summing to 1 within this
# tolerance: enough for float16 probabilities, far too little for logits passed by mistake.
_PROB_SUM_ATOL = 1e-3


# ---------------------------------------------------------------------------
# Input checks
# ---------------------------------------------------------------------------


def _real(x: npt.ArrayLike, name: str, *, min_ndim: int, layout: str) -> np.ndarray:
    arr = as_real_array(x, name, bool_hint="")
    if arr.ndim < min_ndim:
        raise ValueError(f"{name} must have shape {layout}; got {name}.shape = {arr.shape}")
    if not np.isfinite(arr).all():
        i = tuple(int(j) for j in np.argwhere(~np.isfinite(arr))[0])
        raise ValueError(f"{name} must be finite, but {name}{list(i)} = {arr[i]}")
    return arr


def _work(arr: np.ndarray) -> np.ndarray:
    """float16 is computed in float32 (as in helpers.softmax)."""
    return arr.astype(np.float32) if arr.dtype == np.float16 else arr


def _check_k(k: object, num_experts: int, context: str) -> int:
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Integral):
        raise TypeError(f"k must be an integer, got {k!r}")
    k = int(k)
    if not 1 <= k <= num_experts:
        raise ValueError(
            f"k must be between 1 and the number of experts E = {num_experts} ({context}), "
            f"got k = {k}"
        )
    return k


# ---------------------------------------------------------------------------
# Gating
# ---------------------------------------------------------------------------


def top_k_gating(
    router_logits: npt.ArrayLike, k: int
) -> tuple[npt.NDArray[np.floating], npt.NDArray[np.intp]]:
    r"""Top-``k`` gates: a softmax over each token's ``k`` largest router logits.

    Parameters
    ----------
    router_logits : (..., E) array_like
        The router's logits ``h = x W_g``, one row per token, one column per expert.
    k : int
        Experts per token, ``1 <= k <= E``.

    Returns
    -------
    gates : (..., E) ndarray
        Zero outside the ``k`` selected experts; over them, ``exp(h_i) / Σ_{j ∈ top-k}
        exp(h_j)``, so each row sums to 1. Same dtype as the logits (float16 is computed
        in float32; integers become float64).
    indices : (..., k) ndarray of int
        The selected experts, from the largest logit down; equal logits are taken in
        the order of their expert index.

    Raises
    ------
    TypeError
        If the logits are not real numbers or ``k`` is not an integer.
    ValueError
        If the logits have no expert axis or are not finite, or ``k`` is outside
        ``1, ..., E``.

    See Also
    --------
    moe_layer, helpers.softmax.softmax

    Notes
    -----
    Shazeer et al. (2017) write the gate as ``Softmax(KeepTopK(h, k))``, where
    ``KeepTopK`` sets every logit outside the top ``k`` to :math:`-\infty`; Mixtral as
    ``Softmax(TopK(x W_g))``, the same function. It also equals the full softmax
    :math:`p = \operatorname{softmax}(h)` restricted to the top ``k`` and renormalised,
    :math:`g_i = p_i / \sum_{j \in \text{top-}k} p_j`, since the full softmax's
    normaliser cancels; Hugging Face's Mixtral computes it that way. The
    largest selected logit is subtracted before ``exp``, so logits of any size
    give finite gates.

    The Switch Transformer (``k = 1``) does *not* renormalise: its gate is the full
    :math:`p_i`. Renormalised, a single gate would always be 1 and the router would
    get no gradient from the layer's output.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.moe import top_k_gating
    >>> gates, indices = top_k_gating(np.array([1.0, 3.0, 0.0, 2.0]), k=2)
    >>> indices
    array([1, 3])
    >>> gates.round(4)  # e^3 / (e^3 + e^2) and e^2 / (e^3 + e^2)
    array([0.    , 0.7311, 0.    , 0.2689])
    """
    h = _real(router_logits, "router_logits", min_ndim=1, layout="(..., E)")
    num_experts = h.shape[-1]
    if num_experts == 0:
        raise ValueError(f"router_logits must have at least one expert: shape {h.shape}")
    k = _check_k(k, num_experts, f"router_logits.shape = {h.shape}")
    out_dtype = h.dtype
    w = _work(h)
    indices = np.argsort(-w, axis=-1, kind="stable")[..., :k]  # (..., k), largest first
    top = np.take_along_axis(w, indices, axis=-1)  # (..., k), top[..., 0] is the largest
    e = np.exp(top - top[..., :1])  # every exponent <= 0, the largest term is 1
    g = e / e.sum(axis=-1, keepdims=True)
    gates = np.zeros_like(w)
    np.put_along_axis(gates, indices, g, axis=-1)
    return gates.astype(out_dtype, copy=False), indices


# ---------------------------------------------------------------------------
# Losses
# ---------------------------------------------------------------------------


def load_balancing_loss(
    router_probs: npt.ArrayLike, expert_indices: npt.ArrayLike, num_experts: int
) -> float:
    r"""The Switch Transformer's load-balancing loss ``N Σ_i f_i P_i`` (without ``α``).

    Parameters
    ----------
    router_probs : (..., E) array_like
        The router's full softmax ``p(x) = softmax(x W_g)`` of every token (all ``E``
        probabilities, not the renormalised top-``k`` gates).
    expert_indices : (..., k) array_like of int
        The experts each token was sent to (``indices`` of :func:`top_k_gating`); the
        leading axes are those of ``router_probs``.
    num_experts : int
        ``N = E``, the number of experts.

    Returns
    -------
    loss : float
        :math:`N \sum_{i=1}^{N} f_i P_i`: exactly 1 when either ``f`` or ``P`` is
        uniform, and :math:`N \sum_i P_i^2 \ge 1` when the two agree (``f = P``), with
        equality only for uniform routing. Multiply it by a coefficient ``α`` (the
        Switch Transformer uses :math:`10^{-2}`) before adding it to the training loss.

    Raises
    ------
    TypeError
        If an argument has the wrong type (say float indices).
    ValueError
        If the shapes disagree, an index is outside ``0, ..., E - 1``, or a row of
        ``router_probs`` does not sum to 1 (logits passed by mistake).

    See Also
    --------
    top_k_gating, moe_layer, router_z_loss

    Notes
    -----
    Over the ``T`` tokens of the batch,

    .. math::

        f_i = \frac{1}{kT} \sum_{t=1}^{T} \#\{j : \text{index}_{t,j} = i\}, \qquad
        P_i = \frac{1}{T} \sum_{t=1}^{T} p_i(x_t),

    so :math:`f_i` is the fraction of the :math:`kT` token-to-expert assignments that
    go to expert :math:`i` and :math:`\sum_i f_i = 1` for every ``k`` (for ``k = 1``
    this is Switch's "fraction of tokens dispatched to expert i"). ``f`` is piecewise
    constant in the router's weights, so the gradient reaches the router through
    ``P`` alone.

    **Hugging Face's Mixtral** (``load_balancing_loss_func`` in ``transformers``)
    counts the ``k`` assignments of each token without dividing by ``k``: its
    ``tokens_per_expert`` sums to ``k``, and its loss is ``k`` times this one (2 for
    Mixtral's top-2 routing, whose uniform value is then 2). It also accumulates in
    float32. The tests check both statements.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.moe import load_balancing_loss
    >>> probs = np.full((4, 2), 0.5)  # 4 tokens, 2 experts, a uniform router
    >>> load_balancing_loss(probs, np.array([[0], [1], [0], [1]]), 2)
    1.0
    >>> skewed = np.array([[0.9, 0.1]] * 4)  # every token prefers expert 0 and goes there
    >>> load_balancing_loss(skewed, np.zeros((4, 1), dtype=int), 2)  # 2 * (1 * 0.9 + 0 * 0.1)
    1.8
    """
    n_exp = as_integer(num_experts, "num_experts", minimum=1)
    probs = _real(router_probs, "router_probs", min_ndim=1, layout="(..., E)")
    if probs.shape[-1] != n_exp:
        raise ValueError(
            f"router_probs must have one column per expert, num_experts = {n_exp}; got "
            f"router_probs.shape = {probs.shape}"
        )
    idx = np.asarray(expert_indices)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"expert_indices must be integers (expert numbers), got dtype {idx.dtype}")
    if idx.ndim != probs.ndim or idx.shape[:-1] != probs.shape[:-1] or idx.shape[-1] < 1:
        raise ValueError(
            "expert_indices must have shape (..., k) with the leading axes of router_probs "
            f"(..., E): got expert_indices.shape = {idx.shape}, router_probs.shape = "
            f"{probs.shape}"
        )
    if idx.size and (idx.min() < 0 or idx.max() >= n_exp):
        bad = idx[(idx < 0) | (idx >= n_exp)].flat[0]
        raise ValueError(f"expert_indices must lie in 0, ..., {n_exp - 1}; got {bad}")
    p = _work(probs).reshape(-1, n_exp).astype(np.float64)  # (T, E)
    sums = p.sum(axis=-1)
    if p.shape[0] and np.abs(sums - 1).max() > _PROB_SUM_ATOL:
        worst = sums[np.argmax(np.abs(sums - 1))]
        raise ValueError(
            f"router_probs must be probabilities whose rows sum to 1, got a row summing to "
            f"{worst:.6g}; pass softmax(router_logits), not the logits or the top-k gates"
        )
    k = idx.shape[-1]
    T = p.shape[0]
    f = np.bincount(idx.ravel(), minlength=n_exp) / (k * T)  # (E,), sums to 1
    P = p.mean(axis=0)  # (E,)
    return float(n_exp * (f @ P))


def router_z_loss(router_logits: npt.ArrayLike) -> float:
    r"""ST-MoE's router z-loss: the mean squared log-partition function of the router.

    Parameters
    ----------
    router_logits : (..., E) array_like
        The router's logits, one row per token.

    Returns
    -------
    loss : float
        :math:`\frac{1}{B} \sum_{t=1}^{B} \big(\log \sum_{j=1}^{E} e^{h_{t,j}}\big)^2`
        over the ``B`` tokens. ST-MoE adds it with the coefficient
        :math:`c_z = 10^{-3}`.

    Raises
    ------
    TypeError, ValueError
        If the logits are not real, finite, with an expert axis.

    Notes
    -----
    Softmax is unchanged by adding a constant to every logit of a row, so the router's
    probabilities do not pin the logits' level; the z-loss does, pulling each row's
    log-sum-exp towards 0 and so keeping the logits small, where float32 and bfloat16
    round them least. Without the square the "loss" would be unbounded below: it
    could be driven to :math:`-\infty` by lowering every logit.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.moe import router_z_loss
    >>> round(router_z_loss(np.zeros((3, 4))), 6)  # log 4 squared
    1.921812
    """
    h = _real(router_logits, "router_logits", min_ndim=1, layout="(..., E)")
    if h.shape[-1] == 0:
        raise ValueError(f"router_logits must have at least one expert: shape {h.shape}")
    z = logsumexp(_work(h).astype(np.float64), axis=-1)
    return float(np.mean(np.square(z)))


def expert_capacity(num_tokens: int, num_experts: int, capacity_factor: float, k: int = 1) -> int:
    r"""Token slots per expert: ``⌈capacity_factor · k · T / E⌉``.

    Parameters
    ----------
    num_tokens : int
        ``T``, tokens in the batch (or in the group routed together).
    num_experts : int
        ``E``.
    capacity_factor : float
        Positive; 1 gives each expert exactly its even share of the ``k T`` assignments.
    k : int, default 1
        Experts per token.

    Returns
    -------
    capacity : int
        The Switch Transformer's ``(tokens per batch / number of experts) × capacity
        factor`` with ``k T`` assignments in place of ``T`` tokens, rounded up.
        Implementations round differently (up, down, or to a multiple of a hardware
        tile); the book rounds up.

    Examples
    --------
    >>> from helpers.moe import expert_capacity
    >>> expert_capacity(64, 8, 1.0), expert_capacity(64, 8, 1.25), expert_capacity(64, 8, 1.0, k=2)
    (8, 10, 16)
    """
    T = as_integer(num_tokens, "num_tokens", minimum=0)
    E = as_integer(num_experts, "num_experts", minimum=1)
    kk = _check_k(k, E, f"num_experts = {E}")
    if isinstance(capacity_factor, (bool, np.bool_)) or not isinstance(
        capacity_factor, numbers.Real
    ):
        raise TypeError(f"capacity_factor must be a real number, got {capacity_factor!r}")
    cf = float(capacity_factor)
    if not (math.isfinite(cf) and cf > 0):
        raise ValueError(f"capacity_factor must be positive and finite, got {cf!r}")
    # round the product first so that 1.25 * 64 / 8 = 10 exactly is not pushed to 11
    return math.ceil(round(cf * kk * T / E, 9))


# ---------------------------------------------------------------------------
# The layer
# ---------------------------------------------------------------------------


def _silu(x: np.ndarray) -> np.ndarray:
    """``x σ(x)``; σ(x) = (1 + tanh(x/2)) / 2 has no overflow for any x."""
    return x * (0.5 * (1.0 + np.tanh(0.5 * x)))


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


_ACTIVATIONS = {"silu": _silu, "relu": _relu}


def _check_experts(
    experts: Mapping[str, Any], d_model: int, num_experts: int, dtype: np.dtype
) -> tuple[dict[str, np.ndarray], int]:
    if not isinstance(experts, Mapping):
        raise TypeError(
            "experts must be a dict of stacked expert weights, e.g. {'W_1': (E, d_model, "
            f"d_ff), 'W_2': (E, d_ff, d_model)}}; got {type(experts).__name__}"
        )
    allowed = {"W_1", "W_2", "W_3", "b_1", "b_2"}
    unknown = sorted(set(experts) - allowed)
    if unknown:
        raise ValueError(f"experts has unknown keys {unknown}; allowed are {sorted(allowed)}")
    for name in ("W_1", "W_2"):
        if name not in experts:
            raise ValueError(f"experts is missing {name!r} (keys: {sorted(experts)})")
    arrs = {
        name: _real(a, f"experts[{name!r}]", min_ndim=1, layout="stacked per expert")
        for name, a in experts.items()
    }
    W_1 = arrs["W_1"]
    if W_1.ndim != 3 or W_1.shape[0] != num_experts or W_1.shape[1] != d_model:
        raise ValueError(
            f"experts['W_1'] must have shape (E, d_model, d_ff) = ({num_experts}, {d_model}, "
            f"d_ff) (E from W_g, d_model from X); got {W_1.shape}"
        )
    d_ff = W_1.shape[2]
    expected = {
        "W_2": (num_experts, d_ff, d_model),
        "W_3": (num_experts, d_model, d_ff),
        "b_1": (num_experts, d_ff),
        "b_2": (num_experts, d_model),
    }
    for name, shape in expected.items():
        if name in arrs and arrs[name].shape != shape:
            raise ValueError(
                f"experts[{name!r}] must have shape {shape} (E = {num_experts}, d_model = "
                f"{d_model}, d_ff = {d_ff} from W_1); got {arrs[name].shape}"
            )
    return {n: a.astype(dtype, copy=False) for n, a in arrs.items()}, d_ff


def moe_layer(
    X: npt.ArrayLike,
    W_g: npt.ArrayLike,
    experts: Mapping[str, npt.ArrayLike],
    k: int,
    *,
    capacity_factor: float | None = None,
    router_dtype: npt.DTypeLike | None = None,
    activation: str | None = None,
) -> tuple[npt.NDArray[np.floating], dict[str, Any]]:
    r"""A sparse mixture-of-experts feed-forward layer with top-``k`` routing.

    Parameters
    ----------
    X : (..., n, d_model) array_like
        Token representations, one per row.
    W_g : (d_model, E) array_like
        The router: token ``x`` gets the logits ``x W_g``.
    experts : dict of str to array_like
        The ``E`` experts' weights, stacked along a first axis of length ``E``:
        ``"W_1"`` ``(E, d_model, d_ff)`` and ``"W_2"`` ``(E, d_ff, d_model)``, and either

        * ``"W_3"`` ``(E, d_model, d_ff)``: gated experts (SwiGLU, as in Mixtral),
          :math:`E_i(x) = (\operatorname{act}(x W_1^{(i)}) \odot x W_3^{(i)}) W_2^{(i)}`;
        * or no ``"W_3"``: plain two-layer experts
          :math:`E_i(x) = \operatorname{act}(x W_1^{(i)} + b_1^{(i)}) W_2^{(i)} + b_2^{(i)}`
          with optional biases ``"b_1"`` ``(E, d_ff)`` and ``"b_2"`` ``(E, d_model)``.
    k : int
        Experts per token, ``1 <= k <= E``.
    capacity_factor : float, optional
        If given, each expert processes at most :func:`expert_capacity` ``(T, E,
        capacity_factor, k)`` token assignments of the ``T`` tokens of ``X``; the
        others are *dropped* (they contribute 0, and in a Transformer the token passes
        on through the residual connection). Assignments are served in order of
        choice (every token's first choice before any second choice), then of token.
        By default nothing is dropped.
    router_dtype : dtype, optional
        Compute the router's softmax and top-``k`` in this dtype, then cast the gates
        back to ``X``'s dtype. ``np.float32`` reproduces Hugging Face's Mixtral, which
        casts the router logits to float32 even in a float64 model.
    activation : {"silu", "relu"}, optional
        The experts' activation; default ``"silu"`` for gated experts and ``"relu"``
        for plain ones.

    Returns
    -------
    output : (..., n, d_model) ndarray
        :math:`\sum_{i} g_i(x) E_i(x)` for every token, over its kept assignments.
    info : dict
        What the losses and the figures need, over the same leading axes as ``X``:
        ``"router_logits"`` ``(..., n, E)``; ``"router_probs"`` ``(..., n, E)``, the
        full softmax (for :func:`load_balancing_loss`); ``"gates"`` ``(..., n, E)`` and
        ``"indices"`` ``(..., n, k)`` from :func:`top_k_gating`; ``"kept"``
        ``(..., n, k)`` bool, which assignments were processed; ``"tokens_per_expert"``
        ``(E,)``, the processed assignments per expert; ``"capacity"``, an int or None.

    Raises
    ------
    TypeError
        If an input is not real or ``experts`` is not a dict.
    ValueError
        If the shapes disagree (the message names the arrays and shapes), ``experts``
        lacks ``"W_1"`` or ``"W_2"``, ``k`` is outside ``1, ..., E``, an input is not
        finite, or ``activation`` is unknown.

    See Also
    --------
    top_k_gating, load_balancing_loss, router_z_loss, expert_capacity

    Notes
    -----
    Each expert runs once, on the rows of the tokens routed to it (a gather, one
    batched FFN, a scatter-add weighted by the gates); an expert that receives no
    token costs nothing. That is where a sparse layer saves compute: a token pays for
    ``k`` experts while the layer holds ``E``.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.moe import moe_layer
    >>> rng = np.random.default_rng(0)
    >>> E, d, d_ff = 4, 6, 8
    >>> experts = {
    ...     "W_1": rng.normal(size=(E, d, d_ff)),
    ...     "W_3": rng.normal(size=(E, d, d_ff)),
    ...     "W_2": rng.normal(size=(E, d_ff, d)),
    ... }
    >>> X, W_g = rng.normal(size=(5, d)), rng.normal(size=(d, E))
    >>> Y, info = moe_layer(X, W_g, experts, k=2)
    >>> Y.shape, info["indices"].shape, int(info["tokens_per_expert"].sum())
    ((5, 6), (5, 2), 10)
    """
    x = _real(X, "X", min_ndim=2, layout="(..., n, d_model)")
    w_g = _real(W_g, "W_g", min_ndim=2, layout="(d_model, E)")
    if w_g.ndim != 2 or w_g.shape[0] != x.shape[-1]:
        raise ValueError(
            f"W_g must have shape (d_model, E) with d_model = X.shape[-1] = {x.shape[-1]}; "
            f"got W_g.shape = {w_g.shape}"
        )
    num_experts = w_g.shape[1]
    if num_experts == 0:
        raise ValueError(f"W_g must have at least one expert column: W_g.shape = {w_g.shape}")
    kk = _check_k(k, num_experts, f"W_g.shape = {w_g.shape}")
    out_dtype = np.result_type(x, w_g)
    dtype = np.dtype(np.float32) if out_dtype == np.float16 else out_dtype
    d_model = x.shape[-1]
    params, _ = _check_experts(experts, d_model, num_experts, dtype)
    gated = "W_3" in params
    if gated and ("b_1" in params or "b_2" in params):
        raise ValueError("gated experts (with 'W_3') take no biases 'b_1', 'b_2'")
    act_name = activation if activation is not None else ("silu" if gated else "relu")
    if act_name not in _ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {act_name!r}")
    act = _ACTIVATIONS[act_name]

    lead = x.shape[:-1]  # (..., n)
    flat = x.reshape(-1, d_model).astype(dtype, copy=False)  # (T, d_model)
    T = flat.shape[0]
    logits = flat @ w_g.astype(dtype, copy=False)  # (T, E)
    r_logits = logits if router_dtype is None else logits.astype(np.dtype(router_dtype))
    if r_logits.dtype.kind != "f":
        raise TypeError(f"router_dtype must be a floating dtype, got {r_logits.dtype}")
    probs = softmax(r_logits, axis=-1)  # (T, E)
    gates, indices = top_k_gating(r_logits, kk)  # (T, E), (T, k)
    gates = gates.astype(dtype, copy=False)

    kept = np.ones((T, kk), dtype=bool)
    capacity = None
    if capacity_factor is not None:
        capacity = expert_capacity(T, num_experts, capacity_factor, kk)
        order = indices.T.ravel()  # (k T,): every first choice, then every second, ...
        by_expert = np.argsort(order, kind="stable")  # assignments grouped by expert
        starts = np.searchsorted(order[by_expert], np.arange(num_experts))
        position = np.empty(order.size, dtype=np.intp)
        position[by_expert] = np.arange(order.size) - starts[order[by_expert]]
        kept = (position < capacity).reshape(kk, T).T  # (T, k)

    output = np.zeros_like(flat)  # (T, d_model)
    tokens_per_expert = np.zeros(num_experts, dtype=np.intp)
    for e in range(num_experts):
        rows, _ = np.nonzero((indices == e) & kept)  # tokens sent to expert e, each once
        tokens_per_expert[e] = rows.size
        if rows.size == 0:
            continue  # an expert with no token costs nothing
        x_e = flat[rows]  # (T_e, d_model)
        hidden = x_e @ params["W_1"][e]  # (T_e, d_ff)
        if gated:
            hidden = act(hidden) * (x_e @ params["W_3"][e])
        else:
            if "b_1" in params:
                hidden = hidden + params["b_1"][e]
            hidden = act(hidden)
        y_e = hidden @ params["W_2"][e]  # (T_e, d_model)
        if "b_2" in params:
            y_e = y_e + params["b_2"][e]
        output[rows] += gates[rows, e][:, None] * y_e

    E = num_experts
    info = {
        "router_logits": logits.reshape(*lead, E),
        "router_probs": probs.reshape(*lead, E),
        "gates": gates.reshape(*lead, E),
        "indices": indices.reshape(*lead, kk),
        "kept": kept.reshape(*lead, kk),
        "tokens_per_expert": tokens_per_expert,
        "capacity": capacity,
    }
    return output.reshape(x.shape).astype(out_dtype, copy=False), info


# ---------------------------------------------------------------------------
# Counting
# ---------------------------------------------------------------------------


def moe_parameter_count(
    *,
    vocab_size: int,
    d_model: int,
    num_layers: int,
    num_heads: int,
    num_kv_heads: int,
    d_ff: int,
    num_experts: int,
    k: int,
    head_dim: int | None = None,
    tie_embeddings: bool = False,
) -> dict[str, int]:
    r"""Total and active parameters of a Mixtral-style decoder.

    The model: token embeddings; ``num_layers`` blocks of grouped-query attention
    without biases, an RMSNorm before it and one before an MoE layer of ``num_experts``
    SwiGLU experts (three ``d_model × d_ff`` matrices each) with a router ``W_g``; a
    final RMSNorm; an output matrix (``tie_embeddings=False``, Mixtral's choice) or the
    embeddings reused. Rotary positions have no parameters.

    Parameters
    ----------
    vocab_size, d_model, num_layers, num_heads, num_kv_heads, d_ff, num_experts, k : int
        The sizes (Mixtral 8x7B: 32000, 4096, 32, 32, 8, 14336, 8, 2).
    head_dim : int, optional
        Width of a head; default ``d_model // num_heads``.
    tie_embeddings : bool, default False
        Whether the output matrix is the embedding matrix.

    Returns
    -------
    counts : dict of str to int
        ``"total"``: every parameter; ``"active"``: those one token uses (``k`` of the
        ``E`` experts in every layer, everything else in full); ``"expert"``: one
        expert of one layer; ``"embedding"``: the embedding and output matrices.

    Examples
    --------
    >>> from helpers.moe import moe_parameter_count
    >>> c = moe_parameter_count(
    ...     vocab_size=32000,
    ...     d_model=4096,
    ...     num_layers=32,
    ...     num_heads=32,
    ...     num_kv_heads=8,
    ...     d_ff=14336,
    ...     num_experts=8,
    ...     k=2,
    ... )
    >>> round(c["total"] / 1e9, 1), round(c["active"] / 1e9, 1)
    (46.7, 12.9)
    """
    V = as_integer(vocab_size, "vocab_size", minimum=1)
    d = as_integer(d_model, "d_model", minimum=1)
    L = as_integer(num_layers, "num_layers", minimum=1)
    h = as_integer(num_heads, "num_heads", minimum=1)
    h_kv = as_integer(num_kv_heads, "num_kv_heads", minimum=1)
    ff = as_integer(d_ff, "d_ff", minimum=1)
    E = as_integer(num_experts, "num_experts", minimum=1)
    kk = _check_k(k, E, f"num_experts = {E}")
    if h % h_kv:
        raise ValueError(f"num_kv_heads = {h_kv} must divide num_heads = {h}")
    if head_dim is None:
        if d % h:
            raise ValueError(f"num_heads = {h} must divide d_model = {d} (or pass head_dim)")
        d_k = d // h
    else:
        d_k = as_integer(head_dim, "head_dim", minimum=1)
    attention = d * h * d_k + 2 * d * h_kv * d_k + h * d_k * d  # W_Q, W_K and W_V, W_O
    expert = 3 * d * ff
    router = d * E
    norms = 2 * d
    embedding = V * d * (1 if tie_embeddings else 2)
    shared = embedding + d + L * (attention + router + norms)  # + the final norm
    return {
        "total": shared + L * E * expert,
        "active": shared + L * kk * expert,
        "expert": expert,
        "embedding": embedding,
    }
