"""Tests of helpers.cost: operation counts against PyTorch's FLOP counter, cache memory
against caches that actually exist (ours and a tiny Hugging Face Llama's).

Oracles: ``torch.utils.flop_counter.FlopCounterMode`` counts 2 FLOPs per multiply-add
of every matrix product a layer written in PyTorch runs, forward and backward; the
bytes of a ``KVCache`` filled by ``attention_decoder``, and of the cache a
``transformers`` ``LlamaForCausalLM`` (tiny random config, never downloaded) returns.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from helpers import KVCache, attention_decoder, init_attention_decoder, kv_cache_elements
from helpers.cost import AttentionCost, attention_cost, kv_cache_bytes

# (n, m, d_model, h, d_k, d_v): self-attention, cross-attention, heads whose widths do
# not multiply to d_model, a single query (a decoding step without cache reuse).
SIZES = [
    (16, 16, 32, 4, None, None),
    (7, 11, 24, 3, None, None),
    (5, 9, 20, 3, 6, 4),
    (1, 13, 16, 2, None, 5),
]


def torch_mha_flops(n, m, d_model, h, d_k, d_v):
    """(forward, backward) FLOPs of multi-head attention written out in PyTorch."""
    gen = torch.Generator().manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64, requires_grad=True)

    X, Y = rand(n, d_model), rand(m, d_model)  # queries' and keys' tokens
    W_Q, W_K, W_V = rand(d_model, h * d_k), rand(d_model, h * d_k), rand(d_model, h * d_v)
    W_O = rand(h * d_v, d_model)
    with FlopCounterMode(display=False) as forward:
        Q = (X @ W_Q).reshape(n, h, d_k).transpose(0, 1)  # (h, n, d_k)
        K = (Y @ W_K).reshape(m, h, d_k).transpose(0, 1)
        V = (Y @ W_V).reshape(m, h, d_v).transpose(0, 1)
        A = torch.softmax(Q @ K.transpose(1, 2) / d_k**0.5, dim=-1)  # (h, n, m)
        out = (A @ V).transpose(0, 1).reshape(n, h * d_v) @ W_O
    with FlopCounterMode(display=False) as backward:
        out.backward(torch.randn(n, d_model, generator=gen, dtype=torch.float64))
    return forward.get_total_flops(), backward.get_total_flops()


@pytest.mark.parametrize("sizes", SIZES, ids=str)
def test_counts_match_pytorchs_flop_counter(sizes):
    n, m, d_model, h, d_k, d_v = sizes
    c = attention_cost(n, m, d_model, h, d_k=d_k, d_v=d_v)
    fwd, bwd = torch_mha_flops(n, m, d_model, h, c.d_k, c.d_v)
    assert c.flops == fwd == 2 * c.total
    assert 2 * c.backward == bwd  # X and Y require gradients: every product costs two


def test_each_step_against_its_matrix_product():
    """Each field is the multiply-adds of one einsum, counted from the operand shapes."""
    n, m, d_model, h, d_k, d_v = 6, 10, 12, 3, 5, 7
    c = attention_cost(n, m, d_model, h, d_k=d_k, d_v=d_v)

    def macs(spec, *shapes):
        """Multiply-adds of an einsum: the product of the sizes of all its indices."""
        sizes = {}
        for letters, shape in zip(spec.split("->")[0].split(","), shapes, strict=True):
            sizes.update(zip(letters, shape, strict=True))
        return math.prod(sizes.values())

    assert c.q_projection == macs("nd,de->ne", (n, d_model), (d_model, h * d_k))
    assert c.k_projection == macs("md,de->me", (m, d_model), (d_model, h * d_k))
    assert c.v_projection == macs("md,de->me", (m, d_model), (d_model, h * d_v))
    assert c.scores == macs("hnk,hmk->hnm", (h, n, d_k), (h, m, d_k))
    assert c.weighted_sum == macs("hnm,hmv->hnv", (h, n, m), (h, m, d_v))
    assert c.output_projection == macs("ne,ed->nd", (n, h * d_v), (h * d_v, d_model))
    assert c.softmax_exps == c.weights_entries == h * n * m
    assert sum(c.steps().values()) == c.total == c.projections + c.attention
    assert c.backward_recompute == c.backward + c.scores


def test_self_attention_total_and_crossover():
    for n, d in [(128, 64), (1000, 512), (4096, 768)]:
        c = attention_cost(n, n, d, 8)
        assert c.total == 4 * n * d * d + 2 * n * n * d
        assert c.projections == 4 * n * d * d and c.attention == 2 * n * n * d
    # the n² term overtakes the projections exactly past n = 2 d_model
    d = 256
    assert (
        attention_cost(2 * d, 2 * d, d, 4).attention
        == attention_cost(2 * d, 2 * d, d, 4).projections
    )
    assert attention_cost(2 * d + 1, 2 * d + 1, d, 4).attention > (
        attention_cost(2 * d + 1, 2 * d + 1, d, 4).projections
    )


def test_counts_are_exact_python_ints_and_frozen():
    n = 10**8  # the scores alone take 64 · n² · 128 = 8.2e19 multiply-adds, beyond int64
    c = attention_cost(n, n, 8192, 64)
    assert isinstance(c.total, int) and c.scores == 64 * n * n * 128 > np.iinfo(np.int64).max
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.n = 3
    assert isinstance(c, AttentionCost)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((0, 4, 8, 2), {}, ValueError, "n must be positive"),
        ((4, 0, 8, 2), {}, ValueError, "m must be positive"),
        ((4, 4, 10, 3), {}, ValueError, "d_model = 10 is not divisible by h = 3"),
        ((4, 4, 8, 2), {"d_k": 0}, ValueError, "d_k must be positive"),
        ((4, 4, 8, 2), {"d_v": 2.5}, TypeError, "d_v must be an integer"),
        ((4.0, 4, 8, 2), {}, TypeError, "n must be an integer"),
    ],
)
def test_attention_cost_bad_input(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        attention_cost(*args, **kwargs)


# ---------------------------------------------------------------------------
# KV-cache memory
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("h_kv", [4, 2, 1])
def test_kv_cache_bytes_equal_a_filled_cache(h_kv):
    rng = np.random.default_rng(h_kv)
    L, d_model, h, t, batch = 3, 16, 4, 9, 2
    layers = init_attention_decoder(L, d_model, h, rng=rng, num_kv_heads=h_kv, dtype=np.float32)
    caches = [KVCache() for _ in layers]
    X = rng.normal(size=(batch, t, d_model)).astype(np.float32)
    attention_decoder(layers, X[:, :5], h, caches=caches)  # a prompt, then tokens one by one
    for s in range(5, t):
        attention_decoder(layers, X[:, s : s + 1], h, caches=caches)
    measured = sum(c.nbytes for c in caches)
    expected = kv_cache_bytes(
        t, num_layers=L, num_kv_heads=h_kv, d_head=d_model // h, batch=batch, bytes_per_entry=4
    )
    assert measured == expected
    assert expected == batch * 4 * kv_cache_elements(t, d_model, h, h_kv, num_layers=L)


def test_kv_cache_bytes_equal_a_hugging_face_llama_cache():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=50,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,  # grouped-query attention
        head_dim=8,
        max_position_embeddings=64,
    )
    model = transformers.LlamaForCausalLM(config).to(torch.float16).eval()
    tokens = torch.randint(0, 50, (2, 11), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        cache = model(tokens, use_cache=True).past_key_values
    measured = sum(
        layer.keys.numel() * layer.keys.element_size()
        + layer.values.numel() * layer.values.element_size()
        for layer in cache.layers
    )
    assert measured == kv_cache_bytes(11, num_layers=3, num_kv_heads=2, d_head=8, batch=2)


def test_kv_cache_bytes_grouped_query_saving():
    full = kv_cache_bytes(4096, num_layers=32, num_kv_heads=32, d_head=128)
    assert full == 2 * 2**30  # 2 GiB in float16
    assert kv_cache_bytes(4096, num_layers=32, num_kv_heads=8, d_head=128) * 4 == full
    assert kv_cache_bytes(0, num_layers=1, num_kv_heads=1, d_head=1) == 0


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"t": -1}, ValueError, "t must be >= 0"),
        ({"num_layers": 0}, ValueError, "num_layers must be positive"),
        ({"num_kv_heads": 1.5}, TypeError, "num_kv_heads must be an integer"),
        ({"bytes_per_entry": 0}, ValueError, "bytes_per_entry must be positive"),
        ({"batch": True}, TypeError, "batch must be an integer"),
    ],
)
def test_kv_cache_bytes_bad_input(kwargs, error, match):
    args = {"t": 4, "num_layers": 2, "num_kv_heads": 2, "d_head": 8} | kwargs
    t = args.pop("t")
    with pytest.raises(error, match=match):
        kv_cache_bytes(t, **args)
