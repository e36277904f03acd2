"""Tests of helpers.multihead: PyTorch parity, gradients, heads, GQA, counting, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.masks import causal_mask, padding_mask
from helpers.multihead import (
    grouped_query_attention,
    init_mha_params,
    kv_cache_elements,
    merge_heads,
    mha_parameter_count,
    multi_head_attention,
    multi_head_attention_backward,
    split_heads,
)

SEEDS = range(3)
BIAS_NAMES = ("b_Q", "b_K", "b_V", "b_O")

# Tolerances. Inputs and weights are O(1) (weights scaled by 1/sqrt(d_model)), so every
# output and weight is a sum of at most a few dozen O(1) products.
# * Float64 against an independent computation (PyTorch, a loop over heads): the two
#   sum in different orders, which moves each result by ~d_model * eps64 ~ 1e-14.
RTOL_64, ATOL_64 = 1e-10, 1e-12
# * Float32: the same, with eps32 ~ 1.2e-7: ~d_model * eps32 ~ 4e-6 for d_model = 32,
#   through the projections, the softmax and W_O.
RTOL_32, ATOL_32 = 1e-4, 2e-5
# * Gradients in float64 against PyTorch's autograd: longer chains of products and
#   sums over the batch and tokens, ~1e-13; still far below any formula slip.
RTOL_GRAD, ATOL_GRAD = 1e-9, 1e-11
# * Central differences with step 1e-6 in float64: truncation O(step²) ~ 1e-12 times
#   third derivatives of O(10), plus cancellation eps/step ~ 1e-10 times the loss.
FD_STEP, FD_ATOL, FD_RTOL = 1e-6, 1e-7, 1e-6

PROPERTY = settings(max_examples=40, deadline=None)

TOL = {
    np.float32: {"rtol": RTOL_32, "atol": ATOL_32},
    np.float64: {"rtol": RTOL_64, "atol": ATOL_64},
}


def random_params(
    rng: np.random.Generator, d_model: int, *, bias: bool = True, dtype=np.float64, **gqa
) -> dict[str, np.ndarray]:
    """PyTorch-like weights plus *non-zero* biases (init gives zeros, which test nothing)."""
    params = init_mha_params(d_model, rng=rng, bias=bias, **gqa)
    for name in BIAS_NAMES:
        if name in params:
            params[name] = rng.normal(scale=0.5, size=params[name].shape)
    return {k: v.astype(dtype) for k, v in params.items()}


# ---------------------------------------------------------------------------
# Independent references, written for clarity
# ---------------------------------------------------------------------------


def plain_softmax_attention(Q, K, V, allowed=None):
    """softmax(Q K^T / sqrt(d_k)) V for one head, (n, d_k), (m, d_k), (m, d_v)."""
    S = Q @ K.T / math.sqrt(Q.shape[-1])
    if allowed is not None:
        S = np.where(allowed, S, -np.inf)
    A = np.exp(S - S.max(axis=-1, keepdims=True))
    A /= A.sum(axis=-1, keepdims=True)
    return A @ V, A


def loop_over_heads(X_q, X_kv, params, num_heads, mask=None, kv_head_of=None):
    """Multi-head attention one sequence and one head at a time, by column slices.

    ``kv_head_of(i)`` is the key/value head of query head ``i`` (``i`` in MHA).
    """
    batch = np.broadcast_shapes(X_q.shape[:-2], X_kv.shape[:-2])
    X_q = np.broadcast_to(X_q, (*batch, *X_q.shape[-2:]))
    X_kv = np.broadcast_to(X_kv, (*batch, *X_kv.shape[-2:]))
    n, m, d = X_q.shape[-2], X_kv.shape[-2], X_q.shape[-1]
    d_k = d // num_heads
    kv_head_of = kv_head_of or (lambda i: i)
    full_mask = None if mask is None else np.broadcast_to(mask, (*batch, num_heads, n, m))
    b = {name: params.get(name, 0.0) for name in BIAS_NAMES}
    out = np.zeros((*batch, n, d))
    weights = np.zeros((*batch, num_heads, n, m))
    for idx in np.ndindex(*batch):
        Q = X_q[idx] @ params["W_Q"] + b["b_Q"]
        K = X_kv[idx] @ params["W_K"] + b["b_K"]
        V = X_kv[idx] @ params["W_V"] + b["b_V"]
        heads = []
        for i in range(num_heads):
            q = Q[:, i * d_k : (i + 1) * d_k]
            j = kv_head_of(i)
            k, v = K[:, j * d_k : (j + 1) * d_k], V[:, j * d_k : (j + 1) * d_k]
            allowed = None if full_mask is None else full_mask[(*idx, i)]
            head, weights[(*idx, i)] = plain_softmax_attention(q, k, v, allowed)
            heads.append(head)
        out[idx] = np.concatenate(heads, axis=-1) @ params["W_O"] + b["b_O"]
    return out, weights


def torch_module(params: dict[str, np.ndarray], num_heads: int) -> torch.nn.MultiheadAttention:
    """``nn.MultiheadAttention`` holding our weights.

    PyTorch stores the projections for ``x @ W.T`` (``nn.Linear``): its packed
    ``in_proj_weight`` is ``[W_Q^T; W_K^T; W_V^T]``, shape (3 d_model, d_model), and
    ``out_proj.weight`` is ``W_O^T``.
    """
    W_Q = params["W_Q"]
    d, dtype = W_Q.shape[0], torch.from_numpy(W_Q).dtype
    bias = "b_Q" in params
    module = torch.nn.MultiheadAttention(d, num_heads, bias=bias, batch_first=True, dtype=dtype)
    with torch.no_grad():
        packed = np.concatenate([params["W_Q"].T, params["W_K"].T, params["W_V"].T])
        module.in_proj_weight.copy_(torch.from_numpy(packed))
        module.out_proj.weight.copy_(torch.from_numpy(params["W_O"].T))
        if bias:
            packed_b = np.concatenate([params["b_Q"], params["b_K"], params["b_V"]])
            module.in_proj_bias.copy_(torch.from_numpy(packed_b))
            module.out_proj.bias.copy_(torch.from_numpy(params["b_O"]))
    return module.eval()


# ---------------------------------------------------------------------------
# Parity with torch.nn.MultiheadAttention
# ---------------------------------------------------------------------------

# (name, batch, n, m, num_heads, mask kind). Masks are built so that no row is fully
# masked (PyTorch's nn.MultiheadAttention gives nan there; chapter 2 gives 0).
PARITY_CASES = [
    ("self-attention", 2, 6, 6, 4, None),
    ("cross-attention n != m", 3, 4, 7, 2, None),
    ("one head", 2, 5, 5, 1, None),
    ("causal", 2, 6, 6, 4, "causal"),
    ("padding", 3, 5, 6, 8, "padding"),
    ("causal and padding", 3, 6, 6, 2, "causal+padding"),
    ("per-sequence, per-head mask", 2, 4, 5, 4, "random"),
]


def masks_for(kind, rng, batch, n, m, num_heads):
    """``(our mask, torch kwargs)`` for one mask kind.

    nn.MultiheadAttention's boolean masks have the OPPOSITE convention to the book's:
    ``attn_mask`` and ``key_padding_mask`` are True where attending is NOT allowed. So
    each torch mask below is the negation (~) of ours. Its ``attn_mask`` is (n, m) or
    (batch * num_heads, n, m), batch-major; ``key_padding_mask`` is (batch, m).
    """
    if kind is None:
        return None, {}
    if kind == "causal":
        mask = causal_mask(n, m)  # (n, m): shared by every sequence and head
        return mask, {"attn_mask": torch.from_numpy(~mask)}
    lengths = rng.integers(1, m + 1, size=batch)
    lengths[0] = m
    keys = padding_mask(lengths, m)  # (batch, 1, m)
    if kind == "padding":
        # Our mask needs a head axis: (batch, 1, 1, m) broadcasts to (batch, h, n, m).
        return keys[:, None], {"key_padding_mask": torch.from_numpy(~keys[:, 0])}
    if kind == "causal+padding":
        lengths = np.maximum(lengths, 1)  # key 0 is always there, so no row is empty
        mask = causal_mask(n) & keys[:, None]  # (batch, 1, n, m)
        return mask, {
            "attn_mask": torch.from_numpy(~causal_mask(n)),
            "key_padding_mask": torch.from_numpy(~keys[:, 0]),
        }
    mask = rng.random((batch, num_heads, n, m)) < 0.6
    mask[..., 0] = True  # every query may attend to key 0
    return mask, {"attn_mask": torch.from_numpy(~mask.reshape(batch * num_heads, n, m))}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no bias"])
@pytest.mark.parametrize(
    ("batch", "n", "m", "num_heads", "mask_kind"),
    [case[1:] for case in PARITY_CASES],
    ids=[case[0] for case in PARITY_CASES],
)
def test_matches_torch_multihead_attention(batch, n, m, num_heads, mask_kind, bias, dtype):
    rng = np.random.default_rng(n * 100 + m * 10 + num_heads)
    d_model = 32
    params = random_params(rng, d_model, bias=bias, dtype=dtype)
    X_q = rng.normal(size=(batch, n, d_model)).astype(dtype)
    X_kv = X_q if n == m else rng.normal(size=(batch, m, d_model)).astype(dtype)
    mask, torch_masks = masks_for(mask_kind, rng, batch, n, m, num_heads)

    out, weights = multi_head_attention(X_q, X_kv, num_heads=num_heads, mask=mask, **params)

    module = torch_module(params, num_heads)
    with torch.no_grad():
        kv = torch.from_numpy(X_kv)
        t_out, t_weights = module(
            torch.from_numpy(X_q),
            kv,
            kv,
            need_weights=True,
            average_attn_weights=False,  # per-head weights (batch, h, n, m)
            **torch_masks,
        )
    assert out.dtype == weights.dtype == dtype
    assert out.shape == (batch, n, d_model)
    assert weights.shape == tuple(t_weights.shape) == (batch, num_heads, n, m)
    np.testing.assert_allclose(out, t_out.numpy(), **TOL[dtype])
    np.testing.assert_allclose(weights, t_weights.numpy(), **TOL[dtype])
    if mask is not None:
        assert np.all(weights[~np.broadcast_to(mask, weights.shape)] == 0)


def test_unbatched_input_matches_torch():
    rng = np.random.default_rng(1)
    params = random_params(rng, 16)
    X = rng.normal(size=(5, 16))
    out, weights = multi_head_attention(X, X, num_heads=4, **params)
    with torch.no_grad():
        t = torch.from_numpy(X)
        t_out, t_weights = torch_module(params, 4)(t, t, t, average_attn_weights=False)
    assert out.shape == (5, 16) and weights.shape == (4, 5, 5)
    np.testing.assert_allclose(out, t_out.numpy(), rtol=RTOL_64, atol=ATOL_64)
    np.testing.assert_allclose(weights, t_weights.numpy(), rtol=RTOL_64, atol=ATOL_64)


# ---------------------------------------------------------------------------
# The packed computation equals a loop over heads
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("num_heads", [1, 2, 4, 8])
@pytest.mark.parametrize("masked", [False, True], ids=["no mask", "causal"])
def test_packed_heads_equal_a_loop_over_heads(seed, num_heads, masked):
    rng = np.random.default_rng(seed)
    params = random_params(rng, 16)
    X = rng.normal(size=(2, 5, 16))
    mask = causal_mask(5) if masked else None
    out, weights = multi_head_attention(X, X, num_heads=num_heads, mask=mask, **params)
    ref_out, ref_weights = loop_over_heads(X, X, params, num_heads, mask)
    np.testing.assert_allclose(out, ref_out, rtol=RTOL_64, atol=ATOL_64)
    np.testing.assert_allclose(weights, ref_weights, rtol=RTOL_64, atol=ATOL_64)


@pytest.mark.parametrize("seed", SEEDS)
def test_cross_attention_with_shared_memory_broadcasts_over_the_batch(seed):
    rng = np.random.default_rng(seed)
    params = random_params(rng, 8)
    X_q, memory = rng.normal(size=(3, 4, 8)), rng.normal(size=(6, 8))  # one memory for all
    out, weights = multi_head_attention(X_q, memory, num_heads=2, **params)
    tiled = np.broadcast_to(memory, (3, 6, 8))
    ref_out, ref_weights = multi_head_attention(X_q, tiled, num_heads=2, **params)
    assert out.shape == (3, 4, 8) and weights.shape == (3, 2, 4, 6)
    np.testing.assert_allclose(out, ref_out, rtol=RTOL_64, atol=ATOL_64)
    np.testing.assert_allclose(weights, ref_weights, rtol=RTOL_64, atol=ATOL_64)


def test_weights_are_distributions_and_masked_entries_exactly_zero():
    rng = np.random.default_rng(0)
    params = random_params(rng, 12)
    X = rng.normal(scale=5.0, size=(2, 7, 12))
    mask = causal_mask(7)
    _, weights = multi_head_attention(X, X, num_heads=3, mask=mask, **params)
    assert np.all(weights >= 0)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    assert np.all(weights[..., ~mask] == 0)


def test_a_sequence_with_no_keys_left_gets_zero_weights_and_output_b_O():
    """Chapter 2's convention for a fully masked row (nn.MultiheadAttention gives nan)."""
    rng = np.random.default_rng(0)
    params = random_params(rng, 8)
    X = rng.normal(size=(2, 3, 8))
    mask = padding_mask([3, 0], 3)[:, None]  # (2, 1, 1, 3): sequence 1 is all padding
    out, weights = multi_head_attention(X, X, num_heads=2, mask=mask, **params)
    assert np.all(weights[1] == 0)
    np.testing.assert_array_equal(out[1], np.broadcast_to(params["b_O"], (3, 8)))
    ref, _ = multi_head_attention(X[:1], X[:1], num_heads=2, **params)
    np.testing.assert_allclose(out[:1], ref, rtol=RTOL_64, atol=ATOL_64)


@pytest.mark.parametrize(
    "shape",
    [(6, 6), (1, 6), (6,), (1, 1, 6, 6), (2, 1, 6, 6), (1, 4, 6, 6), (2, 4, 6, 6)],
    ids=str,
)
def test_mask_shapes_that_broadcast_give_the_same_result(shape):
    rng = np.random.default_rng(0)
    params = random_params(rng, 8)
    X = rng.normal(size=(2, 6, 8))
    base = rng.random(shape) < 0.7
    base[..., 0] = True
    full = np.broadcast_to(base, (2, 4, 6, 6))
    out, weights = multi_head_attention(X, X, num_heads=4, mask=base, **params)
    ref_out, ref_weights = loop_over_heads(X, X, params, 4, full)
    np.testing.assert_allclose(out, ref_out, rtol=RTOL_64, atol=ATOL_64)
    np.testing.assert_allclose(weights, ref_weights, rtol=RTOL_64, atol=ATOL_64)


@PROPERTY
@given(
    num_heads=st.integers(1, 5),
    d_k=st.integers(1, 4),
    n=st.integers(1, 5),
    seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
def test_permuting_the_heads_consistently_leaves_the_output_unchanged(
    num_heads, d_k, n, seed, data
):
    """Heads are interchangeable: relabel them by moving whole blocks of d_k columns of
    W_Q, W_K, W_V (and entries of b_Q, b_K, b_V) and the same blocks of rows of W_O."""
    perm = data.draw(st.permutations(range(num_heads)))
    d_model = num_heads * d_k
    rng = np.random.default_rng(seed)
    params = random_params(rng, d_model)
    X = rng.normal(size=(2, n, d_model))
    cols = np.concatenate([np.arange(p * d_k, (p + 1) * d_k) for p in perm]).astype(int)
    permuted = {
        "W_Q": params["W_Q"][:, cols],
        "W_K": params["W_K"][:, cols],
        "W_V": params["W_V"][:, cols],
        "W_O": params["W_O"][cols, :],
        "b_Q": params["b_Q"][cols],
        "b_K": params["b_K"][cols],
        "b_V": params["b_V"][cols],
        "b_O": params["b_O"],
    }
    mask = causal_mask(n)
    out, weights = multi_head_attention(X, X, num_heads=num_heads, mask=mask, **params)
    p_out, p_weights = multi_head_attention(X, X, num_heads=num_heads, mask=mask, **permuted)
    np.testing.assert_allclose(p_out, out, rtol=RTOL_64, atol=ATOL_64)
    np.testing.assert_allclose(p_weights, weights[:, list(perm)], rtol=RTOL_64, atol=ATOL_64)


# ---------------------------------------------------------------------------
# split_heads and merge_heads
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(5, 12), (2, 5, 12), (2, 3, 5, 12)], ids=str)
@pytest.mark.parametrize("num_heads", [1, 2, 3, 4, 6, 12])
def test_split_heads_gives_each_head_a_contiguous_block_of_columns(shape, num_heads):
    X = np.random.default_rng(0).normal(size=shape)
    d_k = 12 // num_heads
    heads = split_heads(X, num_heads)
    assert heads.shape == (*shape[:-2], num_heads, shape[-2], d_k)
    assert np.shares_memory(heads, X)  # a view
    for i in range(num_heads):
        assert np.array_equal(heads[..., i, :, :], X[..., i * d_k : (i + 1) * d_k])
    merged = merge_heads(heads)
    assert merged.shape == shape
    assert np.array_equal(merged, X)


def test_merge_heads_concatenates_the_heads_side_by_side():
    heads = np.arange(2 * 3 * 2).reshape(2, 3, 2)  # (h, n, d_k) = (2, 3, 2)
    assert np.array_equal(merge_heads(heads), np.concatenate([heads[0], heads[1]], axis=-1))


# ---------------------------------------------------------------------------
# Gradients
# ---------------------------------------------------------------------------


def backward_case(seed, *, bias=True, cross=False, masked=True):
    rng = np.random.default_rng(seed)
    d_model, num_heads, batch, n = 8, 2, 2, 3
    m = 4 if cross else n
    params = random_params(rng, d_model, bias=bias)
    X_q = rng.normal(size=(batch, n, d_model))
    X_kv = rng.normal(size=(batch, m, d_model)) if cross else X_q.copy()
    mask = None
    if masked:
        mask = causal_mask(n, m)
    G = rng.normal(size=(batch, n, d_model))
    return X_q, X_kv, params, num_heads, mask, G


GRAD_CONFIGS = [
    {"bias": True, "cross": False, "masked": True},
    {"bias": True, "cross": True, "masked": False},
    {"bias": False, "cross": True, "masked": True},
]
GRAD_IDS = ["self, causal, bias", "cross, bias", "cross, causal, no bias"]


@pytest.mark.parametrize("config", GRAD_CONFIGS, ids=GRAD_IDS)
def test_backward_matches_central_differences(config):
    X_q, X_kv, params, num_heads, mask, G = backward_case(0, **config)

    def loss(X_q, X_kv, params):
        out, _ = multi_head_attention(X_q, X_kv, num_heads=num_heads, mask=mask, **params)
        return float(np.sum(G * out))

    grads = multi_head_attention_backward(
        X_q, X_kv, num_heads=num_heads, grad_output=G, mask=mask, **params
    )
    inputs = {"X_q": X_q, "X_kv": X_kv, **params}
    expected_keys = {"d" + k for k in inputs}
    assert set(grads) == expected_keys
    for name, value in inputs.items():
        fd = np.zeros_like(value)
        for idx in np.ndindex(value.shape):
            plus, minus = value.copy(), value.copy()
            plus[idx] += FD_STEP
            minus[idx] -= FD_STEP
            args = [{**inputs, name: v} for v in (plus, minus)]
            losses = [loss(a["X_q"], a["X_kv"], {k: a[k] for k in params}) for a in args]
            fd[idx] = (losses[0] - losses[1]) / (2 * FD_STEP)
        assert grads["d" + name].shape == value.shape
        np.testing.assert_allclose(grads["d" + name], fd, rtol=FD_RTOL, atol=FD_ATOL, err_msg=name)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("config", GRAD_CONFIGS, ids=GRAD_IDS)
def test_backward_matches_torch_autograd(config, dtype):
    X_q, X_kv, params, num_heads, mask, G = backward_case(1, **config)
    X_q, X_kv, G = X_q.astype(dtype), X_kv.astype(dtype), G.astype(dtype)
    params = {k: v.astype(dtype) for k, v in params.items()}
    grads = multi_head_attention_backward(
        X_q, X_kv, num_heads=num_heads, grad_output=G, mask=mask, **params
    )

    module = torch_module(params, num_heads)
    tq = torch.from_numpy(X_q).requires_grad_()
    tkv = torch.from_numpy(X_kv).requires_grad_()
    torch_mask = None if mask is None else torch.from_numpy(~mask)  # True = NOT allowed
    out, _ = module(tq, tkv, tkv, attn_mask=torch_mask, need_weights=False)
    out.backward(torch.from_numpy(G))

    d = X_q.shape[-1]
    in_grad = module.in_proj_weight.grad.numpy()  # (3 d, d): rows act as x @ W^T
    expected = {
        "dX_q": tq.grad.numpy(),
        "dX_kv": tkv.grad.numpy(),
        "dW_Q": in_grad[:d].T,
        "dW_K": in_grad[d : 2 * d].T,
        "dW_V": in_grad[2 * d :].T,
        "dW_O": module.out_proj.weight.grad.numpy().T,
    }
    if config["bias"]:
        b = module.in_proj_bias.grad.numpy()
        expected |= {
            "db_Q": b[:d],
            "db_K": b[d : 2 * d],
            "db_V": b[2 * d :],
            "db_O": module.out_proj.bias.grad.numpy(),
        }
    assert set(grads) == set(expected)
    tol = {"rtol": RTOL_GRAD, "atol": ATOL_GRAD} if dtype == np.float64 else TOL[np.float32]
    for name, value in expected.items():
        assert grads[name].dtype == dtype, name
        np.testing.assert_allclose(grads[name], value, **tol, err_msg=name)


def test_self_attention_gradient_is_the_sum_of_both_paths():
    """With X_q = X_kv = X, dL/dX = dX_q + dX_kv (X enters through Q, K and V)."""
    X, _, params, num_heads, mask, G = backward_case(2, cross=False)
    grads = multi_head_attention_backward(
        X, X, num_heads=num_heads, grad_output=G, mask=mask, **params
    )
    tx = torch.from_numpy(X).requires_grad_()
    out, _ = torch_module(params, num_heads)(
        tx, tx, tx, attn_mask=torch.from_numpy(~mask), need_weights=False
    )
    out.backward(torch.from_numpy(G))
    np.testing.assert_allclose(
        grads["dX_q"] + grads["dX_kv"], tx.grad.numpy(), rtol=RTOL_GRAD, atol=ATOL_GRAD
    )


def test_backward_of_a_broadcast_memory_sums_over_the_batch():
    rng = np.random.default_rng(3)
    params = random_params(rng, 8)
    X_q, memory, G = rng.normal(size=(3, 4, 8)), rng.normal(size=(5, 8)), rng.normal(size=(3, 4, 8))
    grads = multi_head_attention_backward(X_q, memory, num_heads=2, grad_output=G, **params)
    tiled = np.broadcast_to(memory, (3, 5, 8)).copy()
    ref = multi_head_attention_backward(X_q, tiled, num_heads=2, grad_output=G, **params)
    assert grads["dX_kv"].shape == memory.shape
    np.testing.assert_allclose(grads["dX_kv"], ref["dX_kv"].sum(axis=0), rtol=RTOL_64, atol=ATOL_64)
    for name in ("dW_Q", "dW_K", "dW_V", "dW_O", "db_K", "db_V"):
        np.testing.assert_allclose(grads[name], ref[name], rtol=RTOL_64, atol=ATOL_64)


# ---------------------------------------------------------------------------
# Grouped-query attention
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("num_heads", [1, 2, 4])
def test_gqa_with_as_many_kv_heads_as_heads_is_mha(seed, num_heads):
    rng = np.random.default_rng(seed)
    params = random_params(rng, 8)
    X = rng.normal(size=(2, 5, 8))
    mask = causal_mask(5)
    gqa = grouped_query_attention(
        X, X, num_heads=num_heads, num_kv_heads=num_heads, mask=mask, **params
    )
    mha = multi_head_attention(X, X, num_heads=num_heads, mask=mask, **params)
    assert np.array_equal(gqa[0], mha[0])
    assert np.array_equal(gqa[1], mha[1])


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("masked", [False, True], ids=["no mask", "causal"])
def test_multi_query_attention_by_hand(seed, masked):
    """num_kv_heads = 1: every query head attends with the same K = X W_K and V = X W_V."""
    rng = np.random.default_rng(seed)
    d_model, num_heads, n = 12, 4, 5
    d_k = d_model // num_heads
    params = random_params(rng, d_model, num_heads=num_heads, num_kv_heads=1)
    assert params["W_K"].shape == params["W_V"].shape == (d_model, d_k)
    X = rng.normal(size=(n, d_model))
    mask = causal_mask(n) if masked else None
    out, weights = grouped_query_attention(
        X, X, num_heads=num_heads, num_kv_heads=1, mask=mask, **params
    )
    Q = X @ params["W_Q"] + params["b_Q"]
    K = X @ params["W_K"] + params["b_K"]  # (n, d_k): one key head for everybody
    V = X @ params["W_V"] + params["b_V"]
    heads = [
        plain_softmax_attention(Q[:, i * d_k : (i + 1) * d_k], K, V, mask) for i in range(num_heads)
    ]
    ref = np.concatenate([head for head, _ in heads], axis=-1) @ params["W_O"] + params["b_O"]
    assert out.shape == (n, d_model) and weights.shape == (num_heads, n, n)
    np.testing.assert_allclose(out, ref, rtol=RTOL_64, atol=ATOL_64)
    np.testing.assert_allclose(weights, np.stack([a for _, a in heads]), rtol=RTOL_64, atol=ATOL_64)


@pytest.mark.parametrize(("num_heads", "num_kv_heads"), [(4, 2), (6, 3), (6, 2), (8, 4)])
@pytest.mark.parametrize("mask_shape", [None, (5, 5), (2, 1, 5, 5), "per-head"])
def test_gqa_query_head_i_uses_kv_head_i_over_group_size(num_heads, num_kv_heads, mask_shape):
    """Reference: MHA with each key/value head's columns repeated for its group."""
    rng = np.random.default_rng(num_heads * 10 + num_kv_heads)
    d_k, group = 2, num_heads // num_kv_heads
    d_model = num_heads * d_k
    params = random_params(rng, d_model, num_heads=num_heads, num_kv_heads=num_kv_heads)
    X_q, X_kv = rng.normal(size=(2, 5, d_model)), rng.normal(size=(2, 5, d_model))
    mask = None
    if mask_shape is not None:
        shape = (2, num_heads, 5, 5) if mask_shape == "per-head" else mask_shape
        mask = rng.random(shape) < 0.6
        mask[..., 0] = True
    out, weights = grouped_query_attention(
        X_q, X_kv, num_heads=num_heads, num_kv_heads=num_kv_heads, mask=mask, **params
    )
    ref_out, ref_weights = loop_over_heads(
        X_q, X_kv, params, num_heads, mask, kv_head_of=lambda i: i // group
    )
    np.testing.assert_allclose(out, ref_out, rtol=RTOL_64, atol=ATOL_64)
    np.testing.assert_allclose(weights, ref_weights, rtol=RTOL_64, atol=ATOL_64)


@pytest.mark.parametrize(("num_heads", "num_kv_heads"), [(4, 1), (4, 2), (8, 2)])
def test_gqa_grouping_matches_torch_enable_gqa(num_heads, num_kv_heads):
    """PyTorch's scaled_dot_product_attention(enable_gqa=True) uses the same grouping."""
    rng = np.random.default_rng(7)
    d_model, n = 16, 6
    d_k = d_model // num_heads
    params = random_params(rng, d_model, num_heads=num_heads, num_kv_heads=num_kv_heads)
    X = rng.normal(size=(2, n, d_model))
    out, _ = grouped_query_attention(
        X, X, num_heads=num_heads, num_kv_heads=num_kv_heads, mask=causal_mask(n), **params
    )

    def heads(name, count):  # (b, count, n, d_k)
        Y = torch.from_numpy(X @ params["W_" + name] + params["b_" + name])
        return Y.reshape(2, n, count, d_k).transpose(1, 2)

    with torch.no_grad():
        o = F.scaled_dot_product_attention(
            heads("Q", num_heads),
            heads("K", num_kv_heads),
            heads("V", num_kv_heads),
            attn_mask=torch.from_numpy(causal_mask(n)),  # F.sdpa: True = may attend
            enable_gqa=True,
        )
    ref = o.transpose(1, 2).reshape(2, n, d_model).numpy() @ params["W_O"] + params["b_O"]
    np.testing.assert_allclose(out, ref, rtol=RTOL_64, atol=ATOL_64)


# ---------------------------------------------------------------------------
# Initialisation, parameter counts, KV cache
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("num_heads", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("bias", [True, False])
def test_parameter_count_matches_torch_and_does_not_depend_on_heads(num_heads, bias):
    d_model = 64
    module = torch.nn.MultiheadAttention(d_model, num_heads, bias=bias)
    expected = sum(p.numel() for p in module.parameters())
    assert mha_parameter_count(d_model, num_heads, bias=bias) == expected
    assert expected == 4 * d_model**2 + (4 * d_model if bias else 0)
    params = init_mha_params(d_model, rng=np.random.default_rng(0), bias=bias)
    assert sum(p.size for p in params.values()) == expected


@pytest.mark.parametrize(
    ("d_model", "num_heads", "num_kv_heads"), [(64, 8, 8), (64, 8, 4), (64, 8, 1), (48, 6, 3)]
)
@pytest.mark.parametrize("bias", [True, False])
def test_gqa_parameter_count_is_the_size_of_its_weights(d_model, num_heads, num_kv_heads, bias):
    d_k = d_model // num_heads
    count = mha_parameter_count(d_model, num_heads, bias=bias, num_kv_heads=num_kv_heads)
    kv = num_kv_heads * d_k
    assert count == 2 * d_model**2 + 2 * d_model * kv + (2 * d_model + 2 * kv if bias else 0)
    params = init_mha_params(
        d_model,
        rng=np.random.default_rng(0),
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        bias=bias,
    )
    assert sum(p.size for p in params.values()) == count


@pytest.mark.parametrize(
    ("n", "d_model", "num_heads", "num_kv_heads", "num_layers", "expected"),
    [
        (1024, 512, 8, None, 1, 2 * 1024 * 512),
        (1024, 512, 8, 8, 1, 2 * 1024 * 512),
        (1024, 512, 8, 2, 1, 2 * 1024 * 128),
        (1024, 512, 8, 1, 1, 2 * 1024 * 64),
        (4096, 4096, 32, 8, 32, 2 * 32 * 4096 * 1024),  # a Llama-2-70B-like layer shape
        (0, 64, 4, 2, 3, 0),
    ],
)
def test_kv_cache_elements(n, d_model, num_heads, num_kv_heads, num_layers, expected):
    assert kv_cache_elements(n, d_model, num_heads, num_kv_heads, num_layers) == expected


@pytest.mark.parametrize(("num_heads", "num_kv_heads"), [(4, 4), (4, 2), (4, 1)])
def test_kv_cache_is_the_size_of_the_projected_keys_and_values(num_heads, num_kv_heads):
    n, d_model, layers = 7, 16, 3
    p = init_mha_params(
        d_model, rng=np.random.default_rng(0), num_heads=num_heads, num_kv_heads=num_kv_heads
    )
    X = np.ones((n, d_model))
    per_layer = (X @ p["W_K"]).size + (X @ p["W_V"]).size
    assert (
        kv_cache_elements(n, d_model, num_heads, num_kv_heads, num_layers=layers)
        == layers * per_layer
    )


def test_init_uses_the_distributions_of_torch_multihead_attention():
    d_model = 256
    params = init_mha_params(d_model, rng=np.random.default_rng(0))
    module = torch.nn.MultiheadAttention(d_model, 8)
    in_bound = math.sqrt(6 / (d_model + 3 * d_model))  # xavier_uniform_ on (3d, d)
    out_bound = 1 / math.sqrt(d_model)  # nn.Linear's default (kaiming_uniform_, a=√5)
    torch_in = module.in_proj_weight.detach().numpy()
    torch_out = module.out_proj.weight.detach().numpy()
    # Uniform(-a, a): the sample maximum of 65536 draws is within 0.1% of a, and the
    # variance a²/3 is estimated to ~1% (4 standard errors).
    for ours, theirs, bound in (
        (np.concatenate([params[k] for k in ("W_Q", "W_K", "W_V")], axis=1), torch_in, in_bound),
        (params["W_O"], torch_out, out_bound),
    ):
        for sample in (ours, theirs):
            assert np.abs(sample).max() <= bound
            assert np.abs(sample).max() > 0.999 * bound
            np.testing.assert_allclose(sample.var(), bound**2 / 3, rtol=0.03)
    for name in BIAS_NAMES:
        assert np.array_equal(params[name], np.zeros(d_model))
    assert not module.in_proj_bias.detach().numpy().any()
    assert not module.out_proj.bias.detach().numpy().any()


def test_init_is_reproducible_and_respects_dtype_and_bias():
    a = init_mha_params(8, rng=np.random.default_rng(5))
    b = init_mha_params(8, rng=np.random.default_rng(5))
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert list(a) == ["W_Q", "W_K", "W_V", "W_O", *BIAS_NAMES]
    c = init_mha_params(8, rng=np.random.default_rng(5), bias=False, dtype=np.float32)
    assert list(c) == ["W_Q", "W_K", "W_V", "W_O"]
    assert all(v.dtype == np.float32 and v.flags.c_contiguous for v in c.values())
    np.testing.assert_allclose(c["W_Q"], a["W_Q"], rtol=1e-7)
    # the same draw whatever the number of heads: MHA's weights do not depend on it
    d = init_mha_params(8, rng=np.random.default_rng(5), num_heads=4, num_kv_heads=4)
    assert all(np.array_equal(a[k], d[k]) for k in a)


# ---------------------------------------------------------------------------
# dtypes
# ---------------------------------------------------------------------------


def test_integer_inputs_become_float64_and_mixed_inputs_promote():
    rng = np.random.default_rng(0)
    params = random_params(rng, 4, bias=False)
    X = rng.integers(-3, 4, size=(3, 4))
    out, weights = multi_head_attention(X, X, num_heads=2, **params)
    assert out.dtype == weights.dtype == np.float64
    ref, _ = multi_head_attention(X.astype(float), X.astype(float), num_heads=2, **params)
    np.testing.assert_array_equal(out, ref)
    p32 = {k: v.astype(np.float32) for k, v in params.items()}
    out, _ = multi_head_attention(X.astype(np.float32), X.astype(np.float32), num_heads=2, **p32)
    assert out.dtype == np.float32
    mixed, _ = multi_head_attention(X.astype(np.float32), X, num_heads=2, **p32)
    assert mixed.dtype == np.float64


def test_inputs_are_not_modified():
    rng = np.random.default_rng(0)
    params = random_params(rng, 8)
    X, G = rng.normal(size=(2, 3, 8)), rng.normal(size=(2, 3, 8))
    copies = {k: v.copy() for k, v in {**params, "X": X, "G": G}.items()}
    multi_head_attention(X, X, num_heads=2, **params)
    multi_head_attention_backward(X, X, num_heads=2, grad_output=G, **params)
    grouped_query_attention(X, X, num_heads=2, num_kv_heads=2, **params)
    for k, v in {**params, "X": X, "G": G}.items():
        assert np.array_equal(v, copies[k]), k


# ---------------------------------------------------------------------------
# Errors name the arguments and the shapes
# ---------------------------------------------------------------------------


def _call(fn="mha", *, d=8, h=2, h_kv=None, change=None):
    rng = np.random.default_rng(0)
    kv = {} if h_kv is None else {"num_heads": h, "num_kv_heads": h_kv}
    p = init_mha_params(d, rng=rng, **kv)
    args = {"X_q": rng.normal(size=(2, 3, d)), "X_kv": rng.normal(size=(2, 4, d)), **p}
    args["num_heads"] = h
    if fn == "gqa":
        args["num_kv_heads"] = h_kv
    if fn == "backward":
        args["grad_output"] = np.zeros((2, 3, d))
    args.update(change or {})
    f = {
        "mha": multi_head_attention,
        "gqa": grouped_query_attention,
        "backward": multi_head_attention_backward,
    }[fn]
    return f(**args)


ERROR_CASES = [
    # (fn, kwargs of _call, exception, message)
    ("mha", {"h": 3}, ValueError, r"d_model = 8 is not divisible by num_heads = 3"),
    ("mha", {"change": {"num_heads": 0}}, ValueError, r"num_heads must be positive, got 0"),
    ("mha", {"change": {"num_heads": -2}}, ValueError, r"num_heads must be positive, got -2"),
    ("mha", {"change": {"num_heads": 2.0}}, TypeError, r"num_heads must be an integer, got 2.0"),
    ("mha", {"change": {"num_heads": True}}, TypeError, r"num_heads must be an integer"),
    (
        "mha",
        {"change": {"W_Q": np.zeros((8, 6))}},
        ValueError,
        r"W_Q must have shape \(d_model, d_model\) = \(8, 8\), got \(8, 6\)",
    ),
    (
        "mha",
        {"change": {"W_O": np.zeros((8, 8, 1))}},
        ValueError,
        r"W_O must have shape \(d_model, d_model\) = \(8, 8\), got \(8, 8, 1\)",
    ),
    (
        "mha",
        {"change": {"b_K": np.zeros((1, 8))}},
        ValueError,
        r"b_K must have shape \(d_model,\) = \(8,\), got \(1, 8\)",
    ),
    (
        "mha",
        {"change": {"X_kv": np.zeros((2, 4, 6))}},
        ValueError,
        r"X_q and X_kv must have the same width d_model .*X_q.shape = \(2, 3, 8\), "
        r"X_kv.shape = \(2, 4, 6\)",
    ),
    (
        "mha",
        {"change": {"X_kv": np.zeros((3, 4, 8))}},
        ValueError,
        r"batch shapes of X_q and X_kv do not broadcast: X_q.shape = \(2, 3, 8\), "
        r"X_kv.shape = \(3, 4, 8\)",
    ),
    (
        "mha",
        {"change": {"X_q": np.zeros(8)}},
        ValueError,
        r"X_q must have shape \(\.\.\., n, d_model\)",
    ),
    ("mha", {"change": {"X_kv": np.zeros((2, 0, 8))}}, ValueError, r"X_kv has no keys"),
    ("mha", {"change": {"X_q": np.full((2, 3, 8), np.nan)}}, ValueError, r"Q must be finite"),
    ("mha", {"change": {"X_q": np.zeros((2, 3, 8), dtype=bool)}}, TypeError, r"X_q must be .*bool"),
    ("mha", {"change": {"W_V": np.zeros((8, 8), dtype=complex)}}, TypeError, r"W_V .*complex"),
    (
        "mha",
        {"change": {"mask": np.ones((2, 3, 4), dtype=bool)}},
        ValueError,
        r"mask.shape = \(2, 3, 4\) does not match .* \(2, 2, 3, 4\).*insert the head axis: "
        r"mask\[:, None\]",
    ),
    (
        "mha",
        {"change": {"mask": np.ones((1, 2, 2, 3, 4), dtype=bool)}},
        ValueError,
        r"mask.shape = \(1, 2, 2, 3, 4\) does not match .*one axis per axis of the weights$",
    ),
    (
        "mha",
        {"change": {"mask": np.ones((2, 3, 3, 4), dtype=bool)}},
        ValueError,
        r"mask.shape = \(2, 3, 3, 4\) does not broadcast to the attention weights",
    ),
    (
        "mha",
        {"change": {"mask": np.ones((3, 5), dtype=bool)}},
        ValueError,
        r"mask.shape = \(3, 5\) does not broadcast",
    ),
    ("mha", {"change": {"mask": np.array([["a"] * 4] * 3)}}, TypeError, r"mask must be a boolean"),
    (
        "gqa",
        {"h": 4, "h_kv": 4, "change": {"num_kv_heads": 3}},
        ValueError,
        r"num_heads = 4 is not divisible by num_kv_heads = 3",
    ),
    (
        "gqa",
        {"h": 4, "h_kv": 4, "change": {"num_kv_heads": 0}},
        ValueError,
        r"num_kv_heads must be positive",
    ),
    (
        "gqa",
        {"h": 4, "h_kv": 2, "change": {"num_kv_heads": 1}},
        ValueError,
        r"W_K must have shape \(d_model, num_kv_heads \* d_k\) = \(8, 2\), got \(8, 4\)",
    ),
    (
        "gqa",
        {"h": 4, "h_kv": 2, "change": {"b_V": np.zeros(8)}},
        ValueError,
        r"b_V must have shape \(num_kv_heads \* d_k,\) = \(4,\), got \(8,\)",
    ),
    (
        "backward",
        {"change": {"grad_output": np.zeros((2, 4, 8))}},
        ValueError,
        r"grad_output must have the output's shape \(\.\.\., n, d_model\) = \(2, 3, 8\), "
        r"got \(2, 4, 8\)",
    ),
]


@pytest.mark.parametrize(
    ("fn", "kwargs", "exception", "message"),
    ERROR_CASES,
    ids=[f"{c[0]}: {c[3][:40]}" for c in ERROR_CASES],
)
def test_bad_input_raises_naming_the_arguments(fn, kwargs, exception, message):
    with pytest.raises(exception, match=message):
        _call(fn, **kwargs)


@pytest.mark.parametrize(
    ("call", "exception", "message"),
    [
        (lambda: split_heads(np.zeros((3, 10)), 4), ValueError, r"d_model = 10 .*num_heads = 4"),
        (
            lambda: split_heads(np.zeros(8), 2),
            ValueError,
            r"X must have shape \(\.\.\., n, d_model\)",
        ),
        (lambda: split_heads(np.zeros((3, 8)), 0), ValueError, r"num_heads must be positive"),
        (
            lambda: merge_heads(np.zeros((3, 8))),
            ValueError,
            r"X must have shape \(\.\.\., h, n, d_k\)",
        ),
        (lambda: mha_parameter_count(10, 4), ValueError, r"d_model = 10 is not divisible"),
        (lambda: mha_parameter_count(8, 4, num_kv_heads=3), ValueError, r"num_heads = 4 is not"),
        (lambda: mha_parameter_count(0, 1), ValueError, r"d_model must be positive, got 0"),
        (lambda: mha_parameter_count(8.0, 2), TypeError, r"d_model must be an integer"),
        (lambda: kv_cache_elements(-1, 8, 2), ValueError, r"n must be >= 0, got -1"),
        (lambda: kv_cache_elements(4, 8, 2, 1, 0), ValueError, r"num_layers must be positive"),
        (
            lambda: init_mha_params(8, rng=np.random.RandomState(0)),
            TypeError,
            r"rng must be a numpy.random.Generator.*got RandomState",
        ),
        (
            lambda: init_mha_params(8, rng=np.random.default_rng(), dtype=np.int64),
            TypeError,
            r"dtype must be a floating dtype",
        ),
        (
            lambda: init_mha_params(8, rng=np.random.default_rng(), num_kv_heads=2),
            ValueError,
            r"num_kv_heads needs num_heads",
        ),
        (
            lambda: init_mha_params(8, rng=np.random.default_rng(), num_heads=3),
            ValueError,
            r"d_model = 8 is not divisible by num_heads = 3",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_helpers_reject_bad_input(call, exception, message):
    with pytest.raises(exception, match=message):
        call()
