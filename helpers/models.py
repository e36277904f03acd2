"""Introduced in chapter 7: BERT, GPT-2 and the encoder-decoder, as real models in NumPy.

The models are built from the pieces of the earlier chapters: the attention of
chapter 2 (:func:`~helpers.attention.scaled_dot_product_attention`), the heads of
chapter 3 (:func:`~helpers.multihead.multi_head_attention`, ``split_heads``,
``merge_heads``), the key/value cache of chapter 5 (:class:`~helpers.kv_cache.KVCache`)
and the block of chapter 6 (:func:`~helpers.transformer.encoder_block`,
:func:`~helpers.transformer.layer_norm`, :func:`~helpers.transformer.feed_forward`).

* BERT: :func:`bert_params_from_hf` converts a Hugging Face ``BertModel`` state dict,
  :func:`bert_forward` computes its last hidden state, :func:`mlm_corrupt` makes the
  inputs and labels of the masked-language-model objective.
* GPT-2: :func:`gpt2_params_from_hf` converts a ``GPT2LMHeadModel`` state dict,
  :func:`gpt2_forward` computes the logits (optionally with one :class:`KVCache` per
  layer), :func:`next_token_distribution` and :func:`sample_next_token` turn logits into
  the next token with a temperature, top-``k`` and top-``p``, :func:`gpt2_generate`
  decodes, and :func:`beam_search` keeps the ``w`` most probable sequences.
* The encoder-decoder: :func:`decoder_layer` (the original Transformer's decoder layer,
  ``torch.nn.TransformerDecoderLayer``) and :func:`init_decoder_layer_params`.

Conventions: tokens are rows and weights act on the right (``X @ W``,
``book/notation.md``); masks are True where a query may attend. Hugging Face stores
``nn.Linear`` weights as ``(out, in)``, so the converters transpose them; GPT-2's
``Conv1D`` weights are already ``(in, out)``.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from helpers._validate import as_integer
from helpers.attention import scaled_dot_product_attention
from helpers.kv_cache import KVCache
from helpers.masks import causal_mask
from helpers.multihead import init_mha_params, merge_heads, multi_head_attention, split_heads
from helpers.softmax import softmax
from helpers.transformer import encoder_block, feed_forward, init_block_params, layer_norm

__all__ = [
    "beam_search",
    "bert_forward",
    "bert_params_from_hf",
    "decoder_layer",
    "gpt2_forward",
    "gpt2_generate",
    "gpt2_params_from_hf",
    "init_decoder_layer_params",
    "mlm_corrupt",
    "next_token_distribution",
    "sample_next_token",
]

IGNORE_INDEX = -100  # the label of a position the loss skips (PyTorch's and HF's convention)


# ---------------------------------------------------------------------------
# Reading a state dict
# ---------------------------------------------------------------------------


class _StateDict:
    """Named look-ups in a state dict with a model prefix; errors name the missing weight."""

    def __init__(self, state_dict: Mapping[str, Any], prefix: str, model: str) -> None:
        self.sd, self.prefix, self.model = state_dict, prefix, model

    def __call__(self, name: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
        key = self.prefix + name
        if key not in self.sd:
            raise ValueError(
                f"state_dict is missing the {self.model} weight {key!r} ({len(self.sd)} keys given)"
            )
        arr = np.asarray(self.sd[key])
        if arr.dtype.kind != "f":
            raise TypeError(f"state_dict[{key!r}] must be a float array, got dtype {arr.dtype}")
        if shape is not None and arr.shape != shape:
            raise ValueError(f"state_dict[{key!r}] must have shape {shape}, got {arr.shape}")
        return arr

    def count(self, pattern: str) -> int:
        i = 0
        while (self.prefix + pattern.format(i)) in self.sd:
            i += 1
        return i


def _prefix(state_dict: Mapping[str, Any], probe: str, prefixes: Sequence[str], model: str) -> str:
    if not isinstance(state_dict, Mapping):
        raise TypeError(
            "state_dict must be a dict of parameter names to arrays, got "
            f"{type(state_dict).__name__}"
        )
    for p in prefixes:
        if p + probe in state_dict:
            return p
    tried = " or ".join(repr(p + probe) for p in prefixes)
    raise ValueError(
        f"state_dict is missing the {model} weight {tried}: is it a {model} state dict?"
    )


def _check_heads(num_heads: object, d_model: int) -> int:
    h = as_integer(num_heads, "num_heads", minimum=1)
    if d_model % h:
        raise ValueError(f"num_heads = {h} must divide d_model = {d_model}")
    return h


def _check_eps(eps: object) -> float:
    if isinstance(eps, (bool, np.bool_)) or not isinstance(eps, numbers.Real) or not eps > 0:
        raise ValueError(f"eps must be a positive number, got {eps!r}")
    return float(eps)


def _ids(input_ids: npt.ArrayLike, name: str, vocab: int) -> np.ndarray:
    ids = np.asarray(input_ids)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{name} must be integer token ids, got dtype {ids.dtype}")
    if ids.ndim < 1:
        raise ValueError(f"{name} must have shape (..., n), got a scalar")
    if ids.size and (ids.min() < 0 or ids.max() >= vocab):
        bad = ids[(ids < 0) | (ids >= vocab)].flat[0]
        raise ValueError(f"{name} must lie in 0, ..., {vocab - 1} (the vocabulary), got {bad}")
    return ids


# ---------------------------------------------------------------------------
# BERT
# ---------------------------------------------------------------------------


def bert_params_from_hf(
    state_dict: Mapping[str, npt.ArrayLike], *, num_heads: int, eps: float = 1e-12
) -> dict[str, Any]:
    r"""BERT's weights from a Hugging Face ``BertModel`` state dict, in the book's layout.

    Parameters
    ----------
    state_dict : dict of str to array_like
        Hugging Face's parameter names mapped to arrays (``{k: v.numpy() for k, v in
        model.state_dict().items()}``). The names may carry the ``"bert."`` prefix of
        ``BertForMaskedLM`` and friends; the pooler and the heads are ignored.
    num_heads : int
        Attention heads per layer (``config.num_attention_heads``); must divide
        ``d_model``.
    eps : float, default 1e-12
        The layer norms' epsilon (``config.layer_norm_eps``; BERT uses 1e-12).

    Returns
    -------
    params : dict
        ``"token_embedding"`` ``(V, d_model)``, ``"segment_embedding"`` ``(S,
        d_model)``, ``"position_embedding"`` ``(P, d_model)``, ``"emb_ln_gamma"``,
        ``"emb_ln_beta"`` ``(d_model,)``, ``"layers"`` (one dict per layer, with the
        keys of :func:`helpers.transformer.init_block_params`, so each layer is
        chapter 6's post-LN :func:`~helpers.transformer.encoder_block`),
        ``"num_heads"`` and ``"eps"``.

    Raises
    ------
    TypeError
        If ``state_dict`` is not a dict or a weight is not a float array.
    ValueError
        If a weight is missing (the message names it) or has the wrong shape, or
        ``num_heads`` does not divide ``d_model``.

    Notes
    -----
    ``nn.Linear`` stores ``W`` as ``(out, in)`` and computes ``x W^T + b``; the book
    computes ``x W + b``, so every linear weight is transposed. The layer's names map
    as ``attention.self.query`` → ``W_Q``, ``attention.output.dense`` → ``W_O``,
    ``attention.output.LayerNorm`` → ``ln1``, ``intermediate.dense`` → ``W_1``,
    ``output.dense`` → ``W_2``, ``output.LayerNorm`` → ``ln2``.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.models import bert_params_from_hf
    >>> try:
    ...     bert_params_from_hf(
    ...         {"embeddings.word_embeddings.weight": np.zeros((5, 4))}, num_heads=2
    ...     )
    ... except ValueError as err:
    ...     print(err)
    state_dict is missing the BERT weight 'embeddings.position_embeddings.weight' (1 keys given)
    """
    p = _prefix(state_dict, "embeddings.word_embeddings.weight", ["", "bert."], "BERT")
    get = _StateDict(state_dict, p, "BERT")
    tok = get("embeddings.word_embeddings.weight")
    if tok.ndim != 2:
        raise ValueError(f"the word embeddings must be (V, d_model), got {tok.shape}")
    d = tok.shape[1]
    h = _check_heads(num_heads, d)
    params: dict[str, Any] = {
        "token_embedding": tok,
        "position_embedding": get("embeddings.position_embeddings.weight"),
        "segment_embedding": get("embeddings.token_type_embeddings.weight"),
        "emb_ln_gamma": get("embeddings.LayerNorm.weight", (d,)),
        "emb_ln_beta": get("embeddings.LayerNorm.bias", (d,)),
    }
    for key in ("position_embedding", "segment_embedding"):
        if params[key].ndim != 2 or params[key].shape[1] != d:
            raise ValueError(
                f"the {key.replace('_', ' ')}s must be (rows, {d}), got {params[key].shape}"
            )
    n_layers = get.count("encoder.layer.{}.attention.self.query.weight")
    if n_layers == 0:
        get("encoder.layer.0.attention.self.query.weight")  # raises, naming it
    layers = []
    for i in range(n_layers):
        q = f"encoder.layer.{i}."
        d_ff = get(q + "intermediate.dense.weight").shape[0]
        names = {
            "W_Q": ("attention.self.query.weight", (d, d)),
            "b_Q": ("attention.self.query.bias", (d,)),
            "W_K": ("attention.self.key.weight", (d, d)),
            "b_K": ("attention.self.key.bias", (d,)),
            "W_V": ("attention.self.value.weight", (d, d)),
            "b_V": ("attention.self.value.bias", (d,)),
            "W_O": ("attention.output.dense.weight", (d, d)),
            "b_O": ("attention.output.dense.bias", (d,)),
            "ln1_gamma": ("attention.output.LayerNorm.weight", (d,)),
            "ln1_beta": ("attention.output.LayerNorm.bias", (d,)),
            "W_1": ("intermediate.dense.weight", (d_ff, d)),
            "b_1": ("intermediate.dense.bias", (d_ff,)),
            "W_2": ("output.dense.weight", (d, d_ff)),
            "b_2": ("output.dense.bias", (d,)),
            "ln2_gamma": ("output.LayerNorm.weight", (d,)),
            "ln2_beta": ("output.LayerNorm.bias", (d,)),
        }
        layer = {}
        for ours, (theirs, shape) in names.items():
            arr = get(q + theirs, shape)
            layer[ours] = arr.T if ours.startswith("W_") else arr  # (out, in) -> (in, out)
        layers.append(layer)
    params.update(layers=layers, num_heads=h, eps=_check_eps(eps))
    return params


def bert_forward(
    input_ids: npt.ArrayLike,
    params: Mapping[str, Any],
    *,
    token_type_ids: npt.ArrayLike | None = None,
    attention_mask: npt.ArrayLike | None = None,
) -> npt.NDArray[np.floating]:
    r"""BERT's last hidden state: embeddings, then post-LN encoder blocks with GELU.

    Parameters
    ----------
    input_ids : (..., n) array_like of int
        Token ids, ``n`` at most the number of position embeddings.
    params : dict
        From :func:`bert_params_from_hf`.
    token_type_ids : (..., n) array_like of int, optional
        The segment of each token (0 for sentence A, 1 for sentence B); default all 0.
    attention_mask : (..., n) array_like of 0/1 or bool, optional
        1 (True) for a real token, 0 for padding, as in Hugging Face. No query attends
        to a padding key. Default: no padding.

    Returns
    -------
    hidden : (..., n, d_model) ndarray
        Hugging Face's ``last_hidden_state`` (the tests check float64 agreement to
        1e-10). Rows at padding positions are computed but meaningless.

    Raises
    ------
    TypeError, ValueError
        If the ids are not integers, out of the vocabulary or too many for the
        positions, or the shapes of the optional arrays differ from ``input_ids``.

    Notes
    -----
    .. math::

        X_0 = \operatorname{LN}\big(W_\text{tok}[\text{ids}] + W_\text{seg}[\text{types}]
              + W_\text{pos}[0{:}n]\big), \qquad
        X_\ell = \operatorname{Block}_\ell(X_{\ell - 1}),

    each block post-LN: :math:`Z = \operatorname{LN}_1(X + \operatorname{MHA}(X))`,
    :math:`Y = \operatorname{LN}_2(Z + \operatorname{FFN}(Z))` with the exact (erf)
    GELU, every query attending to every non-padding key.
    """
    tok = params["token_embedding"]
    ids = _ids(input_ids, "input_ids", tok.shape[0])
    n = ids.shape[-1]
    n_pos = params["position_embedding"].shape[0]
    if n > n_pos:
        raise ValueError(f"input_ids has n = {n} tokens, more than the {n_pos} positions")
    if token_type_ids is None:
        types = np.zeros_like(ids)
    else:
        types = _ids(token_type_ids, "token_type_ids", params["segment_embedding"].shape[0])
        if types.shape != ids.shape:
            raise ValueError(
                f"token_type_ids must have the shape of input_ids {ids.shape}, got {types.shape}"
            )
    X = tok[ids] + params["segment_embedding"][types] + params["position_embedding"][:n]
    eps = params["eps"]
    X = layer_norm(X, params["emb_ln_gamma"], params["emb_ln_beta"], eps=eps)
    mask = None
    if attention_mask is not None:
        keep = np.asarray(attention_mask)
        if keep.shape != ids.shape:
            raise ValueError(
                f"attention_mask must have the shape of input_ids {ids.shape}, got {keep.shape}"
            )
        if keep.dtype.kind not in "biu" or not np.isin(keep, (0, 1)).all():
            raise ValueError("attention_mask must hold 1 (token) and 0 (padding) only")
        mask = keep.astype(bool)[..., None, None, :]  # (..., 1 head, 1 query, n keys)
    for layer in params["layers"]:
        X, _ = encoder_block(
            X, layer, params["num_heads"], mask=mask, norm_first=False, activation="gelu", eps=eps
        )
    return X


def mlm_corrupt(
    input_ids: npt.ArrayLike,
    *,
    rng: np.random.Generator,
    mask_token_id: int,
    vocab_size: int,
    special_mask: npt.ArrayLike | None = None,
    select_prob: float = 0.15,
) -> tuple[np.ndarray, np.ndarray]:
    r"""BERT's masked-language-model corruption: select 15%, then 80/10/10.

    Parameters
    ----------
    input_ids : (..., n) array_like of int
        The original tokens.
    rng : numpy.random.Generator
        The source of every random choice.
    mask_token_id : int
        The id of ``[MASK]``.
    vocab_size : int
        Random replacements are drawn uniformly from ``0, ..., vocab_size - 1``.
    special_mask : (..., n) array_like of bool, optional
        True for tokens never selected (``[CLS]``, ``[SEP]``, padding).
    select_prob : float, default 0.15
        The probability that a token is selected for prediction.

    Returns
    -------
    corrupted : (..., n) ndarray of int
        The input the model sees: every selected token is replaced by ``[MASK]`` with
        probability 0.8, by a uniformly random token with probability 0.1, and kept
        with probability 0.1.
    labels : (..., n) ndarray of int
        The original token at the selected positions, ``-100`` elsewhere (the loss
        ignores those positions).

    Notes
    -----
    Each token is selected independently (as Hugging Face's data collator does); the
    original BERT code instead selects exactly ``round(0.15 n)`` positions of each
    sequence. Either way a token is ``[MASK]`` in the input with probability
    :math:`0.15 \cdot 0.8 = 0.12`, random with probability 0.015 and unchanged but
    predicted with probability 0.015. The random token can happen to equal the
    original.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.models import mlm_corrupt
    >>> ids = np.arange(10, 30)
    >>> x, y = mlm_corrupt(ids, rng=np.random.default_rng(0), mask_token_id=3, vocab_size=50)
    >>> bool(((y == -100) | (y == ids)).all())  # labels: the original token or "ignore"
    True
    """
    ids = _ids(input_ids, "input_ids", as_integer(vocab_size, "vocab_size", minimum=1))
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    if not 0 <= select_prob <= 1:
        raise ValueError(f"select_prob must lie in [0, 1], got {select_prob!r}")
    u_select = rng.random(ids.shape)
    u_kind = rng.random(ids.shape)
    random_ids = rng.integers(0, vocab_size, size=ids.shape)
    selected = u_select < select_prob
    if special_mask is not None:
        special = np.asarray(special_mask, dtype=bool)
        if special.shape != ids.shape:
            raise ValueError(f"special_mask must have shape {ids.shape}, got {special.shape}")
        selected &= ~special
    corrupted = ids.copy()
    corrupted[selected & (u_kind < 0.8)] = mask_token_id
    swap = selected & (u_kind >= 0.8) & (u_kind < 0.9)
    corrupted[swap] = random_ids[swap]
    labels = np.where(selected, ids, IGNORE_INDEX)
    return corrupted, labels


# ---------------------------------------------------------------------------
# GPT-2
# ---------------------------------------------------------------------------


def gpt2_params_from_hf(
    state_dict: Mapping[str, npt.ArrayLike], *, num_heads: int, eps: float = 1e-5
) -> dict[str, Any]:
    r"""GPT-2's weights from a Hugging Face ``GPT2LMHeadModel`` state dict.

    Parameters
    ----------
    state_dict : dict of str to array_like
        Hugging Face's names mapped to arrays; with the ``"transformer."`` prefix of
        ``GPT2LMHeadModel`` or without it (``GPT2Model``).
    num_heads : int
        Attention heads per layer (``config.n_head``).
    eps : float, default 1e-5
        The layer norms' epsilon (``config.layer_norm_epsilon``).

    Returns
    -------
    params : dict
        ``"token_embedding"`` ``(V, d_model)`` (also the output matrix: the logits are
        ``h @ token_embedding.T``), ``"position_embedding"`` ``(P, d_model)``,
        ``"layers"`` (dicts with the keys of
        :func:`helpers.transformer.init_block_params`), ``"lnf_gamma"``,
        ``"lnf_beta"``, ``"num_heads"``, ``"eps"``.

    Raises
    ------
    TypeError, ValueError
        As :func:`bert_params_from_hf`; also if ``lm_head.weight`` is present and
        differs from the token embeddings (GPT-2 ties them).

    Notes
    -----
    GPT-2 stores its projections as ``Conv1D`` layers, whose weights are already
    ``(in, out)``: no transpose. Its attention packs ``W_Q``, ``W_K``, ``W_V`` side by
    side in one ``c_attn`` weight of shape ``(d_model, 3 d_model)``; the converter
    splits its columns into the three matrices, and the forward pass uses the
    attention of chapters 2 and 3 on them.
    """
    p = _prefix(state_dict, "wte.weight", ["transformer.", ""], "GPT-2")
    get = _StateDict(state_dict, p, "GPT-2")
    wte = get("wte.weight")
    if wte.ndim != 2:
        raise ValueError(f"the token embeddings must be (V, d_model), got {wte.shape}")
    d = wte.shape[1]
    h = _check_heads(num_heads, d)
    params: dict[str, Any] = {"token_embedding": wte, "position_embedding": get("wpe.weight")}
    if params["position_embedding"].ndim != 2 or params["position_embedding"].shape[1] != d:
        raise ValueError(
            f"the position embeddings must be (P, {d}), got {params['position_embedding'].shape}"
        )
    if "lm_head.weight" in state_dict and not np.array_equal(
        np.asarray(state_dict["lm_head.weight"]), wte
    ):
        raise ValueError("lm_head.weight differs from the token embeddings; GPT-2 ties them")
    n_layers = get.count("h.{}.attn.c_attn.weight")
    if n_layers == 0:
        get("h.0.attn.c_attn.weight")  # raises, naming it
    layers = []
    for i in range(n_layers):
        q = f"h.{i}."
        W_qkv = get(q + "attn.c_attn.weight", (d, 3 * d))  # (d, 3d): [W_Q | W_K | W_V]
        b_qkv = get(q + "attn.c_attn.bias", (3 * d,))
        d_ff = get(q + "mlp.c_fc.weight").shape[1]
        layers.append(
            {
                "W_Q": W_qkv[:, :d],
                "W_K": W_qkv[:, d : 2 * d],
                "W_V": W_qkv[:, 2 * d :],
                "b_Q": b_qkv[:d],
                "b_K": b_qkv[d : 2 * d],
                "b_V": b_qkv[2 * d :],
                "W_O": get(q + "attn.c_proj.weight", (d, d)),
                "b_O": get(q + "attn.c_proj.bias", (d,)),
                "ln1_gamma": get(q + "ln_1.weight", (d,)),
                "ln1_beta": get(q + "ln_1.bias", (d,)),
                "W_1": get(q + "mlp.c_fc.weight", (d, d_ff)),
                "b_1": get(q + "mlp.c_fc.bias", (d_ff,)),
                "W_2": get(q + "mlp.c_proj.weight", (d_ff, d)),
                "b_2": get(q + "mlp.c_proj.bias", (d,)),
                "ln2_gamma": get(q + "ln_2.weight", (d,)),
                "ln2_beta": get(q + "ln_2.bias", (d,)),
            }
        )
    params.update(
        layers=layers,
        lnf_gamma=get("ln_f.weight", (d,)),
        lnf_beta=get("ln_f.bias", (d,)),
        num_heads=h,
        eps=_check_eps(eps),
    )
    return params


def _gpt2_block_cached(
    X: np.ndarray, p: Mapping[str, np.ndarray], h: int, eps: float, cache: KVCache
) -> np.ndarray:
    """One pre-LN GPT-2 block on the new tokens ``X``, attending to the cache and them."""
    U = layer_norm(X, p["ln1_gamma"], p["ln1_beta"], eps=eps)  # (..., s, d)
    Q = split_heads(U @ p["W_Q"] + p["b_Q"], h)  # (..., h, s, d_k)
    K_new = split_heads(U @ p["W_K"] + p["b_K"], h)
    V_new = split_heads(U @ p["W_V"] + p["b_V"], h)
    K, V = cache.update(K_new, V_new)  # (..., h, t, d_k): the cached tokens, then the new
    s, t = Q.shape[-2], K.shape[-2]
    heads, _ = scaled_dot_product_attention(Q, K, V, causal_mask(s, t))  # new query i sees t-s+i
    Z = X + merge_heads(heads) @ p["W_O"] + p["b_O"]
    V2 = layer_norm(Z, p["ln2_gamma"], p["ln2_beta"], eps=eps)
    return Z + feed_forward(V2, p["W_1"], p["b_1"], p["W_2"], p["b_2"], activation="gelu_tanh")


def gpt2_forward(
    input_ids: npt.ArrayLike,
    params: Mapping[str, Any],
    *,
    cache: Sequence[KVCache] | None = None,
) -> npt.NDArray[np.floating]:
    r"""GPT-2's next-token logits for every position.

    Parameters
    ----------
    input_ids : (..., n) array_like of int
        Token ids: the whole sequence, or, with a ``cache``, only the tokens after the
        ones already cached.
    params : dict
        From :func:`gpt2_params_from_hf`.
    cache : list of KVCache, optional
        One :class:`~helpers.kv_cache.KVCache` per layer (``[KVCache() for _ in
        params["layers"]]``), updated in place with the keys and values of the new
        tokens. The new tokens get the positions after the cached ones.

    Returns
    -------
    logits : (..., n, V) ndarray
        Row ``i`` scores every token of the vocabulary as the token after position
        ``i``. Equal to Hugging Face's ``GPT2LMHeadModel`` logits (the tests check
        float64 agreement to 1e-10), with or without the cache.

    Raises
    ------
    TypeError, ValueError
        If the ids are not integers in the vocabulary, the positions run out, or
        ``cache`` is not one :class:`KVCache` per layer.

    Notes
    -----
    .. math::

        X_0 = W_\text{tok}[\text{ids}] + W_\text{pos}[t_0 : t_0 + n], \qquad
        Z_\ell = X_{\ell-1} + \operatorname{MHA}_\text{causal}(\operatorname{LN}_1(X_{\ell-1})),
        \quad X_\ell = Z_\ell + \operatorname{FFN}(\operatorname{LN}_2(Z_\ell)),

    then :math:`\text{logits} = \operatorname{LN}_f(X_L)\, W_\text{tok}^\top`: pre-LN
    blocks with the tanh approximation of GELU, a final layer norm, and the output
    matrix tied to the token embeddings. Without a cache each block is chapter 6's
    :func:`~helpers.transformer.encoder_block` with ``norm_first=True`` and a causal
    mask; with one, the same block is computed for the new tokens only, attending to
    the cached keys and values.
    """
    wte = params["token_embedding"]
    ids = _ids(input_ids, "input_ids", wte.shape[0])
    layers = params["layers"]
    start = 0
    if cache is not None:
        if isinstance(cache, KVCache) or len(cache) != len(layers):
            raise ValueError(
                f"cache must be a list of one KVCache per layer ({len(layers)} layers)"
            )
        if not all(isinstance(c, KVCache) for c in cache):
            raise TypeError("cache must hold KVCache objects")
        start = len(cache[0])
    n = ids.shape[-1]
    n_pos = params["position_embedding"].shape[0]
    if start + n > n_pos:
        raise ValueError(
            f"positions {start}, ..., {start + n - 1} exceed the {n_pos} position embeddings"
        )
    X = wte[ids] + params["position_embedding"][start : start + n]  # (..., n, d)
    h, eps = params["num_heads"], params["eps"]
    if cache is None:
        mask = causal_mask(n)
        for layer in layers:
            X, _ = encoder_block(
                X, layer, h, mask=mask, norm_first=True, activation="gelu_tanh", eps=eps
            )
    else:
        for layer, c in zip(layers, cache, strict=True):
            X = _gpt2_block_cached(X, layer, h, eps, c)
    X = layer_norm(X, params["lnf_gamma"], params["lnf_beta"], eps=eps)
    return X @ wte.T  # (..., n, V): the output matrix is the embedding matrix


def next_token_distribution(
    logits: npt.ArrayLike,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> npt.NDArray[np.floating]:
    r"""The distribution the next token is drawn from: temperature, then top-``k``, then top-``p``.

    The order is the one in which Hugging Face's ``generate`` applies its
    ``TemperatureLogitsWarper``, ``TopKLogitsWarper`` and ``TopPLogitsWarper``.

    Parameters
    ----------
    logits : (..., V) array_like
        Next-token logits (the last row of :func:`gpt2_forward`).
    temperature : float, default 1.0
        Positive; the logits are divided by it (chapter 1): below 1 sharpens, above 1
        flattens.
    top_k : int, optional
        Keep only the ``k`` largest logits (ties at the threshold are kept too) and
        renormalise; default: the whole vocabulary.
    top_p : float, optional
        Nucleus sampling (Holtzman et al. 2020), in ``(0, 1]``: rank the tokens left by
        top-``k`` by decreasing probability, a tie going to the *later* token, and keep
        the shortest prefix of that ranking whose probability sums to at least ``top_p``
        (a token is kept when the tokens ranked above it hold less than ``top_p``; the
        most likely token is always kept), then renormalise. Default (or 1): no
        truncation.

    Returns
    -------
    probs : (..., V) ndarray
        :math:`\operatorname{softmax}(z / \tau)` over the kept tokens, 0 elsewhere, in the
        dtype of ``logits`` (float64 for integer logits).

    Notes
    -----
    Top-``p`` decides which tokens to keep in float64, whatever the dtype of ``logits``.
    The ranking, ties included, is that of Hugging Face's ``TopPLogitsWarper`` (an
    ascending stable sort, read from the end; its PyTorch sort keeps ties in index order
    for short rows). The warper removes a token when the cumulative probability of it and
    every token ranked below it is at most ``1 - top_p``, which is the same rule in exact
    arithmetic. At an exact boundary the two computations round differently: for
    probabilities ``(0.5, 0.3, 0.2)`` and ``top_p = 0.8`` the first two tokens hold exactly
    0.8, so the third goes, but ``1 - 0.8`` is ``0.19999999999999996`` in float64 and the
    warper keeps it (in float32 it drops it). Here a mass within ``1e-9`` of ``top_p``
    counts as reaching it, so exact boundaries are decided as exact arithmetic decides
    them; elsewhere the kept tokens are the warper's (the tests compare them).

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.models import next_token_distribution
    >>> next_token_distribution(np.log([0.5, 0.3, 0.2]), top_k=2).round(4)
    array([0.625, 0.375, 0.   ])
    >>> next_token_distribution(np.log([0.5, 0.3, 0.15, 0.05]), top_p=0.9).round(4)
    array([0.5263, 0.3158, 0.1579, 0.    ])
    """
    z = (
        np.asarray(logits, dtype=np.float64)
        if np.asarray(logits).dtype.kind in "iu"
        else np.asarray(logits)
    )
    if z.dtype.kind != "f" or z.ndim < 1:
        raise TypeError(f"logits must be a float array of shape (..., V), got {z.dtype} {z.shape}")
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, numbers.Real)
        or not temperature > 0
    ):
        raise ValueError(f"temperature must be a positive number, got {temperature!r}")
    if top_p is not None and (
        isinstance(top_p, (bool, np.bool_))
        or not isinstance(top_p, numbers.Real)
        or not 0 < top_p <= 1
    ):
        raise ValueError(f"top_p must be a number in (0, 1], got {top_p!r}")
    z = z / float(temperature)
    if top_k is not None:
        k = as_integer(top_k, "top_k", minimum=1)
        if k < z.shape[-1]:
            kth = np.sort(z, axis=-1)[..., -k, None]  # the k-th largest logit
            z = np.where(z >= kth, z, -np.inf)
    if top_p is not None and top_p < 1:
        z = np.where(_nucleus(z, float(top_p)), z, -np.inf)
    return softmax(z, axis=-1)


_TOP_P_SLACK = 1e-9  # a mass this close to top_p counts as reaching it


def _nucleus(z: np.ndarray, top_p: float) -> np.ndarray:
    """The tokens top-``p`` keeps, ``(..., V)`` booleans (see :func:`next_token_distribution`)."""
    q = softmax(z.astype(np.float64), axis=-1)
    # most probable first; ties: the later token first (an ascending stable sort, reversed)
    order = np.flip(np.argsort(q, axis=-1, kind="stable"), axis=-1)
    q_sorted = np.take_along_axis(q, order, axis=-1)
    above = np.cumsum(q_sorted, axis=-1) - q_sorted  # the mass ranked above each token
    keep_sorted = above < top_p - _TOP_P_SLACK
    keep_sorted[..., 0] = True  # the most likely token stays
    keep = np.empty_like(keep_sorted)
    np.put_along_axis(keep, order, keep_sorted, axis=-1)
    return keep


def sample_next_token(
    logits: npt.ArrayLike,
    *,
    rng: np.random.Generator,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> np.ndarray:
    """Draw one token per row from :func:`next_token_distribution`.

    Parameters
    ----------
    logits : (..., V) array_like
        Next-token logits.
    rng : numpy.random.Generator
        The source of randomness: one uniform number per row.
    temperature, top_k, top_p
        As in :func:`next_token_distribution`.

    Returns
    -------
    tokens : (...) ndarray of int
        By inverse transform sampling: the first token whose cumulative probability
        exceeds a uniform draw.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.models import sample_next_token
    >>> rng = np.random.default_rng(0)
    >>> draws = sample_next_token(np.log([[0.7, 0.2, 0.1]] * 10_000), rng=rng)
    >>> np.bincount(draws, minlength=3) / 10_000  # close to 0.7, 0.2, 0.1
    array([0.6999, 0.2021, 0.098 ])
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    p = next_token_distribution(logits, temperature=temperature, top_k=top_k, top_p=top_p)
    u = rng.random(p.shape[:-1])[..., None]  # (..., 1)
    cdf = np.cumsum(p, axis=-1)
    tokens = (cdf <= u).sum(axis=-1)  # the first index with cdf > u
    return np.minimum(tokens, p.shape[-1] - 1)  # guards against cdf[-1] rounding below u


def gpt2_generate(
    prompt_ids: npt.ArrayLike,
    params: Mapping[str, Any],
    num_tokens: int,
    *,
    rng: np.random.Generator,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    use_cache: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Generate ``num_tokens`` tokens after a prompt, one at a time.

    Parameters
    ----------
    prompt_ids : (..., n0) array_like of int
        The prompt (``n0 >= 1``).
    params : dict
        From :func:`gpt2_params_from_hf`.
    num_tokens : int
        How many tokens to generate.
    rng : numpy.random.Generator
        One uniform draw per row and step (see :func:`sample_next_token`).
    temperature, top_k, top_p
        As in :func:`next_token_distribution`; ``top_k=1`` is greedy decoding.
    use_cache : bool, default True
        With a :class:`KVCache` per layer, each step runs only the new token through
        the model; without, each step recomputes the whole sequence.

    Returns
    -------
    tokens : (..., n0 + num_tokens) ndarray of int
        The prompt followed by the generated tokens.
    logits : (..., num_tokens, V) ndarray
        The logits each generated token was drawn from. With the same ``rng`` state,
        both settings of ``use_cache`` return the same tokens, and logits equal to
        rounding (the tests check it).
    """
    ids = _ids(prompt_ids, "prompt_ids", params["token_embedding"].shape[0])
    if ids.shape[-1] < 1:
        raise ValueError("prompt_ids must hold at least one token")
    steps = as_integer(num_tokens, "num_tokens", minimum=0)
    caches = [KVCache() for _ in params["layers"]] if use_cache else None
    tokens = ids
    new_input = ids
    all_logits = []
    for _ in range(steps):
        if use_cache:
            logits = gpt2_forward(new_input, params, cache=caches)[..., -1, :]
        else:
            logits = gpt2_forward(tokens, params)[..., -1, :]
        nxt = sample_next_token(logits, rng=rng, temperature=temperature, top_k=top_k, top_p=top_p)
        all_logits.append(logits)
        new_input = nxt[..., None]
        tokens = np.concatenate([tokens, new_input], axis=-1)
    V = params["token_embedding"].shape[0]
    stacked = np.stack(all_logits, axis=-2) if all_logits else np.zeros((*ids.shape[:-1], 0, V))
    return tokens, stacked


def beam_search(
    next_log_probs: Callable[[np.ndarray], npt.ArrayLike],
    prompt_ids: npt.ArrayLike,
    num_tokens: int,
    *,
    beam_width: int,
    eos_id: int | None = None,
    length_penalty: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Beam search: the ``beam_width`` best continuations kept at every step.

    With ``eos_id``, a hypothesis ends when it adds that token, and hypotheses of
    different lengths are compared by their length-normalised scores, as in Hugging
    Face's ``generate(num_beams=beam_width, eos_token_id=eos_id,
    length_penalty=length_penalty, early_stopping=True)``.

    Parameters
    ----------
    next_log_probs : callable
        ``next_log_probs(tokens) -> log_probs``: for ``tokens`` of shape ``(m, t)`` (``m``
        sequences of the same length), the log-probabilities of the next token, shape
        ``(m, V)``. For a model, ``log_softmax`` of the last row of its logits.
    prompt_ids : (n0,) array_like of int
        The sequence every beam starts from (``n0 >= 1``: a start token at least).
    num_tokens : int
        The most tokens a hypothesis adds (without ``eos_id``: exactly this many).
    beam_width : int
        How many partial sequences are kept after each step; 1 is greedy decoding.
    eos_id : int, optional
        The end-of-sequence token. Default: none, every hypothesis adds ``num_tokens``.
    length_penalty : float, default 1.0
        The exponent :math:`\alpha` of the length normalisation (with ``eos_id`` only):
        0 compares summed log-probabilities, 1 their mean per added token.

    Returns
    -------
    tokens : (w, n0 + L) ndarray of int
        The hypotheses, best first, ``w <= beam_width``; ``L`` is the longest one's number
        of added tokens, and a shorter one is padded with ``eos_id`` after its end.
    scores : (w,) ndarray
        Decreasing. Without ``eos_id``: the summed log-probabilities
        :math:`\sum_t \log p(y_t \mid y_{<t})` of the added tokens. With ``eos_id``: that sum
        divided by :math:`L^\alpha`, where :math:`L` counts the tokens the hypothesis added,
        its end token included (not the prompt).

    Notes
    -----
    Each step scores the ``m V`` one-token extensions of the ``m`` running hypotheses in
    one call of ``next_log_probs`` and ranks them by summed log-probability (ties: the
    lower beam, then the lower token id). Without ``eos_id`` the ``beam_width`` best run
    on. With ``eos_id`` the rules are Hugging Face's, with ``early_stopping=True``:

    * of the ``beam_width`` best extensions, those that add ``eos_id`` are finished, with
      their normalised score; an end token ranked lower is discarded;
    * the ``beam_width`` best extensions that do not end run on (so the beam stays full);
      a finished hypothesis is never extended;
    * of all the finished hypotheses, the ``beam_width`` best (by normalised score; ties:
      the one finished first) are kept, and the search stops as soon as ``beam_width``
      have finished, even if a running one might still overtake them;
    * after ``num_tokens`` steps the ``beam_width`` best running hypotheses finish
      without an end token, with :math:`L` = ``num_tokens``.

    Without ``eos_id`` every hypothesis has the same length, so dividing by
    ``num_tokens ** length_penalty`` would change no ranking: the scores are the sums.
    With ``beam_width >= V**(num_tokens - 1)`` nothing is pruned and the best sequence is
    the exact maximum over all ``V**num_tokens``; with ``beam_width = 1`` it is greedy
    decoding.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.models import beam_search
    >>> table = np.log([[0.6, 0.4], [0.05, 0.95]])  # p(next | last token), V = 2
    >>> def next_log_probs(tokens):
    ...     return table[tokens[:, -1]]
    >>> beam_search(next_log_probs, [0], 2, beam_width=1)[0]  # greedy: 0, then 0
    array([[0, 0, 0]])
    >>> tokens, scores = beam_search(next_log_probs, [0], 2, beam_width=2)
    >>> tokens[0], np.exp(scores[0]).round(2)  # 0.4 * 0.95 = 0.38 beats 0.6 * 0.6
    (array([0, 1, 1]), np.float64(0.38))

    With token 0 as the end token, "0" ends at once (probability 0.6) and "1 1" goes on:

    >>> tokens, scores = beam_search(next_log_probs, [0], 2, beam_width=2, eos_id=0)
    >>> tokens, scores.round(3)  # mean log-probability per token: log(0.38) / 2 > log(0.6)
    (array([[0, 1, 1],
           [0, 0, 0]]), array([-0.484, -0.511]))
    """
    if not callable(next_log_probs):
        raise TypeError(f"next_log_probs must be callable, got {type(next_log_probs).__name__}")
    ids = np.asarray(prompt_ids)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"prompt_ids must be integer token ids, got dtype {ids.dtype}")
    if ids.ndim != 1 or ids.size < 1:
        raise ValueError(f"prompt_ids must have shape (n0,) with n0 >= 1, got {ids.shape}")
    steps = as_integer(num_tokens, "num_tokens", minimum=0)
    width = as_integer(beam_width, "beam_width", minimum=1)
    eos = None if eos_id is None else as_integer(eos_id, "eos_id", minimum=0)
    if (
        isinstance(length_penalty, (bool, np.bool_))
        or not isinstance(length_penalty, numbers.Real)
        or not np.isfinite(length_penalty)
    ):
        raise ValueError(f"length_penalty must be a finite number, got {length_penalty!r}")
    alpha = float(length_penalty) if eos is not None else 0.0
    n0 = ids.size
    running = ids[None, :].astype(np.int64)  # (m, n0 + t - 1), m = 1 at first
    run_scores = np.zeros(1)  # summed log-probabilities of the running hypotheses
    if steps == 0:
        return running, run_scores
    pad = 0 if eos is None else eos  # after a hypothesis's end (never needed without eos)
    done = np.zeros((0, n0 + steps), dtype=np.int64)  # the finished hypotheses, padded
    done_scores = np.zeros(0)  # their normalised scores
    done_added = np.zeros(0, dtype=np.int64)  # how many tokens each added
    for t in range(1, steps + 1):
        logp = np.asarray(next_log_probs(running), dtype=np.float64)
        if logp.ndim != 2 or logp.shape[0] != len(running):
            raise ValueError(
                f"next_log_probs must return shape ({len(running)}, V) for tokens of shape "
                f"{running.shape}, got {logp.shape}"
            )
        V = logp.shape[1]
        if eos is not None and eos >= V:
            raise ValueError(f"eos_id must be a token id below V = {V}, got {eos}")
        total = (run_scores[:, None] + logp).ravel()  # (m V,): every one-token extension
        best = np.argsort(-total, kind="stable")[: 2 * width]  # ties: lower flat index first
        beam, token = np.divmod(best, V)
        ends = (token == eos) | (t == steps)  # an end token, or the last step
        new = np.flatnonzero(ends[:width])  # only the beam_width best may finish
        if new.size:
            seqs = np.full((new.size, n0 + steps), pad, dtype=np.int64)
            seqs[:, : n0 + t - 1] = running[beam[new]]
            seqs[:, n0 + t - 1] = token[new]
            done = np.concatenate([done, seqs])
            done_scores = np.concatenate([done_scores, total[best[new]] / t**alpha])
            done_added = np.concatenate([done_added, np.full(new.size, t)])
            keep = np.argsort(-done_scores, kind="stable")[:width]  # ties: finished first
            done, done_scores, done_added = done[keep], done_scores[keep], done_added[keep]
        if len(done) == width or t == steps:
            break  # early stopping: beam_width hypotheses have finished
        live = np.flatnonzero(~ends)[:width]  # the best that do not end run on
        running = np.concatenate([running[beam[live]], token[live, None]], axis=1)
        run_scores = total[best[live]]
    return done[:, : n0 + done_added.max()], done_scores


# ---------------------------------------------------------------------------
# The encoder-decoder
# ---------------------------------------------------------------------------

_CROSS = ("W_Q_cross", "W_K_cross", "W_V_cross", "W_O_cross")
_CROSS_B = ("b_Q_cross", "b_K_cross", "b_V_cross", "b_O_cross")


def init_decoder_layer_params(
    d_model: int, h: int, d_ff: int, *, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """Random weights of one decoder layer, drawn as PyTorch draws them.

    Parameters
    ----------
    d_model, h, d_ff : int
        Width, heads (dividing ``d_model``), hidden width of the feed-forward network.
    rng : numpy.random.Generator
        The source of randomness.

    Returns
    -------
    params : dict of str to ndarray
        The keys of :func:`helpers.transformer.init_block_params` (self-attention
        ``W_Q`` ... ``b_O``, ``W_1`` ... ``b_2``, ``ln1_*``, ``ln2_*``) plus the
        cross-attention's ``W_Q_cross`` ... ``b_O_cross`` and a third layer norm
        ``ln3_gamma``, ``ln3_beta``. As in ``torch.nn.TransformerDecoderLayer``,
        ``ln1`` follows the self-attention, ``ln2`` the cross-attention and ``ln3`` the
        feed-forward network.
    """
    params = dict(init_block_params(d_model, h, d_ff, rng=rng))
    cross = init_mha_params(d_model, rng=rng, num_heads=h)
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O"):
        params[name + "_cross"] = cross[name]
    params["ln3_gamma"] = np.ones(d_model)
    params["ln3_beta"] = np.zeros(d_model)
    return params


def decoder_layer(
    Y: npt.ArrayLike,
    memory: npt.ArrayLike,
    params: Mapping[str, npt.ArrayLike],
    h: int,
    *,
    self_mask: npt.ArrayLike | None = None,
    memory_mask: npt.ArrayLike | None = None,
    norm_first: bool = False,
    activation: str = "relu",
    eps: float = 1e-5,
) -> tuple[npt.NDArray[np.floating], dict[str, np.ndarray]]:
    r"""One decoder layer of the encoder-decoder Transformer: three sublayers.

    Parameters
    ----------
    Y : (..., n, d_model) array_like
        The decoder's tokens (the target sequence so far).
    memory : (..., m, d_model) array_like
        The encoder's output: the keys and values of the cross-attention.
    params : dict
        From :func:`init_decoder_layer_params`.
    h : int
        Heads of both attentions.
    self_mask : (n, n) or (*batch, h, n, n) array_like of bool, optional
        The self-attention's mask, usually ``causal_mask(n)`` (True = may attend).
    memory_mask : (n, m) or (*batch, h, n, m) array_like of bool, optional
        The cross-attention's mask, e.g. to hide the source's padding.
    norm_first : bool, default False
        Post-LN (the original Transformer) or pre-LN.
    activation : {"relu", "gelu", "gelu_tanh"}, default "relu"
        The feed-forward network's activation.
    eps : float, default 1e-5
        The layer norms' epsilon.

    Returns
    -------
    out : (..., n, d_model) ndarray
        The layer's output; equal to ``torch.nn.TransformerDecoderLayer`` with dropout
        0 and ``batch_first=True`` (the tests check float64 agreement to 1e-10).
    weights : dict
        ``"self"`` ``(..., h, n, n)`` and ``"cross"`` ``(..., h, n, m)``: each query
        of the decoder has a distribution over the ``m`` source tokens.

    Notes
    -----
    Post-LN, as in Vaswani et al. (2017):

    .. math::

        Z_1 = \operatorname{LN}_1(Y + \operatorname{MHA}(Y, Y; M_\text{causal})), \quad
        Z_2 = \operatorname{LN}_2(Z_1 + \operatorname{MHA}(Z_1, \text{memory})), \quad
        \text{out} = \operatorname{LN}_3(Z_2 + \operatorname{FFN}(Z_2)).

    In the cross-attention the queries come from the decoder (``n`` rows) and the keys
    and values from the encoder (``m`` rows): the scores are ``n × m``.
    """
    Ya = np.asarray(Y)
    M = np.asarray(memory)
    if Ya.ndim < 2 or M.ndim < 2 or Ya.shape[-1] != M.shape[-1]:
        raise ValueError(
            "Y (..., n, d_model) and memory (..., m, d_model) must have the same d_model: "
            f"got Y.shape = {Ya.shape}, memory.shape = {M.shape}"
        )
    p = {k: np.asarray(v) for k, v in params.items()}
    missing = [
        k
        for k in (
            "W_Q",
            "W_K",
            "W_V",
            "W_O",
            *_CROSS,
            "W_1",
            "b_1",
            "W_2",
            "b_2",
            "ln1_gamma",
            "ln1_beta",
            "ln2_gamma",
            "ln2_beta",
            "ln3_gamma",
            "ln3_beta",
        )
        if k not in p
    ]
    if missing:
        raise ValueError(f"params is missing {missing}; see init_decoder_layer_params")
    heads = _check_heads(h, Ya.shape[-1])
    eps = _check_eps(eps)

    def ln(x: np.ndarray, i: int) -> np.ndarray:
        return layer_norm(x, p[f"ln{i}_gamma"], p[f"ln{i}_beta"], eps=eps)

    def self_attention(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        names = ("W_Q", "W_K", "W_V", "W_O")
        biases = {b: p[b] for b in ("b_Q", "b_K", "b_V", "b_O") if b in p}
        return multi_head_attention(x, x, *(p[w] for w in names), heads, self_mask, **biases)

    def cross_attention(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        biases = {b[:3]: p[b] for b in _CROSS_B if b in p}
        return multi_head_attention(x, M, *(p[w] for w in _CROSS), heads, memory_mask, **biases)

    def ffn(x: np.ndarray) -> np.ndarray:
        return feed_forward(x, p["W_1"], p["b_1"], p["W_2"], p["b_2"], activation=activation)

    if norm_first:
        a, A_self = self_attention(ln(Ya, 1))
        Z1 = Ya + a
        c, A_cross = cross_attention(ln(Z1, 2))
        Z2 = Z1 + c
        out = Z2 + ffn(ln(Z2, 3))
    else:
        a, A_self = self_attention(Ya)
        Z1 = ln(Ya + a, 1)
        c, A_cross = cross_attention(Z1)
        Z2 = ln(Z1 + c, 2)
        out = ln(Z2 + ffn(Z2), 3)
    return out, {"self": A_self, "cross": A_cross}
