"""Introduced in chapter 5, the cost of attention: counting operations and memory.

* :func:`attention_cost` counts the multiply-adds of every step of a multi-head
  attention layer (the four projections, the scores and the weighted sum of the
  values), the exponentials of the softmax and the entries of the weights, for
  self-attention (``m = n``) or cross-attention (``m`` keys from another sequence).
* :func:`kv_cache_bytes` is the memory of a decoder's key/value cache, with or without
  grouped-query attention.

Counts are exact integers (Python ints, so they never overflow). A *multiply-add*
(MAC) is one ``a * b + c``; a matrix product of an ``(r, s)`` by an ``(s, c)`` matrix
takes ``r s c`` of them, and a floating-point-operation (FLOP) count is twice that.
Shapes follow ``book/notation.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from helpers._validate import as_integer

__all__ = ["AttentionCost", "attention_cost", "kv_cache_bytes"]


@dataclass(frozen=True)
class AttentionCost:
    r"""The operation counts of one multi-head attention layer, per sequence.

    Built by :func:`attention_cost`; every count is a Python int. The step counts are
    multiply-adds (MACs) of matrix products.

    Attributes
    ----------
    n, m, d_model, h, d_k, d_v : int
        The sizes counted: ``n`` queries, ``m`` keys and values, ``h`` heads of
        widths ``d_k`` (queries and keys) and ``d_v`` (values).
    q_projection : int
        :math:`Q = X W_Q` for all heads: ``n · d_model · h d_k``.
    k_projection : int
        :math:`K = X W_K`: ``m · d_model · h d_k``.
    v_projection : int
        :math:`V = X W_V`: ``m · d_model · h d_v``.
    scores : int
        :math:`Q K^\top` in every head: ``h · n · m · d_k``.
    weighted_sum : int
        :math:`A V` in every head: ``h · n · m · d_v``.
    output_projection : int
        The concatenated heads times :math:`W_O`: ``n · h d_v · d_model``.
    softmax_exps : int
        Exponentials of the softmax, one per score: ``h · n · m`` (plus as many
        additions and divisions; not multiply-adds of a matrix product, so not in
        :attr:`total`).
    weights_entries : int
        Entries of the attention weights if they are stored: ``h · n · m`` per
        sequence (multiply by the bytes per entry and the batch size).
    """

    n: int
    m: int
    d_model: int
    h: int
    d_k: int
    d_v: int
    q_projection: int
    k_projection: int
    v_projection: int
    scores: int
    weighted_sum: int
    output_projection: int
    softmax_exps: int
    weights_entries: int

    @property
    def projections(self) -> int:
        """Multiply-adds of the four projections (linear in ``n`` and ``m``)."""
        return self.q_projection + self.k_projection + self.v_projection + self.output_projection

    @property
    def attention(self) -> int:
        """Multiply-adds of the scores and the weighted sum (the ``n · m`` terms)."""
        return self.scores + self.weighted_sum

    @property
    def total(self) -> int:
        """Multiply-adds of the whole forward pass: :attr:`projections` + :attr:`attention`."""
        return self.projections + self.attention

    @property
    def flops(self) -> int:
        """Floating-point operations of the matrix products: ``2 ·`` :attr:`total`."""
        return 2 * self.total

    @property
    def backward(self) -> int:
        r"""Multiply-adds of the backward pass: ``2 ·`` :attr:`total`.

        Each product :math:`Y = XW` of the forward pass costs two products of the
        same size backward, :math:`dX = dY\,W^\top` and :math:`dW = X^\top dY` (for
        the scores, :math:`dQ = dS\,K` and :math:`dK = dS^\top Q`; for the weighted
        sum, :math:`dA = dO\,V^\top` and :math:`dV = A^\top dO`). This counts the
        gradient of the layer's input too, as every layer but the first needs it.
        """
        return 2 * self.total

    @property
    def backward_recompute(self) -> int:
        """Backward multiply-adds when the weights are recomputed (FlashAttention).

        :attr:`backward` plus the scores :math:`QK^\\top` once more: a backward pass
        that did not store the weights recomputes them from ``Q``, ``K`` and the
        row log-sum-exp.
        """
        return self.backward + self.scores

    def steps(self) -> dict[str, int]:
        """The six matrix-product steps, in the order of the forward pass, as a dict."""
        return {
            "Q projection": self.q_projection,
            "K projection": self.k_projection,
            "V projection": self.v_projection,
            "scores Q Kᵀ": self.scores,
            "weights × V": self.weighted_sum,
            "output projection": self.output_projection,
        }


def attention_cost(
    n: int, m: int, d_model: int, h: int, *, d_k: int | None = None, d_v: int | None = None
) -> AttentionCost:
    r"""Multiply-adds of every step of a multi-head attention layer, and its memory.

    Parameters
    ----------
    n : int
        Number of queries (tokens of the sequence that asks), ``>= 1``.
    m : int
        Number of keys and values, ``>= 1``; ``m = n`` for self-attention.
    d_model : int
        Width of the token representations (queries' and keys' sequences alike).
    h : int
        Number of heads.
    d_k : int, optional
        Width of each head's queries and keys; defaults to ``d_model / h`` (then ``h``
        must divide ``d_model``).
    d_v : int, optional
        Width of each head's values; defaults to ``d_k``.

    Returns
    -------
    cost : AttentionCost
        A frozen dataclass with the count of each step (``q_projection``,
        ``k_projection``, ``v_projection``, ``scores``, ``weighted_sum``,
        ``output_projection``), ``softmax_exps`` and ``weights_entries``, and the
        derived ``projections``, ``attention``, ``total``, ``flops``, ``backward``,
        ``backward_recompute`` and ``steps()``.

    Raises
    ------
    TypeError
        If a size is not an integer.
    ValueError
        If a size is not positive, or ``d_k`` is not given and ``h`` does not divide
        ``d_model``.

    See Also
    --------
    kv_cache_bytes, helpers.multihead.mha_parameter_count

    Notes
    -----
    For ``X`` of shape :math:`(n, d_\text{model})` and keys and values made from
    :math:`m` tokens of the same width,

    .. math::

        \underbrace{n d_\text{model} h d_k + m d_\text{model} h (d_k + d_v)
        + n h d_v d_\text{model}}_\text{projections}
        + \underbrace{h n m (d_k + d_v)}_\text{attention} .

    With :math:`m = n` and :math:`h d_k = h d_v = d_\text{model}` this is
    :math:`4 n d_\text{model}^2 + 2 n^2 d_\text{model}`: the :math:`n^2` term
    overtakes the projections when :math:`n > 2 d_\text{model}`. Like the scores,
    the number of entries of the weights, :math:`h n m`, grows with :math:`n m`.

    Examples
    --------
    >>> from helpers.cost import attention_cost
    >>> c = attention_cost(1024, 1024, 512, 8)  # self-attention, d_k = d_v = 64
    >>> c.scores == 8 * 1024 * 1024 * 64
    True
    >>> c.total == 4 * 1024 * 512**2 + 2 * 1024**2 * 512
    True
    >>> c.weights_entries  # 8 heads of 1024 x 1024 weights
    8388608
    >>> long = attention_cost(2048, 2048, 512, 8)  # n > 2 d_model: the n² terms dominate
    >>> long.attention > long.projections
    True
    """
    n = as_integer(n, "n", minimum=1)
    m = as_integer(m, "m", minimum=1)
    d_model = as_integer(d_model, "d_model", minimum=1)
    h = as_integer(h, "h", minimum=1)
    if d_k is None:
        if d_model % h:
            raise ValueError(
                f"d_model = {d_model} is not divisible by h = {h}: pass d_k (the width of "
                "each head's queries and keys) explicitly, or choose h dividing d_model"
            )
        d_k = d_model // h
    else:
        d_k = as_integer(d_k, "d_k", minimum=1)
    d_v = d_k if d_v is None else as_integer(d_v, "d_v", minimum=1)
    return AttentionCost(
        n=n,
        m=m,
        d_model=d_model,
        h=h,
        d_k=d_k,
        d_v=d_v,
        q_projection=n * d_model * h * d_k,
        k_projection=m * d_model * h * d_k,
        v_projection=m * d_model * h * d_v,
        scores=h * n * m * d_k,
        weighted_sum=h * n * m * d_v,
        output_projection=n * h * d_v * d_model,
        softmax_exps=h * n * m,
        weights_entries=h * n * m,
    )


def kv_cache_bytes(
    t: int,
    *,
    num_layers: int,
    num_kv_heads: int,
    d_head: int,
    batch: int = 1,
    bytes_per_entry: int = 2,
) -> int:
    r"""Bytes of a decoder's key/value cache after ``t`` tokens.

    Parameters
    ----------
    t : int
        Number of tokens cached (prompt and generated), ``>= 0``.
    num_layers : int
        Number of attention layers, each with its own cache.
    num_kv_heads : int
        Key/value heads per layer: ``h`` for multi-head attention, fewer for
        grouped-query attention (``h_kv``), 1 for multi-query attention.
    d_head : int
        Width of each head's keys (and values).
    batch : int, default 1
        Number of sequences decoded together.
    bytes_per_entry : int, default 2
        2 for float16 or bfloat16, 4 for float32 (``np.dtype(...).itemsize``).

    Returns
    -------
    nbytes : int
        ``2 · num_layers · t · num_kv_heads · d_head · batch · bytes_per_entry``.

    Raises
    ------
    TypeError
        If an argument is not an integer.
    ValueError
        If ``t`` is negative or another argument is not positive.

    See Also
    --------
    helpers.multihead.kv_cache_elements, helpers.kv_cache.KVCache

    Notes
    -----
    Each layer keeps, for every cached token, one key and one value per key/value
    head (the factor 2). With ``num_kv_heads = h`` and ``h · d_head = d_model`` this is
    :math:`2 L t d_\text{model}` entries per sequence; grouped-query attention divides
    it by ``h / h_kv``.

    Examples
    --------
    >>> from helpers.cost import kv_cache_bytes
    >>> # 32 layers, 32 heads of width 128 (d_model = 4096), 4096 tokens, float16:
    >>> kv_cache_bytes(4096, num_layers=32, num_kv_heads=32, d_head=128) / 2**30  # GiB
    2.0
    >>> kv_cache_bytes(4096, num_layers=32, num_kv_heads=8, d_head=128) / 2**30  # GQA, 8 groups
    0.5
    """
    t = as_integer(t, "t", minimum=0)
    num_layers = as_integer(num_layers, "num_layers", minimum=1)
    num_kv_heads = as_integer(num_kv_heads, "num_kv_heads", minimum=1)
    d_head = as_integer(d_head, "d_head", minimum=1)
    batch = as_integer(batch, "batch", minimum=1)
    bytes_per_entry = as_integer(bytes_per_entry, "bytes_per_entry", minimum=1)
    return 2 * num_layers * t * num_kv_heads * d_head * batch * bytes_per_entry
