"""Tests of helpers.circuits: PyTorch parity of the model, its gradients and its training,
the scores, zero- and mean-ablation, the copying score, the batch generator's statistics,
bad input, and chapter 8's script of seeds."""

from __future__ import annotations

import ast
import sys

import numpy as np
import pytest
import torch

from helpers.circuits import (
    attention_only_backward,
    attention_only_forward,
    composition_score,
    copying_score,
    head_output_means,
    init_attention_only_params,
    k_composition_scores,
    phase_change_step,
    prefix_matching_score,
    previous_token_score,
    repeated_token_batch,
    train_attention_only,
)
from tests.notebook_bootstrap import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import ch8_seeds

# Float64 against PyTorch's float64: the two sum in different orders; the results differ
# by a few hundred ulps of O(1) numbers at most (~1e-13), far below any slip.
PARITY = {"rtol": 1e-10, "atol": 1e-10}


def torch_model(tokens, params, num_heads, ablate=(), replacement=None, T=None):
    """The same model written with torch.nn.MultiheadAttention, in float64, with autograd.

    An ablated head's output (before W_O) is replaced by zeros, or by ``replacement[layer,
    head]`` ((n, d_v) per head) when given. ``T``: the parameters as tensors (made from
    ``params`` when None)."""
    if T is None:
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
        instead = torch.zeros(n, d, dtype=torch.float64)
        for la, h in ablate:
            if la == layer:
                keep[h * dh : (h + 1) * dh] = 0
                if replacement is not None:
                    instead[:, h * dh : (h + 1) * dh] = torch.from_numpy(replacement[la, h])
        X = X + (Z * keep + instead) @ T[f"W_O{layer}"]
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


# ---------------------------------------------------------------------------
# Mean-ablation
# ---------------------------------------------------------------------------


def test_mean_ablation_matches_pytorch_forward_and_backward():
    rng = np.random.default_rng(11)
    params = init_attention_only_params(9, 12, 3, 2, 8, rng=rng)
    tokens = rng.integers(0, 10, size=(4, 7))
    ref = rng.integers(0, 10, size=(6, 7))
    _, ref_cache = attention_only_forward(ref, params, num_heads=3)
    means = head_output_means(ref_cache)
    ablate = ((0, 1), (1, 2))
    logits, cache = attention_only_forward(
        tokens, params, num_heads=3, ablate=ablate, replacement=means
    )
    G = rng.standard_normal(logits.shape)
    grads = attention_only_backward(G, cache)
    t_logits, _, T = torch_model(tokens, params, 3, ablate, means)
    np.testing.assert_allclose(logits, t_logits.detach().numpy(), **PARITY)
    (t_logits * torch.from_numpy(G)).sum().backward()
    for k in params:
        np.testing.assert_allclose(grads[k], T[k].grad.numpy(), **PARITY, err_msg=k)
    zeroed, _ = attention_only_forward(tokens, params, num_heads=3, ablate=ablate)
    assert np.abs(logits - zeroed).max() > 1e-3  # the means are not zero


def test_head_output_means_are_the_batch_means_of_each_head():
    rng = np.random.default_rng(12)
    params = init_attention_only_params(7, 8, 2, 2, 6, rng=rng)
    tokens = rng.integers(0, 8, size=(5, 6))
    _, cache = attention_only_forward(tokens, params, num_heads=2)
    means = head_output_means(cache)
    assert means.shape == (2, 2, 6, 4)
    for layer in range(2):
        for r in range(2):
            expected = cache["Z"][layer][:, :, 4 * r : 4 * (r + 1)].mean(axis=0)
            np.testing.assert_allclose(means[layer, r], expected, rtol=1e-14, atol=1e-15)


def test_zero_replacement_is_zero_ablation_and_own_mean_changes_nothing():
    rng = np.random.default_rng(13)
    params = init_attention_only_params(7, 8, 2, 2, 6, rng=rng)
    tokens = rng.integers(0, 8, size=(3, 6))
    ablate = [(0, 0), (1, 1)]
    zeroed, _ = attention_only_forward(tokens, params, num_heads=2, ablate=ablate)
    by_zeros, _ = attention_only_forward(
        tokens, params, num_heads=2, ablate=ablate, replacement=np.zeros((2, 2, 6, 4))
    )
    np.testing.assert_array_equal(by_zeros, zeroed)
    # on a batch of one sequence repeated, each head's output is its own mean
    same = np.repeat(tokens[:1], 4, axis=0)
    full, cache = attention_only_forward(same, params, num_heads=2)
    ablated, _ = attention_only_forward(
        same, params, num_heads=2, ablate=ablate, replacement=head_output_means(cache)
    )
    np.testing.assert_allclose(ablated, full, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------


def _task(vocab=8, n=10, size=12, seed=1):
    return repeated_token_batch(
        size, n, vocab, rng=np.random.default_rng(seed), min_period=2, max_period=4
    )


def test_training_matches_pytorch_autograd_and_adam():
    """Five steps of train_attention_only against the same model trained with autograd and
    torch.optim.Adam on the same batches (float64; the two sum in different orders)."""
    vocab, d, h, n, steps = 8, 8, 2, 10, 5
    params = init_attention_only_params(vocab, d, h, 2, n, rng=np.random.default_rng(0))
    start = {k: v.copy() for k, v in params.items()}
    e_tokens, e_pred = _task(vocab, n)
    hist = train_attention_only(
        params,
        num_heads=h,
        steps=steps,
        rng=np.random.default_rng(5),
        eval_tokens=e_tokens,
        eval_predictable=e_pred,
        batch=4,
        lr=1e-2,
        every=steps,
        min_period=2,
        max_period=4,
    )
    T = {k: torch.tensor(v, requires_grad=True) for k, v in start.items()}
    opt = torch.optim.Adam(list(T.values()), lr=1e-2)
    rng = np.random.default_rng(5)
    losses = []
    for _ in range(steps):
        tokens, _ = repeated_token_batch(4, n, vocab, rng=rng, min_period=2, max_period=4)
        logits, _, _ = torch_model(tokens, start, h, T=T)
        loss = torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, vocab), torch.as_tensor(tokens[:, 1:]).reshape(-1)
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    np.testing.assert_allclose(hist["train"], losses, **PARITY)
    for k in params:
        np.testing.assert_allclose(params[k], T[k].detach().numpy(), **PARITY, err_msg=k)
    assert max(np.abs(params[k] - start[k]).max() for k in params) > 1e-3  # it did train


def test_training_history_is_deterministic_and_measured_on_the_evaluation_batch():
    vocab, n = 8, 10
    e_tokens, e_pred = _task(vocab, n)
    runs = []
    for _ in range(2):
        params = init_attention_only_params(vocab, 8, 2, 2, n, rng=np.random.default_rng(3))
        start = {k: v.copy() for k, v in params.items()}
        hist = train_attention_only(
            params,
            num_heads=2,
            steps=20,
            rng=np.random.default_rng(4),
            eval_tokens=e_tokens,
            eval_predictable=e_pred,
            batch=4,
            every=10,
            min_period=2,
            max_period=4,
        )
        runs.append(hist)
    for key in runs[0]:
        np.testing.assert_array_equal(runs[0][key], runs[1][key], err_msg=key)
    hist = runs[0]
    assert hist["step"].tolist() == [0, 10, 20] and hist["train"].shape == (20,)
    assert hist["prev"].shape == hist["prefix"].shape == (3, 2, 2)
    assert hist["frames"].shape == (3, 2, 2, n, n) and hist["position_loss"].shape == (3, n - 1)
    # step 0 is the untrained model on the evaluation batch
    logits, cache = attention_only_forward(e_tokens, start, num_heads=2)
    logp = torch.log_softmax(torch.from_numpy(logits[:, :-1]), dim=-1).numpy()
    nll = -np.take_along_axis(logp, e_tokens[:, 1:, None], axis=-1)[..., 0]
    np.testing.assert_allclose(hist["in_context"][0], nll[e_pred].mean(), rtol=1e-12)
    np.testing.assert_allclose(hist["other"][0], nll[~e_pred].mean(), rtol=1e-12)
    np.testing.assert_allclose(hist["position_loss"][0], nll.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(hist["prev"][0], previous_token_score(cache["weights"]))
    np.testing.assert_array_equal(hist["frames"][0], cache["weights"][:, 0])


def test_phase_change_step():
    steps = [0, 25, 50, 75, 100]
    assert phase_change_step(steps, [3.9, 3.0, 1.9, 2.5, 1.0], threshold=2.0) == 50
    assert phase_change_step(steps, [3.9, 3.0, 2.0, 2.5, 2.1], threshold=2.0) is None
    assert phase_change_step(steps, [1.0, 3.0, 2.0, 2.5, 2.1], threshold=2.0) == 0
    with pytest.raises(ValueError, match="in_context"):
        phase_change_step(steps, [1.0, 2.0], threshold=2.0)


# ---------------------------------------------------------------------------
# The copying score
# ---------------------------------------------------------------------------


def test_copying_score_on_known_spectra():
    rng = np.random.default_rng(14)
    B = rng.standard_normal((6, 6))
    assert copying_score(B @ B.T + 0.1 * np.eye(6)) == pytest.approx(1.0)  # positive definite
    assert copying_score(-(B @ B.T) - 0.1 * np.eye(6)) == pytest.approx(-1.0)
    assert copying_score(np.array([[0.0, -1.0], [1.0, 0.0]])) == pytest.approx(0.0, abs=1e-15)
    assert copying_score(np.diag([3.0, -1.0])) == pytest.approx(0.5)
    # invariant under a change of basis and a positive scale; parity with torch.linalg.eigvals
    M = rng.standard_normal((7, 7))
    P = rng.standard_normal((7, 7))
    similar = 2.5 * P @ M @ np.linalg.inv(P)
    assert copying_score(similar) == pytest.approx(copying_score(M), rel=1e-9)
    ev = torch.linalg.eigvals(torch.from_numpy(M))
    expected = (ev.sum().real / ev.abs().sum()).item()
    assert copying_score(M) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("M", "words"),
    [(np.ones((2, 3)), "square"), (np.zeros((3, 3)), "zero"), (np.full((2, 2), np.nan), "finite")],
)
def test_copying_score_rejects_bad_matrices(M, words):
    with pytest.raises(ValueError, match=words):
        copying_score(M)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"replacement": np.zeros((2, 2, 3, 3))}, "replacement"),
        ({"replacement": np.full((2, 2, 3, 2), np.inf)}, "replacement"),
    ],
)
def test_forward_rejects_a_bad_replacement(kwargs, words):
    params = init_attention_only_params(7, 4, 2, 2, 5, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match=words):
        attention_only_forward(
            np.array([[7, 1, 2]]), params, num_heads=2, ablate=[(0, 0)], **kwargs
        )


def test_training_rejects_a_bad_evaluation_batch():
    params = init_attention_only_params(8, 8, 2, 1, 10, rng=np.random.default_rng(0))
    e_tokens, e_pred = _task(8, 10)
    common = {"num_heads": 2, "steps": 1, "eval_tokens": e_tokens, "min_period": 2, "max_period": 4}
    with pytest.raises(ValueError, match="eval_predictable"):
        train_attention_only(
            params, rng=np.random.default_rng(0), eval_predictable=e_pred[:, 1:], **common
        )
    with pytest.raises(TypeError, match="rng"):
        train_attention_only(params, rng=0, eval_predictable=e_pred, **common)


# ---------------------------------------------------------------------------
# Chapter 8's study of seeds (scripts/ch8_seeds.py)
# ---------------------------------------------------------------------------


def test_the_chapter_holds_a_table_the_script_can_read_and_write():
    table = ch8_seeds.read_chapter()
    assert set(table) == set(ch8_seeds.NAMES)
    assert table["STUDY_STEPS"] == ch8_seeds.STUDY_STEPS
    assert len(table["TWO_LAYER_PHASE"]) == ch8_seeds.TWO_LAYER_SEEDS
    assert len(table["ONE_LAYER_PHASE"]) == ch8_seeds.ONE_LAYER_SEEDS
    for step in [*table["TWO_LAYER_PHASE"], *table["ONE_LAYER_PHASE"]]:
        assert step is None or (0 < step <= table["STUDY_STEPS"] and step % 25 == 0)
    # what the script prints is the cell's text, and reads back as the same table
    printed = {}
    for line in ch8_seeds.as_source(table).splitlines():
        name, _, value = line.partition(" = ")
        printed[name] = ast.literal_eval(value)
    assert printed == table


def test_the_script_trains_as_the_chapter_does():
    """The script's first steps of seed 0 are the chapter's run: the same weights, batches and
    evaluation batch (the chapter asserts that its full run lands on the table's step)."""
    hist = ch8_seeds.run(0, layers=2, steps=25)
    params = init_attention_only_params(48, 24, 3, 2, 24, rng=np.random.default_rng(0))
    e_tokens, e_pred = repeated_token_batch(
        128, 24, 48, rng=np.random.default_rng(2), min_period=3, max_period=11
    )
    again = train_attention_only(
        params,
        num_heads=3,
        steps=25,
        rng=np.random.default_rng(1),
        eval_tokens=e_tokens,
        eval_predictable=e_pred,
    )
    np.testing.assert_array_equal(hist["in_context"], again["in_context"])
    assert ch8_seeds.phase_of(hist) is None  # nothing happens in 25 steps
    assert ch8_seeds.data_seed(0) == 1 and ch8_seeds.data_seed(3) == 103
