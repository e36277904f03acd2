"""Tests of helpers.circuits: PyTorch parity of the model and its gradients, the scores,
ablation, the batch generator's statistics, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.circuits import (
    attention_only_backward,
    attention_only_forward,
    composition_score,
    init_attention_only_params,
    k_composition_scores,
    prefix_matching_score,
    previous_token_score,
    repeated_token_batch,
)

# Float64 against PyTorch's float64: the two sum in different orders; the results differ
# by a few hundred ulps of O(1) numbers at most (~1e-13), far below any slip.
PARITY = {"rtol": 1e-10, "atol": 1e-10}


def torch_model(tokens, params, num_heads, ablate=()):
    """The same model written with torch.nn.MultiheadAttention, in float64, with autograd."""
    T = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    t = torch.as_tensor(tokens)
    n = t.shape[1]
    d = T["W_E"].shape[1]
    layers = sum(k.startswith("W_Q") for k in T)
    X = T["W_E"][t] + T["W_pos"][:n]
    attn_mask = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)  # True = hidden
    weights = []
    for layer in range(layers):
        mha = torch.nn.MultiheadAttention(d, num_heads, bias=False, batch_first=True)
        mha = mha.double()
        # MHA computes x W^T with (out, in) weights; ours are (in, out), so transpose,
        # and write them through functional_call so that gradients reach T.
        W_in = torch.cat([T[f"W_Q{layer}"].T, T[f"W_K{layer}"].T, T[f"W_V{layer}"].T])
        Z, A = torch.func.functional_call(
            mha,
            {"in_proj_weight": W_in, "out_proj.weight": torch.eye(d, dtype=torch.float64)},
            (X, X, X),
            {"attn_mask": attn_mask, "need_weights": True, "average_attn_weights": False},
        )
        dh = d // num_heads
        keep = torch.ones(d, dtype=torch.float64)
        for la, h in ablate:
            if la == layer:
                keep[h * dh : (h + 1) * dh] = 0
        X = X + (Z * keep) @ T[f"W_O{layer}"]
        weights.append(A)
    return X @ T["W_U"], torch.stack(weights), T


@pytest.mark.parametrize(
    ("vocab", "d", "h", "layers", "n", "ablate"),
    [(7, 8, 2, 2, 6, ()), (5, 12, 3, 1, 9, ()), (9, 8, 4, 3, 5, ((1, 2), (0, 0)))],
)
def test_forward_and_backward_match_pytorch(vocab, d, h, layers, n, ablate):
    rng = np.random.default_rng(vocab + d + n)
    params = init_attention_only_params(vocab, d, h, layers, n + 2, rng=rng)
    tokens = rng.integers(0, vocab + 1, size=(3, n))
    logits, cache = attention_only_forward(tokens, params, num_heads=h, ablate=ablate)
    G = rng.standard_normal(logits.shape)
    grads = attention_only_backward(G, cache)
    t_logits, t_weights, T = torch_model(tokens, params, h, ablate)
    np.testing.assert_allclose(logits, t_logits.detach().numpy(), **PARITY)
    np.testing.assert_allclose(cache["weights"], t_weights.detach().numpy(), **PARITY)
    (t_logits * torch.from_numpy(G)).sum().backward()
    assert set(grads) == set(params)
    for k in params:
        np.testing.assert_allclose(grads[k], T[k].grad.numpy(), **PARITY, err_msg=k)


def test_ablation_equals_zeroing_the_head_by_hand():
    rng = np.random.default_rng(3)
    params = init_attention_only_params(11, 12, 3, 2, 10, rng=rng)
    tokens = rng.integers(0, 12, size=(4, 10))
    ablated, cache = attention_only_forward(tokens, params, num_heads=3, ablate=[(0, 1)])
    # by hand: zero the rows of W_O that head 1 of layer 0 writes through
    by_hand = {k: v.copy() for k, v in params.items()}
    by_hand["W_O0"][4:8] = 0.0
    expected, _ = attention_only_forward(tokens, by_hand, num_heads=3)
    np.testing.assert_allclose(ablated, expected, rtol=0, atol=1e-13)
    full, _ = attention_only_forward(tokens, params, num_heads=3)
    assert np.abs(full - ablated).max() > 1e-3  # the head did contribute
    # the ablated head's output parameters get no gradient
    grads = attention_only_backward(np.ones_like(ablated), cache)
    assert (grads["W_O0"][4:8] == 0).all() and (grads["W_V0"][:, 4:8] == 0).all()


def test_ablating_every_head_leaves_the_direct_path():
    rng = np.random.default_rng(4)
    params = init_attention_only_params(6, 8, 2, 2, 5, rng=rng)
    tokens = rng.integers(0, 7, size=(2, 5))
    every = [(la, h) for la in range(2) for h in range(2)]
    logits, _ = attention_only_forward(tokens, params, num_heads=2, ablate=every)
    direct = (params["W_E"][tokens] + params["W_pos"][:5]) @ params["W_U"]
    np.testing.assert_allclose(logits, direct, rtol=1e-12, atol=1e-12)


def test_scores_on_hand_made_patterns():
    n = 6
    tokens = np.array([[9, 1, 2, 3, 1, 2], [9, 4, 4, 5, 6, 7]])
    prev = np.broadcast_to(np.eye(n, k=-1), (2, n, n)).copy()
    prev[:, 0, 0] = 1.0
    uniform = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    induct = np.zeros((2, n, n))
    induct[:, :, 0] = 1.0  # default: the first token
    induct[0, 4] = 0.0
    induct[0, 4, 2] = 1.0  # token 1 at 4: after its copy at 1 comes position 2
    induct[0, 5] = 0.0
    induct[0, 5, 3] = 1.0  # token 2 at 5: after its copy at 2 comes position 3
    induct[1, 2] = 0.0
    induct[1, 2, 2] = 1.0  # token 4 at 2: after its copy at 1 comes position 2 (itself)
    W = np.stack([np.stack([prev, np.broadcast_to(uniform, (2, n, n)), induct], axis=1)])
    ps = previous_token_score(W)
    pm = prefix_matching_score(W, tokens)
    assert ps.shape == pm.shape == (1, 3)
    np.testing.assert_allclose(ps[0, 0], 1.0)
    np.testing.assert_allclose(ps[0, 1], np.mean(1 / np.arange(2, n + 1)))
    np.testing.assert_allclose(pm[0, 2], 1.0)
    # the three queries with an earlier copy: (0, 4) -> 2, (0, 5) -> 3, (1, 2) -> 2
    np.testing.assert_allclose(pm[0, 1], (1 / 5 + 1 / 6 + 1 / 3) / 3)
    np.testing.assert_allclose(pm[0, 0], 0.0)  # a previous-token head looks one too far back


def test_prefix_matching_sums_over_every_earlier_copy():
    tokens = np.array([[9, 1, 5, 1, 6, 1]])  # query 5 has copies at 1 and 3: targets 2, 4
    A = np.zeros((1, 1, 1, 6, 6))
    A[..., 5, 2] = A[..., 5, 4] = 0.5
    A[..., 3, 2] = 1.0
    np.testing.assert_allclose(prefix_matching_score(A, tokens), [[1.0]])


@pytest.mark.parametrize(("lo", "hi"), [(2, 2), (3, 9)])
def test_repeated_token_batch_statistics(lo, hi):
    rng = np.random.default_rng(5)
    vocab, n, B = 10, 20, 4000
    tokens, predictable = repeated_token_batch(B, n, vocab, rng=rng, min_period=lo, max_period=hi)
    assert tokens.dtype == np.int64 and tokens.shape == (B, n) and predictable.shape == (B, n - 1)
    assert (tokens[:, 0] == vocab).all() and tokens[:, 1:].max() < vocab
    counts = predictable.sum(1)
    assert counts.min() == lo - 1 and counts.max() == hi - 1  # p - 1 predictable per sequence
    assert abs(counts.mean() - ((lo + hi) / 2 - 1)) < 0.1
    # every predictable next token follows an earlier copy of the current token, p back
    b, i = np.nonzero(predictable)
    p = counts[b] + 1
    assert (tokens[b, i + 1] == tokens[b, i + 1 - p]).all()
    assert (tokens[b, i] == tokens[b, i - p]).all()
    # the other tokens are uniform over the vocabulary (chi-square-like bound)
    free = tokens[:, 1:][~np.pad(predictable, ((0, 0), (1, 0)))[:, 1:]]
    freq = np.bincount(free, minlength=vocab) / free.size
    assert np.abs(freq - 1 / vocab).max() < 0.01
    # the start of the repeat varies: the first predictable position takes many values
    first = np.argmax(predictable, axis=1)
    assert len(np.unique(first)) > 5


def test_loss_of_a_uniform_guess_on_unpredictable_tokens_is_log_v():
    # a model with zero unembedding predicts uniformly: its loss is exactly log V
    rng = np.random.default_rng(6)
    params = init_attention_only_params(13, 8, 2, 2, 12, rng=rng)
    params["W_U"][:] = 0
    tokens, _ = repeated_token_batch(3, 12, 13, rng=rng, min_period=2, max_period=5)
    logits, _ = attention_only_forward(tokens, params, num_heads=2)
    np.testing.assert_allclose(logits, 0.0)


def test_k_composition_score_definition():
    rng = np.random.default_rng(7)
    params = init_attention_only_params(5, 8, 2, 2, 4, rng=rng)
    scores = k_composition_scores(params, num_heads=2)
    W_QK = params["W_Q1"][:, 4:] @ params["W_K1"][:, 4:].T  # head 1 of layer 1
    W_OV = params["W_V0"][:, :4] @ params["W_O0"][:4]  # head 0 of layer 0
    expected = np.linalg.norm(W_QK @ W_OV.T) / (np.linalg.norm(W_QK) * np.linalg.norm(W_OV))
    np.testing.assert_allclose(scores[1, 0], expected, rtol=1e-12)
    assert ((scores > 0) & (scores <= 1)).all()
    assert composition_score(np.eye(3), np.eye(3)) == pytest.approx(1 / np.sqrt(3))


def test_extreme_weights_give_finite_logits_and_gradients():
    rng = np.random.default_rng(8)
    params = init_attention_only_params(7, 8, 2, 2, 6, rng=rng)
    params["W_Q1"] *= 300.0  # scores of order 1e4: saturated softmax
    tokens = rng.integers(0, 8, size=(2, 6))
    logits, cache = attention_only_forward(tokens, params, num_heads=2)
    grads = attention_only_backward(np.ones_like(logits), cache)
    assert np.isfinite(logits).all() and all(np.isfinite(g).all() for g in grads.values())


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda p: attention_only_forward(np.array([[8, 1]]), p, num_heads=2), "tokens"),
        (lambda p: attention_only_forward(np.array([[-1, 1]]), p, num_heads=2), "tokens"),
        (lambda p: attention_only_forward(np.array([[1.0, 2.0]]), p, num_heads=2), "tokens"),
        (lambda p: attention_only_forward(np.zeros((1, 6), int), p, num_heads=2), "max_len"),
        (lambda p: attention_only_forward(np.array([[1, 2]]), p, num_heads=3), "num_heads"),
        (
            lambda p: attention_only_forward(np.array([[1, 2]]), p, num_heads=2, ablate=[(2, 0)]),
            "ablate",
        ),
        (
            lambda p: attention_only_forward(np.array([[1, 2]]), p, num_heads=2, ablate=[(0, 2)]),
            "ablate",
        ),
        (
            lambda p: attention_only_forward(np.array([[1, 2]]), {"W_E": p["W_E"]}, num_heads=2),
            "W_pos",
        ),
        (
            lambda p: repeated_token_batch(
                2, 10, 5, rng=np.random.default_rng(0), min_period=2, max_period=5
            ),
            "max_period",
        ),
        (
            lambda p: repeated_token_batch(
                2, 10, 5, rng=np.random.default_rng(0), min_period=4, max_period=3
            ),
            "min_period",
        ),
        (lambda p: repeated_token_batch(2, 10, 5, rng=0, min_period=1, max_period=2), "rng"),
        (lambda p: previous_token_score(np.ones((2, 3, 3))), "weights"),
        (lambda p: prefix_matching_score(np.ones((1, 1, 1, 3, 3)), np.ones((2, 3), int)), "tokens"),
        (
            lambda p: init_attention_only_params(5, 6, 4, 1, 3, rng=np.random.default_rng(0)),
            "num_heads",
        ),
    ],
)
def test_bad_input_names_the_argument(call, words):
    params = init_attention_only_params(7, 4, 2, 2, 5, rng=np.random.default_rng(0))
    with pytest.raises((TypeError, ValueError), match=words):
        call(params)


def test_backward_rejects_a_gradient_of_the_wrong_shape():
    params = init_attention_only_params(7, 4, 2, 1, 5, rng=np.random.default_rng(0))
    _, cache = attention_only_forward(np.array([[7, 1, 2]]), params, num_heads=2)
    with pytest.raises(ValueError, match="grad_logits"):
        attention_only_backward(np.ones((1, 3, 6)), cache)
