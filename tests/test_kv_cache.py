"""Tests of helpers.kv_cache: the cache itself, and cached decoding = full recomputation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.kv_cache import KVCache, attention_decoder, init_attention_decoder
from helpers.masks import causal_mask
from helpers.multihead import grouped_query_attention, kv_cache_elements

# Cached and full decoding do the same arithmetic on the same numbers, but in matrix
# products of different shapes (one row against many), which BLAS may sum in a different
# order: the outputs, O(1) after a few residual layers, agree to a few units of float64
# rounding (~1e-15), far below any slip (a wrong mask or a stale key moves them by O(0.1)).
ATOL_EXACT = 1e-12
PROPERTY = settings(max_examples=30, deadline=None)


# ---------------------------------------------------------------------------
# The cache
# ---------------------------------------------------------------------------


def test_update_appends_and_returns_everything():
    rng = np.random.default_rng(0)
    k1, v1 = rng.normal(size=(2, 3, 4, 5)), rng.normal(size=(2, 3, 4, 6))  # (b, h, t, d)
    k2, v2 = rng.normal(size=(2, 3, 1, 5)), rng.normal(size=(2, 3, 1, 6))
    cache = KVCache()
    assert len(cache) == 0 and cache.keys is None and cache.values is None
    K, V = cache.update(k1, v1)
    assert np.array_equal(K, k1) and np.array_equal(V, v1)
    K, V = cache.update(k2, v2)
    assert K.shape == (2, 3, 5, 5) and V.shape == (2, 3, 5, 6) and len(cache) == 5
    assert np.array_equal(K, np.concatenate([k1, k2], axis=-2))
    assert np.array_equal(V, np.concatenate([v1, v2], axis=-2))
    assert np.array_equal(cache.keys, K) and np.array_equal(cache.values, V)


@pytest.mark.parametrize("capacity", [None, 1, 3, 100])
def test_one_token_at_a_time_equals_concatenation(capacity):
    rng = np.random.default_rng(1)
    ks, vs = rng.normal(size=(20, 2, 1, 3)), rng.normal(size=(20, 2, 1, 4))
    cache = KVCache(capacity)
    returned = []
    for t in range(20):
        returned.append(cache.update(ks[t], vs[t]))
    K_all = np.concatenate(list(ks), axis=-2)  # (2, 20, 3)
    V_all = np.concatenate(list(vs), axis=-2)
    for t, (K, V) in enumerate(returned):
        # every earlier result is unchanged by the later updates (and buffer growth)
        assert np.array_equal(K, K_all[:, : t + 1]) and np.array_equal(V, V_all[:, : t + 1])


def test_buffer_grows_geometrically():
    cache = KVCache()
    buffers = set()
    for _ in range(1000):
        cache.update(np.zeros((1, 2)), np.zeros((1, 2)))
        buffers.add(id(cache._k))
    # doubling from 1: 1, 2, 4, ..., 1024 -> 11 buffers, not 1000 copies
    assert len(buffers) <= 11
    assert cache._k.shape[-2] == 1024


def test_returned_arrays_are_read_only():
    cache = KVCache()
    K, V = cache.update(np.zeros((2, 3)), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="read-only"):
        K[0, 0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        V[0, 0] = 1.0


def test_nbytes_and_reset():
    cache = KVCache(capacity=64)
    cache.update(np.zeros((4, 7, 8), np.float32), np.zeros((4, 7, 16), np.float32))
    assert cache.nbytes == 4 * 7 * (8 + 16) * 4  # the part in use, not the capacity
    assert "7 tokens" in repr(cache)
    cache.reset()
    assert len(cache) == 0 and cache.nbytes == 0 and repr(cache) == "KVCache(empty)"
    K, _ = cache.update(np.ones((1, 2)), np.ones((1, 2)))  # a new sequence, any shape
    assert K.shape == (1, 2)


def test_integers_become_float64_and_empty_updates_are_allowed():
    cache = KVCache()
    K, V = cache.update(np.ones((2, 3), dtype=int), np.ones((2, 3), dtype=int))
    assert K.dtype == V.dtype == np.float64
    K, V = cache.update(np.zeros((0, 3)), np.zeros((0, 3)))
    assert K.shape == (2, 3)


@pytest.mark.parametrize(
    ("first", "second", "error", "match"),
    [
        (None, (np.zeros(3), np.zeros((1, 3))), ValueError, r"k must have at least 2 axes.*\(3,\)"),
        (None, (np.zeros((2, 3)), np.zeros((3, 3))), ValueError, r"k.shape = \(2, 3\), v.shape"),
        (None, (np.zeros((2, 3), bool), np.zeros((2, 3))), TypeError, "k must be .* dtype bool"),
        (
            (np.zeros((2, 1, 4)), np.zeros((2, 1, 4))),
            (np.zeros((3, 1, 4)), np.zeros((3, 1, 4))),
            ValueError,
            r"new rows must have shape k \(2, 1, 4\).*k.shape = \(3, 1, 4\)",
        ),
        (
            (np.zeros((1, 4)), np.zeros((1, 4))),
            (np.zeros((1, 5)), np.zeros((1, 4))),
            ValueError,
            r"d_v = 4.*got k.shape = \(1, 5\)",
        ),
        (
            (np.zeros((1, 4)), np.zeros((1, 4))),
            (np.zeros((1, 4), np.float32), np.zeros((1, 4), np.float32)),
            TypeError,
            "this cache stores float64; got k of dtype float32",
        ),
    ],
)
def test_bad_input_is_named(first, second, error, match):
    cache = KVCache()
    if first is not None:
        cache.update(*first)
    with pytest.raises(error, match=match):
        cache.update(*second)


@pytest.mark.parametrize(("capacity", "error"), [(0, ValueError), (2.5, TypeError)])
def test_bad_capacity(capacity, error):
    with pytest.raises(error, match="capacity"):
        KVCache(capacity)


# ---------------------------------------------------------------------------
# Cached decoding = full causal recomputation
# ---------------------------------------------------------------------------


def decode_with_cache(layers, X, h, chunks):
    """Feed X through the decoder in consecutive chunks of the given sizes, with caches."""
    caches = [KVCache() for _ in layers]
    outputs, start = [], 0
    for size in chunks:
        outputs.append(attention_decoder(layers, X[..., start : start + size, :], h, caches=caches))
        start += size
    assert start == X.shape[-2]
    return np.concatenate(outputs, axis=-2), caches


@pytest.mark.parametrize("h_kv", [4, 2, 1])
@pytest.mark.parametrize("seed", range(3))
def test_cached_decoding_equals_full_recomputation(seed, h_kv):
    rng = np.random.default_rng(seed)
    layers = init_attention_decoder(3, 16, 4, rng=rng, num_kv_heads=h_kv)
    X = rng.normal(size=(2, 12, 16))  # a batch of 2 sequences of 12 tokens
    full = attention_decoder(layers, X, 4)
    # a prompt of 5 tokens at once, then one token at a time
    cached, caches = decode_with_cache(layers, X, 4, [5] + [1] * 7)
    np.testing.assert_allclose(cached, full, rtol=0, atol=ATOL_EXACT)
    # and the naive way: recompute the whole prefix at every step, keep its last row
    last_rows = [attention_decoder(layers, X[:, : t + 1], 4)[:, -1] for t in range(12)]
    recomputed = np.stack(last_rows, axis=1)
    np.testing.assert_allclose(recomputed, full, rtol=0, atol=ATOL_EXACT)
    # the caches hold 2 L t h_kv d_k numbers per sequence
    elements = sum(c.keys.size + c.values.size for c in caches)
    assert elements == 2 * kv_cache_elements(12, 16, 4, num_kv_heads=h_kv, num_layers=3)


@PROPERTY
@given(chunks=st.lists(st.integers(0, 4), min_size=1, max_size=8), seed=st.integers(0, 2**16))
def test_any_chunking_gives_the_same_outputs(chunks, seed):
    rng = np.random.default_rng(seed)
    layers = init_attention_decoder(2, 8, 2, rng=rng)
    n = sum(chunks)
    X = rng.normal(size=(n, 8))
    if n == 0:
        return
    cached, _ = decode_with_cache(layers, X, 2, chunks)
    np.testing.assert_allclose(cached, attention_decoder(layers, X, 2), rtol=0, atol=ATOL_EXACT)


def test_a_stale_cache_is_detected():
    """The equality is not automatic: reusing a cache across sequences breaks it."""
    rng = np.random.default_rng(5)
    layers = init_attention_decoder(2, 8, 2, rng=rng)
    X, X_other = rng.normal(size=(6, 8)), rng.normal(size=(6, 8))
    _, caches = decode_with_cache(layers, X_other, 2, [6])
    stale = attention_decoder(layers, X, 2, caches=caches)  # forgot to reset
    assert np.abs(stale - attention_decoder(layers, X, 2)).max() > 1e-2


def test_decoder_is_a_stack_of_grouped_query_attention_layers():
    """The decoder against chapter 3's layer, applied with a residual connection."""
    rng = np.random.default_rng(7)
    layers = init_attention_decoder(3, 12, 6, rng=rng, num_kv_heads=3)
    X = rng.normal(size=(9, 12))
    Y = X
    for p in layers:
        H = Y / np.sqrt(np.mean(Y**2, axis=-1, keepdims=True) + 1e-6)
        out, _ = grouped_query_attention(
            H, H, **p, num_heads=6, num_kv_heads=3, mask=causal_mask(9)
        )
        Y = Y + out
    np.testing.assert_allclose(attention_decoder(layers, X, 6), Y, rtol=1e-12, atol=1e-12)


def test_decoder_matches_pytorch():
    """The same decoder written with torch's scaled_dot_product_attention (is_causal)."""
    rng = np.random.default_rng(11)
    layers = init_attention_decoder(2, 16, 4, rng=rng, num_kv_heads=2)
    X = rng.normal(size=(3, 10, 16))
    x = torch.from_numpy(X)
    for p in layers:
        w = {k: torch.from_numpy(v) for k, v in p.items()}
        hn = x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6)
        q = (hn @ w["W_Q"]).unflatten(-1, (4, 4)).transpose(1, 2)  # (b, h, n, d_k)
        k = (hn @ w["W_K"]).unflatten(-1, (2, 4)).transpose(1, 2)  # (b, h_kv, n, d_k)
        v = (hn @ w["W_V"]).unflatten(-1, (2, 4)).transpose(1, 2)
        k, v = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
        heads = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + heads.transpose(1, 2).flatten(-2) @ w["W_O"]
    np.testing.assert_allclose(attention_decoder(layers, X, 4), x.numpy(), rtol=1e-10, atol=1e-12)


def test_decoder_errors():
    rng = np.random.default_rng(0)
    layers = init_attention_decoder(2, 8, 2, rng=rng)
    with pytest.raises(ValueError, match="one KVCache per layer: got 1 caches for 2 layers"):
        attention_decoder(layers, np.zeros((1, 8)), 2, caches=[KVCache()])
    with pytest.raises(ValueError, match=r"X must have shape \(..., s, d_model\)"):
        attention_decoder(layers, np.zeros(8), 2)
    with pytest.raises(ValueError, match="num_kv_heads"):
        init_attention_decoder(1, 8, 4, rng=rng, num_kv_heads=3)
    with pytest.raises(ValueError, match="num_layers must be positive"):
        init_attention_decoder(0, 8, 4, rng=rng)
